package webdav

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ecstore/ecstore/internal/netfence"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/tlsfiles"
	"github.com/ecstore/ecstore/internal/watchdog"
)

// Third-party copy (WLCG HTTP-TPC), which FTS and davix-cp use to move
// files between storage systems without passing the bytes through the
// client:
//
//   - pull: COPY to the destination object here, with "Source: URL" of
//     the file on another server. The gateway GETs it and stores it.
//   - push: COPY of an object here, with "Destination: URL" on another
//     server. The gateway PUTs it there.
//
// A request header "TransferHeaderName: value" is sent to the other
// server as "Name: value" (its credentials, typically "Authorization:
// Bearer ..."). A "Credential" header other than "none" asks for a
// delegated credential, which is not offered (400).
//
// Once the transfer starts the answer is 202 Accepted with a text body:
// a performance marker every markerEvery while bytes move,
//
//	Perf Marker
//	Timestamp: 1767225600
//	Stripe Index: 0
//	Stripe Bytes Transferred: 4194304
//	Total Stripe Count: 1
//	End
//
// and a last line "success: Created", or "failure: REASON" (the status
// has been sent by then). A pulled object appears only when it was
// received whole and, when the source sent a Digest (it is asked for
// adler32), matches it; with "RequireChecksumVerification: true" a
// source that sends none is refused. A pulled object keeps the source's
// Content-Type, as a PUT does (XRootD's HTTP TPC keeps none: its files
// have no media type). A push sends the object's adler32 as Digest and its
// Content-Type, unless the client sent TransferHeaderDigest or
// TransferHeaderContent-Type.

// markerEvery is the period of performance markers; tpcIdle ends a
// transfer whose bytes stopped moving (the other server hangs) for that
// long.
const (
	markerEvery = 5 * time.Second
	tpcIdle     = 2 * time.Minute
)

// tpcClient makes the gateway's requests to other servers.
type tpcClient interface {
	Do(*http.Request) (*http.Response, error)
}

// defaultTPCClient trusts the authorities a grid host trusts. A transfer
// has no overall deadline (files are large); connecting, the TLS
// handshake and the other server's first answer are bounded. It connects
// through fence: never to a storage node or a link-local address, even
// when a redirect points there.
func defaultTPCClient(fence *netfence.Fence) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSHandshakeTimeout = 30 * time.Second
	tr.ResponseHeaderTimeout = 2 * time.Minute
	tr.DialContext = fence.DialContext
	tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		cfg, err := tlsfiles.ClientConfig()
		if err != nil {
			return nil, err
		}
		host, _, _ := net.SplitHostPort(addr)
		cfg = cfg.Clone()
		cfg.ServerName = host
		conn, err := fence.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		return tc, nil
	}
	return &http.Client{Transport: tr, CheckRedirect: func(r *http.Request, via []*http.Request) error {
		if via[0].Method != http.MethodGet {
			return http.ErrUseLastResponse // a push's PUT is not followed (it would become a GET)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}}
}

// tpcURL parses a third-party copy's Source or Destination.
func tpcURL(header, v string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(v))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errorf(http.StatusBadRequest, "%s %q: want an http or https URL", header, v)
	}
	return u, nil
}

// safeURL is u for messages and logs: without user information and
// query, which may carry credentials (?authz=...).
func safeURL(u *url.URL) string {
	v := *u
	v.User, v.RawQuery, v.Fragment = nil, "", ""
	return v.String()
}

// withSafeURL returns err, a transfer's error, with the URL that an
// *url.Error from the HTTP client carries (the one asked for, or a
// redirect's) made safe as safeURL does: the error is logged and
// answered.
func withSafeURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil {
			ue.URL = safeURL(u)
		} else {
			ue.URL = "(unparsable URL)"
		}
	}
	return err
}

// isRemoteDestination reports whether a COPY's Destination names another
// server (a push), rather than a path here.
func isRemoteDestination(r *http.Request) bool {
	u, err := url.Parse(strings.TrimSpace(r.Header.Get("Destination")))
	if err != nil || u.Host == "" {
		return false
	}
	fwd := r.Header.Get("X-Forwarded-Host")
	return !strings.EqualFold(u.Host, r.Host) && (fwd == "" || !strings.EqualFold(u.Host, fwd))
}

// transferHeaders returns the headers to send to the other server.
func transferHeaders(r *http.Request) http.Header {
	out := http.Header{}
	for name, vs := range r.Header {
		if rest, ok := strings.CutPrefix(name, "Transferheader"); ok && rest != "" {
			for _, v := range vs {
				out.Add(rest, v)
			}
		}
	}
	return out
}

// checkTPC refuses what a third-party copy does not offer.
func checkTPC(r *http.Request) error {
	if c := strings.TrimSpace(r.Header.Get("Credential")); c != "" && !strings.EqualFold(c, "none") {
		return errorf(http.StatusBadRequest, "Credential %q: credential delegation is not offered; pass the other server's credentials as TransferHeaderAuthorization", c)
	}
	return nil
}

// tpcPull serves a COPY with a Source header: the object at the
// request's path is fetched from the source.
func (h *handler) tpcPull(req *request) error {
	r := req.r
	if err := checkTPC(r); err != nil {
		return err
	}
	src, err := tpcURL("Source", r.Header.Get("Source"))
	if err != nil {
		return err
	}
	if req.slash || req.path == "/" {
		return errorf(http.StatusMethodNotAllowed, "COPY into a collection URL")
	}
	info, err := h.store.Stat(req.ctx, req.path)
	switch {
	case err == nil && info.IsDir:
		return errorf(http.StatusMethodNotAllowed, "%s is a collection", req.path)
	case err == nil && strings.EqualFold(strings.TrimSpace(r.Header.Get("Overwrite")), "F"):
		return errorf(http.StatusPreconditionFailed, "%s exists and Overwrite is F", req.path)
	case err != nil && !errors.Is(err, object.ErrNotExist) && !errors.Is(err, object.ErrUnrecoverable):
		return err
	}
	if err := h.noObjectAbove(req, req.path); err != nil {
		return err
	}
	ctx, cancel := watchdog.WithIdleTimeout(req.ctx, tpcIdle)
	defer cancel()
	get, err := http.NewRequestWithContext(ctx, http.MethodGet, src.String(), nil)
	if err != nil {
		return wrapf(err, http.StatusBadRequest, "Source %q", safeURL(src))
	}
	get.Header = transferHeaders(r)
	if get.Header.Get("Want-Digest") == "" {
		get.Header.Set("Want-Digest", "adler32") // verified before the object appears
	}
	resp, err := h.tpc.Do(get)
	if err != nil {
		return wrapf(withSafeURL(err), http.StatusBadGateway, "GET %s", safeURL(src))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errorf(http.StatusBadGateway, "GET %s: the source answered %s", safeURL(src), resp.Status)
	}
	check, err := newDigestCheck(resp.Header.Get("Digest"))
	if err != nil {
		return wrapf(err, http.StatusBadGateway, "GET %s: a Digest that cannot be read", safeURL(src))
	}
	if check.sums == nil && strings.EqualFold(strings.TrimSpace(r.Header.Get("RequireChecksumVerification")), "true") {
		return errorf(http.StatusBadGateway, "GET %s: the source sent no adler32 or crc32c Digest, and RequireChecksumVerification is true", safeURL(src))
	}
	// The source's Content-Type is kept as a PUT's is; one that a PUT
	// would refuse is left out rather than fail the copy over it.
	meta, _ := contentTypeMeta(resp.Header.Get("Content-Type"))
	w, err := h.store.Create(req.ctx, req.path, &object.CreateOptions{User: meta, SizeHint: max(resp.ContentLength, 0),
		Exclusive: req.createOnly, Precondition: createOnlyAtCommit(req, req.path)})
	if err != nil {
		return createOnlyErr(req, err)
	}
	var moved atomic.Int64
	return h.streamTPC(req, &moved, func() error {
		n, err := w.ReadFrom(&bodyReader{r: &countingReader{ctx: ctx, r: resp.Body, n: &moved}, check: check})
		switch {
		case err != nil:
			_ = w.Abort()
			return fmt.Errorf("reading %s after %d bytes: %w", safeURL(src), n, err)
		case resp.ContentLength >= 0 && n != resp.ContentLength:
			_ = w.Abort()
			return fmt.Errorf("the source sent %d bytes of %d", n, resp.ContentLength)
		}
		if err := check.verify(); err != nil {
			_ = w.Abort()
			return fmt.Errorf("%s: %w", safeURL(src), err)
		}
		if err := w.Close(); err != nil {
			return fmt.Errorf("storing %s: %w", req.path, err)
		}
		if h.opts.Hooks.Bytes != nil {
			h.opts.Hooks.Bytes("write", int(n))
		}
		return nil
	})
}

// tpcPush serves a COPY whose Destination is on another server: the
// object at the request's path is sent there with PUT.
func (h *handler) tpcPush(req *request) error {
	r := req.r
	if err := checkTPC(r); err != nil {
		return err
	}
	dst, err := tpcURL("Destination", r.Header.Get("Destination"))
	if err != nil {
		return err
	}
	rd, err := h.store.Open(req.ctx, req.path)
	if err != nil {
		return err
	}
	defer rd.Close()
	var moved atomic.Int64
	ctx, cancel := watchdog.WithIdleTimeout(req.ctx, tpcIdle)
	defer cancel()
	// The object streams into the request body through a pipe; the
	// reader is closed (ending the stream) before the object is.
	pr, pw := io.Pipe()
	streamed := make(chan struct{})
	go func() {
		defer close(streamed)
		_, err := rd.WriteTo(ctx, pw)
		pw.CloseWithError(err)
	}()
	defer func() { pr.Close(); <-streamed }()
	body := &countingReader{ctx: ctx, r: pr, n: &moved}
	put, err := http.NewRequestWithContext(ctx, http.MethodPut, dst.String(), body)
	if err != nil {
		return wrapf(err, http.StatusBadRequest, "Destination %q", safeURL(dst))
	}
	put.ContentLength = rd.Size()
	put.Header = transferHeaders(r)
	if sum := rd.Info().Adler32; sum != "" && put.Header.Get("Digest") == "" {
		put.Header.Set("Digest", "adler32="+sum) // for the destination to verify
	}
	if ct := rd.Info().User[contentTypeKey]; ct != "" && put.Header.Get("Content-Type") == "" {
		put.Header.Set("Content-Type", ct)
	}
	put.GetBody = nil // not replayable: no redirect may resend it
	return h.streamTPC(req, &moved, func() error {
		resp, err := h.tpc.Do(put)
		if err != nil {
			return fmt.Errorf("PUT %s: %w", safeURL(dst), withSafeURL(err))
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode < 200 || resp.StatusCode >= 300 || resp.Request == nil || resp.Request.Method != http.MethodPut {
			// (A redirect a client followed would have turned the PUT
			// into a GET, whose 200 stores nothing.)
			return fmt.Errorf("PUT %s: the destination answered %s", safeURL(dst), resp.Status)
		}
		if h.opts.Hooks.Bytes != nil {
			h.opts.Hooks.Bytes("read", int(moved.Load()))
		}
		return nil
	})
}

// streamTPC answers 202 and sends performance markers while transfer
// runs, then its outcome.
func (h *handler) streamTPC(req *request, moved *atomic.Int64, transfer func() error) error {
	w := req.w
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusAccepted)
	flush := func() {
		if f, ok := w.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
	}
	flush()
	done := make(chan error, 1)
	go func() { done <- transfer() }()
	tick := time.NewTicker(h.markerEvery)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				h.opts.Logger.Warn("third-party copy failed", "obj", req.path, "err", err)
				fmt.Fprintf(w, "failure: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
				req.transferErr = err // for the request's metrics: its status was 202
			} else {
				fmt.Fprintf(w, "success: Created\n")
			}
			flush()
			return nil
		case now := <-tick.C:
			fmt.Fprintf(w, "Perf Marker\nTimestamp: %d\nStripe Index: 0\nStripe Bytes Transferred: %d\nTotal Stripe Count: 1\nEnd\n",
				now.Unix(), moved.Load())
			flush()
		}
	}
}

// countingReader counts the bytes read through it, each read progress
// for ctx's watchdog.
type countingReader struct {
	ctx context.Context
	r   io.Reader
	n   *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.n.Add(int64(n))
		watchdog.Progress(c.ctx)
	}
	return n, err
}
