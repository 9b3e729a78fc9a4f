package webdav

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"strconv"
	"strings"
	"testing"

	"github.com/ecstore/ecstore/internal/testcluster"
)

// TestGetMultipleRanges checks the multipart/byteranges answer to a
// request for several ranges, read with the standard library's MIME
// parser: every part in the order asked with its Content-Range and
// bytes, including ranges across blocks, one longer than a buffered
// range (streamed) and the object's last byte; each part's headers in
// the order davix needs; a Content-Length that is the body's; and the
// same headers for HEAD.
func TestGetMultipleRanges(t *testing.T) {
	ts := newTestServer(t)
	data := testcluster.Rand(testRand(t), 3*rangeBuffered+777)
	size := int64(len(data))
	ts.put("/m", data)
	bs := testGeometry.BlockSize()
	cases := [][]byteRange{
		{{0, 10}, {100, 1}},
		{{5 * bs, 3000}, {bs - 7, 20}, {size - 1, 1}},                           // out of order, across a block boundary, the last byte
		{{17, rangeBuffered + 5}, {2 * rangeBuffered, 4096}, {size - 500, 500}}, // a streamed range among buffered ones
	}
	// Many small ranges: several batches.
	var many []byteRange
	for i := range 3*rangeBatch + 3 {
		many = append(many, byteRange{int64(i) * 40000, 1000 + int64(i)})
	}
	cases = append(cases, many)
	for _, ranges := range cases {
		var spec []string
		for _, r := range ranges {
			spec = append(spec, fmt.Sprintf("%d-%d", r.start, r.start+r.length-1))
		}
		hdr := map[string]string{"Range": "bytes=" + strings.Join(spec, ",")}
		get := ts.must(206, "GET", "/m", nil, hdr)
		if cl := get.Header.Get("Content-Length"); cl != strconv.Itoa(len(get.body)) {
			t.Fatalf("%d ranges: Content-Length %s for a %d-byte body", len(ranges), cl, len(get.body))
		}
		mt, params, err := mime.ParseMediaType(get.Header.Get("Content-Type"))
		if err != nil || mt != "multipart/byteranges" || params["boundary"] == "" {
			t.Fatalf("Content-Type %q: %v", get.Header.Get("Content-Type"), err)
		}
		// Davix takes a part's headers to end with its Content-Range.
		if n := strings.Count(string(get.body), "\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes "); n != len(ranges) {
			t.Errorf("%d ranges: %d parts with Content-Type, then Content-Range", len(ranges), n)
		}
		mr := multipart.NewReader(bytes.NewReader(get.body), params["boundary"])
		for i, r := range ranges {
			p, err := mr.NextPart()
			if err != nil {
				t.Fatalf("%d ranges: part %d: %v", len(ranges), i, err)
			}
			if want := fmt.Sprintf("bytes %d-%d/%d", r.start, r.start+r.length-1, size); p.Header.Get("Content-Range") != want {
				t.Errorf("part %d: Content-Range %q, want %q", i, p.Header.Get("Content-Range"), want)
			}
			if p.Header.Get("Content-Type") != "application/octet-stream" {
				t.Errorf("part %d: Content-Type %q", i, p.Header.Get("Content-Type"))
			}
			b, err := io.ReadAll(p)
			if err != nil || !bytes.Equal(b, data[r.start:r.start+r.length]) {
				t.Fatalf("part %d: %d bytes, %v, not bytes [%d, +%d)", i, len(b), err, r.start, r.length)
			}
		}
		if _, err := mr.NextPart(); err != io.EOF {
			t.Fatalf("%d ranges: after the last part: %v", len(ranges), err)
		}
		head := ts.must(206, "HEAD", "/m", nil, hdr)
		if head.Header.Get("Content-Length") != get.Header.Get("Content-Length") || len(head.body) != 0 ||
			!strings.HasPrefix(head.Header.Get("Content-Type"), "multipart/byteranges; boundary=") {
			t.Errorf("HEAD: Content-Length %q, Content-Type %q, %d body bytes",
				head.Header.Get("Content-Length"), head.Header.Get("Content-Type"), len(head.body))
		}
	}
	// If-Range with another entity tag: the whole object.
	r := ts.must(200, "GET", "/m", nil, map[string]string{"Range": "bytes=0-1,5-6", "If-Range": `"other"`})
	if !bytes.Equal(r.body, data) {
		t.Errorf("If-Range mismatch: %d bytes, not the object", len(r.body))
	}
}

// TestGetMultipleRangesBoundsTheFraming checks that the framing of many
// parts cannot make an answer much larger than the object: ranges of a
// byte each get the whole object, and an object stored with a very long
// media type has parts with application/octet-stream (found by review:
// 4096 ranges of an object with a 1 MiB Content-Type would have been
// answered with 4 GiB).
func TestGetMultipleRangesBoundsTheFraming(t *testing.T) {
	ts := newTestServer(t)
	data := testcluster.Rand(testRand(t), 4000)
	ts.put("/tiny", data)
	var spec []string
	for i := range len(data) {
		spec = append(spec, fmt.Sprintf("%d-%d", i, i))
	}
	r := ts.must(200, "GET", "/tiny", nil, map[string]string{"Range": "bytes=" + strings.Join(spec, ",")})
	if !bytes.Equal(r.body, data) {
		t.Errorf("4000 one-byte ranges: %d bytes, not the object", len(r.body))
	}

	long := "application/x-" + strings.Repeat("a", 2*maxPartType)
	ts.must(201, "PUT", "/typed", data, map[string]string{"Content-Type": long})
	r = ts.must(206, "GET", "/typed", nil, map[string]string{"Range": "bytes=0-9,100-109"})
	if strings.Contains(string(r.body), long) || strings.Count(string(r.body), "Content-Type: application/octet-stream\r\n") != 2 {
		t.Errorf("parts of an object with a %d-byte media type:\n%.300s", len(long), r.body)
	}
}
