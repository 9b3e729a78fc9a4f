package s3

import (
	"maps"
	"strings"
	"testing"

	"github.com/ecstore/ecstore/internal/object"
)

// putWithUser writes data at path straight through the engine with user
// metadata user, as another frontend does (root:// keeps extended
// attributes as "xrootd.U.NAME", docs/FORMAT.md §5).
func putWithUser(t *testing.T, ts *testServer, path string, data []byte, user map[string]string) {
	t.Helper()
	ts.c.PutWith(t, path, data, &object.CreateOptions{User: user})
}

// CopyObject keeps the metadata of other frontends (the extended
// attributes an object got over root://), under either metadata
// directive: S3 neither shows nor sets it, as it does not a source's
// tags, so REPLACE replaces only what S3 shows (x-amz-meta-* and the
// standard headers). It stays out of the copy's headers.
func TestCopyObjectKeepsAttributes(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	putWithUser(t, ts, "/bkt/src", []byte("attributed"), map[string]string{
		"xrootd.U.foo": "t:bar", "xrootd.U.bin": "b:/wD+eA==",
		"x-amz-meta-color": "blue", "content-type": "text/plain", "s3-etag": "0123",
	})
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want map[string]string // besides the attributes and the new ETag
	}{
		{"COPY", map[string]string{}, map[string]string{"x-amz-meta-color": "blue", "content-type": "text/plain"}},
		{"REPLACE", map[string]string{"X-Amz-Metadata-Directive": "REPLACE", "X-Amz-Meta-Size": "9"},
			map[string]string{"x-amz-meta-size": "9"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.hdr["X-Amz-Copy-Source"] = "/bkt/src"
			ts.must(200, "PUT", "/bkt/"+tc.name, nil, tc.hdr)
			info, err := ts.c.Store.Stat(t.Context(), "/bkt/"+tc.name)
			if err != nil {
				t.Fatal(err)
			}
			want := maps.Clone(tc.want)
			want["xrootd.U.foo"], want["xrootd.U.bin"] = "t:bar", "b:/wD+eA=="
			want[etagKey] = info.User[etagKey]
			if info.User[etagKey] == "0123" || !maps.Equal(info.User, want) {
				t.Errorf("copy's user metadata %q, want %q and a new ETag", info.User, want)
			}
			r := ts.must(200, "HEAD", "/bkt/"+tc.name, nil, nil)
			for k := range r.Header {
				if strings.Contains(strings.ToLower(k), "xrootd") {
					t.Errorf("HEAD shows %s: %q", k, r.Header[k])
				}
			}
		})
	}
}

// Metadata that is not UTF-8 (header values may carry any byte from
// 0x80) is refused: the metadata entry holds JSON strings, which would
// have kept each such byte as U+FFFD, so that HEAD answered other bytes
// than were stored. UTF-8 is kept as sent.
func TestMetadataMustBeUTF8(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	ts.must(200, "PUT", "/bkt/src", []byte("x"), nil)
	for _, hdr := range []map[string]string{
		{"X-Amz-Meta-Latin1": "caf\xe9"},
		{"Content-Type": "text/\xff"},
		{"Content-Disposition": "attachment; filename=\"\xe9.txt\""},
	} {
		ts.fails(400, "InvalidArgument", "PUT", "/bkt/k", []byte("x"), hdr)
		ts.fails(400, "InvalidArgument", "POST", "/bkt/k?uploads", nil, hdr)
		hdr["X-Amz-Copy-Source"], hdr["X-Amz-Metadata-Directive"] = "/bkt/src", "REPLACE"
		ts.fails(400, "InvalidArgument", "PUT", "/bkt/k", nil, hdr)
	}
	if _, err := ts.c.Store.Stat(t.Context(), "/bkt/k"); err == nil {
		t.Error("an object was stored")
	}
	ts.must(200, "PUT", "/bkt/k", []byte("x"), map[string]string{"X-Amz-Meta-Word": "café"})
	if r := ts.must(200, "HEAD", "/bkt/k", nil, nil); r.Header.Get("X-Amz-Meta-Word") != "café" {
		t.Errorf("HEAD: x-amz-meta-word %q, want café", r.Header.Get("X-Amz-Meta-Word"))
	}
}

// The headers kept with an object (the standard ones and x-amz-meta-*)
// hold at most 8 KiB, AWS's limit on a PUT's headers: a longer
// Content-Type or Content-Disposition was kept and sent back on every
// GET and HEAD, in a header line longer than clients read (Python's
// http.client, under boto3 and the aws cli, stops at 64 KiB).
func TestStoredHeadersBounded(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	ts.must(200, "PUT", "/bkt/src", []byte("x"), nil)
	long := "attachment; filename=" + strings.Repeat("n", maxStoredMeta)
	for _, hdr := range []map[string]string{
		{"Content-Disposition": long},
		{"Content-Type": long[:maxStoredMeta/2], "Cache-Control": long[:maxStoredMeta/2]},
	} {
		ts.fails(400, "MetadataTooLarge", "PUT", "/bkt/k", []byte("x"), hdr)
		ts.fails(400, "MetadataTooLarge", "POST", "/bkt/k?uploads", nil, hdr)
		hdr["X-Amz-Copy-Source"], hdr["X-Amz-Metadata-Directive"] = "/bkt/src", "REPLACE"
		ts.fails(400, "MetadataTooLarge", "PUT", "/bkt/k", nil, hdr)
	}
	ok := long[:maxStoredMeta-len("content-disposition")-len("x-amz-meta-a")-1]
	ts.must(200, "PUT", "/bkt/k", []byte("x"), map[string]string{"Content-Disposition": ok, "X-Amz-Meta-A": "1"})
	if r := ts.must(200, "HEAD", "/bkt/k", nil, nil); r.Header.Get("Content-Disposition") != ok {
		t.Errorf("HEAD: Content-Disposition of %d bytes, want %d", len(r.Header.Get("Content-Disposition")), len(ok))
	}
}

// S3 cannot set root:// attributes: x-amz-meta-xrootd.U.foo, in any
// case, is S3 metadata named xrootd.u.foo (kept under "x-amz-meta-"),
// and a header named as a metadata key is not metadata at all.
func TestS3CannotSetAttributes(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	hdr := map[string]string{"X-Amz-Meta-Xrootd.U.foo": "t:forged", "xrootd.U.bar": "t:forged", "S3-Etag": "forged"}
	ts.must(200, "PUT", "/bkt/k", []byte("x"), hdr)
	hdr["X-Amz-Copy-Source"], hdr["X-Amz-Metadata-Directive"] = "/bkt/k", "REPLACE"
	ts.must(200, "PUT", "/bkt/c", nil, hdr)
	for _, p := range []string{"/bkt/k", "/bkt/c"} {
		info, err := ts.c.Store.Stat(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		if info.User["x-amz-meta-xrootd.u.foo"] != "t:forged" || info.User[etagKey] == "forged" || len(info.User) != 2 {
			t.Errorf("%s: user metadata %q, want x-amz-meta-xrootd.u.foo and the ETag only", p, info.User)
		}
	}
}
