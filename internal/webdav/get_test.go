package webdav

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/testcluster"
)

func TestGetHead(t *testing.T) {
	ts := newTestServer(t)
	data := testcluster.Rand(testRand(t), 5*8192+123) // crosses blocks of 8 KiB
	ts.put("/d/obj.bin", data)
	info, err := ts.store.Stat(t.Context(), "/d/obj.bin")
	if err != nil {
		t.Fatal(err)
	}
	get := ts.must(http.StatusOK, "GET", "/d/obj.bin", nil, nil)
	if !bytes.Equal(get.body, data) {
		t.Fatalf("GET returned %d bytes, not the object", len(get.body))
	}
	head := ts.must(http.StatusOK, "HEAD", "/d/obj.bin", nil, nil)
	if len(head.body) != 0 {
		t.Fatalf("HEAD sent a body of %d bytes", len(head.body))
	}
	for _, r := range []*response{get, head} {
		h := r.Header
		if h.Get("Content-Length") != strconv.Itoa(len(data)) || h.Get("Accept-Ranges") != "bytes" ||
			h.Get("ETag") != `"`+string(info.Version)+`"` || h.Get("Last-Modified") != info.MTime.UTC().Format(http.TimeFormat) ||
			h.Get("Content-Type") != "application/octet-stream" {
			t.Errorf("%s headers: %v", r.Request.Method, h)
		}
	}
	if got := ts.bytes["read"]; got != len(data) {
		t.Errorf("bytes hook counted %d read bytes, want %d", got, len(data))
	}
	ts.must(http.StatusNotFound, "GET", "/d/missing", nil, nil)
	ts.must(http.StatusNotFound, "HEAD", "/d/missing", nil, nil)
	ts.must(http.StatusNotFound, "GET", "/d/obj.bin/", nil, nil) // an object is no collection
	// A collection's GET is an HTML index naming its members.
	idx := ts.must(http.StatusOK, "GET", "/d/", nil, nil)
	if !bytes.Contains(idx.body, []byte(`href="/d/obj.bin"`)) || idx.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("index of /d: %s", idx.body)
	}
	ts.must(http.StatusOK, "GET", "/", nil, nil)
	ops := ts.opsRecorded()
	for _, want := range []string{"http_get ok", "http_head ok", "http_get error", "http_head error"} {
		if !hasLine(ops, want) {
			t.Errorf("hooks did not record %q: %q", want, ops)
		}
	}
}

func TestGetRange(t *testing.T) {
	ts := newTestServer(t)
	data := testcluster.Rand(testRand(t), 20000)
	size := int64(len(data))
	ts.put("/r", data)
	ts.put("/empty", nil)
	tests := []struct {
		name       string
		path       string
		rng        string
		status     int
		start, end int64 // bytes [start, end) for 200/206
	}{
		{"first bytes", "/r", "bytes=0-9", 206, 0, 10},
		{"middle across blocks", "/r", "bytes=8000-16500", 206, 8000, 16501},
		{"open end", "/r", "bytes=19990-", 206, 19990, size},
		{"suffix", "/r", "bytes=-100", 206, size - 100, size},
		{"suffix longer than object", "/r", "bytes=-100000", 206, 0, size},
		{"last byte", "/r", "bytes=19999-19999", 206, 19999, size},
		{"end past size clamped", "/r", "bytes=19000-99999999", 206, 19000, size},
		{"huge end", "/r", "bytes=5-999999999999999999999999", 206, 5, size},
		{"unit case-insensitive", "/r", "Bytes=1-2", 206, 1, 3},
		{"start at size", "/r", "bytes=20000-", 416, 0, 0},
		{"start past size", "/r", "bytes=30000-30010", 416, 0, 0},
		{"zero suffix", "/r", "bytes=-0", 416, 0, 0},
		{"huge start", "/r", "bytes=999999999999999999999999-", 416, 0, 0},
		{"empty object", "/empty", "bytes=0-0", 416, 0, 0},
		{"one satisfiable of several", "/r", "bytes=30000-30010, 0-9", 206, 0, 10},
		{"empty list elements", "/r", "bytes=, 0-9,", 206, 0, 10},
		{"none satisfiable of several", "/r", "bytes=30000-30010,-0", 416, 0, 0},
		{"overlapping past the size: ignored", "/r", "bytes=0-15000,5000-19999", 200, 0, size},
		{"too many ranges: ignored", "/r", "bytes=" + strings.Repeat("0-0,", maxRanges) + "1-1", 200, 0, size},
		{"one bad of several: ignored", "/r", "bytes=0-1,5-4", 200, 0, size},
		{"other unit: ignored", "/r", "items=0-1", 200, 0, size},
		{"garbage: ignored", "/r", "bytes=a-b", 200, 0, size},
		{"reversed: ignored", "/r", "bytes=10-5", 200, 0, size},
		{"no dash: ignored", "/r", "bytes=10", 200, 0, size},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, method := range []string{"GET", "HEAD"} {
				r := ts.must(tt.status, method, tt.path, nil, map[string]string{"Range": tt.rng})
				objSize := size
				if tt.path == "/empty" {
					objSize = 0
				}
				switch tt.status {
				case 416:
					if r.Header.Get("Content-Range") != fmt.Sprintf("bytes */%d", objSize) {
						t.Errorf("%s 416 Content-Range %q", method, r.Header.Get("Content-Range"))
					}
					continue
				case 206:
					want := fmt.Sprintf("bytes %d-%d/%d", tt.start, tt.end-1, size)
					if r.Header.Get("Content-Range") != want {
						t.Errorf("%s Content-Range %q, want %q", method, r.Header.Get("Content-Range"), want)
					}
				}
				if r.Header.Get("Content-Length") != strconv.FormatInt(tt.end-tt.start, 10) {
					t.Errorf("%s Content-Length %q, want %d", method, r.Header.Get("Content-Length"), tt.end-tt.start)
				}
				if method == "GET" && !bytes.Equal(r.body, data[tt.start:tt.end]) {
					t.Errorf("GET body: %d bytes, not bytes [%d, %d)", len(r.body), tt.start, tt.end)
				}
			}
		})
	}
}

func TestConditionalGet(t *testing.T) {
	ts := newTestServer(t)
	ts.put("/c", []byte("conditional content"))
	etag := ts.must(200, "HEAD", "/c", nil, nil).Header.Get("ETag")
	lm := ts.must(200, "HEAD", "/c", nil, nil).Header.Get("Last-Modified")
	future := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	past := time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)
	tests := []struct {
		name   string
		hdr    map[string]string
		status int
	}{
		{"If-None-Match same", map[string]string{"If-None-Match": etag}, 304},
		{"If-None-Match weak same", map[string]string{"If-None-Match": "W/" + etag}, 304},
		{"If-None-Match star", map[string]string{"If-None-Match": "*"}, 304},
		{"If-None-Match other", map[string]string{"If-None-Match": `"other"`}, 200},
		{"If-Match same", map[string]string{"If-Match": etag}, 200},
		{"If-Match in list", map[string]string{"If-Match": `"x", ` + etag}, 200},
		{"If-Match other", map[string]string{"If-Match": `"other"`}, 412},
		{"If-Match weak never matches", map[string]string{"If-Match": "W/" + etag}, 412},
		{"If-Modified-Since last modified", map[string]string{"If-Modified-Since": lm}, 304},
		{"If-Modified-Since past", map[string]string{"If-Modified-Since": past}, 200},
		{"If-Unmodified-Since past", map[string]string{"If-Unmodified-Since": past}, 412},
		{"If-Unmodified-Since future", map[string]string{"If-Unmodified-Since": future}, 200},
		{"If-None-Match wins over If-Modified-Since", map[string]string{"If-None-Match": `"other"`, "If-Modified-Since": future}, 200},
		{"If-Range same etag", map[string]string{"Range": "bytes=0-3", "If-Range": etag}, 206},
		{"If-Range other etag", map[string]string{"Range": "bytes=0-3", "If-Range": `"other"`}, 200},
		{"If-Range date", map[string]string{"Range": "bytes=0-3", "If-Range": lm}, 206},
		{"If-Range old date", map[string]string{"Range": "bytes=0-3", "If-Range": past}, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ts.must(tt.status, "GET", "/c", nil, tt.hdr)
			if tt.status == 304 && (r.Header.Get("ETag") != etag || len(r.body) != 0) {
				t.Errorf("304: ETag %q, body %q", r.Header.Get("ETag"), r.body)
			}
		})
	}
}

func TestWantDigest(t *testing.T) {
	ts := newTestServer(t)
	data := testcluster.Rand(testRand(t), 30001)
	ts.put("/sum", data)
	ad := fmt.Sprintf("%08x", adler32.Checksum(data))
	crc := base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))))
	tests := []struct{ want, digest string }{
		{"adler32", "adler32=" + ad},
		{"ADLER32", "adler32=" + ad},
		{"crc32c", "crc32c=" + crc},
		{"adler32, crc32c", "adler32=" + ad + ",crc32c=" + crc},
		{"adler32;q=0.3, crc32c;q=1", "crc32c=" + crc + ",adler32=" + ad},
		{"md5, adler32", "adler32=" + ad},
		{"adler32;q=0", ""},
		{"sha-256", ""},
	}
	for _, tt := range tests {
		for _, method := range []string{"GET", "HEAD"} {
			r := ts.must(200, method, "/sum", nil, map[string]string{"Want-Digest": tt.want})
			if got := r.Header.Get("Digest"); got != tt.digest {
				t.Errorf("%s Want-Digest %q: Digest %q, want %q", method, tt.want, got, tt.digest)
			}
		}
	}
	// A range still gets the digest of the whole object (RFC 3230: an
	// instance digest).
	r := ts.must(206, "GET", "/sum", nil, map[string]string{"Want-Digest": "adler32", "Range": "bytes=0-9"})
	if r.Header.Get("Digest") != "adler32="+ad {
		t.Errorf("ranged GET Digest %q", r.Header.Get("Digest"))
	}
	// No Want-Digest, no Digest.
	if d := ts.must(200, "HEAD", "/sum", nil, nil).Header.Get("Digest"); d != "" {
		t.Errorf("Digest %q without Want-Digest", d)
	}
}
