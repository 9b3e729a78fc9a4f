package webdav

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/fuzzhttp"
	"github.com/ecstore/ecstore/internal/repair"
	"github.com/ecstore/ecstore/internal/testcluster"
)

var fuzzMethods = []string{"GET", "HEAD", "PUT", "DELETE", "MKCOL", "MOVE", "COPY", "PROPFIND", "OPTIONS", "POST", "PROPPATCH", "LOCK"}

// FuzzHandler sends arbitrary requests (method, target, headers, body),
// authenticated with a bearer token unless authed is false, to the
// handler over a test cluster holding a directory and an object. Every
// answer must be a sane HTTP answer: no panic, no server error on a
// healthy cluster; and the cluster must be left clean (no debris of
// writes, nothing damaged).
func FuzzHandler(f *testing.F) {
	seeds := []struct {
		method uint8
		authed bool
		target string
		hdr    string
		body   string
	}{
		{0, true, "/d/o", "Range: bytes=2-5", ""},
		{0, true, "/d/o", "Range: bytes=-3\nWant-Digest: adler32;q=0.5, crc32c", ""},
		{1, false, "/d/o", "If-None-Match: *", ""},
		{2, true, "/d/p", "Content-Type: text/plain", "new object"},
		{2, true, "/d/", "", ""},
		{2, true, "/d/o/x", "", "under an object"},
		{2, true, "/d/big", "Content-Length: 99", "short"},
		{3, true, "/d/p", "", ""},
		{3, true, "/d", "", ""},
		{4, true, "/e/f", "", ""},
		{5, true, "/d/o", "Destination: http://example.com/d/q\nOverwrite: F", ""},
		{5, true, "/d/o", "Destination: /../../etc/passwd", ""},
		{6, true, "/d/o", "Destination: http://example.com/e/%2e%2e/o2\nOverwrite: T", ""},
		{6, true, "/d", "Destination: http://example.com/d/sub", ""},
		{7, true, "/d", "Depth: 1", `<?xml version="1.0"?><propfind xmlns="DAV:"><prop><getcontentlength/><checksums xmlns="http://www.dcache.org/2013/webdav"/></prop></propfind>`},
		{7, true, "/", "Depth: infinity", ""},
		{7, true, "/d/o", "Depth: 0", `<propfind xmlns="DAV:"><allprop/></propfind>`},
		{7, true, "/d", "Depth: 1", "<propfind><prop><x:y xmlns:x='&#0;'/></prop>"},
		{8, false, "/", "", ""},
		{9, true, "/d/o", "", "post"},
		{0, true, "/d/o?x=1&y", "Authorization: Basic !!!", ""},
		{0, false, "/%2e%2e/x", "Authorization: Bearer wrong", ""},
		{6, true, "/d/pulled", "Source: https://other.example.org/f\nTransferHeaderAuthorization: Bearer x", ""},
		{6, true, "/d/o", "Destination: https://other.example.org/f\nCredential: none", ""},
		{6, true, "/d/o", "Source: gsiftp://x/y", ""},
	}
	for _, s := range seeds {
		f.Add(s.method, s.authed, s.target, s.hdr, []byte(s.body))
	}
	c := testcluster.New(f, 4, testGeometry)
	// Third-party copies talk to this in-memory "other server" instead
	// of the network.
	h := NewHandler(c.Store, Options{Tokens: []string{testToken}, AnonymousRead: true, TPCClient: &http.Client{Transport: fakeRemote{}}})
	for _, setup := range []struct{ method, target, body string }{{"MKCOL", "/d", ""}, {"PUT", "/d/o", "0123456789"}} {
		r := httptest.NewRequest(setup.method, setup.target, strings.NewReader(setup.body))
		r.Header.Set("Authorization", "Bearer "+testToken)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code >= 300 {
			f.Fatalf("%s %s: %d %s", setup.method, setup.target, w.Code, w.Body.Bytes())
		}
	}
	f.Cleanup(func() {
		rep, err := repair.Check(context.Background(), c.Store, repair.CheckOptions{DebrisAge: time.Nanosecond})
		if err != nil || !rep.Clean() {
			f.Errorf("cluster not clean after the requests: %v; debris %+v", err, rep.Debris)
		}
	})
	f.Fuzz(func(t *testing.T, method uint8, authed bool, target, hdr string, body []byte) {
		r, ok := fuzzhttp.Request(fuzzMethods[int(method)%len(fuzzMethods)], target, hdr, body)
		if !ok {
			t.Skip("not a request a server would parse")
		}
		if authed && r.Header.Get("Authorization") == "" {
			r.Header.Set("Authorization", "Bearer "+testToken)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code < 100 || w.Code > 599 || w.Code >= 500 && w.Code != http.StatusNotImplemented {
			t.Fatalf("%s %s %v: status %d: %s", r.Method, target, r.Header, w.Code, w.Body.Bytes())
		}
	})
}

// fakeRemote answers a third-party copy's requests in memory: a small
// file for GET, 201 for PUT (after reading the body).
type fakeRemote struct{}

func (fakeRemote) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	resp := &http.Response{StatusCode: http.StatusCreated, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: r}
	if r.Method == http.MethodGet {
		resp.StatusCode, resp.ContentLength = http.StatusOK, 11
		resp.Body = io.NopCloser(strings.NewReader("from remote"))
	}
	return resp, nil
}
