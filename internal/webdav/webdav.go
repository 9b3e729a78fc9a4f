// Package webdav is ecstore's plain HTTP and WebDAV frontend: an
// http.Handler that serves an object.Store's namespace to curl, davix,
// browsers and WebDAV clients. The URL path is the object path (DESIGN.md
// section 2): http://gateway/atlas/run1.root is the object
// /atlas/run1.root, which root:// and S3 (bucket atlas, key run1.root)
// serve too.
//
// Scope: GET and HEAD with one byte range (RFC 9110 section 14) and the
// conditional headers (If-Match, If-None-Match, If-Modified-Since,
// If-Unmodified-Since, If-Range); instance digests (RFC 3230 Want-Digest
// and Digest, algorithms adler32 and crc32c) answered from the objects'
// stored whole-object checksums without reading data; PUT streamed into
// an object.Writer (with an optional RFC 3230 Digest header checked before
// the object is committed); DELETE of objects and empty collections; and
// the WebDAV class 1 methods of RFC 4918 that file clients use: MKCOL,
// MOVE, COPY of objects, and PROPFIND with Depth 0 and 1. Authentication
// (auth.go): HTTP Basic with an access key id and secret, or a bearer
// token; anonymous reads, and anonymous writes on loopback connections,
// only when configured.
//
// Non-goals: locking (LOCK and UNLOCK; the server is DAV class 1),
// PROPPATCH and dead properties, several byte ranges in one request (the
// whole object is sent, as RFC 9110 allows), partial PUT (Content-Range
// is refused with 400), recursive DELETE and COPY of collections,
// PROPFIND with Depth: infinity (403, as most servers answer), and TLS
// (put a TLS-terminating proxy in front: Basic credentials and tokens
// travel in clear otherwise).
//
// Durability: a PUT, COPY or MOVE is answered (201 or 204) only after the
// engine committed it: for PUT and COPY, Writer.Close returned with the
// write quorum of archives durable. A PUT whose body is short, breaks off
// or does not match its Digest is aborted and leaves nothing visible.
// Memory per transfer is the engine's few blocks in either direction;
// objects are never buffered whole.
package webdav

import (
	"context"
	"errors"
	"fmt"
	"github.com/ecstore/ecstore/internal/httpmeter"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ecstore/ecstore/internal/access"
	"github.com/ecstore/ecstore/internal/gateway"
	"github.com/ecstore/ecstore/internal/jwtauth"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/object"
)

// Options configure the HTTP frontend. Zero values take the documented
// defaults; with no credentials and no anonymous access, every request
// is refused.
type Options struct {
	// Keys maps access key ids to their secrets: HTTP Basic
	// authentication with an id and its secret may read and write.
	Keys map[string]string
	// KeyGrants limits access keys to storage scopes (scopes.go); a key
	// without one may do everything.
	KeyGrants map[string]*jwtauth.Grant
	// Tokens are the bearer tokens ("Authorization: Bearer TOKEN") that
	// may read and write.
	Tokens []string
	// AnonymousRead lets requests without credentials use GET, HEAD and
	// PROPFIND. (OPTIONS, which tells nothing about objects, never needs
	// credentials.)
	AnonymousRead bool
	// AnonymousWrite lets requests without credentials write too, but
	// only on connections whose local address is a loopback address: the
	// handler checks every request, so a listener reachable from other
	// hosts never takes anonymous writes from them.
	AnonymousWrite bool
	// Access, when set, replaces Keys, KeyGrants, Tokens, JWT and
	// AnonymousRead with a set that may be reloaded while the handler
	// serves.
	Access *access.Live
	// JWT, when set, takes bearer tokens that are JSON Web Tokens of its
	// issuers, each held to its storage scopes (see scopes.go).
	JWT *jwtauth.Checker
	// TPCClient makes the requests of third-party copies (tpc.go) to
	// other servers. Default: an HTTP client that trusts the system's
	// authorities and X509_CERT_DIR's.
	TPCClient *http.Client
	// markerEvery overrides the period of third-party copies'
	// performance markers (tests).
	markerEvery time.Duration
	// Hooks observe every request (op "http_get", "http_put", ...; an
	// error for any status of 400 or more) and the object bytes moved.
	Hooks gateway.Hooks
	// Logger receives one record per failed request: Error for server
	// faults (5xx), Debug otherwise. Default: discard.
	Logger *slog.Logger
}

// handler serves HTTP and WebDAV requests over a store.
type handler struct {
	store  *object.Store
	opts   Options
	access *access.Live
	auth   atomic.Pointer[builtAuth] // of the current access set
	// tpc and markerEvery serve third-party copies (tpc.go).
	tpc         tpcClient
	markerEvery time.Duration
}

// NewHandler returns an http.Handler serving store over HTTP and WebDAV.
// It is safe for concurrent use and keeps no per-object state; each
// request's context governs its store operations, so a client that goes
// away aborts its upload.
func NewHandler(store *object.Store, opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	h := &handler{store: store, opts: opts, access: opts.Access, markerEvery: markerEvery}
	if h.access == nil {
		h.access = access.NewLive(&access.Set{Keys: opts.Keys, Grants: opts.KeyGrants, Tokens: opts.Tokens, JWT: opts.JWT, AnonymousRead: opts.AnonymousRead})
	}
	if opts.markerEvery > 0 {
		h.markerEvery = opts.markerEvery
	}
	if opts.TPCClient != nil {
		h.tpc = opts.TPCClient
	} else {
		h.tpc = defaultTPCClient(gateway.NodeFence(store))
	}
	return h
}

// allowed is the Allow header: every method this frontend implements.
const allowed = "OPTIONS, GET, HEAD, PUT, DELETE, MKCOL, MOVE, COPY, PROPFIND"

// writeMethods are the methods that change the namespace.
var writeMethods = map[string]bool{http.MethodPut: true, http.MethodDelete: true, "MKCOL": true, "MOVE": true, "COPY": true}

// readMethods are the methods that only read.
var readMethods = map[string]bool{http.MethodGet: true, http.MethodHead: true, "PROPFIND": true, http.MethodOptions: true}

// request is one request being served.
type request struct {
	w    *httpmeter.Writer
	r    *http.Request
	ctx  context.Context
	path string // the cleaned object path
	// slash reports a URL path that ended in '/' (a collection's URL).
	slash bool
	// grant is what the request's JSON Web Token (or scoped access key)
	// allows; nil: everything.
	grant *jwtauth.Grant
	// createOnly: the grant allows this write only as a creation, so its
	// object must not replace one that appears meanwhile.
	createOnly bool
	// transferErr is the failure of a third-party copy, reported in the
	// body of its 202 answer (streamTPC).
	transferErr error
}

func (h *handler) ServeHTTP(hw http.ResponseWriter, r *http.Request) {
	start := time.Now()
	w := &httpmeter.Writer{ResponseWriter: hw}
	w.Header().Set("Server", "ecstore")
	req := &request{w: w, r: r, ctx: r.Context()}
	var err error
	defer func() { h.record(req, start, err) }() // also when a broken stream panics
	err = h.serve(req)
	if err != nil {
		h.fail(req, err)
	}
}

// record reports the request to the hooks.
func (h *handler) record(req *request, start time.Time, err error) {
	hooks := &h.opts.Hooks
	status := req.w.Status
	if err != nil && status < 400 {
		status = statusOf(err) // a stream that broke after its status was sent
	}
	if hooks.Request != nil {
		var herr error
		if status >= 400 {
			herr = err
			if herr == nil {
				herr = fmt.Errorf("webdav: status %d", status)
			}
		}
		if herr == nil && req.transferErr != nil {
			herr = req.transferErr // a third-party copy that failed after its 202
		}
		hooks.Request(opName(req.r.Method), time.Since(start), herr)
	}
	if hooks.Bytes != nil && req.r.Method == http.MethodGet && req.w.Bytes > 0 && status < 300 {
		hooks.Bytes("read", int(req.w.Bytes))
	}
}

// opName is the metrics label of a method.
func opName(method string) string {
	if writeMethods[method] || readMethods[method] {
		return "http_" + strings.ToLower(method)
	}
	return "http_other"
}

func (h *handler) serve(req *request) error {
	r := req.r
	write := writeMethods[r.Method]
	if !write && !readMethods[r.Method] {
		req.w.Header().Set("Allow", allowed)
		return errorf(http.StatusMethodNotAllowed, "method %s is not supported (allowed: %s)", r.Method, allowed)
	}
	if r.Method == http.MethodOptions {
		return h.options(req) // reveals nothing about objects: no credentials needed
	}
	if err := h.authNow().check(req, write); err != nil {
		if statusOf(err) == http.StatusForbidden { // wrong credentials (401: none sent)
			h.opts.Hooks.AuthFailed("http", "credentials")
		}
		return err
	}
	var err error
	if req.path, req.slash, err = cleanPath(r.URL.Path); err != nil {
		return err
	}
	if req.grant != nil {
		if err := h.checkScopes(req); err != nil {
			if statusOf(err) == http.StatusForbidden {
				h.opts.Hooks.AuthFailed("http", "permission")
			}
			return err
		}
	}
	switch r.Method {
	case http.MethodGet:
		return h.get(req, false)
	case http.MethodHead:
		return h.get(req, true)
	case "PROPFIND":
		return h.propfind(req)
	case http.MethodPut:
		return h.put(req)
	case http.MethodDelete:
		return h.delete(req)
	case "MKCOL":
		return h.mkcol(req)
	case "MOVE":
		return h.moveOrCopy(req, false)
	case "COPY":
		switch {
		case r.Header.Get("Source") != "":
			return h.tpcPull(req)
		case isRemoteDestination(r):
			return h.tpcPush(req)
		}
		return h.moveOrCopy(req, true)
	}
	return errorf(http.StatusMethodNotAllowed, "method %s is not supported", r.Method)
}

// options answers OPTIONS: the WebDAV compliance class and the methods.
func (h *handler) options(req *request) error {
	hdr := req.w.Header()
	hdr.Set("DAV", "1")
	hdr.Set("Allow", allowed)
	hdr.Set("Accept-Ranges", "bytes")
	hdr.Set("MS-Author-Via", "DAV")
	hdr.Set("Content-Length", "0")
	req.w.WriteHeader(http.StatusOK)
	return nil
}

// httpError is an error with the HTTP status to answer.
type httpError struct {
	status int
	msg    string
	err    error // the cause, if any
}

func (e *httpError) Error() string {
	if e.err != nil {
		return fmt.Sprintf("webdav: %d %s: %v", e.status, e.msg, e.err)
	}
	return fmt.Sprintf("webdav: %d %s", e.status, e.msg)
}

func (e *httpError) Unwrap() error { return e.err }

func errorf(status int, format string, args ...any) *httpError {
	return &httpError{status: status, msg: fmt.Sprintf(format, args...)}
}

// wrapf is errorf with a cause.
func wrapf(err error, status int, format string, args ...any) *httpError {
	return &httpError{status: status, msg: fmt.Sprintf(format, args...), err: err}
}

// statusOf maps an error to the status to answer: httpErrors carry their
// own, engine errors map by kind.
func statusOf(err error) int {
	var he *httpError
	switch {
	case errors.As(err, &he):
		return he.status
	case errors.Is(err, object.ErrNotExist), errors.Is(err, node.ErrNotExist):
		return http.StatusNotFound
	case errors.Is(err, object.ErrIsDir), errors.Is(err, object.ErrNotDir), errors.Is(err, node.ErrNotDir),
		errors.Is(err, node.ErrIsDir), errors.Is(err, object.ErrNotEmpty), errors.Is(err, object.ErrExist):
		return http.StatusConflict
	case errors.Is(err, node.ErrPath), errors.Is(err, object.ErrMetadataTooLarge):
		return http.StatusBadRequest
	case errors.Is(err, object.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, node.ErrNoSpace):
		return http.StatusInsufficientStorage
	case errors.Is(err, object.ErrQuorum), errors.Is(err, object.ErrUnrecoverable):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// fail answers err. When the response has already started (a read that
// failed mid-stream), the connection is broken instead, so that the client
// cannot take a truncated body for a complete one.
func (h *handler) fail(req *request, err error) {
	status := statusOf(err)
	attrs := []any{"method", req.r.Method, "obj", req.r.URL.Path, "status", status, "remote", req.r.RemoteAddr, "err", err}
	gone := req.w.Status != 0 && req.ctx.Err() != nil // the client went away mid-stream
	if status >= 500 && !gone {
		h.opts.Logger.Error("http request failed", attrs...)
	} else {
		h.opts.Logger.Debug("http request refused", attrs...)
	}
	if req.w.Status != 0 {
		panic(http.ErrAbortHandler)
	}
	hdr := req.w.Header()
	for _, k := range []string{"Content-Length", "ETag", "Last-Modified", "Accept-Ranges", "Digest", "Content-Type", "Content-Disposition"} {
		hdr.Del(k)
	}
	if status != http.StatusRequestedRangeNotSatisfiable {
		hdr.Del("Content-Range")
	}
	msg := http.StatusText(status)
	var he *httpError
	if errors.As(err, &he) && he.msg != "" {
		msg = he.msg
	} else if status >= 500 || status == http.StatusConflict {
		msg += ": " + err.Error()
	}
	body := fmt.Sprintf("%d %s\n", status, msg)
	hdr.Set("Content-Type", "text/plain; charset=utf-8")
	hdr.Set("Content-Length", fmt.Sprint(len(body)))
	hdr.Set("X-Content-Type-Options", "nosniff")
	req.w.WriteHeader(status)
	if req.r.Method != http.MethodHead {
		_, _ = req.w.Write([]byte(body))
	}
}
