package xrootd

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ecstore/ecstore/internal/bufpool"
	"github.com/ecstore/ecstore/internal/workers"
)

// session is one client connection.
type session struct {
	srv    *Server
	conn   net.Conn
	limits Limits
	log    *slog.Logger
	in     *bufio.Reader // requests, read only by the reading goroutine
	// frameRd is what s.in reads the connection through (a TLS layer
	// too): it holds a client to ReadTimeout within a frame.
	frameRd *frameReader

	ctx    context.Context // cancelled when the connection ends
	cancel context.CancelFunc

	draining atomic.Bool // stop reading requests (graceful shutdown)
	killed   atomic.Bool

	wmu  sync.Mutex // serializes response frames
	werr error      // sticky write error, under wmu
	out  io.Writer  // where frames go: conn, or its TLS layer; under wmu

	// underTLS is set once the connection has switched to TLS (conn
	// stays the TCP connection, for deadlines and closing).
	underTLS atomic.Bool
	// needAuth: requests wait for a successful kXR_auth.
	needAuth atomic.Bool
	ident    atomic.Pointer[Identity]

	slots  chan struct{} // one per request in flight
	budget budget        // payload bytes in flight
	wg     sync.WaitGroup

	loggedIn atomic.Bool
	// The file table. A bound sub-stream has none of its own: it uses
	// its parent's (see owner).
	mu      sync.Mutex // guards files and nextFH
	files   map[FileHandle]*openFile
	nextFH  uint32
	workers sync.WaitGroup

	// sessID is the session id of the kXR_login answer (Server.logins
	// maps it back to the session); under srv.mu.
	sessID    [16]byte
	hasSessID bool
	// parent is, for a connection bound to a session by kXR_bind (a
	// data sub-stream), that session; pathID is its path id there. Both
	// are set once, before any request after the bind is read.
	parent atomic.Pointer[session]
	pathID uint8
	// The sub-streams bound to this session, by path id (0 unused);
	// pathsClosed is set when the session ends: no more binds.
	pathMu      sync.Mutex
	paths       [MaxSubStreams + 1]*session
	pathsClosed bool
	// requestsDone is closed once the requests of the session have all
	// been answered: a sub-stream that shuts down gracefully waits for
	// it, since reads on the session may be answered on the sub-stream.
	requestsDone chan struct{}
	// done is closed when the connection has ended.
	done chan struct{}
	// rx and tx count the bytes received and sent on the connection.
	rx, tx atomic.Int64
}

// openFile is a file opened by kXR_open on this connection.
type openFile struct {
	fh       FileHandle
	f        File
	name     string
	writable bool
	// readers counts reads in progress; close waits for them.
	readers sync.WaitGroup
	// queue carries the write-side requests, run in order by one worker.
	// It is written only under session.mu while the file is in the table
	// and closed when the file leaves the table.
	queue chan func()
	// closed is set by the worker once kXR_close has run.
	closed bool
	// slicing admits the reads longer than one frame that are answered
	// from the file's own buffers (FileSlicer), SliceReadsPerFile at a
	// time.
	slicing chan struct{}
}

// budget is a byte semaphore with a single acquirer (the reading
// goroutine) and many releasers.
type budget struct {
	mu    sync.Mutex
	avail int64
	wake  chan struct{}
}

func (b *budget) acquire(ctx context.Context, n int64) error {
	for {
		b.mu.Lock()
		if b.avail >= n {
			b.avail -= n
			b.mu.Unlock()
			return nil
		}
		b.mu.Unlock()
		select {
		case <-b.wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.avail += n
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

func newSession(ctx context.Context, srv *Server, conn net.Conn, limits Limits, log *slog.Logger) *session {
	id := srv.nextSess.Add(1)
	s := &session{
		srv:    srv,
		conn:   conn,
		out:    conn,
		limits: limits,
		log:    log.With("conn", id, "remote", conn.RemoteAddr().String()),
		slots:  make(chan struct{}, limits.MaxInflight),
		budget: budget{avail: limits.PayloadBudget, wake: make(chan struct{}, 1)},
		files:  make(map[FileHandle]*openFile),

		requestsDone: make(chan struct{}),
		done:         make(chan struct{}),
	}
	s.frameRd = &frameReader{s: s}
	s.in = bufio.NewReaderSize(s.frameRd, 64<<10)
	s.ident.Store(&Identity{Remote: remoteAddrPort(conn)})
	// A bound sub-stream acts as its session's client.
	ctx = context.WithValue(ctx, identityKey{}, identityOf(func() Identity { return *s.owner().ident.Load() }))
	s.ctx, s.cancel = context.WithCancel(ctx)
	return s
}

// kill closes the connection at once; requests in flight see their context
// cancelled.
func (s *session) kill() {
	s.killed.Store(true)
	// Close first: a handler that sees its context cancelled must find
	// the connection gone, not send a "cancelled" response that would
	// tell the client the server is still talking to it.
	s.conn.Close()
	s.cancel()
}

// drain makes the session stop reading requests; the ones in flight finish
// and then the connection closes.
func (s *session) drain() {
	s.draining.Store(true)
	s.conn.SetReadDeadline(time.Now())
}

// setReadDeadline sets the read deadline unless the session is draining,
// in which case the deadline stays in the past.
// frameReader reads the connection for s.in. While a frame's payload
// is being read (inFrame, set by the reading goroutine only), every read
// renews a deadline of ReadTimeout: a client silent in the middle of a
// frame is cut off.
type frameReader struct {
	s       *session
	inFrame bool
	armed   bool // a deadline was set within the frame
}

func (r *frameReader) Read(p []byte) (int, error) {
	if r.inFrame {
		r.s.setReadDeadline(time.Now().Add(r.s.limits.ReadTimeout))
		r.armed = true
	}
	n, err := r.s.conn.Read(p)
	r.s.rx.Add(int64(n))
	return n, err
}

// inFrame marks the reading of a frame's payload (see frameReader); the
// deadline is cleared when it ends.
func (s *session) inFrame(on bool) {
	s.frameRd.inFrame = on
	if !on && s.frameRd.armed {
		s.frameRd.armed = false
		s.setReadDeadline(time.Time{})
	}
}

func (s *session) setReadDeadline(t time.Time) {
	s.conn.SetReadDeadline(t)
	if s.draining.Load() {
		s.conn.SetReadDeadline(time.Now())
	}
}

// serve runs the connection until the client leaves, the server shuts
// down or a frame cannot be delimited.
func (s *session) serve() {
	stop := context.AfterFunc(s.ctx, func() { s.conn.Close() })
	defer stop()
	s.log.Debug("xrootd connection opened")

	defer close(s.done)
	graceful := s.run()
	s.srv.forgetLogin(s)

	if !graceful {
		// The client is gone or misbehaved: abandon the work in flight.
		s.cancel()
	}
	s.wg.Wait()
	close(s.requestsDone)
	if p := s.parent.Load(); p != nil {
		s.unbind(p, graceful)
	} else {
		s.closePaths(graceful)
		s.closeAllFiles()
	}
	s.cancel()
	s.conn.Close()
	s.log.Debug("xrootd connection closed", "received", s.rx.Load(), "sent", s.tx.Load())
}

// owner is the session whose file table the connection uses: its
// parent for a bound sub-stream, itself otherwise.
func (s *session) owner() *session {
	if p := s.parent.Load(); p != nil {
		return p
	}
	return s
}

// closePaths ends the sub-streams bound to the session, which is ending,
// and refuses further binds. Gracefully, each finishes the requests it
// has in flight (writes to the session's files) first.
func (s *session) closePaths(graceful bool) {
	s.pathMu.Lock()
	s.pathsClosed = true
	subs := s.paths
	s.paths = [MaxSubStreams + 1]*session{}
	s.pathMu.Unlock()
	for _, sub := range subs {
		if sub == nil {
			continue
		}
		if graceful {
			sub.drain()
		} else {
			sub.kill()
		}
	}
	for _, sub := range subs {
		if sub != nil {
			<-sub.done
		}
	}
}

// unbind runs when a sub-stream bound to p ends: it frees its path id
// and counts its bytes. Gracefully, it first waits for p's requests,
// whose answers may be due on it.
func (s *session) unbind(p *session, graceful bool) {
	if graceful {
		select {
		case <-p.requestsDone:
		case <-s.ctx.Done():
		}
	}
	p.pathMu.Lock()
	if p.paths[s.pathID] == s {
		p.paths[s.pathID] = nil
	}
	p.pathMu.Unlock()
	rx, tx := s.rx.Load(), s.tx.Load()
	s.srv.subRx.Add(rx)
	s.srv.subTx.Add(tx)
	s.log.Debug("xrootd sub-stream closed", "path", s.pathID, "received", rx, "sent", tx)
}

// pathSession is the session on which the answer to a read that names
// path id id goes: the sub-stream bound with that id to the session s
// belongs to, or s itself for path 0 or kXR_AnyPath.
func (s *session) pathSession(id uint8) (*session, error) {
	if id == 0 || id == AnyPath {
		return s, nil
	}
	o := s.owner()
	var sub *session
	o.pathMu.Lock()
	if int(id) < len(o.paths) {
		sub = o.paths[id]
	}
	o.pathMu.Unlock()
	if sub == nil {
		return nil, Errorf(ErrArgInvalid, "path id %d is not a sub-stream of this session", id)
	}
	return sub, nil
}

// run performs the handshake and reads requests. It reports whether it
// stopped gracefully (shutdown), in which case requests in flight should
// be allowed to finish.
func (s *session) run() (graceful bool) {
	s.conn.SetWriteDeadline(time.Now().Add(s.limits.HandshakeTimeout))
	s.setReadDeadline(time.Now().Add(s.limits.HandshakeTimeout))
	if err := ReadHandshake(s.in); err != nil {
		s.log.Debug("xrootd handshake failed", "err", err)
		return false
	}
	if err := s.writeRaw(AppendHandshakeResponse(nil, s.protocolVersion(), DataServer)); err != nil {
		return false
	}
	// A client has ReadTimeout to log in (and authenticate where it
	// must): one that connects and stays silent holds nothing for long.
	loginBy := time.Now().Add(s.limits.ReadTimeout)
	s.setReadDeadline(loginBy)

	var hb [RequestHeaderLen]byte
	for loggingIn := true; ; {
		if loggingIn && s.loggedIn.Load() && !s.needAuth.Load() {
			loggingIn = false
			s.setReadDeadline(time.Time{})
		}
		var err error
		if loggingIn {
			_, err = io.ReadFull(s.in, hb[:])
		} else {
			err = s.readHeader(hb[:])
		}
		if err != nil {
			return s.readEnded(err)
		}
		h := ParseRequestHeader(&hb)
		if err := checkRequestHeader(h, s.limits.MaxPayload); err != nil {
			code := ErrArgInvalid
			if errors.Is(err, ErrFrameTooLarge) {
				code = ErrArgTooLong
			}
			s.log.Debug("xrootd bad request frame; closing", "err", err)
			s.sendError(h.StreamID, &Error{Code: code, Message: err.Error()})
			return false
		}
		if served, ok := s.streamWrite(h); served {
			if !ok {
				return s.draining.Load()
			}
			continue
		}
		select {
		case s.slots <- struct{}{}:
		case <-s.ctx.Done():
			return false
		}
		size := int64(h.Dlen)
		if err := s.budget.acquire(s.ctx, size); err != nil {
			<-s.slots
			return false
		}
		s.inFrame(true)
		payload, err := readPayload(s.in, int(h.Dlen))
		s.inFrame(false)
		if loggingIn {
			s.setReadDeadline(loginBy)
		}
		if err != nil {
			s.budget.release(size)
			<-s.slots
			if s.draining.Load() {
				// Shutdown interrupted this request; finish the others.
				return true
			}
			s.log.Debug("xrootd request payload unreadable; closing", "req", h.ID, "err", err)
			return false
		}
		f := &RequestFrame{StreamID: h.StreamID, ID: h.ID, Params: h.Params, Payload: payload}
		s.wg.Add(1)
		s.dispatch(f)
	}
}

// readHeader reads the next request header. With an IdleTimeout, the
// connection ends when that much time passes with no request in flight,
// no file open and no complete header received.
func (s *session) readHeader(hb []byte) error {
	if s.limits.IdleTimeout <= 0 {
		_, err := io.ReadFull(s.in, hb)
		return err
	}
	defer s.setReadDeadline(time.Time{})
	n := 0
	for n < len(hb) {
		s.setReadDeadline(time.Now().Add(s.limits.IdleTimeout))
		m, err := s.in.Read(hb[n:])
		n += m
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded) && !s.draining.Load() && (len(s.slots) > 0 || s.openFiles() > 0):
			// Busy, not idle: requests are still being answered, or
			// a file is open (an analysis job may compute for an hour
			// between two reads of it).
		case errors.Is(err, io.EOF) && n > 0:
			return io.ErrUnexpectedEOF
		default:
			return err
		}
	}
	return nil
}

// openFiles is the number of files the connection has open.
func (s *session) openFiles() int {
	o := s.owner()
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.files)
}

// readEnded classifies the error that stopped the request reader.
func (s *session) readEnded(err error) (graceful bool) {
	if s.draining.Load() {
		return true
	}
	switch {
	case errors.Is(err, io.EOF):
	case errors.Is(err, os.ErrDeadlineExceeded):
		s.log.Debug("xrootd connection idle; closing")
	case s.ctx.Err() != nil || s.killed.Load():
	default:
		s.log.Debug("xrootd read failed", "err", truncated(err))
	}
	return false
}

// finish releases what a request held, recycling its payload buffer.
func (s *session) finish(f *RequestFrame) {
	s.budget.release(int64(len(f.Payload)))
	bufpool.Put(f.Payload)
	f.Payload = nil
	<-s.slots
	s.wg.Done()
}

// guard runs fn, turning a panic into a logged kXR_ServerError.
func (s *session) guard(sid StreamID, id RequestID, fn func()) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("xrootd request panicked", "req", id, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			s.sendError(sid, &Error{Code: ErrServerError, Message: "internal server error"})
		}
	}()
	fn()
}

// writeRaw writes pre-encoded bytes under the write lock.
func (s *session) writeRaw(b []byte) error {
	return s.writeFrame(net.Buffers{b})
}

func (s *session) writeFrame(bufs net.Buffers) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.werr != nil {
		return s.werr
	}
	s.conn.SetWriteDeadline(time.Now().Add(s.limits.WriteTimeout))
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	if err := writeFrames(s.out, bufs); err != nil {
		return s.writeFailed(err)
	}
	s.tx.Add(int64(n))
	return nil
}

// writeFailed records that writing a response failed with err, which
// sticks, and closes the connection: the client cannot tell where the
// frame broke off. s.wmu is held.
func (s *session) writeFailed(err error) error {
	s.werr = fmt.Errorf("xrootd: write response: %w", err)
	if !s.killed.Load() && s.ctx.Err() == nil {
		s.log.Debug("xrootd response write failed; closing", "err", err)
	}
	s.kill()
	return s.werr
}

// send sends one response frame whose body is the concatenation of parts.
func (s *session) send(sid StreamID, st Status, parts ...[]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	hdr := AppendResponseHeader(make([]byte, 0, ResponseHeaderLen), sid, st, n)
	bufs := make(net.Buffers, 0, 1+len(parts))
	bufs = append(bufs, hdr)
	for _, p := range parts {
		if len(p) > 0 {
			bufs = append(bufs, p)
		}
	}
	return s.writeFrame(bufs)
}

// sendOK sends kXR_ok with the given body.
func (s *session) sendOK(sid StreamID, body []byte) error { return s.send(sid, StatusOK, body) }

// sendError sends kXR_error for err.
func (s *session) sendError(sid StreamID, err error) error {
	xe := toProtocolError(err)
	return s.send(sid, StatusError, AppendErrorBody(nil, xe.Code, xe.Message))
}

// sendStatus sends a kXR_status frame: the status body with info, then
// data outside the header's dlen.
func (s *session) sendStatus(sid StreamID, id RequestID, respType uint8, info, data []byte) error {
	sb := StatusBody{StreamID: sid, RequestID: id, RespType: respType, DataLen: int32(len(data)), Info: info}
	body := sb.AppendTo(make([]byte, 0, StatusBodyLen+len(info)))
	hdr := AppendResponseHeader(make([]byte, 0, ResponseHeaderLen), sid, StatusStatus, len(body))
	bufs := net.Buffers{hdr, body}
	if len(data) > 0 {
		bufs = append(bufs, data)
	}
	return s.writeFrame(bufs)
}

// newSessionID returns a random 16-byte session id.
func newSessionID() [16]byte {
	var id [16]byte
	rand.Read(id[:])
	return id
}

// registerFile adds an opened file to the table and starts its worker.
func (s *session) registerFile(f File, name string, writable bool) (FileHandle, error) {
	s = s.owner()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.files) >= s.limits.MaxOpenFiles {
		return FileHandle{}, Errorf(ErrOverloaded, "too many open files on this connection (limit %d)", s.limits.MaxOpenFiles)
	}
	var fh FileHandle
	for {
		binary.BigEndian.PutUint32(fh[:], s.nextFH)
		s.nextFH++
		if _, used := s.files[fh]; !used {
			break
		}
	}
	of := &openFile{fh: fh, f: f, name: name, writable: writable, queue: make(chan func(), s.limits.MaxInflight+1), slicing: make(chan struct{}, s.limits.SliceReadsPerFile)}
	s.files[fh] = of
	s.workers.Add(1)
	workers.Go(func() {
		defer s.workers.Done()
		for fn := range of.queue {
			fn()
		}
	})
	return fh, nil
}

// acquireFile returns the open file for fh and counts a reader on it; the
// caller must call of.readers.Done.
func (s *session) acquireFile(fh FileHandle) *openFile {
	s = s.owner()
	s.mu.Lock()
	defer s.mu.Unlock()
	of := s.files[fh]
	if of != nil {
		of.readers.Add(1)
	}
	return of
}

// enqueue appends a write-side operation to the file's ordered queue. It
// reports false when fh is not open.
func (s *session) enqueue(fh FileHandle, fn func(of *openFile)) bool {
	s = s.owner()
	s.mu.Lock()
	defer s.mu.Unlock()
	of := s.files[fh]
	if of == nil {
		return false
	}
	// Never blocks: every queued operation holds one of MaxInflight slots.
	of.queue <- func() { fn(of) }
	return true
}

// removeFile takes fh out of the table so that no further operation can be
// queued; it runs on the file's worker.
func (s *session) removeFile(of *openFile) {
	s = s.owner()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.files[of.fh] == of {
		delete(s.files, of.fh)
		close(of.queue)
	}
}

// closeAllFiles runs when the connection of a session (not a sub-stream)
// ends: files the client left open are aborted (FileAborter) or closed,
// all at once.
func (s *session) closeAllFiles() {
	s.mu.Lock()
	left := make([]*openFile, 0, len(s.files))
	for fh, of := range s.files {
		delete(s.files, fh)
		close(of.queue)
		left = append(left, of)
	}
	s.mu.Unlock()
	s.workers.Wait()
	// Each on its own: an abort that takes long (an upload committed
	// then) must not hold up another (one kept for its client, waiting
	// to be taken up again).
	var wg sync.WaitGroup
	for _, of := range left {
		wg.Go(func() {
			of.readers.Wait()
			ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), time.Minute)
			defer cancel()
			var err error
			if a, ok := of.f.(FileAborter); ok && of.writable {
				err = a.Abort(ctx)
			} else {
				err = of.f.Close(ctx)
			}
			s.log.Debug("xrootd file left open at disconnect", "path", of.name, "writable", of.writable, "err", err)
		})
	}
	wg.Wait()
}

// remoteAddrPort is conn's remote address, IPv4 addresses unmapped; the
// zero AddrPort for a connection that is not TCP.
func remoteAddrPort(conn net.Conn) netip.AddrPort {
	ta, ok := conn.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}
	}
	ap := ta.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
