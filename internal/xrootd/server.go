package xrootd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Limits bound what one client connection may cost the server. The zero
// value of each field selects its default.
//
// Memory per connection stays below PayloadBudget (request payloads being
// read or processed) plus, for each of MaxInflight requests, its response
// buffers: about two ResponseChunks for reads (data and its page CRCs),
// or one readv element of up to MaxReadVItemLen, plus small overhead.
// Nothing is ever allocated from a length the client declares beyond
// these bounds.
type Limits struct {
	// MaxPayload is the largest request payload accepted. A larger
	// declared length is answered with kXR_error kXR_ArgTooLong and the
	// connection is closed, since the payload cannot be skipped cheaply.
	// Default DefaultMaxPayload (16 MiB + 64 KiB).
	MaxPayload int
	// PayloadBudget bounds the payload bytes of all requests of one
	// connection that are in flight; the connection stops reading when
	// it is exhausted. Default MaxPayload: one large write being
	// received while the one before it is processed.
	PayloadBudget int64
	// MaxInflight bounds the requests of one connection processed
	// concurrently. Default 64.
	MaxInflight int
	// ResponseChunk is the largest data part of one response frame;
	// longer reads are sent as kXR_oksofar (or partial kXR_status)
	// frames. Rounded down to whole pages. Default 1 MiB.
	ResponseChunk int
	// SliceReadsPerFile bounds the reads longer than ResponseChunk of one
	// open file that are answered from the file's own buffers
	// (FileSlicer) at once; the others wait their turn. Two keep one
	// read's frames going out while the next one's data is fetched.
	// Default 2.
	SliceReadsPerFile int
	// MaxOpenFiles bounds the files one connection has open. Default 1024.
	MaxOpenFiles int
	// HandshakeTimeout bounds the time from accept to a complete
	// handshake. Default 30 s.
	HandshakeTimeout time.Duration
	// IdleTimeout closes a connection that sends no request for this
	// long while it has nothing in flight and no file open (XrdCl
	// itself closes a data server connection idle for 5 minutes). Zero
	// (the default) disables it.
	IdleTimeout time.Duration
	// WriteTimeout bounds the sending of one response frame. Default 60 s.
	WriteTimeout time.Duration
	// ReadTimeout bounds the silence of a client within a request frame
	// (once its header has come, until its payload has), and the time it
	// takes to log in after the handshake, so that a client cannot hold
	// a connection's goroutine and buffers by stopping half-way. Default
	// 60 s.
	ReadTimeout time.Duration
	// WaitRespAfter is how long a kXR_sync may run before the client is
	// answered kXR_waitresp, the answer following as kXR_attn
	// kXR_asynresp (the sync that ends a third-party copy lasts as long
	// as the copy). Default 2 s.
	WaitRespAfter time.Duration
}

// ServerVersion is the Server's answer to kXR_query config "version".
// It also tells clients that the server runs each file's write-side
// requests (kXR_write, kXR_pgwrite, kXR_sync, kXR_truncate, kXR_close)
// in the order they arrive, so that they may be sent without waiting for
// each other's answers (ClientFile.FinishWrite).
const ServerVersion = "ecstore"

// MaxSubStreams bounds the data sub-streams (kXR_bind) bound to one
// session at a time: path ids 1 to 15, as xrootd allows (its maxStreams
// of 16 counts the session's own connection), and as many as xrdcp -S
// asks for at most.
const MaxSubStreams = 15

// AnyPath is the pathid (kXR_AnyPath) of a request that leaves the choice
// of the sub-stream to the server; this server answers on the connection
// the request came on.
const AnyPath = 0xff

func (l Limits) withDefaults() Limits {
	if l.MaxPayload <= 0 {
		l.MaxPayload = DefaultMaxPayload
	}
	if l.PayloadBudget <= 0 {
		l.PayloadBudget = int64(l.MaxPayload)
	}
	if l.PayloadBudget < int64(l.MaxPayload) {
		l.PayloadBudget = int64(l.MaxPayload)
	}
	if l.MaxInflight <= 0 {
		l.MaxInflight = 64
	}
	if l.ResponseChunk <= 0 {
		l.ResponseChunk = 1 << 20
	}
	l.ResponseChunk = max(l.ResponseChunk/PageSize, 1) * PageSize
	if l.SliceReadsPerFile <= 0 {
		l.SliceReadsPerFile = 2
	}
	if l.MaxOpenFiles <= 0 {
		l.MaxOpenFiles = 1024
	}
	if l.HandshakeTimeout <= 0 {
		l.HandshakeTimeout = 30 * time.Second
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = 60 * time.Second
	}
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = 60 * time.Second
	}
	if l.WaitRespAfter <= 0 {
		l.WaitRespAfter = 2 * time.Second
	}
	return l
}

// Server serves a FileSystem over the XRootD protocol as a data server.
//
// Each connection has one goroutine that reads requests; requests are
// processed concurrently (up to Limits.MaxInflight per connection), except
// that the write-side requests on one open file (write, pgwrite, sync,
// truncate, close) run one at a time in arrival order. Responses are sent
// whole, one frame at a time, so frames of different streams interleave
// but never mix. A panic in a handler is recovered, logged and answered
// with kXR_ServerError; the connection survives.
//
// Set the fields before calling Serve and do not change them afterwards.
type Server struct {
	// Handler is the file system served. It must not be nil.
	Handler FileSystem
	// Logger receives connection lifecycle (Debug), failed requests
	// (Debug) and recovered panics (Error). Nil discards logs.
	Logger *slog.Logger
	// Limits bound per-connection resources.
	Limits Limits
	// SiteName is returned for kXR_query config "sitename"; when empty
	// the key is echoed, as xrootd does for unset values.
	SiteName string
	// NoPageChecksums makes the server present itself as one without
	// kXR_pgread and kXR_pgwrite: it reports protocol version
	// ProtocolVersionNoPgRW and no kXR_suppgrw flag, so that XRootD
	// clients read and write with kXR_read and kXR_write and compute no
	// CRC32C per 4 KiB page (which Debian's client library does in
	// software, at about 0.5 GB/s per core: the bound of a copy with
	// xrdcp). Page requests a client sends anyway are still served.
	NoPageChecksums bool
	// TLS, when set, is offered to clients that can use it (kXR_haveTLS):
	// a roots:// client asks for it, and with Tokens every TLS-capable
	// client is moved to TLS before its login (kXR_gotoTLS, kXR_tlsLogin),
	// as token authentication is allowed under TLS only. The connection
	// switches right after the kXR_protocol answer.
	TLS *tls.Config
	// Tokens, when set, offers token authentication (the ztn security
	// protocol: the client sends a bearer token, from BEARER_TOKEN or its
	// token file) to clients under TLS. It checks a token and returns
	// the name to log for its holder and what it allows (kept as
	// Identity.Grant for the FileSystem to interpret; nil: everything),
	// or why it is not valid.
	Tokens func(ctx context.Context, token string) (holder string, grant any, err error)
	// TokenRequired refuses clients without a valid token: they are not
	// offered anonymous access ("unix"), and every request but the
	// session's own (protocol, login, auth, ping) fails with
	// kXR_NotAuthorized until kXR_auth succeeds. Without it, a client
	// without a token is logged in anonymously.
	TokenRequired bool
	// AuthFailed, when set, is called for every kXR_auth refused (a token
	// not accepted, a malformed credential, a protocol not offered).
	AuthFailed func()

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	sessions  map[*session]struct{}
	logins    map[[16]byte]*session // logged-in sessions by session id
	// subRx and subTx count the bytes received and sent on data
	// sub-streams that have ended (SubStreamBytes).
	subRx, subTx atomic.Int64
	closing      atomic.Bool
	wg           sync.WaitGroup // sessions
	nextSess     atomic.Uint64
}

func (s *Server) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func (s *Server) init() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listeners == nil {
		s.listeners = make(map[net.Listener]struct{})
		s.sessions = make(map[*session]struct{})
		s.logins = make(map[[16]byte]*session)
	}
}

// SubStreamBytes returns the bytes received and sent on the data
// sub-streams (connections bound to a session with kXR_bind, as xrdcp -S
// opens them) that have ended, request and response headers included.
func (s *Server) SubStreamBytes() (received, sent int64) {
	return s.subRx.Load(), s.subTx.Load()
}

// remember registers the session id sess's login answer gives, so that
// connections can bind to the session; an earlier id of sess is
// forgotten.
func (s *Server) remember(sess *session, id [16]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess.hasSessID && s.logins[sess.sessID] == sess {
		delete(s.logins, sess.sessID)
	}
	sess.sessID, sess.hasSessID = id, true
	s.logins[id] = sess
}

// forgetLogin makes sess, which is ending, unknown to kXR_bind.
func (s *Server) forgetLogin(sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess.hasSessID && s.logins[sess.sessID] == sess {
		delete(s.logins, sess.sessID)
	}
}

// lookupLogin returns the logged-in session with session id id, or nil.
func (s *Server) lookupLogin(id [16]byte) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logins[id]
}

// Serve accepts connections on ln and serves each until the client goes
// away. It returns ErrServerClosed after Shutdown, ctx.Err() after ctx is
// cancelled (which also closes every connection at once), or the
// listener's error. Serve closes ln before it returns.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.Handler == nil {
		ln.Close()
		return errors.New("xrootd: Server.Handler is nil")
	}
	s.init()
	if s.closing.Load() {
		ln.Close()
		return ErrServerClosed
	}
	s.mu.Lock()
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
		ln.Close()
	}()

	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		s.closeSessions()
	})
	defer stop()

	log := s.logger()
	limits := s.Limits.withDefaults()
	var tempDelay time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return ErrServerClosed
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				tempDelay = min(max(2*tempDelay, 5*time.Millisecond), time.Second)
				log.Warn("xrootd accept error; retrying", "err", err, "delay", tempDelay)
				time.Sleep(tempDelay)
				continue
			}
			return fmt.Errorf("xrootd: accept: %w", err)
		}
		tempDelay = 0
		sess := newSession(ctx, s, conn, limits, log)
		s.mu.Lock()
		if s.closing.Load() {
			s.mu.Unlock()
			conn.Close()
			return ErrServerClosed
		}
		s.sessions[sess] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			sess.serve()
			s.mu.Lock()
			delete(s.sessions, sess)
			s.mu.Unlock()
		}()
	}
}

// closeSessions closes every connection at once.
func (s *Server) closeSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sess := range s.sessions {
		sess.kill()
	}
}

// Shutdown stops the server gracefully: it closes the listeners, makes
// every connection stop reading new requests, lets the requests in flight
// finish and send their responses, and closes the connections (files still
// open are aborted or closed). If ctx ends first, the remaining
// connections are closed at once and ctx.Err() is returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.init()
	s.closing.Store(true)
	s.mu.Lock()
	for ln := range s.listeners {
		ln.Close()
	}
	for sess := range s.sessions {
		sess.drain()
	}
	s.mu.Unlock()

	finished := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(finished)
	}()
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
		s.closeSessions()
		<-finished
		return ctx.Err()
	}
}
