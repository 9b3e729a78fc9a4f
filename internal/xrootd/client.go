package xrootd

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ecstore/ecstore/internal/bufpool"
	"github.com/ecstore/ecstore/internal/watchdog"
)

// DialOptions configure Dial. The zero value of each field selects its
// default; a nil *DialOptions selects all defaults.
type DialOptions struct {
	// Logger receives connection lifecycle and protocol oddities at
	// Debug level. Nil discards logs.
	Logger *slog.Logger
	// Username is the login name, at most 8 bytes. Default "ecstore".
	Username string
	// AppName is sent as xrd.appname at login. Default "ecstore".
	AppName string
	// Dial opens the connection. Default: a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// MaxFrame bounds the body of one response frame. Default
	// DefaultMaxPayload. A frame answering a request whose answer is
	// small by nature (a stat, an open, a write, a read of a few bytes)
	// has a tighter bound of its request's kind, checked, as MaxFrame is,
	// before the frame is read: a frame past it fails the connection.
	// So have the answers of the dial (the handshake, kXR_protocol,
	// kXR_login, kXR_auth): 64 KiB.
	MaxFrame int
	// MaxResponse bounds a response assembled from several frames (a
	// directory listing, a readv's data); answers that are small by
	// nature (stat, open, checksum, query, locate) have tighter bounds
	// of their own (see smallAnswer). A listing handed over part by part
	// (ListAttrEach) may total 4 × MaxResponse. Default 256 MiB.
	MaxResponse int
	// MaxInflight bounds the requests outstanding on the connection.
	// Default 256.
	MaxInflight int
	// ReadChunk and WriteChunk bound the data of one read or write
	// request; larger transfers are split. Default 8 MiB each; ReadChunk
	// is capped at MaxFrame and WriteChunk at 16 MiB.
	ReadChunk, WriteChunk int
	// WriteWindow is how many write requests of one WriteAt or
	// PgWriteAt call may be outstanding at once. They are sent in
	// offset order. Default 4.
	WriteWindow int
	// MaxWaitRetries bounds how often a request answered with kXR_wait
	// is re-sent. Default 10.
	MaxWaitRetries int
	// MaxWait caps one kXR_wait pause. Default 60 s.
	MaxWait time.Duration
	// Redirects is how many kXR_redirect answers one request follows
	// (see Client). Default 0: none, a redirect is returned as a
	// *RedirectError. DefaultRedirects is xrdcp's.
	Redirects int
	// WantTLS asks the server for TLS (a roots:// URL does too): the
	// connection fails if the server offers none.
	WantTLS bool
	// AbleTLS tells the server that the client can use TLS, so that a
	// server that requires it (XRootD with token authentication, an
	// ecstore gateway that takes tokens) moves the connection to TLS.
	// Set by WantTLS, TLS and Token.
	AbleTLS bool
	// TLS is the client's TLS configuration. Default tlsfiles.ClientConfig: the
	// system's authorities and X509_CERT_DIR's.
	TLS *tls.Config
	// Token is the bearer token to present to a server that asks for one
	// (XRootD's ztn). Default: FindBearerToken, when the server asks,
	// unless NoTokenSearch.
	Token string
	// NoTokenSearch keeps the client from looking for a token in the
	// environment (a service's connections must not present the token of
	// whoever runs it).
	NoTokenSearch bool
	// staleAbandoned is how long requests given up on may stay
	// unanswered before they count as lost (see staleAbandoned); tests
	// shorten it.
	staleAbandoned time.Duration
	// partWait is how long the connection's reader waits for a caller
	// to take a part of its answer (see partWait); tests shorten it.
	partWait time.Duration

	// Observe, if set, is told of every request sent after the login
	// once its answer is in, or once the request failed (its sending
	// too) or its caller gave up on it (metrics of the server's load and latency). It runs
	// on the caller's goroutine and must be quick.
	Observe func(Observation)
}

// Observation describes one request a Client sent and how it ended.
type Observation struct {
	Request RequestID
	// Name names the request: the name of its RequestID ("open",
	// "read", ...), and for a kXR_query its kind: "query_space",
	// "query_cksum", "query_config", "open_whole", "list_attrs" and
	// "rm_attr" (the small-file open, the listing with attributes and
	// the removal that says what it removed, of ecstore's servers),
	// "query" for others.
	Name     string
	Duration time.Duration // from sending the request to its final answer
	Sent     int           // payload bytes sent with the request
	Received int64         // data bytes of the answer
	// Err is nil for an answer of kXR_ok or kXR_status, and for
	// kXR_wait (the request is then sent again, and observed again);
	// the server's error (an *Error), or why no answer came (the
	// caller's context ended, the connection failed), otherwise.
	Err error
}

func (o *DialOptions) withDefaults() DialOptions {
	var d DialOptions
	if o != nil {
		d = *o
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Username == "" {
		d.Username = "ecstore"
	}
	if d.AppName == "" {
		d.AppName = "ecstore"
	}
	if d.Dial == nil {
		var nd net.Dialer
		d.Dial = nd.DialContext
	}
	if d.MaxFrame <= 0 {
		d.MaxFrame = DefaultMaxPayload
	}
	if d.MaxResponse <= 0 {
		d.MaxResponse = 256 << 20
	}
	if d.MaxInflight <= 0 {
		d.MaxInflight = 256
	}
	d.MaxInflight = min(d.MaxInflight, 65535)
	if d.staleAbandoned <= 0 {
		d.staleAbandoned = staleAbandoned
	}
	if d.partWait <= 0 {
		d.partWait = partWait
	}
	if d.ReadChunk <= 0 {
		d.ReadChunk = 8 << 20
	}
	d.ReadChunk = min(d.ReadChunk, d.MaxFrame)
	if d.WriteChunk <= 0 {
		d.WriteChunk = 8 << 20
	}
	// Keep a pgwrite payload within the default server payload limit.
	d.WriteChunk = min(d.WriteChunk, DefaultMaxPayload-64<<10)
	if d.WriteWindow <= 0 {
		d.WriteWindow = 4
	}
	if d.MaxWaitRetries <= 0 {
		d.MaxWaitRetries = 10
	}
	if d.MaxWait <= 0 {
		d.MaxWait = time.Minute
	}
	d.AbleTLS = d.AbleTLS || d.WantTLS || d.TLS != nil || d.Token != ""
	return d
}

// Client is a connection to one XRootD server, logged in anonymously.
// Requests from any number of goroutines are multiplexed over the
// connection by stream id. Every method that talks to the server takes a
// context that bounds it; a request abandoned by its context keeps its
// stream id reserved until the server's answer arrives and is discarded,
// or until so many such requests stay unanswered that the connection is
// failed (see staleAbandoned).
//
// The client follows kXR_wait (pause and re-send; after part of an
// answer, ErrMalformed) and kXR_waitresp (the answer arrives later as
// kXR_attn) itself; kXR_error is returned as an *Error.
//
// kXR_redirect is returned as a *RedirectError, unless
// DialOptions.Redirects allows following it: then a request about a path
// (stat, open, dirlist, mkdir, rm, rmdir, mv, chmod, truncate, locate,
// checksum and space queries, attributes) and a ping or config query are
// sent again where the redirect leads, with the redirect's opaque CGI
// appended to the path, over a connection of the Client's own to that
// server (dialled with the same options, and closed with the Client), up
// to Redirects times (then ErrTooManyRedirects, which wraps the last
// *RedirectError). A file opened there is read, written and closed
// there. A request on an open file that is redirected fails with the
// *RedirectError: its handle belongs to the server that opened it.
type Client struct {
	conn  net.Conn
	in    *bufio.Reader // reads conn: the handshake, then readLoop only
	opts  DialOptions
	log   *slog.Logger
	addr  string
	proto ProtocolResponse
	sess  [16]byte
	tls   bool // the connection is under TLS

	// wmu serializes request frames: a token held by the sender. A
	// channel, so that a request waiting behind a write that a server no
	// longer reads gives up with its own context.
	wmu chan struct{}

	mu    sync.Mutex
	calls map[StreamID]*call
	next  uint16
	err   error         // sticky; set once the connection failed
	done  chan struct{} // closed when the connection failed or closed
	slots chan struct{}
	// batching is held (a token in it) by a batch of requests while it
	// takes its slots.
	batching chan struct{}

	// redir holds the connections to the servers that redirects led
	// to, by address (redirectClient); rdial is held (a token) by the
	// one dialling such a connection.
	rmu   sync.Mutex
	redir map[string]*Client
	rdial chan struct{}
}

// call is one outstanding request.
type call struct {
	// frames takes the answer's frames to the caller. readLoop closes
	// it, after the frames in it, when the caller took none for
	// partWait (overran), and drops the rest of the answer.
	frames  chan *ResponseFrame
	overran bool          // readLoop's alone
	gone    chan struct{} // closed when the caller stops listening

	// sink, when set, is where the bodies of the call's kXR_oksofar and
	// kXR_ok frames are received, in order, without an intermediate
	// buffer (kXR_read). readLoop holds smu during each read into sink;
	// pending.detach sets detaching, then takes smu to make sure it
	// never writes there again.
	smu       sync.Mutex
	sink      []byte
	detaching atomic.Bool

	// late, when set, takes the final answer of a call whose caller
	// gave up on it (lateFor): an open's answer holds a file handle that
	// only a close releases. lmu orders readLoop's delivery against
	// abandon, so that the answer reaches exactly one of them.
	late      func(f *ResponseFrame)
	lmu       sync.Mutex
	abandoned bool

	// abandonedAt is when the caller gave up on the call (UnixNano; 0
	// while it listens): see starved.
	abandonedAt atomic.Int64

	// req is the request's kind, and max bounds one frame of its answer
	// (frameBound): readLoop checks a frame's dlen, and a kXR_status
	// frame's data length, against it before it reads them.
	req RequestID
	max int
}

// deliver hands f to the call's caller, or to late when the caller gave
// up (readLoop). It drops f once the connection is closed (closed): a
// caller that finds it closed stops listening without giving up, and
// the server's handles are gone with the connection. A caller that takes
// none of the frames handed to it for wait holds every other request of
// the connection meanwhile: the rest of its answer is dropped, and the
// caller told (frames closed). Only an answer of many parts (a listing)
// fills frames; late is for answers of one frame.
func (cl *call) deliver(f *ResponseFrame, closed <-chan struct{}, wait time.Duration) {
	if cl.late == nil {
		if cl.overran {
			return
		}
		select {
		case cl.frames <- f:
			return
		default:
		}
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case cl.frames <- f:
		case <-cl.gone:
		case <-closed:
		case <-t.C:
			cl.overran = true
			close(cl.frames)
		}
		return
	}
	cl.lmu.Lock()
	defer cl.lmu.Unlock()
	if !cl.abandoned {
		select {
		case cl.frames <- f:
			return
		case <-cl.gone:
		case <-closed:
			return
		}
	}
	if isFinal(f) {
		go cl.late(f)
	}
}

// lateFor returns what to do with the answer to req once its caller gave
// up: close the file that an open opened (kXR_open, and ecstore's open
// that sends a small file whole), which would otherwise stay open on the
// server for as long as the connection lives. nil for other requests.
func (c *Client) lateFor(req Request) func(f *ResponseFrame) {
	var handle func(body []byte) (FileHandle, bool)
	switch r := req.(type) {
	case *OpenRequest:
		handle = func(body []byte) (FileHandle, bool) {
			or, err := ParseOpenResponse(body)
			return or.Handle, err == nil
		}
	case *QueryRequest:
		if r.InfoType != QueryOpaqueFile || !bytes.Contains(r.Args, []byte("?"+OpenWholeArg+"=")) {
			return nil
		}
		handle = func(body []byte) (FileHandle, bool) {
			_, or, err := ParseOpenWhole(body)
			if err != nil || or == nil {
				return FileHandle{}, false
			}
			return or.Handle, true
		}
	default:
		return nil
	}
	return func(f *ResponseFrame) {
		if f.Status != StatusOK {
			return
		}
		fh, ok := handle(f.Body)
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), lateCloseTimeout)
		defer cancel()
		if err := c.roundTrip(ctx, &CloseRequest{Handle: fh}, nil); err != nil {
			c.log.Debug("xrootd client could not close a file whose open was abandoned", "handle", fmt.Sprintf("%x", fh), "err", err)
		}
	}
}

// lateCloseTimeout bounds the close of a file whose open was abandoned.
const lateCloseTimeout = 30 * time.Second

// receive reads the n-byte body of f straight into the call's sink when
// it fits there; it reports whether it did. An error is a read error.
// It reads as the bytes arrive, one read at a time, and skips the rest
// of the body once the call is detached (its caller gave up): the
// stream stays in step, and sink is not written again.
func (cl *call) receive(r io.Reader, f *ResponseFrame, n int) (bool, error) {
	cl.smu.Lock()
	if cl.sink == nil || n > len(cl.sink) {
		cl.smu.Unlock()
		return false, nil
	}
	dst := cl.sink[:n:n]
	cl.sink = cl.sink[n:]
	cl.smu.Unlock()
	got := 0
	for got < n && !cl.detaching.Load() {
		cl.smu.Lock()
		if cl.sink == nil {
			cl.smu.Unlock()
			break
		}
		k, err := r.Read(dst[got:])
		cl.smu.Unlock()
		got += k
		if err != nil && got < n {
			return true, truncatedEOF(err)
		}
	}
	if got < n {
		// Detached: nobody takes the answer (see deliver).
		if _, err := io.CopyN(io.Discard, r, int64(n-got)); err != nil {
			return true, truncatedEOF(err)
		}
		return true, nil
	}
	f.Body, f.inPlace = dst, true
	return true, nil
}

// Dial connects to the XRootD server at addr ("host:port", "host" for
// port 1094, or a root:// URL whose path is ignored), performs the
// handshake, kXR_protocol and an anonymous kXR_login. It fails if the
// server requires authentication or TLS, which this client does not
// support.
func Dial(ctx context.Context, addr string, opts *DialOptions) (*Client, error) {
	o := opts.withDefaults()
	hostport, secure, err := parseAddr(addr)
	if err != nil {
		return nil, err
	}
	if secure {
		o.WantTLS, o.AbleTLS = true, true
	}
	conn, err := o.Dial(ctx, "tcp", hostport)
	if err != nil {
		return nil, fmt.Errorf("xrootd: dial %s: %w", hostport, err)
	}
	c := &Client{
		conn:     conn,
		in:       bufio.NewReaderSize(conn, 64<<10),
		opts:     o,
		log:      o.Logger.With("server", hostport),
		addr:     hostport,
		calls:    make(map[StreamID]*call),
		next:     1,
		done:     make(chan struct{}),
		slots:    make(chan struct{}, o.MaxInflight),
		batching: make(chan struct{}, 1),
		wmu:      make(chan struct{}, 1),
		rdial:    make(chan struct{}, 1),
	}
	if err := c.setup(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("xrootd: connect to %s: %w", hostport, err)
	}
	go c.readLoop()
	c.log.Debug("xrootd client connected", "protocol", fmt.Sprintf("%x", c.proto.Version), "flags", fmt.Sprintf("%#x", c.proto.Flags))
	return c, nil
}

// parseAddr returns the host:port of addr, and whether it is a roots://
// (or xroots://) URL.
func parseAddr(addr string) (hostport string, secure bool, err error) {
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil {
			return "", false, fmt.Errorf("xrootd: address %q: %w", addr, err)
		}
		switch u.Scheme {
		case "root", "xroot":
		case "roots", "xroots":
			secure = true
		default:
			return "", false, fmt.Errorf("xrootd: address %q: scheme %q is not root:// or roots://", addr, u.Scheme)
		}
		addr = u.Host
	}
	if addr == "" {
		return "", false, fmt.Errorf("xrootd: empty address")
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return net.JoinHostPort(strings.Trim(addr, "[]"), "1094"), secure, nil
	}
	return addr, secure, nil
}

// setup runs the handshake, kXR_protocol and kXR_login synchronously.
func (c *Client) setup(ctx context.Context) error {
	if dl, ok := ctx.Deadline(); ok {
		c.conn.SetDeadline(dl)
	}
	defer deadlineOnDone(ctx, c.conn.SetDeadline)()
	defer c.conn.SetDeadline(time.Time{})

	b := AppendHandshake(nil)
	var flags uint8
	if c.opts.AbleTLS {
		flags |= ProtoAbleTLS
	}
	if c.opts.WantTLS {
		flags |= ProtoWantTLS
	}
	b = EncodeRequest(StreamID{}, &ProtocolRequest{ClientVersion: ProtocolVersion, Flags: flags, Expect: ProtoExpectLogin}).AppendTo(b)
	if _, err := c.conn.Write(b); err != nil {
		return ctxErr(ctx, fmt.Errorf("send handshake: %w", err))
	}
	f, err := ReadResponseFrame(c.in, c.dialAnswerMax())
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("read handshake response: %w", err))
	}
	if _, _, err := ParseHandshakeResponse(f); err != nil {
		return err
	}
	if f, err = ReadResponseFrame(c.in, c.dialAnswerMax()); err != nil {
		return ctxErr(ctx, fmt.Errorf("read protocol response: %w", err))
	}
	if f.Status != StatusOK {
		return fmt.Errorf("%w: kXR_protocol answered %v", ErrMalformed, f.Status)
	}
	if c.proto, err = ParseProtocolResponse(f.Body); err != nil {
		return err
	}
	switch {
	case c.proto.Flags&FlagGotoTLS != 0 && c.opts.AbleTLS:
		if err := c.startTLS(ctx, hostOf(c.addr)); err != nil {
			return err
		}
	case c.opts.WantTLS:
		return Errorf(ErrTLSRequired, "server offers no TLS (flags %#x), which a roots:// URL asks for", c.proto.Flags)
	case c.proto.Flags&FlagGotoTLS != 0:
		return Errorf(ErrTLSRequired, "server requires TLS (flags %#x): use a roots:// URL", c.proto.Flags)
	}
	// A server that requires TLS for what follows (kXR_tlsLogin, ...)
	// of a client that has not said it can use it refuses the login
	// itself, with kXR_TLSRequired.

	login := &LoginRequest{
		PID:      int32(os.Getpid()),
		Username: c.opts.Username,
		CapVer:   loginAsyncCap | loginVer005,
		Token:    "xrd.appname=" + url.QueryEscape(c.opts.AppName) + "&xrd.rn=ecstore",
	}
	for attempt := 0; ; attempt++ {
		if _, err := c.conn.Write(EncodeRequest(StreamID{}, login).AppendTo(nil)); err != nil {
			return ctxErr(ctx, fmt.Errorf("send login: %w", err))
		}
		if f, err = ReadResponseFrame(c.in, c.dialAnswerMax()); err != nil {
			return ctxErr(ctx, fmt.Errorf("read login response: %w", err))
		}
		if f.Status != StatusWait || attempt >= c.opts.MaxWaitRetries {
			break
		}
		d, _, err := parseWaitBody(f.Body)
		if err != nil {
			return err
		}
		if err := sleepCtx(ctx, min(d, c.opts.MaxWait)); err != nil {
			return err
		}
	}
	if err := statusError(f); err != nil {
		return fmt.Errorf("login: %w", err)
	}
	lr, err := ParseLoginResponse(f.Body)
	if err != nil {
		return err
	}
	if lr.Security != "" {
		if err := c.authenticate(ctx, lr.Security); err != nil {
			return err
		}
	}
	c.sess = lr.SessionID
	return nil
}

// dialAnswer bounds each answer of the dial (the handshake,
// kXR_protocol, kXR_login, kXR_auth): some dozens of bytes, a login's
// security parameters a few hundred.
const dialAnswer = 64 << 10

// dialAnswerMax is dialAnswer, or MaxFrame when that is lower.
func (c *Client) dialAnswerMax() int { return min(dialAnswer, c.opts.MaxFrame) }

// ctxErr prefers the context's error over the I/O error it caused.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	// The connection deadline may fire a moment before the context's.
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) && errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w (%w)", context.DeadlineExceeded, err)
	}
	return err
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// statusError converts a final non-ok response into an error; kXR_ok and
// kXR_status give nil.
func statusError(f *ResponseFrame) error {
	switch f.Status {
	case StatusOK, StatusStatus:
		return nil
	case StatusError:
		xe, err := ParseErrorBody(f.Body)
		if err != nil {
			return err
		}
		return xe
	case StatusRedirect:
		re, err := parseRedirectBody(f.Body)
		if err != nil {
			return err
		}
		return re
	case StatusAuthMore:
		return Errorf(ErrAuthFailed, "server asks for authentication, which this client does not support")
	}
	return fmt.Errorf("%w: unexpected final status %v", ErrMalformed, f.Status)
}

// Protocol returns the server's kXR_protocol answer.
func (c *Client) Protocol() ProtocolResponse { return c.proto }

// Addr returns the server address the client is connected to.
func (c *Client) Addr() string { return c.addr }

// Close closes the connection, and those that redirects led to.
// Outstanding requests fail with ErrClosed.
func (c *Client) Close() error {
	c.fail(ErrClosed)
	c.closeRedirected()
	return nil
}

// Err returns nil while the connection is up, and once it has failed or
// was closed why, an error wrapping ErrClosed: every request would fail
// with it, unsent.
func (c *Client) Err() error {
	select {
	case <-c.done:
		return c.connErr()
	default:
		return nil
	}
}

// fail marks the connection dead with err and wakes every waiter.
func (c *Client) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	close(c.done)
	c.conn.Close()
}

// unsentErr is the error of a request not sent because the connection
// had failed: ErrNotSent and the connection's error.
func (c *Client) unsentErr() error {
	return fmt.Errorf("%w: %w", ErrNotSent, c.connErr())
}

// connErr returns the sticky connection error.
func (c *Client) connErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == ErrClosed {
		return ErrClosed
	}
	return fmt.Errorf("%w: %w", ErrClosed, c.err)
}

// isFinal reports whether f ends its request.
func isFinal(f *ResponseFrame) bool {
	switch f.Status {
	case StatusOKSoFar, StatusWaitResp:
		return false
	case StatusStatus:
		return len(f.Body) < StatusBodyLen || f.Body[7] != RespPartial && f.Body[7] != RespProgress
	}
	return true
}

func (c *Client) readLoop() {
	for {
		f, err := c.readFrame()
		if err != nil {
			c.fail(fmt.Errorf("read response: %w", err))
			return
		}
		if f.Status == StatusAttn {
			inner, ok, err := parseAsyncResponse(f.Body)
			if err != nil {
				c.fail(err)
				return
			}
			if !ok {
				c.log.Debug("xrootd client ignores kXR_attn", "bytes", len(f.Body))
				continue
			}
			f = inner
		}
		if f.Status == StatusWaitResp {
			// The answer will come as kXR_attn kXR_asynresp; the caller's
			// context bounds the wait.
			continue
		}
		final := isFinal(f)
		c.mu.Lock()
		cl := c.calls[f.StreamID]
		if cl != nil && final {
			delete(c.calls, f.StreamID)
			<-c.slots
		}
		c.mu.Unlock()
		if cl == nil {
			c.log.Debug("xrootd client drops response for unknown stream", "stream", f.StreamID.String(), "status", f.Status.String())
			continue
		}
		cl.deliver(f, c.done, c.opts.partWait)
	}
}

// readFrame reads the next response frame, receiving a data body
// straight into its call's sink when the call has one. A frame larger
// than any answer to its request (call.max) is refused once its header
// is in, before its body is read.
func (c *Client) readFrame() (*ResponseFrame, error) {
	f, dlen, err := readResponseHeader(c.in, c.opts.MaxFrame)
	if err != nil {
		return nil, err
	}
	sid, n := f.StreamID, dlen
	if f.Status == StatusAttn && dlen >= 8+ResponseHeaderLen {
		// A kXR_asynresp carries the answer of another stream: its
		// frame is what the bound applies to.
		if h, err := c.in.Peek(8 + ResponseHeaderLen); err == nil && int32(getU32(h)) == attnAsyncResp {
			copy(sid[:], h[8:10])
			n = dlen - 8 - ResponseHeaderLen
		}
	}
	c.mu.Lock()
	cl := c.calls[sid]
	c.mu.Unlock()
	maxBody := c.opts.MaxFrame
	if cl != nil {
		if n > cl.max {
			return nil, fmt.Errorf("%w: a %v frame of %d bytes answering %v, whose answer frames are at most %d bytes", ErrFrameTooLarge, f.Status, n, cl.req, cl.max)
		}
		maxBody = cl.max
		if sid == f.StreamID && (f.Status == StatusOK || f.Status == StatusOKSoFar) {
			if done, err := cl.receive(c.in, f, dlen); done || err != nil {
				return f, err
			}
		}
	}
	if err := readResponseBody(c.in, f, dlen, maxBody); err != nil {
		if cl != nil && errors.Is(err, ErrFrameTooLarge) {
			err = fmt.Errorf("answering %v: %w", cl.req, err)
		}
		return nil, err
	}
	if f.Status == StatusStatus {
		// The status body names its stream and request again
		// (ServerResponseBody_Status): a server that names others is
		// confused about what it answers, on every stream.
		var bsid StreamID
		copy(bsid[:], f.Body[4:6])
		if bsid != f.StreamID {
			return nil, fmt.Errorf("%w: kXR_status on stream %v names stream %v", ErrMalformed, f.StreamID, bsid)
		}
		if id := ReqAuth + RequestID(f.Body[6]); cl != nil && id != cl.req {
			return nil, fmt.Errorf("%w: kXR_status for %v answering %v", ErrMalformed, id, cl.req)
		}
	}
	return f, nil
}

// frameBound bounds one frame of the answer to req, by its kind: a stat,
// an open, a write or a close is answered in some dozens of bytes, a read
// with the bytes asked for. A kXR_error, kXR_wait or kXR_redirect of any
// request fits smallAnswer. Listings are bounded by MaxFrame alone.
func (c *Client) frameBound(req Request) int {
	n := smallAnswer
	switch r := req.(type) {
	case *ReadRequest:
		n = int(r.Length)
	case *PgReadRequest:
		n = PagesLen(r.Offset, int(r.Length))
	case *ReadVRequest:
		n = readVAnswerMax(r.Segments)
	case *LocateRequest:
		n = locateAnswer
	case *DirlistRequest:
		n = c.opts.MaxFrame
	case *FattrRequest:
		n = fattrAnswerMax(r)
	case *QueryRequest:
		switch requestName(r) {
		case "open_whole":
			_, cgi, _ := bytes.Cut(r.Args, []byte("?"))
			v, _ := url.ParseQuery(string(cgi))
			n = c.opts.MaxFrame
			if content, err := strconv.Atoi(v.Get(OpenWholeArg)); err == nil && content >= 0 {
				n = min(content, c.opts.MaxFrame) + smallAnswer
			}
		case "rm_attr":
			n = MaxFattrValue + smallAnswer
		case "query_space", "query_cksum", "query_config":
		default: // a listing with attributes, or a query of unknown kind
			n = c.opts.MaxFrame
		}
	}
	return min(max(n, smallAnswer), c.opts.MaxFrame)
}

// deadlineOnDone sets a connection deadline (set) to now once ctx is
// done, so that a blocked read or write returns, until the function it
// returns is called. That function clears the deadline again if it was
// set, after it was: the setting runs in a goroutine of its own, and one
// that had started but not yet set the deadline when the caller cleared
// it used to set it afterwards, failing the next request on the
// connection with an i/o timeout (CI: the bench's cleanup rm after a
// cancelled run, "send rm request: writev ... i/o timeout").
func deadlineOnDone(ctx context.Context, set func(time.Time) error) (release func()) {
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		set(time.Now())
		close(fired)
	})
	return func() {
		if !stop() {
			<-fired
			set(time.Time{})
		}
	}
}

// pending is a sent request whose answer has not been consumed.
type pending struct {
	c   *Client
	sid StreamID
	cl  *call
	// For DialOptions.Observe: what was sent when, the data received so
	// far, and whether the request has been observed (pending is used
	// by one goroutine at a time).
	req      Request
	at       time.Time
	sent     int
	received int64
	observed bool
}

// requestName is Observation.Name for req.
func requestName(req Request) string {
	q, ok := req.(*QueryRequest)
	if !ok {
		return req.RequestID().String()
	}
	switch q.InfoType {
	case QuerySpace:
		return "query_space"
	case QueryCksum:
		return "query_cksum"
	case QueryConfig:
		return "query_config"
	case QueryOpaqueFile:
		if _, cgi, ok := bytes.Cut(q.Args, []byte("?")); ok {
			switch {
			case bytes.HasPrefix(cgi, []byte(OpenWholeArg+"=")):
				return "open_whole"
			case bytes.HasPrefix(cgi, []byte(AttrListArg+"=")):
				return "list_attrs"
			case bytes.HasPrefix(cgi, []byte(RemoveAttrArg+"=")):
				return "rm_attr"
			}
		}
	}
	return "query"
}

// observe tells DialOptions.Observe, once, how the request ended: with
// its final frame f (err nil), or with err.
func (p *pending) observe(f *ResponseFrame, err error) {
	if p.observed || p.c.opts.Observe == nil {
		return
	}
	p.observed = true
	if err == nil && f != nil && f.Status == StatusError {
		err = statusError(f)
	}
	p.c.opts.Observe(Observation{Request: p.req.RequestID(), Name: requestName(p.req), Duration: time.Since(p.at),
		Sent: p.sent, Received: p.received, Err: err})
}

// start sends req on a free stream id. A non-nil sink receives the data
// of the answer in place (see call.sink); the caller must then detach
// the pending request before it reuses sink.
func (c *Client) start(ctx context.Context, req Request, sink []byte) (*pending, error) {
	var one [1]*pending
	if err := c.send(ctx, []Request{req}, sink, one[:]); err != nil {
		return nil, err
	}
	return one[0], nil
}

// startAll sends reqs in order, each on a free stream id, in one write:
// a server reading the connection finds them together (a file's last
// write, its sync and its close wake it once, not three times, and cost
// the sender one system call). A batch larger than the requests allowed
// in flight goes out one request at a time. On error, the requests not
// sent are not either (a failed write fails the connection).
func (c *Client) startAll(ctx context.Context, reqs []Request) ([]*pending, error) {
	pds := make([]*pending, len(reqs))
	if len(reqs) > cap(c.slots) {
		for i, req := range reqs {
			if err := c.send(ctx, []Request{req}, nil, pds[i:i+1]); err != nil {
				return nil, err
			}
		}
		return pds, nil
	}
	if err := c.send(ctx, reqs, nil, pds); err != nil {
		return nil, err
	}
	return pds, nil
}

// send sends reqs, at most as many as may be in flight, with one write
// and fills pds with their pending calls; sink is for a lone request
// (see start).
func (c *Client) send(ctx context.Context, reqs []Request, sink []byte, pds []*pending) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(reqs) > 1 {
		// One batch at a time takes its slots: two that each held some
		// while waiting for more could otherwise wait for each other.
		select {
		case c.batching <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return c.unsentErr()
		}
	}
	for taken := range reqs {
		if c.takeSlot(ctx) {
			continue
		}
		c.releaseSlots(taken)
		if len(reqs) > 1 {
			<-c.batching
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		return c.unsentErr()
	}
	if len(reqs) > 1 {
		<-c.batching
	}
	if err := ctx.Err(); err != nil {
		// Ended while the slots were taken: send nothing.
		c.releaseSlots(len(reqs))
		return err
	}
	calls := make([]*call, len(reqs))
	sids := make([]StreamID, len(reqs))
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		c.releaseSlots(len(reqs))
		return c.unsentErr()
	}
	for i := range reqs {
		for {
			putU16(sids[i][:], c.next)
			c.next++
			if c.next == 0 {
				c.next = 1
			}
			if _, used := c.calls[sids[i]]; !used {
				break
			}
		}
		calls[i] = &call{frames: make(chan *ResponseFrame, 4), gone: make(chan struct{}), sink: sink, late: c.lateFor(reqs[i]),
			req: reqs[i].RequestID(), max: c.frameBound(reqs[i])}
		c.calls[sids[i]] = calls[i]
	}
	c.mu.Unlock()

	bufs := make(net.Buffers, 0, 2*len(reqs))
	sent := make([]int, len(reqs))
	for i, req := range reqs {
		frame := EncodeRequest(sids[i], req)
		bufs = append(bufs, frame.Header().AppendTo(make([]byte, 0, RequestHeaderLen)))
		if len(frame.Payload) > 0 {
			bufs = append(bufs, frame.Payload)
		}
		sent[i] = len(frame.Payload)
	}
	select {
	case c.wmu <- struct{}{}:
	case <-ctx.Done():
		// Nothing of these requests was sent: the stream is intact.
		c.unsent(sids, calls)
		return ctx.Err()
	case <-c.done:
		return c.unsentErr()
	}
	release := deadlineOnDone(ctx, c.conn.SetWriteDeadline)
	err := writeFrames(c.conn, bufs)
	release()
	<-c.wmu
	if err != nil {
		// A partly written frame leaves the stream unusable.
		c.fail(fmt.Errorf("send %v request: %w", reqs[0].RequestID(), err))
		err = ctxErr(ctx, c.connErr())
		if c.opts.Observe != nil {
			for _, req := range reqs {
				c.opts.Observe(Observation{Request: req.RequestID(), Name: requestName(req), Err: err})
			}
		}
		return err
	}
	at := time.Time{}
	if c.opts.Observe != nil {
		at = time.Now()
	}
	for i, req := range reqs {
		pds[i] = &pending{c: c, sid: sids[i], cl: calls[i]}
		if c.opts.Observe != nil {
			pds[i].req, pds[i].at, pds[i].sent = req, at, sent[i]
		}
	}
	return nil
}

// staleAbandoned is how long a request given up on by its caller may
// stay unanswered before it counts as lost: a node that answers pings but
// never answers some requests (a disk hung under one file, a handler
// stuck) keeps their stream ids reserved, as they may yet be answered.
// When no stream id is free and at least half of them are held by
// requests abandoned longer than this ago, the connection is failed
// (starved): the requests waiting for a stream id, and those sent later,
// fail unsent and go to a fresh connection (xrdnode's pool replaces a
// failed client), instead of waiting until their own deadline for ids
// that may never come back. Those still in flight on it fail too, but
// half the connection is lost already then. Counting only at exhaustion,
// and only half, keeps one lost request from failing a busy connection.
// A healthy node answers a request given up on when it gets to it; 30 s
// after its caller's deadline, on top of the node's own ping answered
// meanwhile, the answer is taken as not coming.
const staleAbandoned = 30 * time.Second

// takeSlot takes a request slot (a stream id), waiting for one until ctx
// is done or the connection fails; it reports whether it took one. While
// it waits it fails a starved connection (see staleAbandoned).
func (c *Client) takeSlot(ctx context.Context) bool {
	select {
	case c.slots <- struct{}{}:
		return true
	default:
	}
	for {
		again := c.starved()
		if c.Err() != nil {
			return false
		}
		t := time.NewTimer(again)
		select {
		case c.slots <- struct{}{}:
			t.Stop()
			return true
		case <-ctx.Done():
			t.Stop()
			return false
		case <-c.done:
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// starved fails the connection when at least half of its stream ids are
// held by requests abandoned more than staleAbandoned ago (see there),
// called when none is free. Otherwise it returns how long it will take
// at the earliest for that to be so.
func (c *Client) starved() time.Duration {
	stale := c.opts.staleAbandoned
	need := (cap(c.slots) + 1) / 2
	now := time.Now()
	var ages []time.Duration
	c.mu.Lock()
	for _, cl := range c.calls {
		if at := cl.abandonedAt.Load(); at != 0 {
			ages = append(ages, now.Sub(time.Unix(0, at)))
		}
	}
	c.mu.Unlock()
	if len(ages) < need {
		return stale
	}
	slices.Sort(ages)
	age := ages[len(ages)-need] // the need-th oldest
	if age < stale {
		return stale - age
	}
	lost := len(ages) - sort.Search(len(ages), func(i int) bool { return ages[i] >= stale })
	c.fail(fmt.Errorf("%d of the %d stream ids are held by requests still unanswered %v after they were given up on: the server lost them", lost, cap(c.slots), stale))
	return 0
}

// unsent forgets the calls of requests that were never sent, and gives
// back their slots.
func (c *Client) unsent(sids []StreamID, calls []*call) {
	c.mu.Lock()
	n := 0
	for i, sid := range sids {
		if c.calls[sid] == calls[i] {
			delete(c.calls, sid)
			n++
		}
	}
	c.mu.Unlock()
	c.releaseSlots(n)
}

// BuffersWriter is a connection that writes several buffers with one
// system call (writev), as net.TCPConn does through net.Buffers. A
// wrapper of the connection (DialOptions.Dial) loses that unless it
// implements BuffersWriter too: request frames would then go out as one
// write per header and one per payload.
type BuffersWriter interface {
	WriteBuffers(bufs *net.Buffers) (int64, error)
}

// joinMax bounds the frames that writeFrames copies into one buffer for
// a connection that cannot write several at once.
const joinMax = 64 << 10

// writeFrames writes bufs, frames of one or more requests or responses,
// to w with one system call where it can: by writev (a TCP or Unix
// connection, or a BuffersWriter), or, for a writer without it (TLS),
// by joining frames of up to joinMax bytes into one write.
func writeFrames(w io.Writer, bufs net.Buffers) error {
	switch conn := w.(type) {
	case BuffersWriter:
		_, err := conn.WriteBuffers(&bufs)
		return err
	case *net.TCPConn, *net.UnixConn:
		_, err := bufs.WriteTo(conn)
		return err
	}
	if len(bufs) > 1 {
		n := 0
		for _, b := range bufs {
			n += len(b)
		}
		if n <= joinMax {
			joined := bufpool.Get(joinMax)[:0] // pooled, where n alone may not be
			for _, b := range bufs {
				joined = append(joined, b...)
			}
			_, err := w.Write(joined)
			bufpool.Put(joined)
			return err
		}
	}
	_, err := bufs.WriteTo(w)
	return err
}

// releaseSlots gives back n request slots taken by send.
func (c *Client) releaseSlots(n int) {
	for range n {
		<-c.slots
	}
}

// detach makes sure the connection's reader no longer writes into the
// call's sink. If it is receiving into it right now (the caller gave up
// mid-frame), the reader lets go after its current read, which returns
// as soon as any bytes arrive, and skips the rest of the frame. Should
// none arrive within detachWait (the server stopped in the middle of the
// frame), the connection is failed, which ends that read: the stream
// cannot skip bytes that do not come.
func (p *pending) detach() {
	cl := p.cl
	cl.detaching.Store(true)
	if !cl.smu.TryLock() {
		t := time.AfterFunc(detachWait, func() {
			p.c.fail(errors.New("a read was abandoned while its answer was arriving, and the server stopped sending it"))
		})
		cl.smu.Lock()
		t.Stop()
	}
	cl.sink = nil
	cl.smu.Unlock()
}

// detachWait bounds how long detach waits for the bytes of a frame
// being received into the sink of a read given up on.
const detachWait = 100 * time.Millisecond

// partWait bounds how long the connection's reader waits for a caller to
// take the next part of its answer, with the parts before it taken
// (DialOptions.partWait): the connection's other answers wait behind it.
// A caller that handles the parts of its answer as they come (a
// ListAttrEach callback) must be quick; one slower than this has the
// rest of its answer dropped and fails with ErrSlowCaller.
const partWait = 5 * time.Second

// wait consumes the answer, passing every data frame (kXR_oksofar, the
// final kXR_ok, kXR_status) to onData (nil: none expected), and returns
// the final frame. A wait with a context already done gives up at once,
// even if the answer is there.
func (p *pending) wait(ctx context.Context, onData func(f *ResponseFrame) error) (*ResponseFrame, error) {
	if onData == nil {
		onData = func(*ResponseFrame) error { return nil }
	}
	if err := ctx.Err(); err != nil {
		p.observe(nil, err)
		p.abandon()
		return nil, err
	}
	for {
		var f *ResponseFrame
		ok := true
		select {
		case f, ok = <-p.cl.frames:
		case <-ctx.Done():
			p.observe(nil, ctx.Err())
			p.abandon()
			return nil, ctx.Err()
		case <-p.c.done:
			// The frames read before the connection closed are the
			// answer's (a server answers, then goes).
			select {
			case f, ok = <-p.cl.frames:
			default:
				err := p.c.connErr()
				p.observe(nil, err)
				return nil, err
			}
		}
		if !ok {
			err := fmt.Errorf("%w: a part of the answer to %v was not taken within %v; the rest was dropped", ErrSlowCaller, p.cl.req, p.c.opts.partWait)
			p.observe(nil, err)
			p.abandon()
			return nil, err
		}
		final := isFinal(f)
		if f.Status == StatusOK || f.Status == StatusOKSoFar || f.Status == StatusStatus {
			p.received += int64(len(f.Body))
			if err := onData(f); err != nil {
				p.observe(nil, err)
				p.abandon()
				return nil, err
			}
		}
		if final {
			p.observe(f, nil)
			return f, nil
		}
	}
}

// roundTrip sends req and waits for its final answer, following kXR_wait.
// onData may be nil when no data is expected.
func (c *Client) roundTrip(ctx context.Context, req Request, onData func(f *ResponseFrame) error) error {
	return c.roundTripInto(ctx, req, nil, onData)
}

// roundTripInto is roundTrip with a sink that receives the answer's data
// in place (see call.sink); sink is no longer written once it returns.
func (c *Client) roundTripInto(ctx context.Context, req Request, sink []byte, onData func(f *ResponseFrame) error) error {
	_, err := c.roundTripAt(ctx, req, sink, onData)
	return err
}

// roundTripAt is roundTripInto following kXR_redirect as DialOptions
// allow; it returns the connection that gave the final answer.
func (c *Client) roundTripAt(ctx context.Context, req Request, sink []byte, onData func(f *ResponseFrame) error) (*Client, error) {
	if c.opts.Redirects <= 0 {
		return c, c.roundTripOnce(ctx, req, sink, onData)
	}
	return c.follow(ctx, req, func(at *Client, req Request) error {
		return at.roundTripOnce(ctx, req, sink, onData)
	})
}

// roundTripOnce is roundTripInto on c alone: a kXR_redirect is returned
// as a *RedirectError.
func (c *Client) roundTripOnce(ctx context.Context, req Request, sink []byte, onData func(f *ResponseFrame) error) error {
	handle := onData
	if handle == nil {
		handle = func(*ResponseFrame) error { return nil }
	}
	// Every part of a long answer (a listing's kXR_oksofar frames) is
	// progress for a watchdog of ctx, which stands still while the part
	// is handled: the request is bounded by how long the server goes
	// silent, not by how long the whole answer, or the caller's work on
	// it, takes.
	parts := 0 // of the answer handed to handle
	onData = func(f *ResponseFrame) error {
		parts++
		defer watchdog.Busy(ctx)()
		return handle(f)
	}
	for attempt := 0; ; attempt++ {
		p, err := c.start(ctx, req, sink)
		if err != nil {
			return err
		}
		f, err := p.wait(ctx, onData)
		if sink != nil {
			p.detach()
		}
		if err != nil {
			return err
		}
		if (f.Status == StatusWait || f.Status == StatusRedirect) && parts > 0 {
			// Sent again, the request's answer would follow the parts
			// handled already (a read's data, a listing's entries).
			return fmt.Errorf("%w: %v after %d parts of the answer", ErrMalformed, f.Status, parts)
		}
		if f.Status == StatusWait && attempt < c.opts.MaxWaitRetries {
			d, msg, err := parseWaitBody(f.Body)
			if err != nil {
				return err
			}
			c.log.Debug("xrootd server asks to wait", "req", req.RequestID().String(), "wait", d, "info", msg)
			if err := sleepCtx(ctx, min(d, c.opts.MaxWait)); err != nil {
				return err
			}
			continue
		}
		if f.Status == StatusWait {
			return Errorf(ErrOverloaded, "server kept asking to wait after %d retries", attempt)
		}
		return statusError(f)
	}
}

// Bounds of the answers collect assembles, by kind of request, so that
// a server cannot make the client gather MaxResponse bytes (256 MiB by
// default) for an answer of a few bytes, once per request.
const (
	// smallAnswer bounds the answer to a stat, an open (its handle and
	// stat line), a checksum, a space or config query and a kXR_fattr
	// set or del: some dozens of bytes, at most a few KiB.
	smallAnswer = 64 << 10
	// locateAnswer bounds a kXR_locate answer: a list of servers.
	locateAnswer = 1 << 20
	// attrEntryMax bounds one entry of an attribute listing: a name
	// (a path, maxPathLen), its stat line and an attribute value.
	attrEntryMax = maxPathLen + MaxFattrValue + smallAnswer
)

// answerMax is limit, or MaxResponse when that is lower.
func (c *Client) answerMax(limit int) int {
	return min(limit, c.opts.MaxResponse)
}

// collect sends req and returns the concatenated bodies of its kXR_oksofar
// and kXR_ok frames, bounded by limit and by MaxResponse.
func (c *Client) collect(ctx context.Context, req Request, limit int) ([]byte, error) {
	_, body, err := c.collectAt(ctx, req, limit)
	return body, err
}

// collectAt is collect returning the connection that answered (see
// roundTripAt).
func (c *Client) collectAt(ctx context.Context, req Request, limit int) (*Client, []byte, error) {
	limit = c.answerMax(limit)
	var body []byte
	at, err := c.roundTripAt(ctx, req, nil, func(f *ResponseFrame) error {
		if f.Status == StatusStatus {
			return fmt.Errorf("%w: unexpected kXR_status answer", ErrMalformed)
		}
		if len(body)+len(f.Body) > limit {
			return fmt.Errorf("%w: %v answer exceeds %d bytes", ErrFrameTooLarge, req.RequestID(), limit)
		}
		body = append(body, f.Body...)
		return nil
	})
	return at, body, err
}

// Ping checks that the server answers.
func (c *Client) Ping(ctx context.Context) error {
	if err := c.roundTrip(ctx, &PingRequest{}, nil); err != nil {
		return fmt.Errorf("xrootd: ping %s: %w", c.addr, err)
	}
	return nil
}

// Stat describes the file or directory at path.
func (c *Client) Stat(ctx context.Context, path string) (FileInfo, error) {
	body, err := c.collect(ctx, &StatRequest{Path: path}, smallAnswer)
	if err != nil {
		return FileInfo{}, fmt.Errorf("xrootd: stat %s: %w", path, err)
	}
	fi, err := ParseStat(string(body))
	if err != nil {
		return FileInfo{}, fmt.Errorf("xrootd: stat %s: %w", path, err)
	}
	return fi, nil
}

// Dirlist lists directory path. With withStat, every entry carries its
// stat information (kXR_dstat); otherwise only Name is set.
func (c *Client) Dirlist(ctx context.Context, path string, withStat bool) ([]FileInfo, error) {
	req := &DirlistRequest{Path: path}
	if withStat {
		req.Options = DirlistStat
	}
	body, err := c.collect(ctx, req, c.opts.MaxResponse)
	if err != nil {
		return nil, fmt.Errorf("xrootd: dirlist %s: %w", path, err)
	}
	list, err := ParseDirlist(body)
	if err != nil {
		return nil, fmt.Errorf("xrootd: dirlist %s: %w", path, err)
	}
	return list, nil
}

// DirlistChecksums lists directory path with every entry's stat and
// checksum (kXR_dcksm, as xrdfs ls -C asks), algorithm naming the
// checksum (cks.type; "" for the server's default). It returns the
// entries, with Checksum empty where the server has none, and the
// algorithm the server named (empty when it sent no checksums at all,
// as xrootd without checksums configured answers).
func (c *Client) DirlistChecksums(ctx context.Context, path, algorithm string) ([]ChecksumEntry, string, error) {
	req := &DirlistRequest{Path: path, Options: DirlistCksum}
	if algorithm != "" {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		req.Path += sep + "cks.type=" + url.QueryEscape(algorithm)
	}
	body, err := c.collect(ctx, req, c.opts.MaxResponse)
	if err != nil {
		return nil, "", fmt.Errorf("xrootd: dirlist %s: %w", path, err)
	}
	list, alg, err := ParseDirlistChecksums(body)
	if err != nil {
		return nil, "", fmt.Errorf("xrootd: dirlist %s: %w", path, err)
	}
	return list, alg, nil
}

// Mkdir creates directory path with permissions perm; with parents,
// missing parents are created and an existing directory is no error.
func (c *Client) Mkdir(ctx context.Context, path string, perm fs.FileMode, parents bool) error {
	req := &MkdirRequest{Mode: uint16(perm.Perm()), Path: path}
	if parents {
		req.Options = MkdirPath
	}
	if err := c.roundTrip(ctx, req, nil); err != nil {
		return fmt.Errorf("xrootd: mkdir %s: %w", path, err)
	}
	return nil
}

// Rm removes the file at path.
func (c *Client) Rm(ctx context.Context, path string) error {
	if err := c.roundTrip(ctx, &RmRequest{Path: path}, nil); err != nil {
		return fmt.Errorf("xrootd: rm %s: %w", path, err)
	}
	return nil
}

// Rmdir removes the empty directory at path.
func (c *Client) Rmdir(ctx context.Context, path string) error {
	if err := c.roundTrip(ctx, &RmdirRequest{Path: path}, nil); err != nil {
		return fmt.Errorf("xrootd: rmdir %s: %w", path, err)
	}
	return nil
}

// Mv renames from to to.
func (c *Client) Mv(ctx context.Context, from, to string) error {
	if err := c.roundTrip(ctx, &MvRequest{Source: from, Target: to}, nil); err != nil {
		return fmt.Errorf("xrootd: mv %s %s: %w", from, to, err)
	}
	return nil
}

// Chmod changes the permissions of path.
func (c *Client) Chmod(ctx context.Context, path string, perm fs.FileMode) error {
	if err := c.roundTrip(ctx, &ChmodRequest{Mode: uint16(perm.Perm()), Path: path}, nil); err != nil {
		return fmt.Errorf("xrootd: chmod %s: %w", path, err)
	}
	return nil
}

// Truncate sets the size of the file at path.
func (c *Client) Truncate(ctx context.Context, path string, size int64) error {
	if err := c.roundTrip(ctx, &TruncateRequest{Path: path, Size: size}, nil); err != nil {
		return fmt.Errorf("xrootd: truncate %s: %w", path, err)
	}
	return nil
}

// Checksum asks the server for the checksum of the file at path with the
// named algorithm ("adler32"; empty for the server's default). It returns
// the algorithm the server used and the value as the server formats it
// (lower-case hex for adler32).
func (c *Client) Checksum(ctx context.Context, path, algorithm string) (alg, value string, err error) {
	arg := path
	if algorithm != "" {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		arg += sep + "cks.type=" + url.QueryEscape(algorithm)
	}
	body, err := c.collect(ctx, &QueryRequest{InfoType: QueryCksum, Args: []byte(arg)}, smallAnswer)
	if err != nil {
		return "", "", fmt.Errorf("xrootd: checksum %s: %w", path, err)
	}
	alg, value, ok := strings.Cut(strings.TrimSpace(cstring(body)), " ")
	if !ok || value == "" {
		return "", "", fmt.Errorf("xrootd: checksum %s: %w: answer %q", path, ErrMalformed, body)
	}
	return alg, value, nil
}

// QueryConfig asks for configuration values (kXR_query kXR_Qconfig), such
// as "readv_iov_max" or "chksum", and returns one value per key. Servers
// echo the key for values they do not have.
func (c *Client) QueryConfig(ctx context.Context, keys ...string) ([]string, error) {
	body, err := c.collect(ctx, &QueryRequest{InfoType: QueryConfig, Args: []byte(strings.Join(keys, " "))}, smallAnswer)
	if err != nil {
		return nil, fmt.Errorf("xrootd: query config: %w", err)
	}
	vals := strings.Split(strings.TrimRight(cstring(body), "\n"), "\n")
	if len(vals) != len(keys) {
		return nil, fmt.Errorf("xrootd: query config: %w: %d values for %d keys", ErrMalformed, len(vals), len(keys))
	}
	return vals, nil
}

// OpenWhole opens path for reading with ecstore's open that reads small
// files whole (WholeOpener): a regular file of at most max bytes comes
// whole, as content, and is not left open; any other comes open, as Open
// returns it (with its stat information). Servers other than ecstore's
// answer kXR_Unsupported.
func (c *Client) OpenWhole(ctx context.Context, path string, max int64) (content []byte, f *ClientFile, err error) {
	q := &QueryRequest{InfoType: QueryOpaqueFile, Args: []byte(path + "?" + OpenWholeArg + "=" + strconv.FormatInt(max, 10))}
	at, body, err := c.collectAt(ctx, q, int(min(max, int64(c.opts.MaxResponse)))+smallAnswer)
	if err != nil {
		return nil, nil, fmt.Errorf("xrootd: open %s: %w", path, err)
	}
	content, r, err := ParseOpenWhole(body)
	if err != nil {
		return nil, nil, fmt.Errorf("xrootd: open %s: %w", path, err)
	}
	if r == nil {
		if int64(len(content)) > max {
			return nil, nil, fmt.Errorf("xrootd: open %s: %w: %d bytes of content, at most %d asked for", path, ErrMalformed, len(content), max)
		}
		return content, nil, nil
	}
	return nil, &ClientFile{c: at, fh: r.Handle, name: path, info: *r.Stat}, nil
}

// RemoveWithAttr removes the file at path, as Rm does, with ecstore's
// removal that says what it removed (AttrRemover): the value attribute
// attr had, or had false when the file had none. Servers other than
// ecstore's answer kXR_Unsupported and remove nothing.
func (c *Client) RemoveWithAttr(ctx context.Context, path, attr string) (value []byte, had bool, err error) {
	q := &QueryRequest{InfoType: QueryOpaqueFile, Args: []byte(path + "?" + RemoveAttrArg + "=" + url.QueryEscape(attr))}
	body, err := c.collect(ctx, q, MaxFattrValue+smallAnswer)
	if err != nil {
		return nil, false, fmt.Errorf("xrootd: rm %s: %w", path, err)
	}
	if value, had, err = ParseRemoveAttr(body); err != nil {
		return nil, false, fmt.Errorf("xrootd: rm %s: %w", path, err)
	}
	return value, had, nil
}

// ListAttr lists directory dir with the value of attribute attr of each
// entry, in one request (kXR_query kXR_Qopaquf, see AttrLister): the
// entries of ListAttrEach, collected. Servers other than ecstore's answer
// kXR_Unsupported.
func (c *Client) ListAttr(ctx context.Context, dir, attr string) ([]AttrEntry, error) {
	var out []AttrEntry
	err := c.ListAttrEach(ctx, dir, attr, func(part []AttrEntry) error {
		out = append(out, part...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// attrListQuery is the request of a listing with attributes.
func attrListQuery(dir, attr string) *QueryRequest {
	return &QueryRequest{InfoType: QueryOpaqueFile, Args: []byte(dir + "?" + AttrListArg + "=" + url.QueryEscape(attr))}
}

// ListAttrEach is ListAttr handing the entries to fn part by part, as the
// answer's frames arrive, so that a large directory's listing is never
// held whole: each part is parsed and handed over before the next is
// read. fn must not keep the slice, and must be quick: while it runs,
// the parts that follow queue up (a few), then the connection's other
// answers wait behind them; a part not taken within 5 s (partWait) fails
// the listing with ErrSlowCaller. An entry split between frames is
// completed by the next, and bounded (attrEntryMax); the whole answer is
// bounded by 4 × MaxResponse, so that one that never ends fails.
func (c *Client) ListAttrEach(ctx context.Context, dir, attr string, fn func([]AttrEntry) error) error {
	var carry []byte
	entryMax := c.answerMax(attrEntryMax)
	total, totalMax := int64(0), 4*int64(c.opts.MaxResponse)
	err := c.roundTrip(ctx, attrListQuery(dir, attr), func(f *ResponseFrame) error {
		if f.Status == StatusStatus {
			return fmt.Errorf("%w: unexpected kXR_status answer", ErrMalformed)
		}
		if total += int64(len(f.Body)); total > totalMax {
			return fmt.Errorf("%w: a listing of more than %d bytes", ErrFrameTooLarge, totalMax)
		}
		carry = append(carry, f.Body...)
		cut := len(carry)
		if f.Status != StatusOK {
			cut = attrListCut(carry)
		}
		if cut > 0 {
			ents, err := ParseAttrList(carry[:cut])
			if err != nil {
				return err
			}
			if len(ents) > 0 {
				if err := fn(ents); err != nil {
					return err
				}
			}
			carry = append(carry[:0], carry[cut:]...)
		}
		if len(carry) > entryMax {
			return fmt.Errorf("%w: an entry of more than %d bytes", ErrFrameTooLarge, entryMax)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("xrootd: list %s with attribute %s: %w", dir, attr, err)
	}
	return nil
}

// attrListCut returns the length of the whole entries (three lines each)
// at the start of b, a part of an attribute listing.
func attrListCut(b []byte) int {
	lines := bytes.Count(b, []byte{'\n'})
	whole := lines - lines%3
	cut := 0
	for range whole {
		cut += bytes.IndexByte(b[cut:], '\n') + 1
	}
	return cut
}

// Space asks for the space behind path (kXR_query kXR_Qspace).
func (c *Client) Space(ctx context.Context, path string) (Space, error) {
	body, err := c.collect(ctx, &QueryRequest{InfoType: QuerySpace, Args: []byte(path)}, smallAnswer)
	if err != nil {
		return Space{}, fmt.Errorf("xrootd: space %s: %w", path, err)
	}
	v, err := url.ParseQuery(cstring(body))
	if err != nil {
		return Space{}, fmt.Errorf("xrootd: space %s: %w: %v", path, ErrMalformed, err)
	}
	num := func(k string) int64 {
		n, _ := strconv.ParseInt(v.Get(k), 10, 64)
		return n
	}
	return Space{Total: num("oss.space"), Free: num("oss.free"), Used: num("oss.used"), LargestFree: num("oss.maxf")}, nil
}

// Locate asks where path is served (kXR_locate) and returns the raw
// answer, such as "Sw[::127.0.0.1]:1094".
func (c *Client) Locate(ctx context.Context, path string) (string, error) {
	body, err := c.collect(ctx, &LocateRequest{Path: path}, locateAnswer)
	if err != nil {
		return "", fmt.Errorf("xrootd: locate %s: %w", path, err)
	}
	return cstring(body), nil
}

// Open opens the file at path (which may carry CGI) with the given
// kXR_open flags; kXR_retstat is always added so that OpenInfo is set.
// A file opened where a redirect led is used there (ClientFile.Addr).
// Use OpenRead to read, OpenNew|OpenMkpath to create a new file,
// OpenDelete to create or replace, OpenUpdate to modify.
func (c *Client) Open(ctx context.Context, path string, flags OpenFlags, perm fs.FileMode) (*ClientFile, error) {
	at, body, err := c.collectAt(ctx, &OpenRequest{Mode: uint16(perm.Perm()), Options: flags | OpenRetStat, Path: path}, smallAnswer)
	if err != nil {
		return nil, fmt.Errorf("xrootd: open %s: %w", path, err)
	}
	r, err := ParseOpenResponse(body)
	if err != nil {
		return nil, fmt.Errorf("xrootd: open %s: %w", path, err)
	}
	f := &ClientFile{c: at, fh: r.Handle, name: path}
	if r.Stat != nil {
		f.info = *r.Stat
	}
	return f, nil
}
