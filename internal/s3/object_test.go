package s3

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"github.com/ecstore/ecstore/internal/httpmeter"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/repair"
	"github.com/ecstore/ecstore/internal/testcluster"
)

func TestPutGetHead(t *testing.T) {
	ts := newTestServer(t)
	rng := testRand(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	for _, size := range []int{0, 1, 8191, 8192, 8193, 100_000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			data := testcluster.Rand(rng, int64(size))
			key := fmt.Sprintf("/bkt/dir/sub/obj-%d", size)
			r := ts.must(200, "PUT", key, data, map[string]string{
				"Content-Type": "text/plain", "X-Amz-Meta-Color": "blue", "x-amz-meta-Two-Words": "a b",
				"Cache-Control": "no-cache", "Content-MD5": b64(md5sum(data)),
			})
			etag := `"` + hex.EncodeToString(md5sum(data)) + `"`
			if r.Header.Get("ETag") != etag {
				t.Fatalf("PUT ETag %q, want %s", r.Header.Get("ETag"), etag)
			}
			if got := ts.get(key); !bytes.Equal(got, data) {
				t.Fatalf("stored %d bytes, want %d", len(got), len(data))
			}
			for _, m := range []string{"GET", "HEAD"} {
				r = ts.must(200, m, key, nil, nil)
				want := map[string]string{"ETag": etag, "Content-Type": "text/plain", "X-Amz-Meta-Color": "blue",
					"X-Amz-Meta-Two-Words": "a b", "Cache-Control": "no-cache", "Content-Length": strconv.Itoa(size),
					"Accept-Ranges": "bytes"}
				for k, v := range want {
					if r.Header.Get(k) != v {
						t.Errorf("%s %s: %s = %q, want %q", m, key, k, r.Header.Get(k), v)
					}
				}
				if _, err := http.ParseTime(r.Header.Get("Last-Modified")); err != nil {
					t.Errorf("Last-Modified %q", r.Header.Get("Last-Modified"))
				}
				if m == "GET" && !bytes.Equal(r.body, data) {
					t.Fatalf("GET body differs")
				}
			}
		})
	}
	// Presigned-style response overrides, and the object ACL.
	r := ts.must(200, "GET", "/bkt/dir/sub/obj-1?response-content-type=a/b&response-content-disposition=attachment", nil, nil)
	if r.Header.Get("Content-Type") != "a/b" || r.Header.Get("Content-Disposition") != "attachment" {
		t.Fatalf("overrides: %v", r.Header)
	}
	if r := ts.must(200, "GET", "/bkt/dir/sub/obj-1?acl", nil, nil); !bytes.Contains(r.body, []byte("FULL_CONTROL")) {
		t.Fatalf("acl: %s", r.body)
	}
	ts.fails(404, "NoSuchKey", "GET", "/bkt/missing?acl", nil, nil)
	ts.fails(404, "NoSuchKey", "GET", "/bkt/missing", nil, nil)
	ts.fails(404, "", "HEAD", "/bkt/missing", nil, nil)
	ts.fails(404, "NoSuchKey", "GET", "/bkt/dir", nil, nil) // a directory is no object
	// Overwrite replaces content and metadata.
	ts.must(200, "PUT", "/bkt/dir/sub/obj-1", []byte("new"), nil)
	r = ts.must(200, "GET", "/bkt/dir/sub/obj-1", nil, nil)
	if string(r.body) != "new" || r.Header.Get("Content-Type") != "binary/octet-stream" || r.Header.Get("X-Amz-Meta-Color") != "" {
		t.Fatalf("overwrite: %q %v", r.body, r.Header)
	}
	// Metadata over 2 KiB is refused.
	ts.fails(400, "MetadataTooLarge", "PUT", "/bkt/big-meta", []byte("x"), map[string]string{"X-Amz-Meta-Big": strings.Repeat("x", 2100)})
	// Objects written by other frontends get a non-MD5 ETag.
	ts.c.Put(t, "/bkt/native", []byte("from xrdcp"))
	r = ts.must(200, "GET", "/bkt/native", nil, nil)
	if e := r.Header.Get("ETag"); !strings.HasSuffix(e, `-1"`) || string(r.body) != "from xrdcp" {
		t.Fatalf("native object: ETag %q body %q", e, r.body)
	}
}

// A payload that fails any check leaves nothing visible: neither a new
// object nor a change to an existing one.
func TestRejectedPayloadLeavesNothing(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	old := bytes.Repeat([]byte("old"), 10000)
	ts.must(200, "PUT", "/bkt/existing", old, nil)
	data := bytes.Repeat([]byte("0123456789abcdef"), 5000) // 80000 bytes, many blocks
	sum := sha256.Sum256(data)
	for _, key := range []string{"/bkt/new", "/bkt/existing"} {
		for _, c := range []struct {
			name, code string
			send       func() *response
		}{
			{"bad content-md5", "BadDigest", func() *response {
				return ts.do("PUT", key, data, map[string]string{"Content-MD5": b64(md5sum(data[1:]))})
			}},
			{"invalid content-md5", "InvalidDigest", func() *response {
				return ts.do("PUT", key, data, map[string]string{"Content-MD5": "nope"})
			}},
			{"sha256 mismatch", "XAmzContentSHA256Mismatch", func() *response {
				r := ts.newRequest("PUT", key, append(bytes.Clone(data[:len(data)-1]), 'X'), nil)
				ts.signer.sign(r, hex.EncodeToString(sum[:]))
				return ts.send(r)
			}},
			{"bad chunk signature", "SignatureDoesNotMatch", func() *response {
				r := ts.newRequest("PUT", key, nil, map[string]string{"X-Amz-Decoded-Content-Length": strconv.Itoa(len(data)), "Content-Encoding": "aws-chunked"})
				seed := ts.signer.sign(r, streamingSigned)
				body := ts.signer.chunkedBody(data, 16384, seed, true, "")
				body = strings.Replace(body, "0123456789", "0123456780", 3) // inside the third chunk
				r.Body, r.ContentLength = io.NopCloser(strings.NewReader(body)), int64(len(body))
				return ts.send(r)
			}},
			{"bad trailing checksum", "BadDigest", func() *response {
				r := ts.newRequest("PUT", key, nil, map[string]string{"X-Amz-Decoded-Content-Length": strconv.Itoa(len(data)),
					"Content-Encoding": "aws-chunked", "X-Amz-Trailer": "x-amz-checksum-crc32"})
				ts.signer.sign(r, streamingUnsignedTrailer)
				body := ts.signer.chunkedBody(data, 16384, "", false, "x-amz-checksum-crc32:"+b64(crc32IEEE(data[1:])))
				r.Body, r.ContentLength = io.NopCloser(strings.NewReader(body)), int64(len(body))
				return ts.send(r)
			}},
			{"short decoded length", "InvalidRequest", func() *response {
				r := ts.newRequest("PUT", key, nil, map[string]string{"X-Amz-Decoded-Content-Length": strconv.Itoa(len(data) - 10), "Content-Encoding": "aws-chunked"})
				seed := ts.signer.sign(r, streamingSigned)
				body := ts.signer.chunkedBody(data, 16384, seed, true, "")
				r.Body, r.ContentLength = io.NopCloser(strings.NewReader(body)), int64(len(body))
				return ts.send(r)
			}},
			{"too large", "EntityTooLarge", func() *response {
				ts.h.opts.MaxObjectSize = 50000
				defer func() { ts.h.opts.MaxObjectSize = 5 << 40 }()
				r := ts.newRequest("PUT", key, nil, nil)
				ts.signer.sign(r, unsignedPayload)
				r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(data)), -1 // chunked: the size is found while streaming
				return ts.send(r)
			}},
		} {
			t.Run(key+"/"+c.name, func(t *testing.T) {
				r := c.send()
				checkErr(t, r, 400+btoi(c.code == "SignatureDoesNotMatch")*3, c.code)
				got := ts.get(key)
				if key == "/bkt/new" && got != nil {
					t.Fatalf("rejected upload visible: %d bytes", len(got))
				}
				if key == "/bkt/existing" && !bytes.Equal(got, old) {
					t.Fatalf("rejected upload changed the object")
				}
			})
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A client that breaks off an upload leaves nothing visible.
func TestInterruptedUpload(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	r := ts.newRequest("PUT", "/bkt/cut", nil, nil)
	ts.signer.sign(r, unsignedPayload)
	r.ContentLength = 1 << 20
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(make([]byte, 100_000)), errReader{}))
	if resp, err := http.DefaultClient.Do(r); err == nil {
		resp.Body.Close()
	}
	// The handler aborts the write when the body fails; wait for the
	// temporary archives to go.
	deadline := time.Now().Add(10 * time.Second)
	for {
		rep, err := repair.Check(t.Context(), ts.c.Store, repair.CheckOptions{DebrisAge: time.Nanosecond})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Debris) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("debris left: %+v", rep.Debris)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := ts.c.Store.Stat(t.Context(), "/bkt/cut"); err == nil {
		t.Fatal("interrupted upload visible")
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("client gone") }

func TestStreamingUploads(t *testing.T) {
	ts := newTestServer(t)
	rng := testRand(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	data := testcluster.Rand(rng, 70_000)
	for _, c := range []struct {
		name, mode, trailer string
		chunk               int
	}{
		{"signed", streamingSigned, "", 8192},
		{"signed, one chunk", streamingSigned, "", 1 << 20},
		{"signed+trailer", streamingSignedTrailer, "x-amz-checksum-crc32", 10000},
		{"unsigned+trailer", streamingUnsignedTrailer, "x-amz-checksum-crc32", 65536},
		{"unsigned, no trailer", streamingUnsignedTrailer, "", 65536},
	} {
		t.Run(c.name, func(t *testing.T) {
			hdr := map[string]string{"X-Amz-Decoded-Content-Length": strconv.Itoa(len(data)), "Content-Encoding": "aws-chunked,gzip",
				"X-Amz-Meta-M": "v"}
			trailer := ""
			if c.trailer != "" {
				hdr["X-Amz-Trailer"] = c.trailer
				trailer = c.trailer + ":" + b64(crc32IEEE(data))
			}
			r := ts.newRequest("PUT", "/bkt/stream", nil, hdr)
			seed := ts.signer.sign(r, c.mode)
			body := ts.signer.chunkedBody(data, c.chunk, seed, c.mode != streamingUnsignedTrailer, trailer)
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader(body)), int64(len(body))
			resp := ts.send(r)
			if resp.StatusCode != 200 || resp.Header.Get("ETag") != `"`+hex.EncodeToString(md5sum(data))+`"` {
				t.Fatalf("PUT: %d %s %v", resp.StatusCode, resp.body, resp.Header)
			}
			g := ts.must(200, "GET", "/bkt/stream", nil, nil)
			if !bytes.Equal(g.body, data) || g.Header.Get("Content-Encoding") != "gzip" || g.Header.Get("X-Amz-Meta-M") != "v" {
				t.Fatalf("GET: %d bytes, %v", len(g.body), g.Header)
			}
		})
	}
}

func TestRanges(t *testing.T) {
	ts := newTestServer(t)
	rng := testRand(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	const size = 50_000
	data := testcluster.Rand(rng, size)
	ts.must(200, "PUT", "/bkt/obj", data, nil)
	ts.must(200, "PUT", "/bkt/empty", nil, nil)
	for _, c := range []struct {
		rng        string
		status     int
		start, end int // inclusive
	}{
		{"bytes=0-9", 206, 0, 9},
		{"bytes=8190-8200", 206, 8190, 8200},
		{"bytes=49990-", 206, 49990, size - 1},
		{"bytes=-5", 206, size - 5, size - 1},
		{"bytes=-100000", 206, 0, size - 1},
		{"bytes=100-99999999", 206, 100, size - 1},
		{"bytes=100-9999999999999999999999", 206, 100, size - 1},
		{"bytes=49999-49999", 206, size - 1, size - 1},
		{"bytes=50000-", 416, 0, 0},
		{"bytes=60000-70000", 416, 0, 0},
		{"bytes=-0", 416, 0, 0},
		{"bytes=5-1", 200, 0, size - 1},
		{"bytes=0-1,5-6", 200, 0, size - 1},
		{"bytes=x-y", 200, 0, size - 1},
		{"items=0-5", 200, 0, size - 1},
	} {
		t.Run(c.rng, func(t *testing.T) {
			r := ts.do("GET", "/bkt/obj", nil, map[string]string{"Range": c.rng})
			if r.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", r.StatusCode, c.status, r.body)
			}
			switch c.status {
			case 416:
				checkErr(t, r, 416, "InvalidRange")
				if r.Header.Get("Content-Range") != "bytes */50000" {
					t.Fatalf("Content-Range %q", r.Header.Get("Content-Range"))
				}
			case 206:
				if want := fmt.Sprintf("bytes %d-%d/%d", c.start, c.end, size); r.Header.Get("Content-Range") != want {
					t.Fatalf("Content-Range %q, want %q", r.Header.Get("Content-Range"), want)
				}
				fallthrough
			default:
				if !bytes.Equal(r.body, data[c.start:c.end+1]) {
					t.Fatalf("body: %d bytes, want %d", len(r.body), c.end+1-c.start)
				}
			}
		})
	}
	checkErr(t, ts.do("GET", "/bkt/empty", nil, map[string]string{"Range": "bytes=0-"}), 416, "InvalidRange")
	if r := ts.must(200, "GET", "/bkt/empty", nil, nil); len(r.body) != 0 {
		t.Fatal("empty object has a body")
	}
}

func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"bytes=0-9", "bytes=-5", "bytes=10-", "bytes=5-1", "bytes=0-1,2-3", "bytes=-0", "bytes= 1 - 2 ", "bytes=99999999999999999999-"} {
		f.Add(s, int64(100))
	}
	f.Fuzz(func(t *testing.T, h string, size int64) {
		if size < 0 {
			return
		}
		start, length, partial, err := parseRange(h, size)
		if err != nil {
			return
		}
		if start < 0 || length < 0 || start+length > size || !partial && (start != 0 || length != size) {
			t.Fatalf("parseRange(%q, %d) = %d, %d, %v", h, size, start, length, partial)
		}
	})
}

func TestConditionals(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	r := ts.must(200, "PUT", "/bkt/obj", []byte("content"), nil)
	etag := r.Header.Get("ETag")
	lm, _ := http.ParseTime(ts.must(200, "HEAD", "/bkt/obj", nil, nil).Header.Get("Last-Modified"))
	before, after := lm.Add(-time.Hour).Format(http.TimeFormat), lm.Add(time.Hour).Format(http.TimeFormat)
	same := lm.Format(http.TimeFormat)
	for _, c := range []struct {
		name   string
		hdr    map[string]string
		status int
	}{
		{"if-match", map[string]string{"If-Match": etag}, 200},
		{"if-match list", map[string]string{"If-Match": `"x", ` + etag}, 200},
		{"if-match star", map[string]string{"If-Match": "*"}, 200},
		{"if-match other", map[string]string{"If-Match": `"other"`}, 412},
		{"if-none-match", map[string]string{"If-None-Match": etag}, 304},
		{"if-none-match other", map[string]string{"If-None-Match": `"other"`}, 200},
		{"if-modified-since before", map[string]string{"If-Modified-Since": before}, 200},
		{"if-modified-since same", map[string]string{"If-Modified-Since": same}, 304},
		{"if-modified-since after", map[string]string{"If-Modified-Since": after}, 304},
		{"if-unmodified-since before", map[string]string{"If-Unmodified-Since": before}, 412},
		{"if-unmodified-since same", map[string]string{"If-Unmodified-Since": same}, 200},
		{"if-match wins over if-unmodified-since", map[string]string{"If-Match": etag, "If-Unmodified-Since": before}, 200},
		{"if-none-match wins over if-modified-since", map[string]string{"If-None-Match": `"other"`, "If-Modified-Since": after}, 200},
		{"if-match fails before if-none-match", map[string]string{"If-Match": `"other"`, "If-None-Match": etag}, 412},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, m := range []string{"GET", "HEAD"} {
				r := ts.do(m, "/bkt/obj", nil, c.hdr)
				if r.StatusCode != c.status {
					t.Fatalf("%s: status %d, want %d", m, r.StatusCode, c.status)
				}
				switch c.status {
				case 304:
					if len(r.body) != 0 || r.Header.Get("ETag") != etag {
						t.Fatalf("304 with body %q / ETag %q", r.body, r.Header.Get("ETag"))
					}
				case 412:
					if m == "GET" {
						checkErr(t, r, 412, "PreconditionFailed")
					}
				}
			}
		})
	}
}

func TestKeyMapping(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	for _, key := range []string{"sp ace", "plus+sign", "ünïcödé/ключ", "a=b&c?d", "pct%41", "tilde~.-_", "star*'()!$,;:@", ".dotfile", "x/.y/..z"} {
		t.Run(key, func(t *testing.T) {
			p := "/bkt/" + key
			r := ts.newRequest("PUT", "/bkt/x", []byte(key), nil)
			r.URL.Path = p
			r.URL.RawPath = ""
			sum := sha256.Sum256([]byte(key))
			ts.signer.sign(r, hex.EncodeToString(sum[:]))
			if resp := ts.send(r); resp.StatusCode != 200 {
				t.Fatalf("PUT %q: %d %s", key, resp.StatusCode, resp.body)
			}
			if got := ts.get(p); string(got) != key {
				t.Fatalf("stored %q", got)
			}
		})
	}
	for _, c := range []struct{ key, code string }{
		{"a//b", "InvalidArgument"}, {"a/./b", "InvalidArgument"}, {"a/../b", "InvalidArgument"},
		{"../b", "InvalidArgument"}, {"..", "InvalidArgument"}, {".", "InvalidArgument"},
		{"ctl\x01char", "InvalidArgument"}, {strings.Repeat("n", 201), "KeyTooLongError"},
		{strings.Repeat("abcdefghi/", 103), "KeyTooLongError"},
	} {
		t.Run("refused "+c.key[:min(len(c.key), 10)], func(t *testing.T) {
			r := ts.newRequest("PUT", "/bkt/x", []byte("x"), nil)
			r.URL.Path, r.URL.RawPath = "/bkt/"+c.key, ""
			sum := sha256.Sum256([]byte("x"))
			ts.signer.sign(r, hex.EncodeToString(sum[:]))
			checkErr(t, ts.send(r), 400, c.code)
		})
	}
	// "a" and "a/b" cannot both exist.
	ts.must(200, "PUT", "/bkt/obj", []byte("x"), nil)
	ts.fails(409, "KeyConflict", "PUT", "/bkt/obj/under", []byte("x"), nil)
	ts.fails(409, "KeyConflict", "PUT", "/bkt/obj/deeper/still", []byte("x"), nil)
	ts.fails(409, "KeyConflict", "PUT", "/bkt/obj/", nil, nil)
	ts.must(200, "PUT", "/bkt/dir/under", []byte("x"), nil)
	ts.fails(409, "KeyConflict", "PUT", "/bkt/dir", []byte("x"), nil)
	// Directory markers: an empty body makes the directory.
	ts.fails(400, "InvalidArgument", "PUT", "/bkt/marker/", []byte("data"), nil)
	r := ts.must(200, "PUT", "/bkt/marker/", nil, nil)
	if r.Header.Get("ETag") != `"`+emptyMD5+`"` {
		t.Fatalf("marker ETag %q", r.Header.Get("ETag"))
	}
	if r := ts.must(200, "HEAD", "/bkt/marker/", nil, nil); r.Header.Get("Content-Length") != "0" {
		t.Fatalf("marker HEAD %v", r.Header)
	}
	ts.fails(404, "NoSuchKey", "GET", "/bkt/nomarker/", nil, nil)
	ts.must(204, "DELETE", "/bkt/marker/", nil, nil)
	ts.fails(404, "NoSuchKey", "GET", "/bkt/marker/", nil, nil)
}

func TestDelete(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	ts.must(200, "PUT", "/bkt/a/b/c/obj", []byte("x"), nil)
	ts.must(200, "PUT", "/bkt/a/keep", []byte("x"), nil)
	ts.must(204, "DELETE", "/bkt/a/b/c/obj", nil, nil)
	ts.must(204, "DELETE", "/bkt/a/b/c/obj", nil, nil) // idempotent
	ts.must(204, "DELETE", "/bkt/never/was", nil, nil)
	ts.must(204, "DELETE", "/bkt/in//valid", nil, nil)
	// Emptied directories are pruned up to the first non-empty one.
	if _, err := ts.c.Store.Stat(t.Context(), "/bkt/a/b"); err == nil {
		t.Fatal("empty directory a/b left behind")
	}
	if _, err := ts.c.Store.Stat(t.Context(), "/bkt/a"); err != nil {
		t.Fatal("non-empty directory a removed")
	}
	ts.must(204, "DELETE", "/bkt/a/keep", nil, nil)
	ts.must(204, "DELETE", "/bkt", nil, nil)
}

func TestDeleteObjects(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	for i := range 5 {
		ts.must(200, "PUT", fmt.Sprintf("/bkt/d/k%d", i), []byte("x"), nil)
	}
	body := `<Delete><Object><Key>d/k0</Key></Object><Object><Key>d/k1</Key></Object><Object><Key>missing</Key></Object><Object><Key>a//b</Key></Object></Delete>`
	var res deleteResult
	decodeXML(t, ts.must(200, "POST", "/bkt?delete", []byte(body), map[string]string{"Content-MD5": b64(md5sum([]byte(body)))}), &res)
	if len(res.Deleted) != 4 || len(res.Errors) != 0 {
		t.Fatalf("result %+v", res)
	}
	quiet := `<Delete><Quiet>true</Quiet><Object><Key>d/k2</Key></Object><Object><Key>d/k3</Key></Object><Object><Key>d/k4</Key></Object></Delete>`
	res = deleteResult{}
	decodeXML(t, ts.must(200, "POST", "/bkt?delete", []byte(quiet), nil), &res)
	if len(res.Deleted) != 0 || len(res.Errors) != 0 {
		t.Fatalf("quiet result %+v", res)
	}
	if _, err := ts.c.Store.Stat(t.Context(), "/bkt/d"); err == nil {
		t.Fatal("emptied directory left")
	}
	ts.fails(400, "MalformedXML", "POST", "/bkt?delete", []byte("<Delete>"), nil)
	ts.fails(400, "MalformedXML", "POST", "/bkt?delete", []byte("<Delete></Delete>"), nil)
	ts.fails(400, "BadDigest", "POST", "/bkt?delete", []byte(quiet), map[string]string{"Content-MD5": b64(md5sum([]byte("x")))})
	ts.must(204, "DELETE", "/bkt", nil, nil)
}

func TestCopyObject(t *testing.T) {
	ts := newTestServer(t)
	rng := testRand(t)
	ts.must(200, "PUT", "/src", nil, nil)
	ts.must(200, "PUT", "/dst", nil, nil)
	data := testcluster.Rand(rng, 30_000)
	put := ts.must(200, "PUT", "/src/dir/obj one", data, map[string]string{"Content-Type": "image/png", "X-Amz-Meta-A": "1"})
	etag := put.Header.Get("ETag")
	var res copyObjectResult
	decodeXML(t, ts.must(200, "PUT", "/dst/copy", nil, map[string]string{"X-Amz-Copy-Source": "/src/dir/obj%20one"}), &res)
	if res.ETag != etag {
		t.Fatalf("copy ETag %s, want %s", res.ETag, etag)
	}
	g := ts.must(200, "GET", "/dst/copy", nil, nil)
	if !bytes.Equal(g.body, data) || g.Header.Get("Content-Type") != "image/png" || g.Header.Get("X-Amz-Meta-A") != "1" {
		t.Fatalf("copy: %d bytes, %v", len(g.body), g.Header)
	}
	ts.must(200, "PUT", "/dst/replaced", nil, map[string]string{"X-Amz-Copy-Source": "src/dir/obj%20one",
		"X-Amz-Metadata-Directive": "REPLACE", "X-Amz-Meta-B": "2"})
	g = ts.must(200, "HEAD", "/dst/replaced", nil, nil)
	if g.Header.Get("X-Amz-Meta-A") != "" || g.Header.Get("X-Amz-Meta-B") != "2" || g.Header.Get("Content-Type") != "binary/octet-stream" {
		t.Fatalf("replaced metadata: %v", g.Header)
	}
	ts.fails(400, "InvalidRequest", "PUT", "/src/dir/obj%20one", nil, map[string]string{"X-Amz-Copy-Source": "/src/dir/obj%20one"})
	ts.must(200, "PUT", "/src/dir/obj%20one", nil, map[string]string{"X-Amz-Copy-Source": "/src/dir/obj%20one",
		"X-Amz-Metadata-Directive": "REPLACE", "Content-Type": "text/plain"})
	if g := ts.must(200, "GET", "/src/dir/obj%20one", nil, nil); !bytes.Equal(g.body, data) || g.Header.Get("Content-Type") != "text/plain" {
		t.Fatal("copy onto itself changed the data or kept the metadata")
	}
	ts.fails(404, "NoSuchKey", "PUT", "/dst/x", nil, map[string]string{"X-Amz-Copy-Source": "/src/missing"})
	ts.fails(404, "NoSuchBucket", "PUT", "/dst/x", nil, map[string]string{"X-Amz-Copy-Source": "/nobucket/missing"})
	ts.fails(400, "InvalidArgument", "PUT", "/dst/x", nil, map[string]string{"X-Amz-Copy-Source": "/src"})
	ts.fails(412, "PreconditionFailed", "PUT", "/dst/x", nil, map[string]string{"X-Amz-Copy-Source": "/src/dir/obj%20one", "X-Amz-Copy-Source-If-Match": `"nope"`})
	ts.fails(412, "PreconditionFailed", "PUT", "/dst/x", nil, map[string]string{"X-Amz-Copy-Source": "/src/dir/obj%20one", "X-Amz-Copy-Source-If-None-Match": etag})
	ts.must(200, "PUT", "/dst/x", nil, map[string]string{"X-Amz-Copy-Source": "/src/dir/obj%20one", "X-Amz-Copy-Source-If-Match": etag})
	ts.fails(409, "KeyConflict", "PUT", "/dst/x/y", nil, map[string]string{"X-Amz-Copy-Source": "/src/dir/obj%20one"})
}

// A slow copy starts its 200 response early and keeps the connection
// alive with whitespace before the result document.
func TestKeepAlive(t *testing.T) {
	ts := newTestServer(t)
	ts.h.keepAliveDelay = time.Millisecond
	ts.must(200, "PUT", "/bkt", nil, nil)
	ts.must(200, "PUT", "/bkt/src", bytes.Repeat([]byte("x"), 300_000), nil)
	r := ts.must(200, "PUT", "/bkt/dst", nil, map[string]string{"X-Amz-Copy-Source": "/bkt/src"})
	var res copyObjectResult
	decodeXML(t, r, &res)
	if res.ETag == "" {
		t.Fatalf("result %s", r.body)
	}
	// A failure found before the work starts is a plain error.
	ts.fails(409, "KeyConflict", "PUT", "/bkt/dst/under", nil, map[string]string{"X-Amz-Copy-Source": "/bkt/src"})

	// A failure after the status went out is an <Error> in the body.
	rec := httptest.NewRecorder()
	req := &request{w: &httpmeter.Writer{ResponseWriter: rec}, r: httptest.NewRequest("PUT", "/bkt/k", nil), id: "ID"}
	ka := ts.h.startKeepAlive(req)
	time.Sleep(20 * time.Millisecond)
	if err := ka.fail(ErrServiceUnavailable); err != nil {
		t.Fatalf("fail after start: %v", err)
	}
	var e errorResponse
	if rec.Code != 200 || xml.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Code != "ServiceUnavailable" || !strings.HasPrefix(rec.Body.String(), "<?xml") {
		t.Fatalf("late failure: %d %q", rec.Code, rec.Body)
	}
}
