package s3

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"flag"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/repair"
	"github.com/ecstore/ecstore/internal/testcluster"
)

var seedFlag = flag.Uint64("seed", 0, "random seed (0: from the clock); always logged")

// testRand returns a seeded generator and logs the seed.
func testRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed %d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x5eed))
}

const (
	testAK     = "AKTEST"
	testSecret = "test/secret+key"
)

// testGeometry keeps blocks small (2 × 4 KiB) so tests cross many.
var testGeometry = layout.Geometry{K: 2, M: 1, ChunkSize: 4096}

// testServer is the S3 handler over a 4-node test cluster, behind a real
// HTTP server.
type testServer struct {
	t      *testing.T
	c      *testcluster.Cluster
	h      *handler
	srv    *httptest.Server
	signer testSigner
}

func newTestServer(t *testing.T, mod ...func(*Options)) *testServer {
	t.Helper()
	return newTestServerOn(t, testcluster.New(t, 4, testGeometry), mod...)
}

// newTestServerOn serves cluster c.
func newTestServerOn(t *testing.T, c *testcluster.Cluster, mod ...func(*Options)) *testServer {
	t.Helper()
	// Every test leaves a clean cluster: no debris of aborted writes, no
	// damaged objects (runs after the server closed).
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
	opts := Options{Credentials: map[string]string{testAK: testSecret}, MinPartSize: 10 << 10}
	for _, m := range mod {
		m(&opts)
	}
	h := NewHandler(c.Store, opts).(*handler)
	h.keepAliveDelay = time.Hour
	t.Cleanup(h.background.Wait) // before the check above
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &testServer{t: t, c: c, h: h, srv: srv,
		signer: testSigner{ak: testAK, sk: testSecret, region: "us-east-1", now: time.Now}}
}

// testClient leaves Content-Encoding alone (objects may be stored gzip).
var testClient = &http.Client{Transport: &http.Transport{DisableCompression: true}}

// response is a finished request.
type response struct {
	*http.Response
	body []byte
}

// code is the S3 error code of an error response.
func (r *response) code() string {
	var e errorResponse
	_ = xml.Unmarshal(r.body, &e)
	return e.Code
}

func (ts *testServer) newRequest(method, path string, body []byte, hdr map[string]string) *http.Request {
	ts.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	r, err := http.NewRequest(method, ts.srv.URL+path, rd)
	if err != nil {
		ts.t.Fatal(err)
	}
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	return r
}

// do sends a request signed with the payload's SHA-256.
func (ts *testServer) do(method, path string, body []byte, hdr map[string]string) *response {
	ts.t.Helper()
	r := ts.newRequest(method, path, body, hdr)
	sum := sha256.Sum256(body)
	ts.signer.sign(r, hex.EncodeToString(sum[:]))
	return ts.send(r)
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

// fails sends a request and checks its error status and code.
func (ts *testServer) fails(status int, code, method, path string, body []byte, hdr map[string]string) *response {
	ts.t.Helper()
	r := ts.do(method, path, body, hdr)
	checkErr(ts.t, r, status, code)
	return r
}

func checkErr(t *testing.T, r *response, status int, code string) {
	t.Helper()
	if r.StatusCode != status || (code != "" && r.Request.Method != http.MethodHead && r.code() != code) {
		t.Fatalf("%s %s: got %d %q, want %d %s: %s", r.Request.Method, r.Request.URL.Path, r.StatusCode, r.code(), status, code, r.body)
	}
	if code != "" && r.Request.Method != http.MethodHead && status != http.StatusNotModified {
		var e errorResponse
		if err := xml.Unmarshal(r.body, &e); err != nil || e.RequestID == "" || e.Message == "" || e.Resource == "" {
			t.Fatalf("error document %s: %v", r.body, err)
		}
		if r.Header.Get("Content-Type") != "application/xml" {
			t.Fatalf("error content type %q", r.Header.Get("Content-Type"))
		}
	}
}

// get returns the content of bucket/key through the store, or nil.
func (ts *testServer) get(path string) []byte {
	b, err := ts.c.Get(path)
	if err != nil {
		return nil
	}
	return b
}

func decodeXML(t *testing.T, r *response, v any) {
	t.Helper()
	if err := xml.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

func TestBuckets(t *testing.T) {
	ts := newTestServer(t)
	var lb listAllMyBucketsResult
	decodeXML(t, ts.must(200, "GET", "/", nil, nil), &lb)
	if len(lb.Buckets) != 0 {
		t.Fatalf("buckets %+v", lb.Buckets)
	}
	ts.must(200, "PUT", "/bkt", nil, nil)
	ts.must(200, "PUT", "/other.bucket-1", []byte(`<CreateBucketConfiguration><LocationConstraint>us-east-1</LocationConstraint></CreateBucketConfiguration>`), nil)
	ts.fails(409, "BucketAlreadyOwnedByYou", "PUT", "/bkt", nil, nil)
	for _, bad := range []string{"ab", "Upper", "-lead", "trail-", "a..b", "192.168.0.1", strings.Repeat("a", 64), ".hidden"} {
		ts.fails(400, "InvalidBucketName", "PUT", "/"+bad, nil, nil)
	}
	ts.must(200, "HEAD", "/bkt", nil, nil)
	ts.fails(404, "NoSuchBucket", "HEAD", "/nope", nil, nil)
	ts.fails(404, "NoSuchBucket", "GET", "/nope", nil, nil)
	ts.fails(404, "NoSuchBucket", "GET", "/nope/key", nil, nil)
	ts.fails(404, "NoSuchBucket", "PUT", "/nope/key", []byte("x"), nil)
	ts.fails(404, "NoSuchBucket", "DELETE", "/nope/key", nil, nil)
	ts.fails(404, "NoSuchBucket", "DELETE", "/nope", nil, nil)
	// A top-level object is no bucket, and hidden directories are not listed.
	ts.c.Put(t, "/toplevel", []byte("x"))
	if err := ts.c.Store.Mkdir(context.Background(), "/.hidden"); err != nil {
		t.Fatal(err)
	}
	ts.fails(409, "BucketAlreadyExists", "PUT", "/toplevel", nil, nil)
	ts.fails(404, "NoSuchBucket", "GET", "/toplevel", nil, nil)
	decodeXML(t, ts.must(200, "GET", "/", nil, nil), &lb)
	if len(lb.Buckets) != 2 || lb.Buckets[0].Name != "bkt" || lb.Buckets[1].Name != "other.bucket-1" {
		t.Fatalf("buckets %+v", lb.Buckets)
	}
	if _, err := time.Parse(time.RFC3339, lb.Buckets[0].CreationDate); err != nil {
		t.Fatalf("creation date %q", lb.Buckets[0].CreationDate)
	}
	var loc locationConstraint
	decodeXML(t, ts.must(200, "GET", "/bkt?location", nil, nil), &loc)
	if loc.Region != "" {
		t.Fatalf("location %q", loc.Region)
	}
	ts.must(200, "GET", "/bkt?versioning", nil, nil)
	ts.must(200, "GET", "/bkt?acl", nil, nil)
	ts.fails(501, "NotImplemented", "GET", "/bkt?policy", nil, nil)
	ts.fails(501, "NotImplemented", "PUT", "/bkt?acl", nil, nil)
	ts.fails(405, "MethodNotAllowed", "POST", "/bkt", nil, nil)
	ts.fails(405, "MethodNotAllowed", "DELETE", "/", nil, nil)

	ts.must(200, "PUT", "/bkt/dir/obj", []byte("data"), nil)
	ts.fails(409, "BucketNotEmpty", "DELETE", "/bkt", nil, nil)
	ts.must(204, "DELETE", "/bkt/dir/obj", nil, nil)
	ts.must(204, "DELETE", "/bkt", nil, nil)
	ts.fails(404, "NoSuchBucket", "HEAD", "/bkt", nil, nil)
	ts.must(204, "DELETE", "/other.bucket-1", nil, nil)
}

func TestVirtualHost(t *testing.T) {
	ts := newTestServer(t, func(o *Options) { o.Domain = "s3.example.test" })
	ts.must(200, "PUT", "/vbkt", nil, nil)
	send := func(method, host, path string, body []byte) *response {
		r := ts.newRequest(method, path, body, nil)
		r.Host = host
		sum := sha256.Sum256(body)
		ts.signer.sign(r, hex.EncodeToString(sum[:]))
		return ts.send(r)
	}
	if r := send("PUT", "vbkt.s3.example.test:1234", "/a/key", []byte("hello")); r.StatusCode != 200 {
		t.Fatalf("virtual-host PUT: %d %s", r.StatusCode, r.body)
	}
	if got := ts.get("/vbkt/a/key"); string(got) != "hello" {
		t.Fatalf("stored %q", got)
	}
	if r := send("GET", "vbkt.s3.example.test", "/a/key", nil); r.StatusCode != 200 || string(r.body) != "hello" {
		t.Fatalf("virtual-host GET: %d %s", r.StatusCode, r.body)
	}
	if r := send("GET", "vbkt.s3.example.test", "/?list-type=2", nil); r.StatusCode != 200 || !bytes.Contains(r.body, []byte("<Key>a/key</Key>")) {
		t.Fatalf("virtual-host list: %d %s", r.StatusCode, r.body)
	}
	// The bare domain is path-style.
	if r := send("GET", "s3.example.test", "/vbkt/a/key", nil); r.StatusCode != 200 || string(r.body) != "hello" {
		t.Fatalf("path-style on the domain: %d %s", r.StatusCode, r.body)
	}
}

func TestAuthFailures(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	ts.must(200, "PUT", "/bkt/k", []byte("original"), nil)
	wrong := ts.signer
	wrong.sk = "not the secret"
	for _, c := range []struct {
		name   string
		signer testSigner
		status int
		code   string
	}{
		{"wrong secret", wrong, 403, "SignatureDoesNotMatch"},
		{"unknown key", testSigner{ak: "nobody", sk: testSecret, region: "us-east-1", now: time.Now}, 403, "InvalidAccessKeyId"},
		{"skewed clock", testSigner{ak: testAK, sk: testSecret, region: "us-east-1", now: func() time.Time { return time.Now().Add(-16 * time.Minute) }}, 403, "RequestTimeTooSkewed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, m := range []struct {
				method, path string
				body         []byte
			}{{"PUT", "/bkt/k", []byte("changed")}, {"DELETE", "/bkt/k", nil}, {"PUT", "/bkt2", nil}, {"GET", "/bkt/k", nil}} {
				r := ts.newRequest(m.method, m.path, m.body, nil)
				sum := sha256.Sum256(m.body)
				c.signer.sign(r, hex.EncodeToString(sum[:]))
				checkErr(t, ts.send(r), c.status, c.code)
			}
			if got := ts.get("/bkt/k"); string(got) != "original" {
				t.Fatalf("object changed to %q", got)
			}
			ts.fails(404, "NoSuchBucket", "HEAD", "/bkt2", nil, nil)
		})
	}
	// Unsigned requests are refused.
	resp, err := http.Get(ts.srv.URL + "/bkt/k")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	checkErr(t, &response{Response: resp, body: b}, 403, "AccessDenied")
}

func TestPresigned(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	put := ts.signer.presign(ts.newRequest("PUT", "/bkt/pre sig+ned", nil, nil), time.Hour)
	req, _ := http.NewRequest("PUT", put, strings.NewReader("presigned body"))
	if r := ts.send(req); r.StatusCode != 200 {
		t.Fatalf("presigned PUT: %d %s", r.StatusCode, r.body)
	}
	get := ts.signer.presign(ts.newRequest("GET", "/bkt/pre sig+ned", nil, nil), time.Hour)
	req, _ = http.NewRequest("GET", get, nil)
	if r := ts.send(req); r.StatusCode != 200 || string(r.body) != "presigned body" {
		t.Fatalf("presigned GET: %d %s", r.StatusCode, r.body)
	}
	// Expired, and tampered.
	old := ts.signer
	old.now = func() time.Time { return time.Now().Add(-2 * time.Hour) }
	req, _ = http.NewRequest("GET", old.presign(ts.newRequest("GET", "/bkt/pre sig+ned", nil, nil), time.Hour), nil)
	checkErr(t, ts.send(req), 403, "AccessDenied")
	req, _ = http.NewRequest("GET", strings.Replace(get, "pre%20sig", "pre%20sog", 1), nil)
	checkErr(t, ts.send(req), 403, "SignatureDoesNotMatch")
}

// A zero-length request with "Expect: 100-continue" gets an interim 100
// before its final response (botocore 1.29 misreads the connection's next
// response otherwise; found by TestInteropBoto3).
func TestExpectContinueEmptyBody(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	r := ts.newRequest("PUT", "/bkt/empty", nil, map[string]string{"Expect": "100-continue", "Content-Length": "0"})
	ts.signer.sign(r, emptySHA256)
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := r.Write(conn); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	for _, want := range []int{100, 200} {
		resp, err := http.ReadResponse(br, r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("status %d, want %d", resp.StatusCode, want)
		}
	}
}
