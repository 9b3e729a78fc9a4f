package webdav

import (
	"bytes"
	"fmt"
	"hash/adler32"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestThirdPartyPull: a COPY with a Source header fetches the file from
// the other server (with the TransferHeader credentials), answers 202
// with performance markers while the bytes come, ends with "success:
// Created", and stores the object; a source that breaks off, or whose
// Digest does not match what it sent, leaves nothing and ends with
// "failure:"; errors found before the transfer keep their status.
func TestThirdPartyPull(t *testing.T) {
	data := bytes.Repeat([]byte("pulled across "), 50000)
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer source-token" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		body := data
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		switch {
		case r.URL.Path == "/corrupt":
			w.Header().Set("Digest", "adler32=00000001")
		case r.Header.Get("Want-Digest") == "adler32":
			w.Header().Set("Digest", fmt.Sprintf("adler32=%08x", adler32.Checksum(data)))
		}
		if r.URL.Path == "/broken" {
			body = data[:len(data)/2] // then the connection ends
		}
		for len(body) > 0 { // in pieces, slowly enough for markers
			n := min(len(body), 100000)
			w.Write(body[:n])
			w.(http.Flusher).Flush()
			body = body[n:]
			time.Sleep(15 * time.Millisecond)
		}
		if r.URL.Path == "/broken" {
			panic(http.ErrAbortHandler)
		}
	}))
	defer src.Close()
	ts := newTestServer(t, func(o *Options) { o.markerEvery = 5 * time.Millisecond })
	ts.must(http.StatusCreated, "MKCOL", "/tpc", nil, nil)
	hdr := map[string]string{"Source": src.URL + "/file", "TransferHeaderAuthorization": "Bearer source-token"}
	r := ts.must(http.StatusAccepted, "COPY", "/tpc/pulled", nil, hdr)
	body := string(r.body)
	if !strings.Contains(body, "Perf Marker\nTimestamp: ") || !strings.Contains(body, "Stripe Bytes Transferred: ") || !strings.HasSuffix(body, "success: Created\n") {
		t.Fatalf("pull answer:\n%s", body)
	}
	if got, err := ts.c.Get("/tpc/pulled"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("pulled object: %d bytes, %v", len(got), err)
	}

	hdr["Source"] = src.URL + "/broken"
	r = ts.must(http.StatusAccepted, "COPY", "/tpc/broken", nil, hdr)
	if !strings.Contains(string(r.body), "\nfailure: ") && !strings.HasPrefix(string(r.body), "failure: ") {
		t.Errorf("pull of a source that breaks off:\n%s", r.body)
	}
	if _, err := ts.c.Get("/tpc/broken"); err == nil {
		t.Error("a broken pull left an object")
	}

	hdr["Source"] = src.URL + "/corrupt"
	r = ts.must(http.StatusAccepted, "COPY", "/tpc/corrupt", nil, hdr)
	if !strings.Contains(string(r.body), "failure: ") || !strings.Contains(string(r.body), "does not match") {
		t.Errorf("pull of a source whose Digest does not match:\n%s", r.body)
	}
	if _, err := ts.c.Get("/tpc/corrupt"); err == nil {
		t.Error("a pull that failed its Digest left an object")
	}

	ts.must(http.StatusBadGateway, "COPY", "/tpc/denied", nil, map[string]string{"Source": src.URL + "/file"})
	ts.must(http.StatusBadGateway, "COPY", "/tpc/unverified", nil, map[string]string{"Source": src.URL + "/file",
		"TransferHeaderAuthorization": "Bearer source-token", "TransferHeaderWant-Digest": "md5", "RequireChecksumVerification": "true"})
	ts.must(http.StatusBadRequest, "COPY", "/tpc/x", nil, map[string]string{"Source": "ftp://elsewhere/x"})
	ts.must(http.StatusBadRequest, "COPY", "/tpc/x", nil, map[string]string{"Source": src.URL + "/file", "Credential": "gridsite"})
	ts.must(http.StatusPreconditionFailed, "COPY", "/tpc/pulled", nil, map[string]string{"Source": src.URL + "/file", "Overwrite": "F"})
}

// TestThirdPartyPush: a COPY whose Destination is on another server PUTs
// the object there with the TransferHeader credentials and its length,
// and reports success; a destination that refuses is reported as a
// failure.
func TestThirdPartyPush(t *testing.T) {
	data := bytes.Repeat([]byte("pushed across "), 40000)
	var (
		mu     sync.Mutex
		got    []byte
		auth   string
		digest string
	)
	dst := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/elsewhere", http.StatusFound) // a client following it would GET
			return
		}
		if r.Method == http.MethodGet && r.URL.Path == "/elsewhere" {
			w.WriteHeader(http.StatusOK)
			return
		}
		if r.Method != http.MethodPut || r.URL.Path == "/refuse" {
			http.Error(w, "refused", http.StatusForbidden)
			return
		}
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, auth, digest = b, r.Header.Get("Authorization"), r.Header.Get("Digest")
		mu.Unlock()
		if r.ContentLength != int64(len(data)) {
			http.Error(w, "length", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer dst.Close()
	ts := newTestServer(t)
	ts.c.Put(t, "/out/obj", data)
	r := ts.must(http.StatusAccepted, "COPY", "/out/obj", nil,
		map[string]string{"Destination": dst.URL + "/in/obj", "TransferHeaderAuthorization": "Bearer dest-token"})
	if !strings.HasSuffix(string(r.body), "success: Created\n") {
		t.Fatalf("push answer:\n%s", r.body)
	}
	mu.Lock()
	if !bytes.Equal(got, data) || auth != "Bearer dest-token" || digest != fmt.Sprintf("adler32=%08x", adler32.Checksum(data)) {
		t.Errorf("the destination got %d bytes with Authorization %q, Digest %q", len(got), auth, digest)
	}
	mu.Unlock()
	r = ts.must(http.StatusAccepted, "COPY", "/out/obj", nil, map[string]string{"Destination": dst.URL + "/refuse"})
	if !strings.Contains(string(r.body), "failure: ") || !strings.Contains(string(r.body), "403") {
		t.Errorf("push to a destination that refuses:\n%s", r.body)
	}
	r = ts.must(http.StatusAccepted, "COPY", "/out/obj", nil, map[string]string{"Destination": dst.URL + "/moved?authz=secret"})
	if !strings.Contains(string(r.body), "failure: ") || strings.Contains(string(r.body), "secret") {
		t.Errorf("push to a destination that redirects (its query holding a credential):\n%s", r.body)
	}
	ts.must(http.StatusNotFound, "COPY", "/out/missing", nil, map[string]string{"Destination": dst.URL + "/in/x"})
}

// Regression (found by review): a COPY's Source or Destination could be
// any address the gateway reaches, a cloud's metadata service or the
// storage nodes included, directly or by a redirect. The gateway's
// transfers never connect to link-local addresses or to its nodes.
func TestThirdPartyCopyIsFenced(t *testing.T) {
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	}))
	defer redirect.Close()
	var logged lockedBuffer
	ts := newTestServer(t, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logged, nil)) })
	ts.must(http.StatusCreated, "MKCOL", "/tpc", nil, nil)
	for _, source := range []string{"http://169.254.169.254/latest/meta-data/", "http://[fe80::1]:80/x", redirect.URL + "/x"} {
		before := strings.Count(logged.String(), "not reachable by client-directed transfers")
		r := ts.do("COPY", "/tpc/fenced", nil, map[string]string{"Source": source})
		if r.StatusCode/100 == 2 && !strings.Contains(string(r.body), "failure: ") {
			t.Errorf("pull from %s: %d %s", source, r.StatusCode, r.body)
		}
		if strings.Count(logged.String(), "not reachable by client-directed transfers") == before {
			t.Errorf("pull from %s: not refused by the fence; log:\n%s", source, logged.String())
		}
		if _, err := ts.c.Get("/tpc/fenced"); err == nil {
			t.Errorf("the pull from %s left an object", source)
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent use (a log).
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
