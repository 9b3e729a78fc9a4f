package webdav

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/testcluster"
)

func TestPut(t *testing.T) {
	ts := newTestServer(t)
	rng := testRand(t)
	data := testcluster.Rand(rng, 3*8192+5)
	ts.must(http.StatusCreated, "PUT", "/new/dirs/obj", data, nil) // parents are created
	if !bytes.Equal(ts.get("/new/dirs/obj"), data) {
		t.Fatal("PUT content not stored")
	}
	data2 := testcluster.Rand(rng, 100)
	ts.must(http.StatusNoContent, "PUT", "/new/dirs/obj", data2, map[string]string{"Content-Type": "text/plain"})
	if !bytes.Equal(ts.get("/new/dirs/obj"), data2) {
		t.Fatal("replacing PUT not stored")
	}
	// The Content-Length is the engine's size hint: a small object is
	// stored with one data chunk per block (the small-object path).
	if info, err := ts.store.Stat(t.Context(), "/new/dirs/obj"); err != nil || info.Geometry.K != 1 {
		t.Errorf("a 100-byte PUT is stored as %v (%v), want K=1", info.Geometry, err)
	}
	if ct := ts.must(200, "HEAD", "/new/dirs/obj", nil, nil).Header.Get("Content-Type"); ct != "text/plain" {
		t.Errorf("Content-Type %q not kept", ct)
	}
	ts.must(http.StatusCreated, "PUT", "/empty", []byte{}, nil)
	if info, err := ts.store.Stat(t.Context(), "/empty"); err != nil || info.Size != 0 || info.IsDir {
		t.Fatalf("empty PUT: %+v %v", info, err)
	}
	if ts.bytes["write"] != len(data)+len(data2) {
		t.Errorf("bytes hook counted %d written bytes, want %d", ts.bytes["write"], len(data)+len(data2))
	}

	ts.must(http.StatusMethodNotAllowed, "PUT", "/new/dirs", data, nil)    // a collection
	ts.must(http.StatusMethodNotAllowed, "PUT", "/new/dirs/x/", data, nil) // a collection URL
	ts.must(http.StatusConflict, "PUT", "/new/dirs/obj/below", data, nil)  // parent is an object
	ts.must(http.StatusConflict, "PUT", "/new/dirs/obj/a/b/c", data, nil)  // ancestor is an object
	ts.must(http.StatusMethodNotAllowed, "PUT", "/", data, nil)            // the root
	ts.must(http.StatusBadRequest, "PUT", "/x", data, map[string]string{"Content-Range": "bytes 0-1/2"})
	ts.must(http.StatusPreconditionFailed, "PUT", "/new/dirs/obj", data, map[string]string{"If-None-Match": "*"})
	ts.must(http.StatusPreconditionFailed, "PUT", "/new/dirs/obj", data, map[string]string{"If-Match": `"nope"`})
	ts.must(http.StatusPreconditionFailed, "PUT", "/absent", data, map[string]string{"If-Match": "*"})
	ts.must(http.StatusCreated, "PUT", "/absent", data, map[string]string{"If-None-Match": "*"})
	if !bytes.Equal(ts.get("/new/dirs/obj"), data2) || ts.exists("/x") || ts.exists("/new/dirs/x") {
		t.Fatal("a refused PUT changed something")
	}
}

func TestPutDigest(t *testing.T) {
	ts := newTestServer(t)
	data := testcluster.Rand(testRand(t), 10000)
	ad := fmt.Sprintf("%08x", adler32.Checksum(data))
	crcB := binary.BigEndian.AppendUint32(nil, crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)))
	for _, d := range []string{"adler32=" + ad, "ADLER32=" + strings.ToUpper(ad), "crc32c=" + base64.StdEncoding.EncodeToString(crcB),
		fmt.Sprintf("crc32c=%x", crcB), "md5=whatever, adler32=" + ad} {
		ts.must(http.StatusCreated, "PUT", "/ok", data, map[string]string{"Digest": d})
		ts.must(http.StatusNoContent, "DELETE", "/ok", nil, nil)
	}
	ts.put("/keep", []byte("old"))
	for _, d := range []string{"adler32=00000000", "crc32c=AAAAAA==", "adler32=xyz"} {
		ts.must(http.StatusBadRequest, "PUT", "/keep", data, map[string]string{"Digest": d})
		ts.must(http.StatusBadRequest, "PUT", "/fresh", data, map[string]string{"Digest": d})
	}
	if string(ts.get("/keep")) != "old" || ts.exists("/fresh") {
		t.Fatal("a PUT with a wrong digest was stored")
	}
}

// A PUT is visible only once its whole body arrived: while the body
// streams nothing is at the path, and the object appears when it ends.
func TestPutVisibleOnlyWhenComplete(t *testing.T) {
	ts := newTestServer(t)
	data := testcluster.Rand(testRand(t), 200000)
	pr, pw := io.Pipe()
	r := ts.req("PUT", "/streamed", pr, nil)
	r.ContentLength = int64(len(data))
	done := make(chan *response, 1)
	go func() { done <- ts.send(r) }()
	if _, err := pw.Write(data[:150000]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if ts.exists("/streamed") {
		t.Fatal("object visible before its body ended")
	}
	if _, err := pw.Write(data[150000:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if resp := <-done; resp.StatusCode != http.StatusCreated {
		t.Fatalf("status %d: %s", resp.StatusCode, resp.body)
	}
	if !bytes.Equal(ts.get("/streamed"), data) {
		t.Fatal("streamed object differs")
	}
}

// A body shorter than its Content-Length, or a chunked body that breaks
// off, stores nothing (and leaves no debris: the cleanup runs fsck).
func TestPutBrokenBody(t *testing.T) {
	ts := newTestServer(t)
	ts.put("/old", []byte("previous version"))
	for _, tt := range []struct {
		name, path, head string
		body             string
	}{
		{"short fixed length", "/short", "Content-Length: 100000\r\n", strings.Repeat("x", 50000)},
		{"short replacing", "/old", "Content-Length: 100000\r\n", strings.Repeat("x", 50000)},
		{"chunked broken off", "/chunked", "Transfer-Encoding: chunked\r\n", "8000\r\n" + strings.Repeat("y", 0x8000) + "\r\n4000\r\nzz"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := len(ts.opsRecorded())
			c, err := net.Dial("tcp", ts.srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(c, "PUT %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n%s\r\n%s", tt.path, testToken, tt.head, tt.body)
			c.(*net.TCPConn).CloseWrite()
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode < 400 {
					t.Errorf("status %d for a broken body", resp.StatusCode)
				}
			}
			c.Close()
			// Wait until the handler has finished.
			for deadline := time.Now().Add(5 * time.Second); len(ts.opsRecorded()) == before; {
				if time.Now().After(deadline) {
					t.Fatal("the request did not finish")
				}
				time.Sleep(5 * time.Millisecond)
			}
			if tt.path == "/old" {
				if got := ts.get("/old"); string(got) != "previous version" {
					t.Fatalf("old object is now %d bytes", len(got))
				}
			} else if ts.exists(tt.path) {
				t.Fatalf("%s is visible after a broken PUT", tt.path)
			}
		})
	}
}

// The engine's failures map to their statuses: 503 when too few nodes
// take a write, 507 when the nodes are out of space; nothing is stored.
func TestPutEngineErrors(t *testing.T) {
	for _, tt := range []struct {
		name   string
		rule   func() *node.Rule
		status int
	}{
		{"nodes down", func() *node.Rule { return node.Inject(node.OpCreate|node.OpWrite, node.Fail(errors503)) }, http.StatusServiceUnavailable},
		{"no space", func() *node.Rule { return node.Inject(node.OpWrite, node.Fail(node.ErrNoSpace)) }, http.StatusInsufficientStorage},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := testcluster.New(t, 4, testGeometry)
			var nodes []node.Node
			for _, n := range c.Nodes {
				nodes = append(nodes, node.Wrap(n, tt.rule()))
			}
			store, err := object.New(nodes, object.Options{Geometry: testGeometry, MinFree: -1})
			if err != nil {
				t.Fatal(err)
			}
			ts := newTestServerOn(t, c, store)
			r := ts.do("PUT", "/obj", testcluster.Rand(testRand(t), 30000), nil)
			if r.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", r.StatusCode, tt.status, r.body)
			}
			if _, err := c.Store.Stat(context.Background(), "/obj"); err == nil {
				t.Fatal("object visible after a failed PUT")
			}
		})
	}
}

// errors503 stands for nodes that cannot be reached.
var errors503 = fmt.Errorf("node unreachable (test)")

// A Content-Type that is not UTF-8 is refused: the metadata entry holds
// JSON strings, which would have kept each such byte as U+FFFD, so that
// GET answered another type than was stored.
func TestPutContentTypeMustBeUTF8(t *testing.T) {
	ts := newTestServer(t)
	ts.must(http.StatusBadRequest, "PUT", "/obj", []byte("x"), map[string]string{"Content-Type": "text/\xff"})
	if ts.exists("/obj") {
		t.Fatal("stored")
	}
	ts.must(http.StatusCreated, "PUT", "/obj", []byte("x"), map[string]string{"Content-Type": "text/plain; name=café"})
	if ct := ts.must(200, "HEAD", "/obj", nil, nil).Header.Get("Content-Type"); ct != "text/plain; name=café" {
		t.Errorf("Content-Type %q", ct)
	}
}

// A Content-Type of more than 8 KiB (what S3 keeps of a PUT's headers
// at most) is refused: it was kept and sent back on every GET, HEAD and
// S3 GET of the object, in a header line longer than some clients read.
func TestPutContentTypeBounded(t *testing.T) {
	ts := newTestServer(t)
	long := "text/plain; x=" + strings.Repeat("y", 8<<10)
	ts.must(http.StatusBadRequest, "PUT", "/obj", []byte("x"), map[string]string{"Content-Type": long})
	if ts.exists("/obj") {
		t.Fatal("stored")
	}
	ts.must(http.StatusCreated, "PUT", "/obj", []byte("x"), map[string]string{"Content-Type": long[:8<<10]})
}
