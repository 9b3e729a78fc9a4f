package xrdnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"sync/atomic"

	"github.com/ecstore/ecstore/internal/bufpool"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// Upload states.
const (
	upWriting = iota
	upFinished
	upCommitted
	upAborted
)

// buffersPerUpload is how many write buffers an upload uses: one being
// sent while the other fills.
const buffersPerUpload = 2

// chunk is a buffer handed to the background writer.
type chunk struct {
	b   []byte
	off int64
}

// upload is the node.Upload of a Node. Write copies small writes into
// buffers that a background goroutine (writer) sends in order, one buffer
// at a time; an error it meets is reported by the next Write or by
// Finish. A write of at least a buffer's size (an archive's chunk) is
// sent from the caller's slice, without a copy, and Write returns once
// the server has acknowledged it. To a server that runs a file's writes
// in order (`ecstore node`) every write is sent ahead instead, from the
// caller's goroutine, and its answer collected writesAhead writes later
// (writeAhead): such an upload has no writer goroutine.
type upload struct {
	n          *Node
	cn         *conn
	f          *xrootd.ClientFile
	path       string // final node path
	tmp        string // temporary node path
	state      int
	err        error // sticky
	fileClosed bool

	attrs map[string]string // SetAttrs, set by Finish

	buf   []byte // being filled; nil when none
	off   int64  // file offset of buf[0]
	nbufs int    // buffers taken from the pool

	ctx       context.Context // the writer's; Abort cancels it
	cancel    context.CancelFunc
	queue     chan chunk    // to the writer (unbuffered)
	free      chan []byte   // buffers back from the writer
	done      chan struct{} // closed when the writer exits
	queueShut bool
	werr      atomic.Pointer[error] // the writer's first error

	// acks are the writes sent ahead (writeAhead), oldest first, whose
	// answers are yet to be collected.
	acks []*xrootd.WriteAck
}

// writesAhead is how many chunk writes an upload to a server that runs a
// file's writes in order sends before it waits for the oldest answer.
var writesAhead = 3 // a variable for BenchmarkWriteAhead

var (
	_ node.Upload     = (*upload)(nil)
	_ node.Attributes = (*upload)(nil)
)

func newUpload(n *Node, cn *conn, f *xrootd.ClientFile, path, tmp string) *upload {
	u := &upload{
		n:     n,
		cn:    cn,
		f:     f,
		path:  path,
		tmp:   tmp,
		queue: make(chan chunk),
		free:  make(chan []byte, buffersPerUpload),
		done:  make(chan struct{}),
	}
	if cn.ordered {
		// Every write is sent ahead from the caller's goroutine: no
		// writer, and no context of its own.
		u.cancel = func() {}
		close(u.done)
		return u
	}
	u.ctx, u.cancel = context.WithCancel(n.base)
	go u.writer()
	return u
}

// writer sends the chunks of the queue in order. After an error it only
// returns the buffers. It exits when the queue is closed or when the
// upload is aborted or the node closed (u.ctx).
func (u *upload) writer() {
	defer close(u.done)
	// Only the writer uses u.ctx: once it returns, the context goes, or
	// it would stay registered with the node's base context (n.base) for
	// as long as the node lives. Uploads that committed never cancelled
	// it: a gateway kept two objects per upload it had ever written
	// (21 000 after the bench suite's first part), which every garbage
	// collection scanned.
	defer u.cancel()
	for {
		var ch chunk
		select {
		case c, ok := <-u.queue:
			if !ok {
				return
			}
			ch = c
		case <-u.ctx.Done():
			err := fmt.Errorf("upload stopped: %w", ErrClosed)
			u.werr.CompareAndSwap(nil, &err)
			return
		}
		if u.werr.Load() == nil {
			var err error
			if u.n.pages {
				_, err = u.f.PgWriteAt(u.ctx, ch.b, ch.off)
			} else {
				_, err = u.f.WriteAt(u.ctx, ch.b, ch.off)
			}
			if err != nil {
				if u.ctx.Err() == nil {
					u.n.pool.observe(u.cn, err)
				}
				u.werr.CompareAndSwap(nil, &err)
			}
		}
		u.free <- ch.b[:0]
	}
}

// writerErr returns the writer's error, if any.
func (u *upload) writerErr() error {
	if p := u.werr.Load(); p != nil {
		return *p
	}
	return nil
}

// stick records err as the upload's sticky error and returns it.
func (u *upload) stick(op string, err error) error {
	u.err = u.n.fail(op, u.path, err)
	return u.err
}

// Write implements node.Upload. It returns once p is copied; the bytes
// reach the server in the background, and a failure to send them is
// returned by a later Write or by Finish. A Write that fails for any
// reason but a context done before it started fails the upload.
func (u *upload) Write(ctx context.Context, p []byte) error {
	switch {
	case u.state != upWriting:
		return u.n.wrap("write", u.path, errors.New("upload already finished"))
	case u.err != nil:
		return u.err
	}
	if err := u.writerErr(); err != nil {
		return u.stick("write", err)
	}
	if err := ctx.Err(); err != nil {
		return u.n.wrap("write", u.path, err)
	}
	if len(p) >= u.n.opts.WriteBuffer {
		return u.writeDirect(ctx, p)
	}
	for len(p) > 0 {
		if u.buf == nil {
			b, err := u.getBuf(ctx)
			if err != nil {
				return u.stick("write", err)
			}
			u.buf = b
		}
		k := min(cap(u.buf)-len(u.buf), len(p))
		u.buf = append(u.buf, p[:k]...)
		p = p[k:]
		if len(u.buf) == cap(u.buf) {
			if err := u.flush(ctx); err != nil {
				return u.stick("write", err)
			}
		}
	}
	return nil
}

// flush sends the filled buffer: to a server that runs a file's writes in
// order ahead of its answer (writeAhead), the buffer free again at once,
// else through the writer.
func (u *upload) flush(ctx context.Context) error {
	if !u.cn.ordered {
		return u.send(ctx)
	}
	err := u.writeAhead(ctx, u.buf)
	u.buf = u.buf[:0]
	return err
}

// writeDirect sends p at the upload's offset, after the writer has sent
// the bytes buffered before it, and waits for the acknowledgement (to a
// server that runs a file's writes in order: see writeAhead). The
// server thus receives the file's bytes in order: a data server writing
// sequential files specially (ecstore node's O_DIRECT appends) sees a
// sequential file.
func (u *upload) writeDirect(ctx context.Context, p []byte) error {
	if len(u.buf) > 0 {
		if err := u.flush(ctx); err != nil {
			return u.stick("write", err)
		}
	}
	if u.cn.ordered {
		if err := u.writeAhead(ctx, p); err != nil {
			return u.stick("write", err)
		}
		return nil
	}
	if err := u.drain(ctx); err != nil {
		return u.stick("write", err)
	}
	var err error
	if u.n.pages {
		_, err = u.f.PgWriteAt(ctx, p, u.off)
	} else {
		_, err = u.f.WriteAt(ctx, p, u.off)
	}
	if err != nil {
		u.n.pool.observe(u.cn, err)
		return u.stick("write", err)
	}
	u.off += int64(len(p))
	return nil
}

// writeAhead sends p at the upload's offset without waiting for its
// answer, once it has collected the oldest answer outstanding if
// writesAhead are: a chunk is then on its way while the server writes the
// one before, where waiting for each answer left the node idle for a
// round trip per chunk (BenchmarkWriteAhead: 1.6-1.8 times the MB/s of
// one upload over round trips of 0.5-2 ms). A failed answer fails the
// upload at the next Write or at Finish. Only for a server that runs a
// file's writes in order (conn.ordered), which takes them as they come
// and never asks for one to be sent again.
func (u *upload) writeAhead(ctx context.Context, p []byte) error {
	if len(u.acks) >= writesAhead {
		if err := u.waitAck(ctx); err != nil {
			return err
		}
	}
	a, err := u.f.StartWriteAt(ctx, p, u.off, u.n.pages)
	if err != nil {
		u.n.pool.observe(u.cn, err)
		return err
	}
	u.acks = append(u.acks, a)
	u.off += int64(len(p))
	return nil
}

// waitAck collects the oldest answer to a write sent ahead. After an
// error the others are given up: the upload has failed.
func (u *upload) waitAck(ctx context.Context) error {
	a := u.acks[0]
	u.acks = u.acks[1:]
	if _, err := a.Wait(ctx); err != nil {
		u.abandonAcks()
		u.n.pool.observe(u.cn, err)
		return err
	}
	return nil
}

// waitAcks collects every answer to the writes sent ahead.
func (u *upload) waitAcks(ctx context.Context) error {
	for len(u.acks) > 0 {
		if err := u.waitAck(ctx); err != nil {
			return err
		}
	}
	return nil
}

// abandonAcks gives up the answers to the writes sent ahead.
func (u *upload) abandonAcks() {
	for _, a := range u.acks {
		a.Abandon()
	}
	u.acks = nil
}

// drain waits until the writer has sent every buffer handed to it.
func (u *upload) drain(ctx context.Context) error {
	held := make([][]byte, 0, u.nbufs)
	defer func() {
		for _, b := range held {
			u.free <- b // never blocks: free holds every buffer
		}
	}()
	for len(held) < u.nbufs {
		select {
		case b := <-u.free:
			held = append(held, b)
		case <-ctx.Done():
			u.n.pool.observe(u.cn, ctx.Err())
			return ctx.Err()
		case <-u.done:
			if err := u.writerErr(); err != nil {
				return err
			}
			return fmt.Errorf("upload stopped: %w", ErrClosed)
		}
	}
	return u.writerErr()
}

// getBuf returns an empty buffer: a new one while the upload has fewer
// than buffersPerUpload, else one the writer is done with.
func (u *upload) getBuf(ctx context.Context) ([]byte, error) {
	select {
	case b := <-u.free:
		return b, nil
	default:
	}
	if u.nbufs < buffersPerUpload {
		u.nbufs++
		return bufpool.Get(u.n.opts.WriteBuffer)[:0], nil
	}
	select {
	case b := <-u.free:
		return b, nil
	case <-ctx.Done():
		u.n.pool.observe(u.cn, ctx.Err())
		return nil, ctx.Err()
	}
}

// send hands the filled buffer to the writer, waiting until the writer
// has sent the previous one.
func (u *upload) send(ctx context.Context) error {
	select {
	case u.queue <- chunk{b: u.buf, off: u.off}:
		u.off += int64(len(u.buf))
		u.buf = nil
		return nil
	case <-ctx.Done():
		u.n.pool.observe(u.cn, ctx.Err())
		return ctx.Err()
	case <-u.done:
		if err := u.writerErr(); err != nil {
			return err
		}
		return fmt.Errorf("upload stopped: %w", ErrClosed)
	}
}

// stopWriter closes the queue and waits for the writer to exit, or for
// ctx to be done.
func (u *upload) stopWriter(ctx context.Context) error {
	if !u.queueShut {
		u.queueShut = true
		close(u.queue)
	}
	select {
	case <-u.done:
		return nil
	case <-ctx.Done():
		u.n.pool.observe(u.cn, ctx.Err())
		return ctx.Err()
	}
}

// Finish implements node.Upload: it sends the buffered bytes, waits for
// every write to be acknowledged, sends kXR_sync if the node is durable
// (Options.Fsync) and closes the file. To a server that runs a file's
// writes in order (conn.ordered) the last buffer, kXR_sync and kXR_close
// go at once: one round trip for the three (a small object's archive is
// one buffer).
func (u *upload) Finish(ctx context.Context) error {
	if u.state != upWriting {
		if u.state == upFinished {
			return u.err
		}
		return u.n.wrap("finish", u.path, errors.New("upload already committed or aborted"))
	}
	if u.err != nil {
		return u.err
	}
	if err := ctx.Err(); err != nil {
		return u.n.wrap("finish", u.path, err)
	}
	u.state = upFinished
	if err := u.waitAcks(ctx); err != nil {
		return u.stick("finish", err)
	}
	if len(u.buf) > 0 && !u.cn.ordered {
		if err := u.send(ctx); err != nil {
			return u.stick("finish", err)
		}
	}
	if err := u.stopWriter(ctx); err != nil {
		return u.stick("finish", err)
	}
	if err := u.writerErr(); err != nil {
		u.releaseBufs()
		return u.stick("finish", err)
	}
	if u.cn.ordered {
		// A server whose close makes the file durable needs no kXR_sync.
		attrErr, err := u.f.FinishWrite(ctx, u.buf, u.off, xrootd.FinishOptions{
			Pages: u.n.pages, Sync: u.n.opts.Fsync && !u.cn.closeSyncs, Attrs: u.fileAttrs()})
		u.off += int64(len(u.buf))
		u.releaseBufs()
		u.n.pool.observe(u.cn, err)
		if err != nil {
			return u.stick("finish", err)
		}
		u.n.attrsSet(attrErr)
		u.fileClosed = true
		return nil
	}
	u.releaseBufs()
	if attrs := u.fileAttrs(); attrs != nil {
		got, err := u.f.SetAttrs(ctx, attrs, false)
		if err == nil {
			err = xrootd.AttrErr(got)
		}
		if ctx.Err() != nil {
			return u.stick("finish", err)
		}
		u.n.attrsSet(err)
	}
	if u.n.opts.Fsync {
		if err := u.f.Sync(ctx); err != nil {
			u.n.pool.observe(u.cn, err)
			return u.stick("finish", err)
		}
	}
	err := u.f.Close(ctx)
	u.n.pool.observe(u.cn, err)
	if err != nil {
		return u.stick("finish", err)
	}
	u.fileClosed = true
	return nil
}

// SetAttrs implements node.Attributes: the attributes are set on the file
// by Finish, in the same round trip as its last write, sync and close
// where the server allows (see xrootd.ClientFile.FinishWrite), as one
// file attribute (attrName) that holds them all. Attributes are kept
// only where the server keeps file attributes: they are an aid, not
// part of the file, and Finish does not fail for them.
//
// After Finish (the file closed) they are set by the temporary file's
// path, in a request of their own.
func (u *upload) SetAttrs(ctx context.Context, attrs map[string]string) error {
	if u.state != upWriting && u.state != upFinished {
		return u.n.wrap("setattrs", u.path, errors.New("upload already committed or aborted"))
	}
	if err := ctx.Err(); err != nil {
		return u.n.wrap("setattrs", u.path, err)
	}
	for k := range attrs {
		if !node.ValidAttrKey(k) {
			return u.n.wrap("setattrs", u.path, fmt.Errorf("invalid attribute key %q", k))
		}
	}
	if u.attrs == nil {
		u.attrs = make(map[string]string, len(attrs))
	}
	maps.Copy(u.attrs, attrs)
	fa := u.fileAttrs()
	if u.state != upFinished || fa == nil {
		return nil
	}
	var got []xrootd.Attr
	err := u.n.pool.call(ctx, true, func(c *xrootd.Client) error {
		var err error
		got, err = c.SetAttrs(ctx, u.n.remote(u.tmp), fa, false)
		return err
	})
	if err == nil {
		err = xrootd.AttrErr(got)
	}
	if ctx.Err() != nil {
		return u.n.wrap("setattrs", u.path, err)
	}
	u.n.attrsSet(err)
	return nil
}

// fileAttrs is the file attribute that holds the attributes set, or nil
// when there are none or the node keeps none.
func (u *upload) fileAttrs() []xrootd.Attr {
	if len(u.attrs) == 0 || !u.n.KeepsAttrs() {
		return nil
	}
	return []xrootd.Attr{{Name: attrName, Value: node.EncodeAttrs(u.attrs)}}
}

// Commit implements node.Upload: kXR_mv of the temporary file onto the
// final path. Commit onto a directory fails with node.ErrIsDir.
func (u *upload) Commit(ctx context.Context) error {
	switch u.state {
	case upCommitted, upAborted:
		return u.n.wrap("commit", u.path, errors.New("upload already committed or aborted"))
	case upWriting:
		if err := u.Finish(ctx); err != nil {
			return err
		}
	}
	if u.err != nil {
		return u.err
	}
	if err := ctx.Err(); err != nil {
		return u.n.wrap("commit", u.path, err)
	}
	n := u.n
	err := n.pool.call(ctx, false, func(c *xrootd.Client) error {
		return c.Mv(ctx, n.remote(u.tmp), n.remote(u.path))
	})
	if err != nil {
		err = mapErr(err)
		if errors.Is(err, node.ErrExist) || errors.Is(err, node.ErrNotEmpty) {
			// The server refused to replace a directory.
			err = fmt.Errorf("%w: %w", node.ErrIsDir, err)
		}
		return n.wrap("commit", u.path, err)
	}
	u.state = upCommitted
	return nil
}

// Abort implements node.Upload. It stops the writer, closes the file and
// removes it; these requests run even if ctx is done, bounded by
// Options.CleanupTimeout.
func (u *upload) Abort(ctx context.Context) error {
	if u.state == upCommitted || u.state == upAborted {
		return nil
	}
	u.state = upAborted
	u.cancel()
	u.abandonAcks()
	// The writer's request was cancelled with u.ctx: this returns
	// promptly.
	_ = u.stopWriter(context.Background())
	u.releaseBufs()
	n := u.n
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.opts.CleanupTimeout)
	defer cancel()
	if !u.fileClosed {
		u.fileClosed = true
		err := u.f.Close(cctx)
		n.pool.observe(u.cn, err) // the data is being discarded
	}
	err := n.pool.call(cctx, true, func(c *xrootd.Client) error {
		return c.Rm(cctx, n.remote(u.tmp))
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return n.fail("abort", u.path, err)
	}
	return nil
}

// TempPath implements node.Upload.
func (u *upload) TempPath() string { return u.tmp }

// releaseBufs returns the upload's buffers to the node's pool once the
// writer has exited.
func (u *upload) releaseBufs() {
	if u.buf != nil {
		bufpool.Put(u.buf)
		u.buf = nil
	}
	for {
		select {
		case b := <-u.free:
			bufpool.Put(b)
		default:
			return
		}
	}
}

// file is the node.File of a Node.
type file struct {
	n      *Node
	cn     *conn
	f      *xrootd.ClientFile
	path   string
	size   int64
	closed atomic.Bool
}

var _ node.File = (*file)(nil)

// ReadAt implements node.File with kXR_read, or with kXR_pgread, which
// verifies the CRC32C of every page, when Options.PageChecksums is set.
func (f *file) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, f.n.wrap("read", f.path, err)
	}
	if off < 0 {
		return 0, f.n.wrap("read", f.path, fmt.Errorf("negative offset %d", off))
	}
	var (
		n   int
		err error
	)
	if f.n.pages {
		n, err = f.f.PgReadAt(ctx, p, off)
	} else {
		n, err = f.f.ReadAt(ctx, p, off)
	}
	if err == io.EOF {
		return n, io.EOF
	}
	if err != nil {
		f.n.pool.observe(f.cn, err)
		return n, f.n.fail("read", f.path, err)
	}
	return n, nil
}

// Size implements node.File.
func (f *file) Size() int64 { return f.size }

// Close implements node.File, bounded by Options.CleanupTimeout. A file
// whose connection is gone is closed already.
func (f *file) Close() error {
	if f.closed.Swap(true) {
		return f.n.wrap("close", f.path, fs.ErrClosed)
	}
	ctx, cancel := context.WithTimeout(f.n.base, f.n.opts.CleanupTimeout)
	defer cancel()
	err := f.f.Close(ctx)
	f.n.pool.observe(f.cn, err)
	if err != nil && !errors.Is(err, xrootd.ErrClosed) && f.n.base.Err() == nil {
		return f.n.fail("close", f.path, err)
	}
	return nil
}
