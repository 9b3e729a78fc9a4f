package webdav

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Regression: a third-party copy dropped the file's Content-Type: a
// pulled object was served as application/octet-stream whatever the
// source said, and a push sent none. A pull keeps the source's
// Content-Type as a PUT would (one that a PUT would refuse, not UTF-8 or
// over 8 KiB, is left out rather than fail the copy); a push sends the
// object's unless the client set one with TransferHeaderContent-Type.
func TestThirdPartyCopyKeepsContentType(t *testing.T) {
	const typed = `application/x-root; note="<&>"`
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/typed":
			w.Header().Set("Content-Type", typed)
		case "/huge-type":
			w.Header().Set("Content-Type", "text/plain; x="+strings.Repeat("x", maxContentType))
		case "/latin1-type":
			w.Header().Set("Content-Type", "text/plain; name=\xe9")
		default:
			w.Header()["Content-Type"] = nil // none, and not sniffed
		}
		w.Write([]byte("<html>the bytes</html>"))
	}))
	defer src.Close()
	var (
		mu     sync.Mutex
		pushed = map[string]string{}
	)
	dst := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		pushed[r.URL.Path] = r.Header.Get("Content-Type")
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	defer dst.Close()

	ts := newTestServer(t)
	ts.must(http.StatusCreated, "MKCOL", "/tpc", nil, nil)
	for path, want := range map[string]string{
		"/typed":       typed,
		"/untyped":     "application/octet-stream",
		"/huge-type":   "application/octet-stream",
		"/latin1-type": "application/octet-stream",
	} {
		r := ts.must(http.StatusAccepted, "COPY", "/tpc"+path, nil, map[string]string{"Source": src.URL + path})
		if !strings.HasSuffix(string(r.body), "success: Created\n") {
			t.Fatalf("pull %s:\n%s", path, r.body)
		}
		if got := ts.must(http.StatusOK, "GET", "/tpc"+path, nil, nil).Header.Get("Content-Type"); got != want {
			t.Errorf("pulled %s served as %q, want %q", path, got, want)
		}
	}

	for _, tc := range []struct {
		obj, header, want string
	}{
		{"/tpc/typed", "", typed},
		{"/tpc/typed", "text/x-mine", "text/x-mine"},
		{"/tpc/untyped", "", ""},
	} {
		hdr := map[string]string{"Destination": dst.URL + "/in"}
		if tc.header != "" {
			hdr["TransferHeaderContent-Type"] = tc.header
		}
		r := ts.must(http.StatusAccepted, "COPY", tc.obj, nil, hdr)
		if !strings.HasSuffix(string(r.body), "success: Created\n") {
			t.Fatalf("push %s:\n%s", tc.obj, r.body)
		}
		mu.Lock()
		got := pushed["/in"]
		mu.Unlock()
		if got != tc.want {
			t.Errorf("push of %s (TransferHeaderContent-Type %q) sent Content-Type %q, want %q", tc.obj, tc.header, got, tc.want)
		}
	}
}
