package webdav

import (
	"bytes"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// syncBuf is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestTPCCredentialsInURLsAreNotLogged: a third-party copy's URL may
// carry a credential in its query ("?authz=" macaroons); a failed
// transfer's error is logged and answered without it. Regression (found
// by review): the *url.Error of the HTTP client, wrapped in the error,
// carried the whole URL into the gateway's log at Error level.
func TestTPCCredentialsInURLsAreNotLogged(t *testing.T) {
	const secret = "SECRETMACAROON0123456789"
	// A port that refuses connections.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()

	var logged syncBuf
	ts := newTestServer(t, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	ts.must(http.StatusCreated, "MKCOL", "/tpc", nil, nil)

	// Pull: the source does not answer.
	ts.do("COPY", "/tpc/pulled", nil, map[string]string{"Source": "http://" + dead + "/file?authz=" + secret})

	// Push: the destination does not answer.
	ts.put("/tpc/obj", []byte("some bytes"))
	ts.do("COPY", "/tpc/obj", nil, map[string]string{"Destination": "http://" + dead + "/dst?authz=" + secret})

	// And one whose destination breaks off mid-way.
	dst := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic(http.ErrAbortHandler) }))
	defer dst.Close()
	ts.do("COPY", "/tpc/obj", nil, map[string]string{"Destination": dst.URL + "/dst?authz=" + secret})

	if !strings.Contains(logged.String(), dead) {
		t.Fatalf("the failed transfers were not logged:\n%s", logged.String())
	}
	for _, l := range strings.Split(logged.String(), "\n") {
		if strings.Contains(l, secret) {
			t.Errorf("credential in the log: %s", l)
		}
	}
}
