package gateway

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/ecstore/ecstore/internal/bufpool"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// XrdCl sends again, in one burst and in no set order, the writes of a
// recovered file that it had no answer for (resume.go): some the gateway
// took before the break (passed over), one it took part of, and some it
// never saw, which may come before the one they follow. A resumed upload
// therefore passes over a write below what it holds only when it is one
// it took (same offset, the length taken), and keeps a write that comes
// after a gap until the gap is filled.

// recentWrites is how many of the last writes an upload remembers, by
// offset and length: more than a client keeps in flight (xrdcp: four).
const recentWrites = 64

// maxPending bounds the bytes of the writes a resumed upload holds for
// a gap: xrdcp keeps four of 8 MiB in flight.
const maxPending = 64 << 20

// span is a write taken: its offset and the bytes taken.
type span struct{ off, n int64 }

// pendingWrite is a write that came after a gap, kept until the gap is
// filled; data is pooled.
type pendingWrite struct {
	off  int64
	data []byte
}

// replay is what a writeFile keeps to take its client's writes again.
type replay struct {
	recent       [recentWrites]span
	next         int
	pending      []pendingWrite // by offset
	pendingBytes int64
}

// took remembers a write of n bytes taken at off.
func (r *replay) took(off, n int64) {
	if n <= 0 {
		return
	}
	r.recent[r.next%recentWrites] = span{off, n}
	r.next++
}

// tookBefore reports whether a write at off of which k bytes lie below
// what is written was taken, those k bytes at least.
func (r *replay) tookBefore(off, k int64) bool {
	for _, s := range r.recent[:min(r.next, recentWrites)] {
		if s.off == off && s.n >= k {
			return true
		}
	}
	return false
}

// errAfterGap: a write of a resumed upload that comes after a gap, to
// be kept until the gap is filled.
var errAfterGap = errors.New("write after a gap")

// keep holds a write that came after a gap: p, or n bytes read from r.
func (wf *writeFile) keep(off int64, p []byte, r io.Reader, n int64) error {
	if wf.replay.pendingBytes+n > maxPending {
		wf.err = xrootd.Errorf(xrootd.ErrUnsupported,
			"%s: objects are written sequentially: write at offset %d, expected %d (and %d bytes wait for that gap already)",
			wf.name, off, wf.w.Size(), wf.replay.pendingBytes)
		return wf.err
	}
	data := bufpool.GetPooled(int(n))
	if p != nil {
		copy(data, p)
	} else if _, err := io.ReadFull(r, data); err != nil {
		bufpool.Put(data)
		// As in WriteFrom: never committed by this connection; taken
		// up again after a break unless a page failed its checksum
		// (nothing of this write was written).
		var pe *xrootd.PageError
		wf.err = fmt.Errorf("%s: write payload at %d: %w", wf.name, off, err)
		wf.cut = !errors.As(err, &pe)
		return wf.err
	}
	i, _ := slices.BinarySearchFunc(wf.replay.pending, off, func(w pendingWrite, off int64) int { return int(w.off - off) })
	wf.replay.pending = slices.Insert(wf.replay.pending, i, pendingWrite{off, data})
	wf.replay.pendingBytes += n
	return nil
}

// join writes the kept writes that what is written now reaches.
func (wf *writeFile) join() error {
	for len(wf.replay.pending) > 0 && wf.err == nil {
		w := wf.replay.pending[0]
		size := wf.w.Size()
		if w.off > size {
			return nil
		}
		wf.replay.pending = wf.replay.pending[1:]
		wf.replay.pendingBytes -= int64(len(w.data))
		if skip := size - w.off; skip < int64(len(w.data)) {
			n, err := wf.w.Write(w.data[skip:])
			wf.written.Add(int64(n))
			if err != nil {
				wf.err = err
			}
			wf.replay.took(w.off, skip+int64(n))
			wf.hooks.bytes("write", n)
		}
		bufpool.Put(w.data)
	}
	return wf.err
}

// dropPending releases the writes still kept for a gap.
func (wf *writeFile) dropPending() {
	for _, w := range wf.replay.pending {
		bufpool.Put(w.data)
	}
	wf.replay.pending, wf.replay.pendingBytes = nil, 0
}
