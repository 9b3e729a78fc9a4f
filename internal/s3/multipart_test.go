package s3

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/testcluster"
)

func (ts *testServer) createUpload(key string, hdr map[string]string) string {
	ts.t.Helper()
	var res initiateMultipartUploadResult
	decodeXML(ts.t, ts.must(200, "POST", key+"?uploads", nil, hdr), &res)
	if !validUploadID(res.UploadID) {
		ts.t.Fatalf("upload id %q", res.UploadID)
	}
	return res.UploadID
}

func completeBody(parts []int, etags []string) []byte {
	var b strings.Builder
	b.WriteString("<CompleteMultipartUpload>")
	for i, p := range parts {
		fmt.Fprintf(&b, "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>", p, etags[i])
	}
	b.WriteString("</CompleteMultipartUpload>")
	return []byte(b.String())
}

// multipartETag is S3's ETag of a multipart object, computed here apart
// from the server.
func multipartETag(parts ...[]byte) string {
	var sums []byte
	for _, p := range parts {
		s := md5.Sum(p)
		sums = append(sums, s[:]...)
	}
	return fmt.Sprintf(`"%x-%d"`, md5.Sum(sums), len(parts))
}

// uploadsLeft lists what remains under the uploads directory.
func (ts *testServer) uploadsLeft() []string {
	ts.h.background.Wait() // completed uploads' parts
	var left []string
	var walk func(dir string)
	walk = func(dir string) {
		infos, err := ts.c.Store.List(ts.t.Context(), dir)
		if err != nil {
			return
		}
		for _, in := range infos {
			left = append(left, in.Path)
			if in.IsDir {
				walk(in.Path)
			}
		}
	}
	walk(uploadsRoot)
	return left
}

func TestMultipartUpload(t *testing.T) {
	ts := newTestServer(t)
	rng := testRand(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	key := "/bkt/dir/big object"
	id := ts.createUpload(key, map[string]string{"Content-Type": "video/mp4", "X-Amz-Meta-Origin": "mpu"})
	parts := [][]byte{testcluster.Rand(rng, 12_000), testcluster.Rand(rng, 10_240), testcluster.Rand(rng, 5_000)}
	etags := make([]string, 3)
	// Part 2 first, and part 1 twice: the second upload replaces the first.
	ts.must(200, "PUT", fmt.Sprintf("%s?partNumber=1&uploadId=%s", key, id), []byte("to be replaced"), nil)
	for _, i := range []int{1, 0, 2} {
		r := ts.must(200, "PUT", fmt.Sprintf("%s?partNumber=%d&uploadId=%s", key, i+1, id), parts[i],
			map[string]string{"Content-MD5": b64(md5sum(parts[i]))})
		etags[i] = r.Header.Get("ETag")
		if etags[i] != `"`+hex.EncodeToString(md5sum(parts[i]))+`"` {
			t.Fatalf("part %d ETag %s", i+1, etags[i])
		}
	}
	// The upload is listed, but neither it nor its parts show as objects
	// or buckets.
	var ups listMultipartUploadsResult
	decodeXML(t, ts.must(200, "GET", "/bkt?uploads", nil, nil), &ups)
	if len(ups.Uploads) != 1 || ups.Uploads[0].UploadID != id || ups.Uploads[0].Key != "dir/big object" {
		t.Fatalf("uploads %+v", ups)
	}
	var lo listObjectsResult
	decodeXML(t, ts.must(200, "GET", "/bkt?list-type=2", nil, nil), &lo)
	if len(lo.Contents) != 0 {
		t.Fatalf("parts visible: %+v", lo.Contents)
	}
	var lb listAllMyBucketsResult
	decodeXML(t, ts.must(200, "GET", "/", nil, nil), &lb)
	if len(lb.Buckets) != 1 {
		t.Fatalf("buckets %+v", lb.Buckets)
	}
	// ListParts, in pages of two.
	var lp listPartsResult
	decodeXML(t, ts.must(200, "GET", key+"?uploadId="+id+"&max-parts=2", nil, nil), &lp)
	if len(lp.Parts) != 2 || !lp.IsTruncated || lp.NextPartNumberMarker != 2 || lp.Parts[0].ETag != etags[0] || lp.Parts[1].Size != 10_240 {
		t.Fatalf("parts page 1: %+v", lp)
	}
	lp = listPartsResult{}
	decodeXML(t, ts.must(200, "GET", key+"?uploadId="+id+"&part-number-marker=2", nil, nil), &lp)
	if len(lp.Parts) != 1 || lp.IsTruncated || lp.Parts[0].PartNumber != 3 || lp.Parts[0].ETag != etags[2] {
		t.Fatalf("parts page 2: %+v", lp)
	}
	// Completion errors leave the upload intact. Part 4 (a copy of part
	// 1) follows the small part 3.
	ts.must(200, "PUT", fmt.Sprintf("%s?partNumber=4&uploadId=%s", key, id), parts[0], nil)
	p123 := []int{1, 2, 3}
	for _, c := range []struct {
		name, code string
		body       []byte
	}{
		{"malformed", "MalformedXML", []byte("<CompleteMultipartUpload><Part>")},
		{"no parts", "MalformedXML", completeBody(nil, nil)},
		{"wrong etag", "InvalidPart", completeBody(p123, []string{etags[0], etags[0], etags[2]})},
		{"missing part", "InvalidPart", completeBody([]int{1, 2, 4}, etags)},
		{"out of order", "InvalidPartOrder", completeBody([]int{2, 1, 3}, []string{etags[1], etags[0], etags[2]})},
		{"duplicate", "InvalidPartOrder", completeBody([]int{1, 1, 3}, etags)},
		{"small part not last", "EntityTooSmall", completeBody([]int{3, 4}, []string{etags[2], etags[0]})},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts.fails(400, c.code, "POST", key+"?uploadId="+id, c.body, nil)
			if got := ts.get("/bkt/dir/big object"); got != nil {
				t.Fatal("failed completion made the object visible")
			}
		})
	}
	// Completing with parts 1-3 (part 4 is dropped) assembles the object.
	ts.h.keepAliveDelay = time.Millisecond // exercise the keep-alive path
	var res completeMultipartUploadResult
	decodeXML(t, ts.must(200, "POST", key+"?uploadId="+id, completeBody(p123, etags), nil), &res)
	ts.h.keepAliveDelay = time.Hour
	want := multipartETag(parts...)
	if res.ETag != want || res.Key != "dir/big object" || res.Bucket != "bkt" {
		t.Fatalf("complete: %+v, want ETag %s", res, want)
	}
	g := ts.must(200, "GET", key, nil, nil)
	if !bytes.Equal(g.body, bytes.Join(parts, nil)) || g.Header.Get("ETag") != want ||
		g.Header.Get("Content-Type") != "video/mp4" || g.Header.Get("X-Amz-Meta-Origin") != "mpu" {
		t.Fatalf("object: %d bytes, %v", len(g.body), g.Header)
	}
	if left := ts.uploadsLeft(); len(left) != 0 {
		t.Fatalf("upload not removed: %q", left)
	}
	ts.fails(404, "NoSuchUpload", "POST", key+"?uploadId="+id, completeBody(p123, etags), nil)
	ts.fails(404, "NoSuchUpload", "PUT", fmt.Sprintf("%s?partNumber=1&uploadId=%s", key, id), []byte("x"), nil)
}

func TestMultipartErrors(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	ts.fails(404, "NoSuchBucket", "POST", "/nobkt/k?uploads", nil, nil)
	ts.fails(400, "InvalidArgument", "POST", "/bkt/dir/?uploads", nil, nil)
	ts.fails(400, "InvalidArgument", "POST", "/bkt/a//b?uploads", nil, nil)
	id := ts.createUpload("/bkt/k", nil)
	for _, c := range []struct {
		path, code string
		status     int
	}{
		{"/bkt/k?partNumber=0&uploadId=" + id, "InvalidArgument", 400},
		{"/bkt/k?partNumber=10001&uploadId=" + id, "InvalidArgument", 400},
		{"/bkt/k?partNumber=x&uploadId=" + id, "InvalidArgument", 400},
		{"/bkt/k?partNumber=1&uploadId=nope", "NoSuchUpload", 404},
		{"/bkt/k?partNumber=1&uploadId=" + strings.Repeat("0", 32), "NoSuchUpload", 404},
		{"/bkt/other?partNumber=1&uploadId=" + id, "NoSuchUpload", 404}, // the id belongs to another key
	} {
		ts.fails(c.status, c.code, "PUT", c.path, []byte("x"), nil)
	}
	// A part that fails its Content-MD5 is not stored.
	ts.fails(400, "BadDigest", "PUT", "/bkt/k?partNumber=1&uploadId="+id, []byte("data"), map[string]string{"Content-MD5": b64(md5sum([]byte("other")))})
	var lp listPartsResult
	decodeXML(t, ts.must(200, "GET", "/bkt/k?uploadId="+id, nil, nil), &lp)
	if len(lp.Parts) != 0 {
		t.Fatalf("rejected part stored: %+v", lp.Parts)
	}
	ts.h.opts.MaxPartSize = 100
	ts.fails(400, "EntityTooLarge", "PUT", "/bkt/k?partNumber=1&uploadId="+id, make([]byte, 101), nil)
	ts.h.opts.MaxPartSize = 5 << 30
	ts.fails(404, "NoSuchUpload", "DELETE", "/bkt/k?uploadId=nope", nil, nil)
	ts.fails(404, "NoSuchUpload", "GET", "/bkt/k?uploadId=nope", nil, nil)
	ts.must(204, "DELETE", "/bkt/k?uploadId="+id, nil, nil)
}

// An upload aborted midway leaves no object and no parts.
func TestMultipartAbort(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	ts.must(200, "PUT", "/bkt/k", []byte("previous version"), nil)
	id := ts.createUpload("/bkt/k", nil)
	other := ts.createUpload("/bkt/k2", nil)
	for n := 1; n <= 3; n++ {
		ts.must(200, "PUT", fmt.Sprintf("/bkt/k?partNumber=%d&uploadId=%s", n, id), bytes.Repeat([]byte{byte(n)}, 11_000), nil)
	}
	ts.must(200, "PUT", "/bkt/k2?partNumber=1&uploadId="+other, []byte("x"), nil)
	ts.must(204, "DELETE", "/bkt/k?uploadId="+id, nil, nil)
	if got := ts.get("/bkt/k"); string(got) != "previous version" {
		t.Fatalf("object changed to %q", got)
	}
	ts.fails(404, "NoSuchUpload", "GET", "/bkt/k?uploadId="+id, nil, nil)
	var ups listMultipartUploadsResult
	decodeXML(t, ts.must(200, "GET", "/bkt?uploads", nil, nil), &ups)
	if len(ups.Uploads) != 1 || ups.Uploads[0].UploadID != other {
		t.Fatalf("uploads %+v", ups)
	}
	// Deleting the (otherwise empty) bucket removes its uploads too.
	ts.must(204, "DELETE", "/bkt/k", nil, nil)
	ts.must(204, "DELETE", "/bkt", nil, nil)
	if left := ts.uploadsLeft(); len(left) != 0 {
		t.Fatalf("orphaned parts: %q", left)
	}
}

func TestUploadPartCopy(t *testing.T) {
	ts := newTestServer(t)
	rng := testRand(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	src := testcluster.Rand(rng, 40_000)
	ts.must(200, "PUT", "/bkt/src", src, nil)
	id := ts.createUpload("/bkt/dst", nil)
	var p1, p2 copyPartResult
	decodeXML(t, ts.must(200, "PUT", "/bkt/dst?partNumber=1&uploadId="+id, nil,
		map[string]string{"X-Amz-Copy-Source": "/bkt/src", "X-Amz-Copy-Source-Range": "bytes=0-19999"}), &p1)
	decodeXML(t, ts.must(200, "PUT", "/bkt/dst?partNumber=2&uploadId="+id, nil,
		map[string]string{"X-Amz-Copy-Source": "bkt/src", "X-Amz-Copy-Source-Range": "bytes=20000-39999"}), &p2)
	ts.fails(400, "InvalidArgument", "PUT", "/bkt/dst?partNumber=3&uploadId="+id, nil,
		map[string]string{"X-Amz-Copy-Source": "/bkt/src", "X-Amz-Copy-Source-Range": "bytes=39000-40000"})
	ts.fails(400, "InvalidArgument", "PUT", "/bkt/dst?partNumber=3&uploadId="+id, nil,
		map[string]string{"X-Amz-Copy-Source": "/bkt/src", "X-Amz-Copy-Source-Range": "0-5"})
	ts.fails(404, "NoSuchKey", "PUT", "/bkt/dst?partNumber=3&uploadId="+id, nil, map[string]string{"X-Amz-Copy-Source": "/bkt/nope"})
	ts.must(200, "POST", "/bkt/dst?uploadId="+id, completeBody([]int{1, 2}, []string{p1.ETag, p2.ETag}), nil)
	g := ts.must(200, "GET", "/bkt/dst", nil, nil)
	if !bytes.Equal(g.body, src) || g.Header.Get("ETag") != multipartETag(src[:20000], src[20000:]) {
		t.Fatalf("copied object: %d bytes, ETag %s", len(g.body), g.Header.Get("ETag"))
	}
}

func TestListMultipartUploads(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	ids := map[string]string{}
	for _, k := range []string{"a/1", "a/2", "b", "c/d/e", "b"} {
		id := ts.createUpload("/bkt/"+k, nil)
		ids[k] = ids[k] + id
	}
	var res listMultipartUploadsResult
	decodeXML(t, ts.must(200, "GET", "/bkt?uploads&delimiter=/", nil, nil), &res)
	if len(res.Uploads) != 2 || res.Uploads[0].Key != "b" || len(res.CommonPrefixes) != 2 || res.CommonPrefixes[0].Prefix != "a/" {
		t.Fatalf("delimited: %+v", res)
	}
	res = listMultipartUploadsResult{}
	decodeXML(t, ts.must(200, "GET", "/bkt?uploads&prefix=a/&max-uploads=1", nil, nil), &res)
	if len(res.Uploads) != 1 || res.Uploads[0].Key != "a/1" || !res.IsTruncated || res.NextKeyMarker != "a/1" {
		t.Fatalf("page 1: %+v", res)
	}
	res = listMultipartUploadsResult{}
	decodeXML(t, ts.must(200, "GET", "/bkt?uploads&prefix=a/&key-marker=a/1&upload-id-marker="+res.NextUploadIDMarker, nil, nil), &res)
	if len(res.Uploads) != 1 || res.Uploads[0].Key != "a/2" || res.IsTruncated {
		t.Fatalf("page 2: %+v", res)
	}
	res = listMultipartUploadsResult{}
	decodeXML(t, ts.must(200, "GET", "/bkt?uploads&key-marker=b", nil, nil), &res)
	if len(res.Uploads) != 1 || res.Uploads[0].Key != "c/d/e" {
		t.Fatalf("after b: %+v", res)
	}
	ts.must(204, "DELETE", "/bkt", nil, nil)
}

// uploadParts uploads random parts numbered numbers to upload id of key,
// part i of size(i) bytes, and returns them with their ETags.
func (ts *testServer) uploadParts(rng *rand.Rand, key, id string, numbers []int, size func(i int) int64) (parts [][]byte, etags []string) {
	ts.t.Helper()
	for i, n := range numbers {
		p := testcluster.Rand(rng, size(i))
		r := ts.must(200, "PUT", fmt.Sprintf("%s?partNumber=%d&uploadId=%s", key, n, id), p, nil)
		parts, etags = append(parts, p), append(etags, r.Header.Get("ETag"))
	}
	return parts, etags
}

// A completion of many parts assembles them in order (the next part is
// opened while one is copied), and the upload is gone as soon as the
// answer comes: no longer listed, its parts no longer listable, even
// while its parts are still being removed.
func TestMultipartCompleteManyParts(t *testing.T) {
	ts := newTestServer(t)
	rng := testRand(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	key := "/bkt/many"
	id := ts.createUpload(key, nil)
	var numbers []int
	for i := range 12 {
		numbers = append(numbers, 2*i+1)
	}
	parts, etags := ts.uploadParts(rng, key, id, numbers, func(i int) int64 { return 10_240 + int64(i)*333 })
	var res completeMultipartUploadResult
	decodeXML(t, ts.must(200, "POST", key+"?uploadId="+id, completeBody(numbers, etags), nil), &res)
	if res.ETag != multipartETag(parts...) {
		t.Errorf("ETag %s; want %s", res.ETag, multipartETag(parts...))
	}
	var ups listMultipartUploadsResult
	decodeXML(t, ts.must(200, "GET", "/bkt?uploads", nil, nil), &ups)
	if len(ups.Uploads) != 0 {
		t.Errorf("completed upload still listed: %+v", ups.Uploads)
	}
	ts.fails(404, "NoSuchUpload", "GET", key+"?uploadId="+id, nil, nil)
	if g := ts.must(200, "GET", key, nil, nil); !bytes.Equal(g.body, bytes.Join(parts, nil)) {
		t.Errorf("object: %d bytes, not the parts in order", len(g.body))
	}
	if left := ts.uploadsLeft(); len(left) != 0 {
		t.Errorf("upload not removed: %q", left)
	}
}

// The removal of a completed upload's parts is a clean-up of the store:
// Store.Drain, which the gateway's shutdown calls, waits for it.
func TestDrainWaitsForCompletedUploadRemoval(t *testing.T) {
	ts := newTestServer(t)
	rng := testRand(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	key := "/bkt/drained"
	id := ts.createUpload(key, nil)
	numbers := []int{1, 2, 3, 4, 5, 6, 7, 8}
	_, etags := ts.uploadParts(rng, key, id, numbers, func(int) int64 { return 10_240 })
	ts.must(200, "POST", key+"?uploadId="+id, completeBody(numbers, etags), nil)
	ts.c.Store.Drain()
	if infos, err := ts.c.Store.List(ts.t.Context(), uploadDir("bkt", id)); err == nil {
		t.Errorf("after Drain, the completed upload's directory holds %d entries", len(infos))
	}
}
