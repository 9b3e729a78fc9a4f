package xrootd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// ClientFile is a file opened with Client.Open. ReadAt, PgReadAt, ReadV
// and Stat may be called concurrently. WriteAt and PgWriteAt split p into
// requests of at most DialOptions.WriteChunk bytes, send them in offset
// order with up to WriteWindow outstanding, and return once all are
// acknowledged; Write appends at the file's own write offset.
type ClientFile struct {
	c    *Client
	fh   FileHandle
	name string
	info FileInfo

	mu  sync.Mutex // guards off; serializes Write
	off int64
}

// Name returns the path the file was opened with.
func (f *ClientFile) Name() string { return f.name }

// Addr returns the address of the server the file is open on: the
// Client's, or that of the server a redirect of the open led to.
func (f *ClientFile) Addr() string { return f.c.addr }

// Handle returns the server's file handle.
func (f *ClientFile) Handle() FileHandle { return f.fh }

// OpenInfo returns the stat information the server sent with the open.
func (f *ClientFile) OpenInfo() FileInfo { return f.info }

// errAbandoned is how a request ended whose caller stopped waiting for
// its answer without a reason of its own (DialOptions.Observe).
var errAbandoned = errors.New("xrootd: request abandoned before its answer")

// abandon stops listening for the answer of p.
func (p *pending) abandon() {
	p.observe(nil, errAbandoned)
	cl := p.cl
	select {
	case <-cl.gone:
		return
	default:
		cl.abandonedAt.Store(time.Now().UnixNano())
		close(cl.gone)
	}
	if cl.late == nil {
		return
	}
	// An answer already handed over, and not taken, goes to late.
	cl.lmu.Lock()
	defer cl.lmu.Unlock()
	cl.abandoned = true
	for {
		select {
		case f, ok := <-cl.frames:
			if !ok {
				return
			}
			if isFinal(f) {
				go cl.late(f)
			}
		default:
			return
		}
	}
}

// ReadAt reads len(p) bytes at off with kXR_read requests. Like
// io.ReaderAt, it returns io.EOF when fewer bytes are available.
func (f *ClientFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("xrootd: read %s: negative offset %d", f.name, off)
	}
	n := 0
	for n < len(p) {
		want := min(len(p)-n, f.c.opts.ReadChunk)
		dst := p[n : n+want]
		got := 0
		err := f.c.roundTripInto(ctx, &ReadRequest{Handle: f.fh, Offset: off + int64(n), Length: int32(want)}, dst, func(fr *ResponseFrame) error {
			if fr.Status == StatusStatus {
				return fmt.Errorf("%w: kXR_status answer to kXR_read", ErrMalformed)
			}
			if got+len(fr.Body) > len(dst) {
				return fmt.Errorf("%w: server sent more than the %d bytes asked", ErrMalformed, len(dst))
			}
			if fr.inPlace {
				got += len(fr.Body) // received at dst[got:] already
			} else {
				got += copy(dst[got:], fr.Body)
			}
			return nil
		})
		n += got
		if err != nil {
			return n, fmt.Errorf("xrootd: read %s at %d: %w", f.name, off+int64(n), err)
		}
		if got < want {
			return n, io.EOF
		}
	}
	return n, nil
}

// PgReadAt reads len(p) bytes at off with kXR_pgread, verifying the CRC32C
// of every page; a mismatch gives an error wrapping ErrChecksum (a
// *PageError). Like io.ReaderAt, it returns io.EOF when fewer bytes are
// available.
func (f *ClientFile) PgReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("xrootd: pgread %s: negative offset %d", f.name, off)
	}
	n := 0
	for n < len(p) {
		want := min(len(p)-n, f.c.opts.ReadChunk)
		dst := p[n : n+want]
		start := off + int64(n)
		got := 0
		err := f.c.roundTrip(ctx, &PgReadRequest{Handle: f.fh, Offset: start, Length: int32(want)}, func(fr *ResponseFrame) error {
			if fr.Status != StatusStatus {
				return fmt.Errorf("%w: %v answer to kXR_pgread", ErrMalformed, fr.Status)
			}
			sb, err := ParseStatusBody(fr.Body)
			if err != nil {
				return err
			}
			if sb.RequestID != ReqPgRead || len(sb.Info) < 8 {
				return fmt.Errorf("%w: kXR_status for %v with %d info bytes", ErrMalformed, sb.RequestID, len(sb.Info))
			}
			if at := int64(binary.BigEndian.Uint64(sb.Info)); at != start+int64(got) {
				return fmt.Errorf("%w: pgread data at offset %d, expected %d", ErrMalformed, at, start+int64(got))
			}
			dl, ok := pagesDataLen(start+int64(got), len(fr.Data))
			if !ok || got+dl > len(dst) {
				return fmt.Errorf("%w: pgread answer of %d bytes does not fit the %d bytes asked", ErrMalformed, len(fr.Data), len(dst)-got)
			}
			out, err := DecodePages(dst[got:got], start+int64(got), fr.Data)
			if err != nil {
				return err
			}
			got += len(out)
			return nil
		})
		n += got
		if err != nil {
			return n, fmt.Errorf("xrootd: pgread %s at %d: %w", f.name, off+int64(n), err)
		}
		if got < want {
			return n, io.EOF
		}
	}
	return n, nil
}

// ReadV reads several ranges in one kXR_readv request and returns their
// data in order. A range past the end of the file comes back short; an
// answer whose ranges are not those asked for (another file handle,
// another offset, more bytes) is refused with ErrMalformed. At
// most MaxReadVItems ranges of at most MaxReadVItemLen bytes each are
// allowed, as servers enforce these limits, and the whole answer must fit
// DialOptions.MaxResponse.
func (f *ClientFile) ReadV(ctx context.Context, segs []ReadSegment) ([][]byte, error) {
	if len(segs) == 0 {
		return nil, nil
	}
	if len(segs) > MaxReadVItems {
		return nil, fmt.Errorf("xrootd: readv %s: %d ranges exceed %d", f.name, len(segs), MaxReadVItems)
	}
	req := &ReadVRequest{Segments: make([]ReadSegment, len(segs))}
	for i, s := range segs {
		if s.Length < 0 || s.Length > MaxReadVItemLen || s.Offset < 0 {
			return nil, fmt.Errorf("xrootd: readv %s: range %d (%d bytes at %d) is invalid", f.name, i, s.Length, s.Offset)
		}
		req.Segments[i] = ReadSegment{Handle: f.fh, Length: s.Length, Offset: s.Offset}
	}
	body, err := f.c.collect(ctx, req, readVAnswerMax(segs))
	if err != nil {
		return nil, fmt.Errorf("xrootd: readv %s: %w", f.name, err)
	}
	got, data, err := ParseReadVResponse(body)
	if err != nil {
		return nil, fmt.Errorf("xrootd: readv %s: %w", f.name, err)
	}
	if len(got) != len(segs) {
		return nil, fmt.Errorf("xrootd: readv %s: %w: %d ranges answered for %d asked", f.name, ErrMalformed, len(got), len(segs))
	}
	for i, g := range got {
		if g.Handle != f.fh {
			return nil, fmt.Errorf("xrootd: readv %s: %w: range %d answered for file handle %x, asked of %x", f.name, ErrMalformed, i, g.Handle, f.fh)
		}
		if g.Offset != segs[i].Offset || g.Length > segs[i].Length {
			return nil, fmt.Errorf("xrootd: readv %s: %w: range %d answered as %d bytes at %d", f.name, ErrMalformed, i, g.Length, g.Offset)
		}
	}
	return data, nil
}

// readVAnswerMax bounds the answer to a readv of segs: each range's
// header and data.
func readVAnswerMax(segs []ReadSegment) int {
	n := 0
	for _, s := range segs {
		n += readVItemLen + int(s.Length)
	}
	return n
}

// WriteAt writes p at off with kXR_write requests. It returns the number
// of bytes the server acknowledged, in order from off.
func (f *ClientFile) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	n, err := f.writeAt(ctx, p, off, false)
	if err != nil {
		return n, fmt.Errorf("xrootd: write %s at %d: %w", f.name, off+int64(n), err)
	}
	return n, nil
}

// PgWriteAt writes p at off with kXR_pgwrite requests, which carry a
// CRC32C per page that the server verifies.
func (f *ClientFile) PgWriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	n, err := f.writeAt(ctx, p, off, true)
	if err != nil {
		return n, fmt.Errorf("xrootd: pgwrite %s at %d: %w", f.name, off+int64(n), err)
	}
	return n, nil
}

// Write appends p at the file's write offset (0 after Open) with
// kXR_write and advances it by the bytes acknowledged.
func (f *ClientFile) Write(ctx context.Context, p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.WriteAt(ctx, p, f.off)
	f.off += int64(n)
	return n, err
}

// writeChunk is one outstanding write request, of n bytes at off.
type writeChunk struct {
	p   *pending
	req Request
	off int64
	n   int
}

func (f *ClientFile) writeAt(ctx context.Context, p []byte, off int64, pages bool) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("negative offset %d", off)
	}
	var q []writeChunk
	acked := 0
	defer func() {
		for _, w := range q {
			w.p.abandon()
		}
	}()
	waitOne := func() error {
		w := q[0]
		q = q[1:]
		fr, err := w.p.wait(ctx, func(*ResponseFrame) error { return nil })
		if err != nil {
			return err
		}
		if fr.Status == StatusWait {
			// Re-send this chunk alone; roundTrip follows further waits.
			// Its answer is checked as the first would have been.
			err = f.c.roundTrip(ctx, w.req, func(fr *ResponseFrame) error {
				if pages {
					return checkPgWriteStatus(fr, w.off)
				}
				return nil
			})
		} else if err = statusError(fr); err == nil && pages {
			err = checkPgWriteStatus(fr, w.off)
		}
		if err != nil {
			return err
		}
		acked += w.n
		return nil
	}
	for pos := 0; pos < len(p); {
		n := min(len(p)-pos, f.c.opts.WriteChunk)
		at := off + int64(pos)
		req := f.writeRequest(p[pos:pos+n], at, pages)
		pd, err := f.c.start(ctx, req, nil)
		if err != nil {
			return acked, err
		}
		q = append(q, writeChunk{p: pd, req: req, off: at, n: n})
		pos += n
		if len(q) >= f.c.opts.WriteWindow {
			if err := waitOne(); err != nil {
				return acked, err
			}
		}
	}
	for len(q) > 0 {
		if err := waitOne(); err != nil {
			return acked, err
		}
	}
	return acked, nil
}

// WriteAck is a write sent ahead by StartWriteAt, whose answers are yet
// to be waited for (Wait) or given up (Abandon).
type WriteAck struct {
	f     *ClientFile
	q     []writeChunk
	off   int64
	pages bool
}

// StartWriteAt sends p at off as WriteAt does (kXR_pgwrite requests with
// pages) and returns once the requests are written to the connection,
// without waiting for their answers: p may be reused at once, and the
// caller may send the file's next bytes while these are on their way and
// being written, which keeps a server that takes a write at a time busy.
// The returned WriteAck's Wait collects the answers.
//
// A server that asks for such a write to be sent again (kXR_wait) fails
// it, p being gone by then: send writes ahead only to a server that runs
// a file's writes in the order they arrive and never asks, as this
// package's Server (see FinishWrite).
func (f *ClientFile) StartWriteAt(ctx context.Context, p []byte, off int64, pages bool) (*WriteAck, error) {
	if off < 0 {
		return nil, fmt.Errorf("xrootd: write %s: negative offset %d", f.name, off)
	}
	a := &WriteAck{f: f, off: off, pages: pages}
	for pos := 0; pos < len(p); {
		n := min(len(p)-pos, f.c.opts.WriteChunk)
		pd, err := f.c.start(ctx, f.writeRequest(p[pos:pos+n], off+int64(pos), pages), nil)
		if err != nil {
			a.Abandon()
			return nil, fmt.Errorf("xrootd: write %s at %d: %w", f.name, off+int64(pos), err)
		}
		a.q = append(a.q, writeChunk{p: pd, off: off + int64(pos), n: n})
		pos += n
	}
	return a, nil
}

// Wait waits for the answers to the write and returns the number of
// bytes the server acknowledged, in order from its offset. After an
// error the answers still outstanding are given up.
func (a *WriteAck) Wait(ctx context.Context) (int, error) {
	acked := 0
	for len(a.q) > 0 {
		w := a.q[0]
		a.q = a.q[1:]
		fr, err := w.p.wait(ctx, nil)
		if err == nil {
			switch {
			case fr.Status == StatusWait:
				err = fmt.Errorf("%w: the server asked for a write sent ahead to be sent again", ErrMalformed)
			default:
				if err = statusError(fr); err == nil && a.pages {
					err = checkPgWriteStatus(fr, w.off)
				}
			}
		}
		if err != nil {
			a.Abandon()
			return acked, fmt.Errorf("xrootd: write %s at %d: %w", a.f.name, a.off+int64(acked), err)
		}
		acked += w.n
	}
	return acked, nil
}

// Abandon gives up the answers not waited for yet.
func (a *WriteAck) Abandon() {
	for _, w := range a.q {
		w.p.abandon()
	}
	a.q = nil
}

// writeRequest is the kXR_write, or with pages the kXR_pgwrite, of b at
// off.
func (f *ClientFile) writeRequest(b []byte, off int64, pages bool) Request {
	if pages {
		return &PgWriteRequest{Handle: f.fh, Offset: off, Pages: AppendPages(make([]byte, 0, PagesLen(off, len(b))), off, b)}
	}
	return &WriteRequest{Handle: f.fh, Offset: off, Data: b}
}

// checkPgWriteStatus verifies the answer to a pgwrite at off: a final
// kXR_status whose info holds only the offset written, off
// (ServerResponseBody_pgWrite). Extra info lists pages the server wants
// resent, which this client reports as a checksum error.
func checkPgWriteStatus(fr *ResponseFrame, off int64) error {
	if fr.Status != StatusStatus {
		return fmt.Errorf("%w: %v answer to kXR_pgwrite", ErrMalformed, fr.Status)
	}
	sb, err := ParseStatusBody(fr.Body)
	if err != nil {
		return err
	}
	if sb.RequestID != ReqPgWrite || len(sb.Info) < 8 {
		return fmt.Errorf("%w: kXR_status for %v with %d info bytes", ErrMalformed, sb.RequestID, len(sb.Info))
	}
	if at := int64(getU64(sb.Info)); at != off {
		return fmt.Errorf("%w: pgwrite answered for offset %d, written at %d", ErrMalformed, at, off)
	}
	if len(sb.Info) > 8 {
		return fmt.Errorf("%w: server reported %d bytes of corrupted page offsets", ErrChecksum, len(sb.Info)-8)
	}
	return nil
}

// FinishOptions say how FinishWrite ends a file.
type FinishOptions struct {
	Pages bool   // send the data with kXR_pgwrite (page checksums)
	Sync  bool   // kXR_sync before the close
	Attrs []Attr // set on the file (kXR_fattr) after the data
}

// FinishWrite ends the writing of a file in one round trip: it sends p at
// off (kXR_write, or kXR_pgwrite with o.Pages; nothing when p is empty),
// a kXR_fattr set of o.Attrs if any, a kXR_sync with o.Sync, and
// kXR_close, all in one write (the server is woken once, not once a
// request), and then waits for every answer. It returns the first error of the writes,
// the sync and the close in err; whatever the outcome, the handle is not
// to be used again. How the attributes fared is in attrErr (the
// request's error, or AttrErr of its answer), which does not fail the
// others: a server without attributes answers kXR_Unsupported.
//
// Only a server that runs each file's write-side requests in the order
// they arrive may be sent this, as this package's Server does (it
// answers kXR_query config "version" with ServerVersion): another could
// close the file before the write or the sync has run, or ask for one of
// them to be sent again (kXR_wait) once the file is closed, which is
// reported as an error.
func (f *ClientFile) FinishWrite(ctx context.Context, p []byte, off int64, o FinishOptions) (attrErr, err error) {
	if off < 0 {
		return nil, fmt.Errorf("xrootd: finish %s: negative offset %d", f.name, off)
	}
	var reqs []Request
	for pos := 0; pos < len(p); {
		n := min(len(p)-pos, f.c.opts.WriteChunk)
		reqs = append(reqs, f.writeRequest(p[pos:pos+n], off+int64(pos), o.Pages))
		pos += n
	}
	var fattr *FattrRequest
	fattrAt := -1 // its index in reqs
	fattrMax := 0 // bounds its answer
	if len(o.Attrs) > 0 {
		fattr = setRequest(o.Attrs, false)
		fattr.Handle = f.fh
		if err := checkFattr(fattr); err != nil {
			return nil, fmt.Errorf("xrootd: finish %s: %w", f.name, err)
		}
		fattrAt = len(reqs)
		fattrMax = f.c.answerMax(fattrAnswerMax(fattr))
		reqs = append(reqs, fattr)
	}
	if o.Sync {
		reqs = append(reqs, &SyncRequest{Handle: f.fh})
	}
	reqs = append(reqs, &CloseRequest{Handle: f.fh})
	var first error
	sent, err := f.c.startAll(ctx, reqs)
	if err != nil {
		first = fmt.Errorf("xrootd: finish %s: %v: %w", f.name, reqs[0].RequestID(), err)
	}
	for i, pd := range sent {
		var body []byte
		fr, err := pd.wait(ctx, func(fr *ResponseFrame) error {
			if i == fattrAt && fr.Status != StatusStatus && len(body)+len(fr.Body) <= fattrMax {
				body = append(body, fr.Body...)
			}
			return nil
		})
		if err == nil {
			// kXR_wait is not followed: the requests after it were sent.
			err = statusError(fr)
			if pg, ok := reqs[i].(*PgWriteRequest); ok && err == nil {
				err = checkPgWriteStatus(fr, pg.Offset)
			}
		}
		if i == fattrAt {
			if err == nil {
				var attrs []Attr
				if attrs, err = ParseFattrResponse(body, FattrSet, fattr.Names); err == nil {
					err = AttrErr(attrs)
				}
			}
			if err != nil {
				attrErr = fmt.Errorf("xrootd: finish %s: fattr: %w", f.name, err)
			}
			continue
		}
		if err != nil && first == nil {
			first = fmt.Errorf("xrootd: finish %s: %v: %w", f.name, reqs[i].RequestID(), err)
		}
	}
	if fattrAt >= len(sent) {
		attrErr = fmt.Errorf("xrootd: finish %s: fattr not sent", f.name)
	}
	return attrErr, first
}

// Sync asks the server to make the written data durable.
func (f *ClientFile) Sync(ctx context.Context) error {
	if err := f.c.roundTrip(ctx, &SyncRequest{Handle: f.fh}, nil); err != nil {
		return fmt.Errorf("xrootd: sync %s: %w", f.name, err)
	}
	return nil
}

// Truncate sets the size of the open file.
func (f *ClientFile) Truncate(ctx context.Context, size int64) error {
	if err := f.c.roundTrip(ctx, &TruncateRequest{Handle: f.fh, Size: size}, nil); err != nil {
		return fmt.Errorf("xrootd: truncate %s: %w", f.name, err)
	}
	return nil
}

// Stat asks the server to describe the open file.
func (f *ClientFile) Stat(ctx context.Context) (FileInfo, error) {
	body, err := f.c.collect(ctx, &StatRequest{Handle: f.fh}, smallAnswer)
	if err != nil {
		return FileInfo{}, fmt.Errorf("xrootd: stat %s: %w", f.name, err)
	}
	fi, err := ParseStat(string(body))
	if err != nil {
		return FileInfo{}, fmt.Errorf("xrootd: stat %s: %w", f.name, err)
	}
	return fi, nil
}

// Close closes the file on the server. For a file being written, a nil
// error means the server accepted the file as complete.
func (f *ClientFile) Close(ctx context.Context) error {
	if err := f.c.roundTrip(ctx, &CloseRequest{Handle: f.fh}, nil); err != nil {
		return fmt.Errorf("xrootd: close %s: %w", f.name, err)
	}
	return nil
}
