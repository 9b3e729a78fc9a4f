package object

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ecstore/ecstore/internal/archive"
	"github.com/ecstore/ecstore/internal/bufpool"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/workers"
)

// pagePiece is the part of one data chunk that a random read needs, read
// with its page checksums (archive.Index.Pages) instead of the whole
// chunk.
type pagePiece struct {
	ref      *archiveRef
	span     archive.PageSpan
	b        int64
	pos      int64 // object offset of the piece's first byte
	lo, hi   int64 // the piece within its chunk
	from, to int64 // the pages that hold it, within the chunk
	buf      []byte
	err      error
}

// maxPagePiece is the largest part of a chunk (as a fraction of it) that
// a random read takes from its pages: a larger one reads the chunk whole,
// in one request, and leaves it in the block cache.
const maxPagePiece = 4

// pieces splits [off, end) into the parts of data chunks that a read of
// pages serves, or returns false when one of them cannot be: its archive
// has no page checksums, is held in memory (read whole already) or not
// open, its node is suspect, the part is large, or the block is in the
// cache. r.mu must be held.
func (r *Reader) pieces(off, end int64) ([]pagePiece, bool) {
	var out []pagePiece
	for pos := off; pos < end; {
		b, s, co := r.l.Locate(pos)
		cl := r.l.ChunkLen(b)
		n := min(end-pos, r.l.DataLen(b, s)-co)
		if n <= 0 || n > cl/maxPagePiece {
			return nil, false
		}
		if _, cached := r.cache[b]; cached {
			return nil, false
		}
		ref := r.slotRef(r.l.Slot(b, s))
		if ref == nil || ref.idx.Whole != nil || r.s.isSuspect(ref.node.ID()) {
			return nil, false
		}
		span, ok := ref.idx.Pages(b)
		if !ok {
			return nil, false
		}
		lo, hi := co, co+n
		from := lo / archive.PageSize * archive.PageSize
		to := min(cl, (hi+archive.PageSize-1)/archive.PageSize*archive.PageSize)
		out = append(out, pagePiece{ref: ref, span: span, b: b, pos: pos, lo: lo, hi: hi, from: from, to: to})
		pos += n
	}
	return out, len(out) > 0
}

// readPages reads the pieces of a random read, each with its page
// checksums, all at once, verifies them and hands them to emit in order.
// It returns false when a piece could not be read or verified, or was
// not back within the hedge delay: the caller then reads the chunks
// whole, which replaces a slow, failed or corrupt one from parity. With
// keep, the pieces' buffers stay allocated until the returned release is
// called.
//
// The reads themselves run under the reader's context with the chunk
// timeout, as readBlock's do, not under the hedge delay: a read the
// caller stops waiting for goes on in the background and gives its
// buffer back when it ends. A node call cut short at the hedge delay
// would count as stuck on a guarded local node (node.Guard's MaxStuck)
// however healthy, if slow, its disk.
func (r *Reader) readPages(ctx context.Context, pieces []pagePiece, keep bool, emit func(pos int64, b []byte)) (int, func(), bool) {
	done := make(chan struct{})
	for i := range pieces {
		p := &pieces[i]
		pages := (p.to - p.from + archive.PageSize - 1) / archive.PageSize
		p.buf = bufpool.GetPooled(int(p.to - p.from + pages*4))
	}
	// Kept goroutines (workers), whose stacks have grown through the
	// protocol client already.
	workers.Go(func() {
		defer close(done)
		rctx, cancel := context.WithTimeout(r.bg, r.s.opts.ChunkTimeout)
		defer cancel()
		var wg sync.WaitGroup
		for i := range pieces {
			p := &pieces[i]
			wg.Add(1)
			workers.Go(func() {
				defer wg.Done()
				p.err = r.readPiece(rctx, p)
			})
		}
		wg.Wait()
	})
	// release gives the buffers back once no read writes into them: a
	// read that node.Guard left running (its file system not answering)
	// may still, and its buffer is dropped instead.
	release := func() {
		for _, p := range pieces {
			if !errors.Is(p.err, node.ErrLeftRunning) {
				bufpool.Put(p.buf)
			}
		}
	}
	hedge := time.NewTimer(r.s.hedgeDelay())
	defer hedge.Stop()
	select {
	case <-done:
	case <-hedge.C:
		go func() { <-done; release() }()
		return 0, nil, false
	case <-ctx.Done():
		go func() { <-done; release() }()
		return 0, nil, false
	}
	for _, p := range pieces {
		if p.err != nil {
			if errors.Is(p.err, archive.ErrChecksum) {
				r.s.opts.Logger.Warn("page checksum mismatch; reading the whole chunk",
					"obj", r.path, "node", p.ref.node.ID(), "block", p.b, "err", p.err)
				r.s.opts.Events.damagedArchive(r.path, p.ref.idx.Meta.Version, p.ref.idx.Meta.Slot, p.b)
			}
			release()
			return 0, nil, false
		}
	}
	n := 0
	for _, p := range pieces {
		emit(p.pos, p.buf[p.lo-p.from:p.hi-p.from])
		n += int(p.hi - p.lo)
	}
	if keep {
		return n, release, true
	}
	release()
	return n, func() {}, true
}

// readPiece reads the pages of p and their checksums (pageCRCs) at once,
// and verifies them. Its error joins those of both reads, so that one
// left running is seen (errors.Is ErrLeftRunning) whatever the other did.
func (r *Reader) readPiece(ctx context.Context, p *pagePiece) error {
	n := p.to - p.from
	data := p.buf[:n]
	var crcs []byte
	errs := make(chan error, 1)
	workers.Go(func() {
		var err error
		crcs, err = r.pageCRCs(ctx, p)
		errs <- err
	})
	err := errors.Join(archive.ReadFull(ctx, p.ref.file, data, p.span.Data+p.from), <-errs)
	if err != nil {
		return fmt.Errorf("node %s: block %d: %w", p.ref.node.ID(), p.b, err)
	}
	for i := int64(0); i < n; i += archive.PageSize {
		page := data[i:min(n, i+archive.PageSize)]
		want := binary.BigEndian.Uint32(crcs[i/archive.PageSize*4:])
		if got := archive.PageCRC(page); got != want {
			return fmt.Errorf("node %s: block %d: page at %d: CRC-32C %08x, want %08x: %w",
				p.ref.node.ID(), p.b, p.from+i, got, want, archive.ErrChecksum)
		}
	}
	return nil
}

// pageCRCs returns the checksums of p's pages: from the group's entry
// when the store's cache holds it (or reads it whole now, at the group's
// second miss: see pageSums), else read from the node into p.buf after
// the pages, as they are when the entry is damaged.
func (r *Reader) pageCRCs(ctx context.Context, p *pagePiece) ([]byte, error) {
	pages := (p.to - p.from + archive.PageSize - 1) / archive.PageSize
	at := p.span.CRCs + p.from/archive.PageSize*4 // file offset of the first page's checksum
	e, sums := p.span.Entry, r.s.pageSums
	if sums.holds(e.Size) {
		key := pageSumsKey{version: p.ref.idx.Meta.Version, slot: p.ref.idx.Meta.Slot, first: e.First, size: e.Size}
		off := at - e.Offset
		within := func(b []byte) ([]byte, bool) {
			if int64(len(b)) != e.Size || off < 0 || off+pages*4 > e.Size {
				return nil, false
			}
			return b[off : off+pages*4], true
		}
		b, state := sums.lookup(key)
		if state == entryHeld {
			if crcs, ok := within(b); ok {
				r.s.opts.Events.pageChecksums(true)
				return crcs, nil
			}
		} else if state == entryAbsent && sums.admit(key) {
			b, loaded, err := sums.get(ctx, key, func(ctx context.Context) ([]byte, error) {
				b := make([]byte, e.Size) // not pooled: a read left running may write into it
				if err := archive.ReadFull(ctx, p.ref.file, b, e.Offset); err != nil {
					return nil, err
				}
				return b, e.Check(b)
			})
			if err == nil {
				if crcs, ok := within(b); ok {
					r.s.opts.Events.pageChecksums(!loaded)
					return crcs, nil
				}
			} else if !errors.Is(err, archive.ErrChecksum) {
				r.s.opts.Events.pageChecksums(false)
				return nil, err
			} else if loaded {
				r.s.opts.Logger.Warn("page checksum entry damaged; reading each block's own checksums",
					"obj", r.path, "node", p.ref.node.ID(), "block", p.b, "err", err)
				r.s.opts.Events.damagedArchive(r.path, p.ref.idx.Meta.Version, p.ref.idx.Meta.Slot, p.b)
			}
		}
		r.s.opts.Events.pageChecksums(false)
	}
	crcs := p.buf[p.to-p.from:]
	return crcs, archive.ReadFull(ctx, p.ref.file, crcs, at)
}
