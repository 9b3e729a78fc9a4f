package xrootd

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"net"
	"net/url"
	"os"
	"path"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ecstore/ecstore/internal/bufpool"
	"github.com/ecstore/ecstore/internal/workers"
)

// maxPathLen bounds the path of a request.
const maxPathLen = 4096

// dispatch routes one request. It runs on the reading goroutine, which
// fixes the order of the write-side requests of each file; everything that
// may block on the handler runs on its own goroutine. The request's slot
// and payload budget are released by s.finish when it is done; nothing may
// keep a slice of f.Payload beyond that, since the buffer is recycled.
func (s *session) dispatch(f *RequestFrame) {
	sid, id := f.StreamID, f.ID
	// A data sub-stream carries the data requests of its session's open
	// files; nothing on it changes who the client is (login, auth, bind).
	if s.parent.Load() != nil {
		switch id {
		case ReqRead, ReqPgRead, ReqReadV, ReqWrite, ReqPgWrite, ReqSync, ReqPing:
		default:
			s.sendError(sid, Errorf(ErrInvalidRequest, "%v request on a data sub-stream (kXR_bind); send it on the session's connection", id))
			s.finish(f)
			return
		}
	}
	// Refused by its id before it is parsed: a client that has not logged
	// in costs no parsing (a list request parses into many strings).
	if !s.loggedIn.Load() {
		switch id {
		case ReqProtocol, ReqLogin, ReqPing, ReqAuth, ReqBind:
		default:
			s.sendError(sid, Errorf(ErrNotAuthorized, "%v request before login", id))
			s.finish(f)
			return
		}
	}
	if s.needAuth.Load() {
		switch id {
		case ReqProtocol, ReqLogin, ReqPing, ReqAuth, ReqEndsess:
		default:
			s.sendError(sid, Errorf(ErrNotAuthorized, "%v request before authentication (kXR_auth)", id))
			s.finish(f)
			return
		}
	}
	req, err := ParseRequest(f)
	if err != nil {
		s.sendError(sid, &Error{Code: ErrArgInvalid, Message: fmt.Sprintf("malformed %v request: %v", id, err)})
		s.finish(f)
		return
	}
	// Requests that change connection state run inline, so that a client
	// that pipelines login and its first request is served in order.
	switch r := req.(type) {
	case *ProtocolRequest:
		s.guard(sid, id, func() { s.doProtocol(sid, r) })
		s.finish(f)
		return
	case *LoginRequest:
		s.guard(sid, id, func() { s.doLogin(sid, r) })
		s.finish(f)
		return
	case *AuthRequest:
		s.guard(sid, id, func() { s.doAuth(sid, r) })
		s.finish(f)
		return
	case *BindRequest:
		s.guard(sid, id, func() { s.doBind(sid, r) })
		s.finish(f)
		return
	case *WriteRequest:
		// A write that names a sub-stream (pathid) is answered there.
		out, err := s.pathSession(r.PathID)
		if err != nil {
			s.fail(sid, id, err)
			s.finish(f)
			return
		}
		out.queueFileOpFor(s, sid, id, r.Handle, f, func(of *openFile) { out.doWrite(sid, of, r.Offset, r.Data, false) })
		return
	case *PgWriteRequest:
		out, err := s.pathSession(r.PathID)
		if err != nil {
			s.fail(sid, id, err)
			s.finish(f)
			return
		}
		out.queueFileOpFor(s, sid, id, r.Handle, f, func(of *openFile) { out.doPgWrite(sid, of, r) })
		return
	case *SyncRequest:
		s.queueFileOp(sid, id, r.Handle, f, func(of *openFile) { s.doSync(sid, of) })
		return
	case *CloseRequest:
		s.noticeClose(r.Handle)
		s.queueFileOp(sid, id, r.Handle, f, func(of *openFile) { s.doClose(sid, of) })
		return
	case *TruncateRequest:
		if r.Path == "" {
			s.queueFileOp(sid, id, r.Handle, f, func(of *openFile) { s.doFileTruncate(sid, of, r.Size) })
			return
		}
	case *FattrRequest:
		if r.Path == "" {
			// In order with the file's writes, sync and close.
			s.queueFileOp(sid, id, r.Handle, f, func(of *openFile) { s.doFileFattr(sid, of, r) })
			return
		}
	}
	// The files a read names are taken here, in the order the requests
	// came, so that a close sent after the read waits for it rather than
	// closing the file before the read's goroutine looks for it.
	held := s.holdFiles(req)
	workers.Go(func() {
		defer s.finish(f)
		defer held.release()
		s.guard(sid, id, func() { s.handle(sid, req, held) })
	})
}

// heldFiles are the open files a request names, each counted as read
// (openFile.readers) until release; a handle that was not open maps to
// nil.
type heldFiles map[FileHandle]*openFile

// holdFiles holds the files named by a request that reads through file
// handles on its own goroutine: kXR_read, kXR_pgread, kXR_readv and
// kXR_stat of a handle.
func (s *session) holdFiles(req Request) heldFiles {
	var handles []FileHandle
	switch r := req.(type) {
	case *ReadRequest:
		handles = []FileHandle{r.Handle}
	case *PgReadRequest:
		handles = []FileHandle{r.Handle}
	case *ReadVRequest:
		for _, seg := range r.Segments {
			handles = append(handles, seg.Handle)
		}
	case *StatRequest:
		if r.Path == "" && r.Options&StatVFS == 0 {
			handles = []FileHandle{r.Handle}
		}
	}
	if len(handles) == 0 {
		return nil
	}
	held := make(heldFiles, 1)
	for _, fh := range handles {
		if _, ok := held[fh]; !ok {
			held[fh] = s.acquireFile(fh)
		}
	}
	return held
}

// release ends the reads of the held files.
func (h heldFiles) release() {
	for _, of := range h {
		if of != nil {
			of.readers.Done()
		}
	}
}

// queueFileOp queues a write-side operation on an open file, or answers
// kXR_FileNotOpen.
func (s *session) queueFileOp(sid StreamID, id RequestID, fh FileHandle, f *RequestFrame, fn func(of *openFile)) {
	s.queueFileOpFor(s, sid, id, fh, f, fn)
}

// queueFileOpFor is queueFileOp for a request that came on from's
// connection (which holds its slot and payload) and is answered on s's.
func (s *session) queueFileOpFor(from *session, sid StreamID, id RequestID, fh FileHandle, f *RequestFrame, fn func(of *openFile)) {
	ok := s.enqueue(fh, func(of *openFile) {
		defer from.finish(f)
		s.guard(sid, id, func() {
			if of.closed {
				s.sendError(sid, Errorf(ErrFileNotOpen, "%v: file handle %x is closed", id, fh))
				return
			}
			fn(of)
		})
	})
	if !ok {
		s.sendError(sid, Errorf(ErrFileNotOpen, "%v: file handle %x is not open", id, fh))
		from.finish(f)
	}
}

// handle serves the requests that run on their own goroutine; held are
// the files they name (holdFiles).
func (s *session) handle(sid StreamID, req Request, held heldFiles) {
	ctx := s.ctx
	var err error
	// A read that names a sub-stream (pathid) is answered there, with
	// this request's stream id; an error too, since the client waits for
	// the answer on that connection.
	out := s
	switch r := req.(type) {
	case *ReadRequest:
		out, err = s.pathSession(r.PathID)
	case *PgReadRequest:
		out, err = s.pathSession(r.PathID)
	case *ReadVRequest:
		out, err = s.pathSession(r.PathID)
	}
	if err != nil {
		s.fail(sid, req.RequestID(), err)
		return
	}
	if o, ok := s.srv.Handler.(ReadObserver); ok {
		var op string
		switch req.(type) {
		case *ReadRequest:
			op = "read"
		case *PgReadRequest:
			op = "pgread"
		case *ReadVRequest:
			op = "readv"
		}
		if op != "" {
			start := time.Now()
			defer func() { o.ReadDone(op, start, err) }()
		}
	}
	switch r := req.(type) {
	case *PingRequest, *SetRequest, *PrepareRequest:
		// Settings are ignored and all data is online: nothing to do.
		err = s.sendOK(sid, nil)
	case *EndsessRequest:
		err = s.doEndsess(sid, r)
	case *StatRequest:
		err = s.doStat(ctx, sid, held, r)
	case *StatxRequest:
		err = s.doStatx(ctx, sid, r)
	case *OpenRequest:
		err = s.doOpen(ctx, sid, r)
	case *ReadRequest:
		err = out.doRead(ctx, sid, held, r)
	case *PgReadRequest:
		err = out.doPgRead(ctx, sid, held, r)
	case *ReadVRequest:
		err = out.doReadV(ctx, sid, held, r)
	case *DirlistRequest:
		err = s.doDirlist(ctx, sid, r)
	case *MkdirRequest:
		err = s.doMkdir(ctx, sid, r)
	case *RmdirRequest:
		err = s.withPath(sid, r.Path, func(name string, _ url.Values) error {
			h, ok := s.srv.Handler.(DirRemover)
			if !ok {
				return Errorf(ErrUnsupported, "rmdir is not supported")
			}
			return h.Rmdir(ctx, name)
		})
	case *RmRequest:
		err = s.withPath(sid, r.Path, func(name string, _ url.Values) error {
			h, ok := s.srv.Handler.(Remover)
			if !ok {
				return Errorf(ErrUnsupported, "rm is not supported")
			}
			return h.Remove(ctx, name)
		})
	case *MvRequest:
		err = s.doMv(ctx, sid, r)
	case *ChmodRequest:
		err = s.withPath(sid, r.Path, func(name string, _ url.Values) error {
			h, ok := s.srv.Handler.(Chmoder)
			if !ok {
				return Errorf(ErrUnsupported, "chmod is not supported")
			}
			return h.Chmod(ctx, name, fs.FileMode(r.Mode)&fs.ModePerm)
		})
	case *TruncateRequest:
		err = s.withPath(sid, r.Path, func(name string, _ url.Values) error {
			h, ok := s.srv.Handler.(Truncater)
			if !ok {
				return Errorf(ErrUnsupported, "truncate is not supported")
			}
			if r.Size < 0 {
				return Errorf(ErrArgInvalid, "negative size %d", r.Size)
			}
			return h.Truncate(ctx, name, r.Size)
		})
	case *FattrRequest:
		err = s.doFattr(ctx, sid, r)
	case *QueryRequest:
		err = s.doQuery(ctx, sid, r)
	case *LocateRequest:
		err = s.doLocate(ctx, sid, r)
	default:
		err = Errorf(ErrUnsupported, "%v request is not supported", req.RequestID())
	}
	if err != nil {
		out.fail(sid, req.RequestID(), err)
	}
}

// fail answers a request with kXR_error, unless err is a failure to send
// (then the connection is already gone).
func (s *session) fail(sid StreamID, id RequestID, err error) {
	if errors.Is(err, errSent) {
		return
	}
	xe := toProtocolError(err)
	s.log.Debug("xrootd request failed", "req", id, "code", xe.Code.String(), "err", err)
	s.sendError(sid, xe)
}

// errSent marks an error that happened while sending a response; there is
// nothing more to tell the client.
var errSent = errors.New("xrootd: response not sent")

// sent wraps a send error so that fail does not try to answer again.
func sent(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", errSent, err)
}

// cleanPath validates a request path and splits off its CGI. Paths must be
// absolute; "." and ".." elements are resolved lexically.
func cleanPath(raw string) (string, url.Values, error) {
	p, cgi, _ := strings.Cut(raw, "?")
	switch {
	case p == "":
		return "", nil, Errorf(ErrArgMissing, "path is missing")
	case len(p) > maxPathLen:
		return "", nil, Errorf(ErrArgTooLong, "path longer than %d bytes", maxPathLen)
	case p[0] != '/':
		return "", nil, Errorf(ErrArgInvalid, "path %q is not absolute", p)
	case strings.ContainsRune(p, 0):
		return "", nil, Errorf(ErrArgInvalid, "path contains a NUL byte")
	}
	values, _ := url.ParseQuery(cgi) // keep what parses
	return path.Clean(p), values, nil
}

// withPath runs fn on the cleaned path and answers kXR_ok when it succeeds.
func (s *session) withPath(sid StreamID, raw string, fn func(name string, cgi url.Values) error) error {
	name, cgi, err := cleanPath(raw)
	if err != nil {
		return err
	}
	if err := fn(name, cgi); err != nil {
		return err
	}
	return sent(s.sendOK(sid, nil))
}

func (s *session) doProtocol(sid StreamID, r *ProtocolRequest) {
	// No security requirements (signing) to append: the short 8-byte
	// answer, as xrootd sends when it has none to report even if
	// kXR_secreqs is set.
	resp := ProtocolResponse{Version: s.protocolVersion(), Flags: FlagIsServer}
	if !s.srv.NoPageChecksums {
		resp.Flags |= FlagSupPgRW
	}
	if p, ok := s.srv.Handler.(PersistOnCloser); ok && p.PersistOnClose() {
		resp.Flags |= FlagSupPOSC
	}
	goTLS := false
	// TLS is offered only before login, with nothing else in flight (the
	// kXR_protocol request holds the one slot): frames of other requests
	// must not go out between the answer and the handshake.
	if s.srv.TLS != nil && !s.underTLS.Load() && !s.loggedIn.Load() && len(s.slots) == 1 {
		resp.Flags |= FlagHaveTLS
		tokens := s.srv.Tokens != nil
		if tokens {
			resp.Flags |= FlagTLSLogin
		}
		// A roots:// client asks for TLS; with tokens every client that
		// can use it is moved to TLS before its login, as xrootd does,
		// since tokens are sent under TLS only. A client told
		// kXR_gotoTLS starts its handshake once it has read this answer.
		goTLS = r.Flags&ProtoWantTLS != 0 || (tokens && r.Flags&ProtoAbleTLS != 0)
		if goTLS {
			resp.Flags |= FlagGotoTLS
		}
	}
	if err := s.sendOK(sid, resp.AppendTo(nil)); err != nil || !goTLS {
		return
	}
	if err := s.startTLS(); err != nil {
		s.log.Debug("xrootd TLS handshake failed; closing", "err", err)
		s.kill()
	}
}

// startTLS runs the server side of the TLS handshake on the connection and
// moves the session's reads and writes onto TLS. It runs on the reading
// goroutine, with nothing in flight (right after kXR_protocol).
func (s *session) startTLS() error {
	tc := tls.Server(&readerConn{Conn: s.conn, r: s.in}, s.srv.TLS)
	ctx, cancel := context.WithTimeout(s.ctx, s.limits.HandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("xrootd: TLS handshake: %w", err)
	}
	s.wmu.Lock()
	s.out = tc
	s.wmu.Unlock()
	s.in = bufio.NewReaderSize(tc, 64<<10)
	s.underTLS.Store(true)
	id := *s.ident.Load()
	id.TLS = true
	s.ident.Store(&id)
	return nil
}

// readerConn is a connection whose reads come from r (the bytes already
// buffered from it, then it), for a TLS layer put over a connection that
// was read through a bufio.Reader.
type readerConn struct {
	net.Conn
	r io.Reader
}

func (c *readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// protocolVersion is the protocol version the server reports.
func (s *session) protocolVersion() int32 {
	if s.srv.NoPageChecksums {
		return ProtocolVersionNoPgRW
	}
	return ProtocolVersion
}

// doLogin logs the client in. Under TLS on a server that takes tokens,
// the answer names the security protocols after the session id (ztn,
// then unix when clients without a token may stay), and the session
// waits for kXR_auth.
func (s *session) doLogin(sid StreamID, r *LoginRequest) {
	underTLS := s.underTLS.Load()
	tokens := s.srv.Tokens != nil
	if tokens && s.srv.TokenRequired && !underTLS {
		s.sendError(sid, Errorf(ErrTLSRequired, "this server takes token holders only, under TLS: use a roots:// URL and a bearer token (BEARER_TOKEN)"))
		return
	}
	id := newSessionID()
	s.srv.remember(s, id)
	body := id[:]
	if tokens && underTLS {
		body = append(body, ztnParams...)
		if !s.srv.TokenRequired {
			body = append(body, unixParams...)
		}
		s.needAuth.Store(true)
	}
	s.ident.Store(&Identity{Holder: r.Username, TLS: underTLS, User: r.Username, PID: r.PID, Remote: s.ident.Load().Remote})
	s.loggedIn.Store(true)
	cgi, _ := url.ParseQuery(r.Token)
	s.log.Debug("xrootd login", "user", r.Username, "app", cgi.Get("xrd.appname"), "client_version", cgi.Get("xrd.rn"), "tls", underTLS)
	s.sendOK(sid, body)
}

// doBind makes the connection a data sub-stream of the session whose
// login answer carried r.SessionID, and answers its path id there. The
// session must be of this server, logged in and authenticated, and on
// the same host; it may have MaxSubStreams sub-streams at a time. The
// connection then takes the data requests of the session's open files
// (dispatch) and nothing else, acting as the session's client.
// doEndsess ends an earlier session of the same client: XrdCl sends
// kXR_endsess with the session id of its broken connection when it logs
// in again, so that the files that connection held are closed (or
// aborted) before it opens them again, as its write recovery does. The
// session must be another logged-in one of the same user and process,
// from the same host; one already gone is kXR_NotFound, which XrdCl
// takes as done.
func (s *session) doEndsess(sid StreamID, r *EndsessRequest) error {
	p := s.srv.lookupLogin(r.SessionID)
	if p == nil || p == s || p.parent.Load() != nil {
		return Errorf(ErrNotFound, "endsess: no such session")
	}
	mine, theirs := s.ident.Load(), p.ident.Load()
	if mine == nil || theirs == nil {
		return Errorf(ErrNotFound, "endsess: no such session")
	}
	if mine.User != theirs.User || mine.PID != theirs.PID || mine.Holder != theirs.Holder || mine.Authenticated != theirs.Authenticated ||
		remoteAddrPort(p.conn).Addr() != remoteAddrPort(s.conn).Addr() {
		return Errorf(ErrNotAuthorized, "endsess: the session is another client's")
	}
	s.log.Debug("xrootd session ended by its client's new connection (kXR_endsess)", "session_remote", p.conn.RemoteAddr().String())
	p.kill()
	return s.sendOK(sid, nil)
}

func (s *session) doBind(sid StreamID, r *BindRequest) {
	refuse := func(code ErrorCode, format string, args ...any) {
		err := Errorf(code, format, args...)
		s.log.Debug("xrootd bind refused", "err", err)
		s.sendError(sid, err)
	}
	if s.loggedIn.Load() || s.parent.Load() != nil {
		refuse(ErrInvalidRequest, "kXR_bind on a connection that is logged in or bound already")
		return
	}
	p := s.srv.lookupLogin(r.SessionID)
	switch {
	case p == nil || p == s:
		refuse(ErrNotAuthorized, "bind: no such session")
		return
	case !p.loggedIn.Load() || p.needAuth.Load():
		refuse(ErrNotAuthorized, "bind: the session is not authenticated")
		return
	case p.parent.Load() != nil:
		refuse(ErrNotAuthorized, "bind: no such session")
		return
	case remoteAddrPort(p.conn).Addr() != remoteAddrPort(s.conn).Addr():
		refuse(ErrNotAuthorized, "bind: the session is on another host")
		return
	case p.underTLS.Load() && !s.underTLS.Load():
		refuse(ErrTLSRequired, "bind: the session is under TLS; so must its sub-streams be")
		return
	}
	p.pathMu.Lock()
	if p.pathsClosed {
		p.pathMu.Unlock()
		refuse(ErrNotAuthorized, "bind: the session has ended")
		return
	}
	id := 0
	for i := 1; i <= MaxSubStreams; i++ {
		if p.paths[i] == nil {
			id = i
			break
		}
	}
	if id == 0 {
		p.pathMu.Unlock()
		refuse(ErrNoMemory, "bind limit exceeded: a session may have %d sub-streams", MaxSubStreams)
		return
	}
	p.paths[id] = s
	s.pathID = uint8(id)
	s.parent.Store(p)
	p.pathMu.Unlock()
	s.loggedIn.Store(true)
	s.log.Debug("xrootd bound as a sub-stream", "session_remote", p.conn.RemoteAddr().String(), "path", id)
	s.sendOK(sid, []byte{byte(id)})
}

// authFailed reports a refused credential to Server.AuthFailed.
func (s *session) authFailed() {
	if s.srv.AuthFailed != nil {
		s.srv.AuthFailed()
	}
}

// doAuth checks a kXR_auth credential: a ztn token, or "unix" (no
// credential: the anonymous fallback) where clients without a token are
// let in.
func (s *session) doAuth(sid StreamID, r *AuthRequest) {
	switch {
	case s.srv.Tokens == nil:
		s.sendError(sid, Errorf(ErrNotAuthorized, "authentication is not offered by this server; log in anonymously"))
		return
	case !s.underTLS.Load():
		s.sendError(sid, Errorf(ErrTLSRequired, "token authentication needs TLS: use a roots:// URL"))
		return
	case !s.needAuth.Load():
		s.sendError(sid, Errorf(ErrAuthFailed, "this session is already authenticated"))
		return
	}
	proto := string(bytes.TrimRight(r.CredType[:], "\x00"))
	switch proto {
	case "ztn":
		tok, err := ParseZtnCredential(r.Credentials)
		if err != nil {
			s.authFailed()
			s.sendError(sid, &Error{Code: ErrAuthFailed, Message: err.Error()})
			return
		}
		holder, grant, err := s.srv.Tokens(s.ctx, tok)
		if err != nil {
			id := *s.ident.Load()
			s.log.Warn("xrootd token refused", "user", id.Holder, "err", err)
			id.TokenRefused = true
			s.ident.Store(&id)
			s.authFailed()
			s.sendError(sid, Errorf(ErrAuthFailed, "token not accepted"))
			return
		}
		id := *s.ident.Load()
		id.Holder, id.Authenticated, id.TokenRefused, id.Grant = holder, true, false, grant
		s.ident.Store(&id)
		s.log.Debug("xrootd client authenticated", "holder", holder)
	case "unix":
		if s.srv.TokenRequired {
			s.sendError(sid, Errorf(ErrAuthFailed, "this server takes token holders only: set BEARER_TOKEN or a token file"))
			return
		}
	default:
		s.authFailed()
		s.sendError(sid, Errorf(ErrAuthFailed, "security protocol %q is not offered (ztn is)", proto))
		return
	}
	s.needAuth.Store(false)
	s.sendOK(sid, nil)
}

func (s *session) doStat(ctx context.Context, sid StreamID, held heldFiles, r *StatRequest) error {
	if r.Options&StatVFS != 0 {
		return s.doStatVFS(ctx, sid, r)
	}
	var fi FileInfo
	if r.Path == "" {
		of := held[r.Handle]
		if of == nil {
			return Errorf(ErrFileNotOpen, "stat: file handle %x is not open", r.Handle)
		}
		var err error
		fi, err = of.f.Stat(ctx)
		if err != nil {
			return fmt.Errorf("stat %s: %w", of.name, err)
		}
	} else {
		name, _, err := cleanPath(r.Path)
		if err != nil {
			return err
		}
		if fi, err = s.srv.Handler.Stat(ctx, name); err != nil {
			return fmt.Errorf("stat %s: %w", name, err)
		}
	}
	return sent(s.sendOK(sid, append(AppendStat(nil, &fi), 0)))
}

func (s *session) doStatVFS(ctx context.Context, sid StreamID, r *StatRequest) error {
	h, ok := s.srv.Handler.(SpaceReporter)
	if !ok {
		return Errorf(ErrUnsupported, "statvfs is not supported")
	}
	name, _, err := cleanPath(r.Path)
	if err != nil {
		return err
	}
	sp, err := h.Space(ctx, name)
	if err != nil {
		return fmt.Errorf("space %s: %w", name, err)
	}
	util := int64(0)
	if sp.Total > 0 {
		util = (sp.Total - sp.Free) * 100 / sp.Total
	}
	// "<nodes rw> <free rw MB> <util rw %> <nodes staging> <free MB> <util %>"
	body := fmt.Sprintf("1 %d %d 0 0 0\x00", sp.Free>>20, util)
	return sent(s.sendOK(sid, []byte(body)))
}

func (s *session) doStatx(ctx context.Context, sid StreamID, r *StatxRequest) error {
	if len(r.Paths) == 0 {
		return Errorf(ErrArgMissing, "statx: no paths")
	}
	out := make([]byte, 0, len(r.Paths))
	for _, p := range r.Paths {
		name, _, err := cleanPath(p)
		if err != nil {
			return err
		}
		fi, err := s.srv.Handler.Stat(ctx, name)
		if err != nil {
			return fmt.Errorf("statx %s: %w", name, err)
		}
		out = append(out, byte(StatFlagsFor(fi.Mode)))
	}
	return sent(s.sendOK(sid, out))
}

func (s *session) doOpen(ctx context.Context, sid StreamID, r *OpenRequest) error {
	name, cgi, err := cleanPath(r.Path)
	if err != nil {
		return err
	}
	opts := OpenOptions{Flags: r.Options, Perm: fs.FileMode(r.Mode) & fs.ModePerm, CGI: cgi}
	f, stat, err := s.openFile(ctx, name, opts, r.Options&(OpenRetStat|OpenCompress) != 0)
	if err != nil {
		return err
	}
	return s.sendOpened(sid, f, name, opts.Flags.Writable(), stat, (*OpenResponse).AppendTo)
}

// openFile opens name through the handler, with its stat information
// when stat is set.
func (s *session) openFile(ctx context.Context, name string, opts OpenOptions, stat bool) (File, *FileInfo, error) {
	f, err := s.srv.Handler.Open(ctx, name, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", name, err)
	}
	if f == nil {
		return nil, nil, Errorf(ErrServerError, "open %s: handler returned no file", name)
	}
	if !stat {
		return f, nil, nil
	}
	fi, err := f.Stat(ctx)
	if err != nil {
		s.discardFile(f, opts.Flags.Writable())
		return nil, nil, fmt.Errorf("open %s: stat: %w", name, err)
	}
	return f, &fi, nil
}

// sendOpened registers f, open at name, and answers with its handle (and
// stat information) as encode writes them.
func (s *session) sendOpened(sid StreamID, f File, name string, writable bool, stat *FileInfo, encode func(*OpenResponse, []byte) []byte) error {
	fh, err := s.registerFile(f, name, writable)
	if err != nil {
		s.discardFile(f, writable)
		return err
	}
	if err := s.sendOK(sid, encode(&OpenResponse{Handle: fh, Stat: stat}, nil)); err != nil {
		// The client cannot know the handle; the file is released when the
		// connection ends.
		return sent(err)
	}
	return nil
}

// discardFile releases a file the client will never see.
func (s *session) discardFile(f File, writable bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), time.Minute)
	defer cancel()
	if d, ok := f.(FileDiscarder); ok && writable {
		d.Discard(ctx)
		return
	}
	if a, ok := f.(FileAborter); ok && writable {
		a.Abort(ctx)
		return
	}
	f.Close(ctx)
}

// readFull reads up to len(p) bytes at off and reports whether the end of
// the file was reached.
func readFull(ctx context.Context, f File, p []byte, off int64) (int, bool, error) {
	n, err := f.ReadAt(ctx, p, off)
	if n < 0 || n > len(p) {
		return 0, false, Errorf(ErrServerError, "read returned %d bytes for a %d-byte buffer", n, len(p))
	}
	switch {
	case err == nil:
		return n, n < len(p), nil
	case errors.Is(err, io.EOF):
		return n, true, nil
	}
	return n, false, err
}

func checkRead(off int64, length int32) error {
	if off < 0 {
		return Errorf(ErrArgInvalid, "negative offset %d", off)
	}
	if length < 0 {
		return Errorf(ErrArgInvalid, "negative length %d", length)
	}
	return nil
}

func (s *session) doRead(ctx context.Context, sid StreamID, held heldFiles, r *ReadRequest) error {
	if err := checkRead(r.Offset, r.Length); err != nil {
		return err
	}
	of := held[r.Handle]
	if of == nil {
		return Errorf(ErrFileNotOpen, "read: file handle %x is not open", r.Handle)
	}
	remaining, off := int(r.Length), r.Offset
	if remaining == 0 {
		return sent(s.sendOK(sid, nil))
	}
	if sl, ok := of.f.(FileSlicer); ok && remaining > s.limits.ResponseChunk {
		// The file's buffers stay lent until a frame is written, and a
		// client that pipelines long reads (xrdcp keeps four of 8 MiB in
		// flight) would have them all lent at once, their frames
		// interleaved: they take turns. Short reads, one frame each,
		// are copied out instead (below): lent, each would hold a whole
		// block (8 MiB at 8+2, 1 MiB chunks) for as long as its frame
		// takes to send, and a client that stops reading its socket
		// with 64 one-byte reads in flight held 64 blocks for the
		// WriteTimeout.
		select {
		case of.slicing <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("read %s at %d: %w", of.name, off, ctx.Err())
		}
		defer func() { <-of.slicing }()
		return s.readSlices(ctx, sid, of.name, sl, remaining, off)
	}
	if fs, ok := of.f.(FileSender); ok {
		if err := s.sendFileFrames(ctx, sid, of.name, fs, remaining, off); err != errNoSendfile {
			return err
		}
	}
	buf := bufpool.GetPooled(min(remaining, s.limits.ResponseChunk))
	defer bufpool.Put(buf)
	for {
		n, eof, err := readFull(ctx, of.f, buf[:min(remaining, len(buf))], off)
		if err != nil {
			return fmt.Errorf("read %s at %d: %w", of.name, off, err)
		}
		remaining -= n
		off += int64(n)
		if eof || remaining == 0 {
			return sent(s.sendOK(sid, buf[:n]))
		}
		if err := s.send(sid, StatusOKSoFar, buf[:n]); err != nil {
			return sent(err)
		}
	}
}

// readSlices answers a kXR_read of remaining bytes at off from a file's
// own buffers, one frame of at most ResponseChunk bytes at a time.
func (s *session) readSlices(ctx context.Context, sid StreamID, name string, f FileSlicer, remaining int, off int64) error {
	for {
		want := min(remaining, s.limits.ResponseChunk)
		bufs, release, err := f.ReadSlices(ctx, off, want)
		eof := errors.Is(err, io.EOF)
		if err != nil && !eof {
			return fmt.Errorf("read %s at %d: %w", name, off, err)
		}
		n := 0
		for _, b := range bufs {
			n += len(b)
		}
		if n > want {
			release()
			return Errorf(ErrServerError, "read %s at %d: %d bytes for a %d-byte request", name, off, n, want)
		}
		remaining -= n
		off += int64(n)
		st := StatusOKSoFar
		if eof || n < want || remaining == 0 {
			st = StatusOK
		}
		err = s.send(sid, st, bufs...)
		release()
		if err != nil || st == StatusOK {
			return sent(err)
		}
	}
}

func (s *session) doPgRead(ctx context.Context, sid StreamID, held heldFiles, r *PgReadRequest) error {
	if err := checkRead(r.Offset, r.Length); err != nil {
		return err
	}
	of := held[r.Handle]
	if of == nil {
		return Errorf(ErrFileNotOpen, "pgread: file handle %x is not open", r.Handle)
	}
	remaining, off := int(r.Length), r.Offset
	chunk := s.limits.ResponseChunk
	// One buffer for data and page CRCs: the data is read into its end
	// and spread into pages in place.
	buf := bufpool.Get(PagesLen(off, min(remaining, chunk)))
	defer bufpool.Put(buf)
	for {
		// Every frame after the first starts on a page boundary.
		n := min(remaining, chunk-int(off%PageSize))
		total := PagesLen(off, n)
		got, eof, err := readFull(ctx, of.f, buf[total-n:total], off)
		if err != nil {
			return fmt.Errorf("pgread %s at %d: %w", of.name, off, err)
		}
		if got < n { // the data must end where the pages will
			copy(buf[PagesLen(off, got)-got:], buf[total-n:total-n+got])
		}
		out := PagesInPlace(buf, off, got)
		info := make([]byte, 8)
		putU64(info, uint64(off))
		remaining -= got
		off += int64(got)
		rt := RespPartial
		if eof || remaining == 0 {
			rt = RespFinal
		}
		if err := s.sendStatus(sid, ReqPgRead, rt, info, out); err != nil {
			return sent(err)
		}
		if rt == RespFinal {
			return nil
		}
	}
}

func (s *session) doReadV(ctx context.Context, sid StreamID, held heldFiles, r *ReadVRequest) error {
	if len(r.Segments) == 0 {
		return Errorf(ErrArgMissing, "readv: empty read list")
	}
	for i, seg := range r.Segments {
		if err := checkRead(seg.Offset, seg.Length); err != nil {
			return fmt.Errorf("readv element %d: %w", i, err)
		}
		if seg.Length > MaxReadVItemLen {
			return Errorf(ErrArgTooLong, "readv element %d: length %d exceeds %d", i, seg.Length, MaxReadVItemLen)
		}
	}
	files := held
	for _, seg := range r.Segments {
		if files[seg.Handle] == nil {
			return Errorf(ErrFileNotOpen, "readv: file handle %x is not open", seg.Handle)
		}
	}
	// The segments that fit in one response frame are read at once,
	// up to readVParallel of them (a vector read is ROOT's way of asking
	// for many baskets together; read one after the other, each would
	// wait for its own round trip to the storage), then sent.
	chunk := s.limits.ResponseChunk
	var (
		buf   []byte
		batch []readVItem
	)
	flush := func(final bool) error {
		var err error
		buf, err = readVBatch(ctx, buf, batch, files)
		batch = batch[:0]
		if err != nil {
			return err
		}
		if final {
			return sent(s.sendOK(sid, buf))
		}
		if err := s.send(sid, StatusOKSoFar, buf); err != nil {
			return sent(err)
		}
		buf = buf[:0]
		return nil
	}
	for i, seg := range r.Segments {
		need := readVItemLen + int(seg.Length)
		if len(buf) > 0 && len(buf)+need > chunk {
			if err := flush(false); err != nil {
				return err
			}
		}
		start := len(buf)
		buf = appendSegment(buf, seg)
		buf = slices.Grow(buf, int(seg.Length))[:start+need]
		batch = append(batch, readVItem{index: i, seg: seg, start: start})
	}
	return flush(true)
}

// readVParallel bounds the segments of one vector read read at once.
const readVParallel = 8

// readVItem is a segment of a vector read and where its header starts
// in the response being assembled.
type readVItem struct {
	index int
	seg   ReadSegment
	start int
}

// readVBatch reads the segments of batch into their places in buf (each
// after its header, buf holding room for all of them), up to
// readVParallel at once, and returns buf. The error is that of the first
// segment that failed, or kXR_FSError for one that reaches past the end
// of its file.
func readVBatch(ctx context.Context, buf []byte, batch []readVItem, files map[FileHandle]*openFile) ([]byte, error) {
	got := make([]int, len(batch))
	errs := make([]error, len(batch))
	read := func(j int) {
		it := batch[j]
		data := buf[it.start+readVItemLen : it.start+readVItemLen+int(it.seg.Length)]
		got[j], _, errs[j] = readFull(ctx, files[it.seg.Handle].f, data, it.seg.Offset)
	}
	if len(batch) == 1 {
		read(0)
	} else {
		var (
			next     atomic.Int32
			wg       sync.WaitGroup
			panicked atomic.Pointer[string]
		)
		for range min(len(batch), readVParallel) {
			wg.Add(1)
			workers.Go(func() {
				defer wg.Done()
				// A File that panics fails the request (session.guard,
				// where the panic is raised again), not the process.
				defer func() {
					if v := recover(); v != nil {
						msg := fmt.Sprintf("%v (in a readv segment's read)\n%s", v, debug.Stack())
						panicked.CompareAndSwap(nil, &msg)
					}
				}()
				for j := int(next.Add(1) - 1); j < len(batch); j = int(next.Add(1) - 1) {
					read(j)
				}
			})
		}
		wg.Wait()
		if msg := panicked.Load(); msg != nil {
			panic(*msg)
		}
	}
	for j, err := range errs {
		if err != nil {
			it := batch[j]
			return buf, fmt.Errorf("readv element %d of %s at %d: %w", it.index, files[it.seg.Handle].name, it.seg.Offset, err)
		}
	}
	for j, it := range batch {
		if got[j] < int(it.seg.Length) {
			// As xrootd answers ("illegal seek"). A segment cut short
			// is not an answer XrdCl takes: it drops the connection and
			// sends the request again, on a new one, forever.
			return buf, Errorf(ErrFSError, "readv element %d of %s: %d bytes at %d reach past the end of the file",
				it.index, files[it.seg.Handle].name, it.seg.Length, it.seg.Offset)
		}
	}
	return buf, nil
}

func (s *session) doWrite(sid StreamID, of *openFile, off int64, data []byte, pg bool) {
	err := s.write(of, off, data)
	if err != nil {
		s.fail(sid, ReqWrite, err)
		return
	}
	if pg {
		info := make([]byte, 8)
		putU64(info, uint64(off))
		s.sendStatus(sid, ReqPgWrite, RespFinal, info, nil)
		return
	}
	s.sendOK(sid, nil)
}

func (s *session) write(of *openFile, off int64, data []byte) error {
	if !of.writable {
		return Errorf(ErrFileNotOpen, "%s is not open for writing", of.name)
	}
	if off < 0 {
		return Errorf(ErrArgInvalid, "negative offset %d", off)
	}
	w, ok := of.f.(FileWriter)
	if !ok {
		return Errorf(ErrUnsupported, "writing %s is not supported", of.name)
	}
	if len(data) == 0 {
		return nil
	}
	n, err := w.WriteAt(s.ctx, data, off)
	if err != nil {
		return fmt.Errorf("write %s at %d: %w", of.name, off, err)
	}
	if n != len(data) {
		return Errorf(ErrIOError, "write %s at %d: short write of %d of %d bytes", of.name, off, n, len(data))
	}
	return nil
}

func (s *session) doPgWrite(sid StreamID, of *openFile, r *PgWriteRequest) {
	if r.Offset < 0 {
		s.fail(sid, ReqPgWrite, Errorf(ErrArgInvalid, "negative offset %d", r.Offset))
		return
	}
	// Verify and strip the CRCs in place.
	data, err := DecodePages(r.Pages[:0], r.Offset, r.Pages)
	if err != nil {
		code := ErrChkSumErr
		if errors.Is(err, ErrMalformed) {
			code = ErrArgInvalid
		}
		s.fail(sid, ReqPgWrite, &Error{Code: code, Message: fmt.Sprintf("pgwrite %s: %v", of.name, err)})
		return
	}
	s.doWrite(sid, of, r.Offset, data, true)
}

func (s *session) doSync(sid StreamID, of *openFile) {
	sy, ok := of.f.(FileSyncer)
	if !ok || !of.writable {
		s.sendOK(sid, nil)
		return
	}
	// A sync may take long (the pull of a third-party copy ends with
	// one): past a moment the client is told to wait for the answer.
	a := s.answerLate(sid, s.limits.WaitRespAfter)
	defer a.timer.Stop() // (a panic is answered by the guard)
	if err := sy.Sync(s.ctx); err != nil {
		a.fail(ReqSync, fmt.Errorf("sync %s: %w", of.name, err))
		return
	}
	a.send(StatusOK, nil)
}

// WaitRespSeconds is how long a client told kXR_waitresp is asked to
// wait for the answer, as xrootd asks of a third-party copy's sync.
const WaitRespSeconds = 1800

// lateAnswer is the answer to a request that may take long: sent as it
// is when it comes soon, else preceded by kXR_waitresp and sent as
// kXR_attn kXR_asynresp.
type lateAnswer struct {
	s        *session
	sid      StreamID
	timer    *time.Timer
	mu       sync.Mutex
	deferred bool // kXR_waitresp was sent
	answered bool
}

// answerLate returns the late answer of request sid: kXR_waitresp goes
// out after d unless the answer is sent first.
func (s *session) answerLate(sid StreamID, d time.Duration) *lateAnswer {
	a := &lateAnswer{s: s, sid: sid}
	a.timer = time.AfterFunc(d, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.answered {
			return
		}
		a.deferred = true
		body := binary.BigEndian.AppendUint32(nil, WaitRespSeconds)
		a.s.send(a.sid, StatusWaitResp, body)
	})
	return a
}

// send answers with st and body.
func (a *lateAnswer) send(st Status, body []byte) error {
	a.timer.Stop()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.answered = true
	if !a.deferred {
		return a.s.send(a.sid, st, body)
	}
	inner := &ResponseFrame{StreamID: a.sid, Status: st, Body: body}
	return a.s.send(StreamID{}, StatusAttn, AppendAsyncResponse(nil, inner))
}

// fail answers with kXR_error for err, as session.fail does.
func (a *lateAnswer) fail(id RequestID, err error) {
	xe := toProtocolError(err)
	a.s.log.Debug("xrootd request failed", "req", id, "code", xe.Code.String(), "err", err)
	a.send(StatusError, AppendErrorBody(nil, xe.Code, xe.Message))
}

func (s *session) doFileTruncate(sid StreamID, of *openFile, size int64) {
	t, ok := of.f.(FileTruncater)
	switch {
	case !of.writable:
		s.fail(sid, ReqTruncate, Errorf(ErrFileNotOpen, "%s is not open for writing", of.name))
	case !ok:
		s.fail(sid, ReqTruncate, Errorf(ErrUnsupported, "truncating %s is not supported", of.name))
	case size < 0:
		s.fail(sid, ReqTruncate, Errorf(ErrArgInvalid, "negative size %d", size))
	default:
		if err := t.Truncate(s.ctx, size); err != nil {
			s.fail(sid, ReqTruncate, fmt.Errorf("truncate %s: %w", of.name, err))
			return
		}
		s.sendOK(sid, nil)
	}
}

// noticeClose tells an open file that implements CloseNoticer that its
// close has arrived.
func (s *session) noticeClose(fh FileHandle) {
	o := s.owner()
	o.mu.Lock()
	of := o.files[fh]
	o.mu.Unlock()
	if of == nil {
		return
	}
	if cn, ok := of.f.(CloseNoticer); ok {
		cn.CloseComing()
	}
}

func (s *session) doClose(sid StreamID, of *openFile) {
	s.removeFile(of)
	of.closed = true
	of.readers.Wait()
	if err := of.f.Close(s.ctx); err != nil {
		s.fail(sid, ReqClose, fmt.Errorf("close %s: %w", of.name, err))
		return
	}
	s.sendOK(sid, nil)
}

// doDirlist answers kXR_dirlist: names, or with kXR_dstat the "." lead
// entry and each name with its stat line, and with kXR_dcksm each stat
// line followed by the entry's checksum (ChecksumLister), as xrootd 5
// answers them (XrdXrootdProtocol::do_DirStat).
func (s *session) doDirlist(ctx context.Context, sid StreamID, r *DirlistRequest) error {
	name, cgi, err := cleanPath(r.Path)
	if err != nil {
		return err
	}
	withStat := r.Options&(DirlistStat|DirlistCksum) != 0
	alg := "" // of kXR_dcksm; none without it
	list := checksumLess(s.srv.Handler.List(ctx, name))
	if h, ok := s.srv.Handler.(Checksummer); ok && r.Options&DirlistCksum != 0 && len(h.ChecksumAlgorithms()) > 0 {
		want := cgi.Get("cks.type")
		if alg = pickAlgorithm(h.ChecksumAlgorithms(), want); alg == "" {
			// xrootd's answer, word for word.
			return Errorf(ErrServerError, "%s checksum not supported.", want)
		}
		if cl, ok := s.srv.Handler.(ChecksumLister); ok {
			list = cl.ListChecksums(ctx, name, alg)
		}
	}
	chunk := s.limits.ResponseChunk
	var buf []byte
	if withStat {
		buf = append(buf, dirlistStatLead...)
	}
	entries := 0
	var entry []byte
	for e, err := range list {
		if err != nil {
			return fmt.Errorf("dirlist %s: %w", name, err)
		}
		if e.Name == "" || e.Name == "." || e.Name == ".." || strings.ContainsAny(e.Name, "/\n\x00") {
			s.log.Debug("xrootd dirlist skips unlistable name", "path", name, "name", e.Name)
			continue
		}
		entry = append(append(entry[:0], e.Name...), '\n')
		if withStat {
			entry = AppendStat(entry, &e.FileInfo)
			if alg != "" {
				entry = AppendChecksumField(entry, alg, e.Checksum)
			}
			entry = append(entry, '\n')
		}
		// Send what is buffered before it grows past a chunk; entries end
		// with a newline, and the last entry always goes in the final
		// kXR_ok, where its newline becomes the terminating NUL.
		if entries > 0 && len(buf)+len(entry) > chunk {
			if err := s.send(sid, StatusOKSoFar, buf); err != nil {
				return sent(err)
			}
			buf = buf[:0]
		}
		buf = append(buf, entry...)
		entries++
	}
	if len(buf) > 0 {
		buf[len(buf)-1] = 0
	}
	return sent(s.sendOK(sid, buf))
}

// checksumLess turns a List into a listing whose entries have no
// checksum.
func checksumLess(list iter.Seq2[FileInfo, error]) iter.Seq2[ChecksumEntry, error] {
	return func(yield func(ChecksumEntry, error) bool) {
		for fi, err := range list {
			if !yield(ChecksumEntry{FileInfo: fi}, err) {
				return
			}
		}
	}
}

// pickAlgorithm returns the checksum algorithm of algs that a client
// asking for want (cks.type) gets: the first when want is empty, else
// the one named want in any case, or "" when none is.
func pickAlgorithm(algs []string, want string) string {
	if want == "" {
		return algs[0]
	}
	for _, a := range algs {
		if strings.EqualFold(a, want) {
			return a
		}
	}
	return ""
}

func (s *session) doMkdir(ctx context.Context, sid StreamID, r *MkdirRequest) error {
	return s.withPath(sid, r.Path, func(name string, _ url.Values) error {
		h, ok := s.srv.Handler.(DirMaker)
		if !ok {
			return Errorf(ErrUnsupported, "mkdir is not supported")
		}
		perm := fs.FileMode(r.Mode) & fs.ModePerm
		if perm == 0 {
			perm = 0o755
		}
		if err := h.Mkdir(ctx, name, perm, r.Options&MkdirPath != 0); err != nil {
			return fmt.Errorf("mkdir %s: %w", name, err)
		}
		return nil
	})
}

func (s *session) doMv(ctx context.Context, sid StreamID, r *MvRequest) error {
	h, ok := s.srv.Handler.(Renamer)
	if !ok {
		return Errorf(ErrUnsupported, "mv is not supported")
	}
	from, _, err := cleanPath(r.Source)
	if err != nil {
		return err
	}
	to, _, err := cleanPath(r.Target)
	if err != nil {
		return err
	}
	if err := h.Rename(ctx, from, to); err != nil {
		return fmt.Errorf("mv %s %s: %w", from, to, err)
	}
	return sent(s.sendOK(sid, nil))
}

func (s *session) doQuery(ctx context.Context, sid StreamID, r *QueryRequest) error {
	args := cstring(r.Args)
	switch r.InfoType {
	case QueryCksum:
		return s.doChecksum(ctx, sid, args)
	case QuerySpace:
		h, ok := s.srv.Handler.(SpaceReporter)
		if !ok {
			return Errorf(ErrUnsupported, "space query is not supported")
		}
		if args == "" {
			args = "/"
		}
		name, _, err := cleanPath(args)
		if err != nil {
			return err
		}
		sp, err := h.Space(ctx, name)
		if err != nil {
			return fmt.Errorf("space %s: %w", name, err)
		}
		largest := sp.LargestFree
		if largest == 0 {
			largest = sp.Free
		}
		body := fmt.Sprintf("oss.cgroup=default&oss.space=%d&oss.free=%d&oss.maxf=%d&oss.used=%d&oss.quota=-1\x00",
			sp.Total, sp.Free, largest, sp.Used)
		return sent(s.sendOK(sid, []byte(body)))
	case QueryConfig:
		var b strings.Builder
		for _, key := range strings.Fields(args) {
			b.WriteString(s.configValue(key))
			b.WriteByte('\n')
		}
		return sent(s.sendOK(sid, []byte(b.String())))
	case QueryStats:
		return sent(s.sendOK(sid, s.statsXML()))
	case QueryOpaqueFile:
		name, cgi, err := cleanPath(args)
		if err != nil {
			return err
		}
		switch {
		case cgi.Has(AttrListArg):
			return s.doListAttr(ctx, sid, name, cgi.Get(AttrListArg))
		case cgi.Has(OpenWholeArg):
			return s.doOpenWhole(ctx, sid, name, cgi.Get(OpenWholeArg))
		case cgi.Has(RemoveAttrArg):
			return s.doRemoveAttr(ctx, sid, name, cgi.Get(RemoveAttrArg))
		}
		return Errorf(ErrUnsupported, "opaque query %q is not supported", args)
	}
	return Errorf(ErrUnsupported, "query type %d is not supported", r.InfoType)
}

// doOpenWhole answers an open that reads small files whole (WholeOpener):
// a regular file of at most max bytes with its content, any other file
// opened as doOpen opens it, with kXR_retstat.
func (s *session) doOpenWhole(ctx context.Context, sid StreamID, name, max string) error {
	h, ok := s.srv.Handler.(WholeOpener)
	if !ok {
		return Errorf(ErrUnsupported, "opaque query %s is not supported", OpenWholeArg)
	}
	limit, err := strconv.ParseInt(max, 10, 64)
	if err != nil || limit < 0 {
		return Errorf(ErrArgInvalid, "%s=%q is not a size", OpenWholeArg, max)
	}
	limit = min(limit, h.OpenWholeMax())
	f, fi, err := s.openFile(ctx, name, OpenOptions{Flags: OpenRead}, true)
	if err != nil {
		return err
	}
	if fi.Flags&(StatIsDir|StatOther) == 0 && fi.Size <= limit {
		// One byte more than the size: a file that grew since the stat
		// is left open rather than sent cut short.
		b := bufpool.Get(1 + int(fi.Size) + 1)
		defer bufpool.Put(b)
		n, eof, err := readFull(ctx, f, b[1:], 0)
		if err == nil && eof {
			f.Close(ctx)
			b[0] = openWholeContent
			return sent(s.sendOK(sid, b[:1+n]))
		}
		if err != nil {
			s.discardFile(f, false)
			return fmt.Errorf("read %s: %w", name, err)
		}
		grown, err := f.Stat(ctx)
		if err != nil {
			s.discardFile(f, false)
			return fmt.Errorf("open %s: stat: %w", name, err)
		}
		fi = &grown
	}
	return s.sendOpened(sid, f, name, false, fi, func(r *OpenResponse, b []byte) []byte { return AppendOpenWholeHandle(b, r) })
}

// doRemoveAttr answers a removal that says what it removed
// (AttrRemover).
func (s *session) doRemoveAttr(ctx context.Context, sid StreamID, name, attr string) error {
	h, ok := s.srv.Handler.(AttrRemover)
	if !ok {
		return Errorf(ErrUnsupported, "opaque query %s is not supported", RemoveAttrArg)
	}
	if attr == "" {
		return Errorf(ErrArgInvalid, "%s names no attribute", RemoveAttrArg)
	}
	value, had, err := h.RemoveWithAttr(ctx, name, attr)
	if err != nil {
		return err
	}
	return sent(s.sendOK(sid, AppendRemoveAttr(nil, value, had)))
}

// doListAttr answers a listing with attributes (AttrLister) in chunks,
// as doDirlist sends a listing.
func (s *session) doListAttr(ctx context.Context, sid StreamID, name, attr string) error {
	h, ok := s.srv.Handler.(AttrLister)
	if !ok || attr == "" {
		return Errorf(ErrUnsupported, "opaque query %s is not supported", AttrListArg)
	}
	chunk := s.limits.ResponseChunk
	var buf []byte
	for e, err := range h.ListAttr(ctx, name, attr) {
		if err != nil {
			return fmt.Errorf("list %s with attribute %s: %w", name, attr, err)
		}
		if e.Name == "" || e.Name == "." || e.Name == ".." || strings.ContainsAny(e.Name, "/\n\x00") {
			s.log.Debug("xrootd attribute listing skips unlistable name", "path", name, "name", e.Name)
			continue
		}
		if len(buf) >= chunk {
			if err := s.send(sid, StatusOKSoFar, buf); err != nil {
				return sent(err)
			}
			buf = buf[:0]
		}
		buf = AppendAttrListEntry(buf, &e)
	}
	return sent(s.sendOK(sid, buf))
}

func (s *session) doChecksum(ctx context.Context, sid StreamID, args string) error {
	h, ok := s.srv.Handler.(Checksummer)
	if !ok {
		return Errorf(ErrUnsupported, "checksums are not supported")
	}
	name, cgi, err := cleanPath(args)
	if err != nil {
		return err
	}
	algs := h.ChecksumAlgorithms()
	if len(algs) == 0 {
		return Errorf(ErrUnsupported, "checksums are not supported")
	}
	want := cgi.Get("cks.type")
	alg := pickAlgorithm(algs, want)
	if alg == "" {
		return Errorf(ErrUnsupported, "checksum %q is not supported (have %s)", want, strings.Join(algs, ", "))
	}
	sum, err := h.Checksum(ctx, name, alg)
	if err != nil {
		return fmt.Errorf("checksum %s of %s: %w", alg, name, err)
	}
	return sent(s.sendOK(sid, []byte(alg+" "+sum+"\x00")))
}

// configValue answers one kXR_query config key; unknown or unset keys are
// echoed, as xrootd does.
func (s *session) configValue(key string) string {
	switch key {
	case "readv_iov_max":
		return strconv.Itoa(MaxReadVItems)
	case "readv_ior_max":
		return strconv.Itoa(MaxReadVItemLen)
	case "chksum":
		if h, ok := s.srv.Handler.(Checksummer); ok {
			var parts []string
			for i, a := range h.ChecksumAlgorithms() {
				parts = append(parts, strconv.Itoa(i)+":"+a)
			}
			if len(parts) > 0 {
				return strings.Join(parts, ",")
			}
		}
	case "role":
		return "server"
	case "version":
		return ServerVersion
	case "pio_max":
		return "0"
	case "bind_max":
		return "0"
	case "sitename":
		if s.srv.SiteName != "" {
			return s.srv.SiteName
		}
	}
	if h, ok := s.srv.Handler.(ConfigReporter); ok {
		if v, ok := h.ConfigValue(key); ok {
			return v
		}
	}
	return key
}

func (s *session) statsXML() []byte {
	host, port := hostPort(s.conn.LocalAddr())
	return fmt.Appendf(nil, `<statistics tod="%d" ver="ecstore" src="%s:%s" pgm="ecstore" ins="anon" pid="%d" site="%s"><stats id="info"><host>%s</host><port>%s</port><name>anon</name></stats></statistics>`+"\x00",
		time.Now().Unix(), host, port, os.Getpid(), s.srv.SiteName, host, port)
}

func hostPort(a net.Addr) (string, string) {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String(), ""
	}
	return host, port
}

// doLocate answers with this server: "S" (a data server), "w" (writable)
// or "r" (read-only, WriteReporter) and its address in the
// "[::ipv4]:port" form xrootd uses.
func (s *session) doLocate(ctx context.Context, sid StreamID, r *LocateRequest) error {
	p := strings.TrimPrefix(r.Path, "*")
	if p == "" {
		p = "/"
	}
	name, _, err := cleanPath(p)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(r.Path, "*") {
		if _, err := s.srv.Handler.Stat(ctx, name); err != nil {
			return fmt.Errorf("locate %s: %w", name, err)
		}
	}
	access := "w"
	if h, ok := s.srv.Handler.(WriteReporter); ok && !h.MayWrite(ctx, name) {
		access = "r"
	}
	return sent(s.sendOK(sid, []byte("S"+access+locateAddr(s.conn.LocalAddr())+"\x00")))
}

func locateAddr(a net.Addr) string {
	host, port := hostPort(a)
	if ip := net.ParseIP(host); ip != nil && ip.To4() != nil {
		return "[::" + ip.To4().String() + "]:" + port
	}
	return "[" + host + "]:" + port
}
