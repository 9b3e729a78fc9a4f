package s3

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// Regression: PUT ?versioning was served as CreateBucket, making a
// missing bucket (200) and telling a client that asked to enable
// versioning that it had; it is refused as not implemented, and a
// missing bucket is NoSuchBucket.
func TestPutBucketVersioningIsNotImplemented(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	body := []byte(`<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Status>Enabled</Status></VersioningConfiguration>`)
	ts.fails(404, "NoSuchBucket", "PUT", "/newbkt?versioning", body, nil)
	ts.fails(501, "NotImplemented", "PUT", "/bkt?versioning", body, nil)
	ts.fails(404, "NoSuchBucket", "HEAD", "/newbkt", nil, nil)
}

// Regression: an abort while a part was still being uploaded answered
// 500 (the part's temporary archives kept the upload's directory from
// being removed), and the SDK's retry then 404. The abort succeeds; the
// late part finds its upload gone and is not kept.
func TestAbortDuringPartUpload(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	id := ts.createUpload("/bkt/obj", nil)
	const size = 1 << 20
	pr, pw := io.Pipe()
	r := ts.newRequest("PUT", fmt.Sprintf("/bkt/obj?partNumber=1&uploadId=%s", id), nil, nil)
	ts.signer.sign(r, unsignedPayload)
	r.Body, r.ContentLength = pr, size
	done := make(chan *response)
	go func() { done <- ts.send(r) }()
	pw.Write(bytes.Repeat([]byte("x"), 200_000))
	time.Sleep(200 * time.Millisecond)
	ab := ts.do("DELETE", "/bkt/obj?uploadId="+id, nil, nil)
	pw.Write(bytes.Repeat([]byte("x"), size-200_000))
	pw.Close()
	part := <-done
	if ab.StatusCode != 204 {
		t.Fatalf("abort: %d %s", ab.StatusCode, ab.body)
	}
	if part.StatusCode == 200 {
		t.Errorf("the part finished after the abort was accepted")
	}
	ts.fails(404, "NoSuchUpload", "GET", "/bkt/obj?uploadId="+id, nil, nil)
}

// Regression: a 412 or 416 carried the object's own headers: its
// Content-Encoding (gzip) labelled the XML error, which clients then
// failed to decode, and its Cache-Control made the error cacheable.
func TestErrorsCarryNoObjectHeaders(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	ts.must(200, "PUT", "/bkt/page.js", []byte("gzipped-bytes"), map[string]string{
		"Content-Encoding": "gzip", "Cache-Control": "max-age=31536000", "X-Amz-Meta-Owner": "me"})
	for _, hdr := range []map[string]string{{"If-Match": `"stale"`}, {"Range": "bytes=100-"}} {
		u := ts.signer.presign(ts.newRequest("GET", "/bkt/page.js", nil, nil), time.Hour)
		req, _ := http.NewRequest("GET", u, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 4 || err != nil || !bytes.Contains(b, []byte("<Error>")) {
			t.Errorf("%v: status %d, body %q, %v", hdr, resp.StatusCode, b, err)
		}
		for _, k := range []string{"Content-Encoding", "Cache-Control", "X-Amz-Meta-Owner"} {
			if v := resp.Header.Get(k); v != "" {
				t.Errorf("%v: the %d error carries %s: %s", hdr, resp.StatusCode, k, v)
			}
		}
	}
	// A 304 still names the version.
	r := ts.do("GET", "/bkt/page.js", nil, map[string]string{"If-None-Match": ts.do("HEAD", "/bkt/page.js", nil, nil).Header.Get("ETag")})
	if r.StatusCode != 304 || r.Header.Get("ETag") == "" || r.Header.Get("Last-Modified") == "" {
		t.Errorf("304: status %d, headers %v", r.StatusCode, r.Header)
	}
}
