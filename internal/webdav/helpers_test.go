package webdav

import (
	"bytes"
	"context"
	"flag"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/gateway"
	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/repair"
	"github.com/ecstore/ecstore/internal/testcluster"
)

var seedFlag = flag.Uint64("seed", 0, "random seed (0: from the clock); always logged")

// testRand returns a seeded generator and logs the seed.
func testRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed %d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x5eed))
}

const (
	testKey    = "AKTEST"
	testSecret = "test/secret+key"
	testToken  = "test-token-0123456789abcdef"
)

// testGeometry keeps blocks small (2 × 4 KiB) so that tests cross many.
var testGeometry = layout.Geometry{K: 2, M: 1, ChunkSize: 4096}

// testServer is the handler over a 4-node test cluster behind a real
// HTTP server on loopback.
type testServer struct {
	t     *testing.T
	c     *testcluster.Cluster
	store *object.Store
	srv   *httptest.Server
	// ops records the metrics hooks' calls.
	mu    sync.Mutex
	ops   []string // "op status"
	bytes map[string]int
}

func newTestServer(t *testing.T, mod ...func(*Options)) *testServer {
	t.Helper()
	c := testcluster.New(t, 4, testGeometry)
	return newTestServerOn(t, c, c.Store, mod...)
}

// newTestServerOn serves store (over the nodes of c). Every test leaves
// a clean cluster: no debris of aborted writes and no damaged objects
// (checked after the server closed).
func newTestServerOn(t *testing.T, c *testcluster.Cluster, store *object.Store, mod ...func(*Options)) *testServer {
	t.Helper()
	t.Cleanup(func() {
		rep, err := repair.Check(context.Background(), c.Store, repair.CheckOptions{DebrisAge: time.Nanosecond})
		if err != nil {
			t.Errorf("fsck: %v", err)
			return
		}
		if !rep.Clean() {
			for _, d := range rep.Debris {
				t.Errorf("fsck: debris %+v", d)
			}
			for _, o := range rep.Objects {
				t.Logf("fsck: %s %v", o.Path, o.Health)
			}
			t.Errorf("fsck: cluster not clean")
		}
	})
	ts := &testServer{t: t, c: c, store: store, bytes: map[string]int{}}
	opts := Options{
		Keys:   map[string]string{testKey: testSecret},
		Tokens: []string{testToken},
		Hooks: gateway.Hooks{
			Request: func(op string, _ time.Duration, err error) {
				status := "ok"
				if err != nil {
					status = "error"
				}
				ts.mu.Lock()
				ts.ops = append(ts.ops, op+" "+status)
				ts.mu.Unlock()
			},
			Bytes: func(dir string, n int) {
				ts.mu.Lock()
				ts.bytes[dir] += n
				ts.mu.Unlock()
			},
		},
	}
	for _, m := range mod {
		m(&opts)
	}
	ts.srv = httptest.NewServer(NewHandler(store, opts))
	t.Cleanup(ts.srv.Close)
	return ts
}

// response is a finished request.
type response struct {
	*http.Response
	body []byte
}

// testClient follows no redirects and leaves encodings alone.
var testClient = &http.Client{
	Transport:     &http.Transport{DisableCompression: true},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// req builds a request with the test token unless hdr sets
// Authorization ("" removes it).
func (ts *testServer) req(method, path string, body io.Reader, hdr map[string]string) *http.Request {
	ts.t.Helper()
	r, err := http.NewRequest(method, ts.srv.URL+path, body)
	if err != nil {
		ts.t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer "+testToken)
	for k, v := range hdr {
		if v == "" {
			r.Header.Del(k)
		} else {
			r.Header.Set(k, v)
		}
	}
	return r
}

// do sends a request (body may be nil).
func (ts *testServer) do(method, path string, body []byte, hdr map[string]string) *response {
	ts.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	return ts.send(ts.req(method, path, rd, hdr))
}

func (ts *testServer) send(r *http.Request) *response {
	ts.t.Helper()
	resp, err := testClient.Do(r)
	if err != nil {
		ts.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		ts.t.Fatal(err)
	}
	return &response{Response: resp, body: b}
}

// must sends a request and fails the test unless the status is want.
func (ts *testServer) must(want int, method, path string, body []byte, hdr map[string]string) *response {
	ts.t.Helper()
	r := ts.do(method, path, body, hdr)
	if r.StatusCode != want {
		ts.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.StatusCode, want, r.body)
	}
	return r
}

// get returns an object's content through the store, or nil.
func (ts *testServer) get(path string) []byte {
	ctx := context.Background()
	r, err := ts.store.Open(ctx, path)
	if err != nil {
		return nil
	}
	defer r.Close()
	var buf bytes.Buffer
	if _, err := r.WriteTo(ctx, &buf); err != nil {
		ts.t.Fatalf("read %s: %v", path, err)
	}
	return buf.Bytes()
}

// put stores an object through the store.
func (ts *testServer) put(path string, data []byte) {
	ts.t.Helper()
	w, err := ts.store.Create(context.Background(), path, nil)
	if err != nil {
		ts.t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		ts.t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		ts.t.Fatal(err)
	}
}

// exists reports whether path exists in the store.
func (ts *testServer) exists(path string) bool {
	_, err := ts.store.Stat(context.Background(), path)
	return err == nil
}

// opsRecorded returns the hooks' calls so far.
func (ts *testServer) opsRecorded() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]string(nil), ts.ops...)
}

func hasLine(lines []string, want string) bool {
	for _, l := range lines {
		if strings.TrimSpace(l) == want {
			return true
		}
	}
	return false
}
