package s3

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Abandoned multipart uploads expire: their parts are removed, no object
// appears, and uploads younger than the cutoff are untouched and can
// still complete.
func TestExpireUploads(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	ts.must(200, "PUT", "/other", nil, nil)
	old := ts.createUpload("/bkt/abandoned", nil)
	old2 := ts.createUpload("/other/deep/key", nil)
	for n := 1; n <= 3; n++ {
		ts.must(200, "PUT", fmt.Sprintf("/bkt/abandoned?partNumber=%d&uploadId=%s", n, old), bytes.Repeat([]byte{byte(n)}, 11_000), nil)
	}
	ts.must(200, "PUT", "/other/deep/key?partNumber=1&uploadId="+old2, []byte("part"), nil)
	time.Sleep(2 * time.Millisecond)
	cutoff := time.Now()
	time.Sleep(2 * time.Millisecond)
	young := ts.createUpload("/bkt/young", nil)
	part := bytes.Repeat([]byte("y"), 11_000)
	etag := ts.must(200, "PUT", "/bkt/young?partNumber=1&uploadId="+young, part, nil).Header.Get("ETag")

	n, err := ExpireUploads(context.Background(), ts.c.Store, cutoff)
	if err != nil || n != 2 {
		t.Fatalf("ExpireUploads = %d, %v; want 2", n, err)
	}
	for _, p := range ts.uploadsLeft() {
		if strings.Contains(p, old) || strings.Contains(p, old2) || strings.Contains(p, "/other") {
			t.Fatalf("left after expiry: %q", ts.uploadsLeft())
		}
	}
	ts.fails(404, "NoSuchKey", "HEAD", "/bkt/abandoned", nil, nil)
	ts.fails(404, "NoSuchUpload", "GET", "/bkt/abandoned?uploadId="+old, nil, nil)
	ts.fails(404, "NoSuchUpload", "PUT", "/bkt/abandoned?partNumber=4&uploadId="+old, []byte("late part"), nil)
	var ups listMultipartUploadsResult
	decodeXML(t, ts.must(200, "GET", "/bkt?uploads", nil, nil), &ups)
	if len(ups.Uploads) != 1 || ups.Uploads[0].UploadID != young {
		t.Fatalf("uploads after expiry: %+v", ups.Uploads)
	}
	// Nothing more to expire; the young upload completes.
	if n, err := ExpireUploads(context.Background(), ts.c.Store, cutoff); n != 0 || err != nil {
		t.Fatalf("second pass: %d, %v", n, err)
	}
	ts.must(200, "POST", "/bkt/young?uploadId="+young, completeBody([]int{1}, []string{etag}), nil)
	if !bytes.Equal(ts.get("/bkt/young"), part) {
		t.Fatal("young upload did not complete")
	}
	if left := ts.uploadsLeft(); len(left) != 0 {
		t.Fatalf("left after completion: %q", left)
	}
	if n, err := ExpireUploads(context.Background(), ts.c.Store, time.Now()); n != 0 || err != nil {
		t.Fatalf("pass over an empty area: %d, %v", n, err)
	}
}

// RunUploadExpiry removes an upload once it is older than Age.
func TestRunUploadExpiry(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	id := ts.createUpload("/bkt/k", nil)
	ts.must(200, "PUT", "/bkt/k?partNumber=1&uploadId="+id, []byte("part"), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunUploadExpiry(ctx, ts.c.Store, ExpiryOptions{Age: 200 * time.Millisecond, Interval: 50 * time.Millisecond})
	}()
	defer func() { cancel(); <-done }()
	for deadline := time.Now().Add(10 * time.Second); len(ts.uploadsLeft()) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("upload not expired: %q", ts.uploadsLeft())
		}
	}
	ts.fails(404, "NoSuchUpload", "GET", "/bkt/k?uploadId="+id, nil, nil)
}
