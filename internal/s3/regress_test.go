package s3

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/jwtauth"
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

// Conditional writes (If-None-Match: *, If-Match) hold on PutObject,
// CompleteMultipartUpload and CopyObject: before, the headers were
// ignored and the object replaced (two holders of a lock file both won).
func TestConditionalWrites(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	ts.must(200, "PUT", "/bkt/lock", []byte("holder-A"), nil)
	etag := ts.do("HEAD", "/bkt/lock", nil, nil).Header.Get("ETag")
	none := map[string]string{"If-None-Match": "*"}
	ts.fails(412, "PreconditionFailed", "PUT", "/bkt/lock", []byte("holder-B"), none)
	ts.fails(412, "PreconditionFailed", "PUT", "/bkt/lock", []byte("holder-C"),
		map[string]string{"If-Match": `"0123456789abcdef0123456789abcdef"`})
	ts.fails(404, "NoSuchKey", "PUT", "/bkt/absent", []byte("x"), map[string]string{"If-Match": etag})
	ts.fails(501, "NotImplemented", "PUT", "/bkt/lock", []byte("x"), map[string]string{"If-None-Match": etag})
	id := ts.createUpload("/bkt/lock", nil)
	p := ts.must(200, "PUT", fmt.Sprintf("/bkt/lock?partNumber=1&uploadId=%s", id), []byte("mpu"), nil)
	ts.fails(412, "PreconditionFailed", "POST", "/bkt/lock?uploadId="+id,
		completeBody([]int{1}, []string{p.Header.Get("ETag")}), none)
	ts.must(200, "PUT", "/bkt/other", []byte("other"), nil)
	ts.fails(412, "PreconditionFailed", "PUT", "/bkt/lock", nil,
		map[string]string{"X-Amz-Copy-Source": "/bkt/other", "If-None-Match": "*"})
	if got := ts.get("/bkt/lock"); string(got) != "holder-A" {
		t.Fatalf("lock object overwritten: %q", got)
	}
	// The conditions that hold let the writes through.
	ts.must(200, "PUT", "/bkt/lock", []byte("holder-D"), map[string]string{"If-Match": etag})
	ts.must(200, "PUT", "/bkt/new", []byte("n"), none)
	if got := ts.get("/bkt/lock"); string(got) != "holder-D" {
		t.Fatalf("read %q after a write whose If-Match held", got)
	}
}

// Of writers racing to create one key with If-None-Match: *, through one
// gateway, exactly one succeeds: the condition is checked again at
// commit, in turn with the key's other commits.
func TestConditionalCreatesRace(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	const writers = 6
	codes := make(chan int, writers)
	for i := range writers {
		go func() {
			r := ts.do("PUT", "/bkt/race", []byte(fmt.Sprintf("writer %d", i)), map[string]string{"If-None-Match": "*"})
			codes <- r.StatusCode
		}()
	}
	won := 0
	for range writers {
		switch c := <-codes; c {
		case 200:
			won++
		case 412:
		default:
			t.Errorf("a racing conditional create answered %d", c)
		}
	}
	if won != 1 {
		t.Errorf("%d of %d racing conditional creates succeeded, want 1", won, writers)
	}
}

// Regression: an empty folder marker, listed as a key of size 0, could
// not be copied (400), which failed aws s3 sync between buckets and
// folder renames in graphical clients.
func TestCopyFolderMarker(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bk1", nil, nil)
	ts.must(200, "PUT", "/bk2", nil, nil)
	ts.must(200, "PUT", "/bk1/folder/", nil, nil)
	ts.must(200, "PUT", "/bk1/file", []byte("x"), nil)
	r := ts.must(200, "PUT", "/bk2/folder/", nil, map[string]string{"X-Amz-Copy-Source": "/bk1/folder/"})
	if !bytes.Contains(r.body, []byte(emptyMD5)) {
		t.Errorf("copy result %s: want the empty marker's ETag", r.body)
	}
	var res listObjectsResult
	decodeXML(t, ts.must(200, "GET", "/bk2?list-type=2", nil, nil), &res)
	if len(res.Contents) != 1 || res.Contents[0].Key != "folder/" || res.Contents[0].Size != 0 {
		t.Errorf("bk2 lists %+v, want the marker folder/", res.Contents)
	}
	ts.fails(404, "NoSuchKey", "PUT", "/bk2/other/", nil, map[string]string{"X-Amz-Copy-Source": "/bk1/missing/"})
	ts.fails(400, "InvalidArgument", "PUT", "/bk2/other/", nil, map[string]string{"X-Amz-Copy-Source": "/bk1/file"})
}

// Regression: a PUT that the access key's storage.create scope alone
// allows was checked to be new before its body came; an object written at
// the key meanwhile was then replaced. The commit checks again.
func TestCreateOnlyKeyDoesNotReplaceAnObjectWrittenMeanwhile(t *testing.T) {
	const ak, sk = "CREATOR", "creator/secret"
	g, err := jwtauth.StaticGrant(ak, "storage.read:/data storage.create:/data/in")
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, func(o *Options) {
		o.Credentials[ak] = sk
		o.Grants = map[string]*jwtauth.Grant{ak: g}
	})
	ts.must(200, "PUT", "/data", nil, nil)
	lim := *ts
	lim.signer = testSigner{ak: ak, sk: sk, region: "us-east-1", now: time.Now}
	const size = 1 << 20
	pr, pw := io.Pipe()
	r := lim.newRequest("PUT", "/data/in/race", nil, nil)
	lim.signer.sign(r, unsignedPayload)
	r.Body, r.ContentLength = pr, size
	done := make(chan *response)
	go func() { done <- lim.send(r) }()
	pw.Write(bytes.Repeat([]byte("c"), 200_000))
	time.Sleep(200 * time.Millisecond)
	ts.must(200, "PUT", "/data/in/race", []byte("written meanwhile"), nil)
	pw.Write(bytes.Repeat([]byte("c"), size-200_000))
	pw.Close()
	if res := <-done; res.StatusCode != 403 {
		t.Errorf("the create-only PUT over an object written meanwhile: %d %s", res.StatusCode, res.body)
	}
	if got := ts.get("/data/in/race"); string(got) != "written meanwhile" {
		t.Errorf("the object is now %d bytes of the create-only PUT", len(got))
	}
}

// Regression (found by review): a request naming an object version
// (?versionId=, or VersionId in a multi-object delete) acted on the
// current object: deleting an old version by its id removed the object.
// ecstore keeps no versions: only versionId=null, the current object, is
// served; others are NotImplemented and change nothing.
func TestVersionIDsOtherThanNullAreRefused(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	ts.must(200, "PUT", "/bkt/k", []byte("current"), nil)
	for _, m := range []string{"GET", "HEAD", "DELETE", "PUT"} {
		r := ts.do(m, "/bkt/k?versionId=3HL4kqtJlcpXroDTDmjVBH40Nrjfkd", []byte("x"), nil)
		if r.StatusCode != 501 {
			t.Errorf("%s with a versionId: %d", m, r.StatusCode)
		}
	}
	r := ts.must(200, "POST", "/bkt?delete", []byte(`<Delete><Object><Key>k</Key><VersionId>3HL4kqtJlcpXroDTDmjVBH40Nrjfkd</VersionId></Object></Delete>`), nil)
	if !bytes.Contains(r.body, []byte("<Error>")) {
		t.Errorf("multi-object delete of a version: %s", r.body)
	}
	if got := ts.get("/bkt/k"); string(got) != "current" {
		t.Fatalf("the object is now %q", got)
	}
	ts.must(200, "GET", "/bkt/k?versionId=null", nil, nil)
	ts.must(204, "DELETE", "/bkt/k?versionId=null", nil, nil)
}
