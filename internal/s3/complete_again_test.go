package s3

import (
	"fmt"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/testcluster"
)

// TestCompleteSentAgainIsAnsweredAsTheFirst: a CompleteMultipartUpload
// sent again after it succeeded (the client lost the first answer and
// retries, as the AWS SDKs do) is answered as the first was, as S3 does,
// while the object is still the one it made; other part lists, or an
// object replaced since, get NoSuchUpload. Before, every repeat got
// NoSuchUpload, and the client reported a failed upload that had been
// stored.
func TestCompleteSentAgainIsAnsweredAsTheFirst(t *testing.T) {
	ts := newTestServer(t, func(o *Options) { o.KeepCompletions = true })
	rng := testRand(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	key := "/bkt/d/obj"
	id := ts.createUpload(key, nil)
	parts := [][]byte{testcluster.Rand(rng, 11_000), testcluster.Rand(rng, 3_000)}
	etags := make([]string, len(parts))
	for i, p := range parts {
		etags[i] = ts.must(200, "PUT", fmt.Sprintf("%s?partNumber=%d&uploadId=%s", key, i+1, id), p, nil).Header.Get("ETag")
	}
	body := completeBody([]int{1, 2}, etags)
	var first, again completeMultipartUploadResult
	decodeXML(t, ts.must(200, "POST", key+"?uploadId="+id, body, nil), &first)
	if want := multipartETag(parts...); first.ETag != want {
		t.Fatalf("complete: %+v, want ETag %s", first, want)
	}
	ts.h.background.Wait() // the parts are gone
	decodeXML(t, ts.must(200, "POST", key+"?uploadId="+id, body, nil), &again)
	if again != first {
		t.Fatalf("sent again: %+v, first %+v", again, first)
	}
	// The upload is over all the same: not listed, no parts, no abort.
	var ups listMultipartUploadsResult
	decodeXML(t, ts.must(200, "GET", "/bkt?uploads", nil, nil), &ups)
	if len(ups.Uploads) != 0 {
		t.Fatalf("completed upload listed: %+v", ups.Uploads)
	}
	ts.fails(404, "NoSuchUpload", "GET", key+"?uploadId="+id, nil, nil)
	ts.fails(404, "NoSuchUpload", "PUT", fmt.Sprintf("%s?partNumber=1&uploadId=%s", key, id), []byte("x"), nil)
	// Other parts, another key: not the completion that was made.
	ts.fails(404, "NoSuchUpload", "POST", key+"?uploadId="+id, completeBody([]int{1}, etags[:1]), nil)
	ts.fails(404, "NoSuchUpload", "POST", "/bkt/d/other?uploadId="+id, body, nil)
	// The object replaced since: the completion is history.
	ts.must(200, "PUT", key, []byte("replaced"), nil)
	ts.fails(404, "NoSuchUpload", "POST", key+"?uploadId="+id, body, nil)
	// The expiry takes the record with the upload's directory.
	if _, err := ExpireUploads(t.Context(), ts.c.Store, ts.h.opts.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if left := ts.uploadsLeft(); len(left) != 0 {
		t.Fatalf("left after the expiry: %q", left)
	}
}
