package s3

import (
	"maps"
	"mime"
	"net/http"
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
// than were stored. UTF-8 is kept as sent (and sent back RFC
// 2047-encoded, TestMetadataRFC2047).
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
	if info, err := ts.c.Store.Stat(t.Context(), "/bkt/k"); err != nil || info.User["x-amz-meta-word"] != "café" {
		t.Errorf("stored x-amz-meta-word %q (%v), want café", info.User["x-amz-meta-word"], err)
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

// metaHeaders checks that every x-amz-meta-* header of a GET or HEAD
// answer is US-ASCII, and returns their values decoded from RFC 2047.
func metaHeaders(t *testing.T, hdr http.Header) map[string]string {
	t.Helper()
	m := map[string]string{}
	for k, vs := range hdr {
		l := strings.ToLower(k)
		if !strings.HasPrefix(l, metaPrefix) {
			continue
		}
		for _, v := range vs {
			for i := 0; i < len(v); i++ {
				if v[i] < ' ' || v[i] > '~' {
					t.Errorf("%s: %q is not printable US-ASCII", k, v)
					break
				}
			}
		}
		v := strings.Join(vs, ",")
		if d, err := new(mime.WordDecoder).DecodeHeader(v); err == nil {
			v = d // else a charset mime does not know, sent as stored
		}
		m[l] = v
	}
	return m
}

// Metadata values that are not US-ASCII travel RFC 2047-encoded, as AWS
// has them: a PUT's encoded-words (=?UTF-8?B?...?=, Q too, UTF-8 or
// ISO-8859-1) are decoded before the value is stored, and GET and HEAD
// send a stored value that is not printable US-ASCII as
// =?UTF-8?B?...?= words. Values were stored as sent and answered raw,
// UTF-8 in a response header, which HTTP allows only as opaque bytes
// (SDKs read them as ISO-8859-1 or refuse them). The same goes for
// CopyObject under either directive and for multipart uploads.
func TestMetadataRFC2047(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	long := strings.Repeat("é", 100) // more than one encoded-word
	sent := map[string]string{
		"X-Amz-Meta-Word":   "=?UTF-8?B?Y2Fmw6k=?=",
		"X-Amz-Meta-Q":      "=?utf-8?q?na=C3=AFve_text?=",
		"X-Amz-Meta-Latin":  "=?ISO-8859-1?Q?caf=E9?=",
		"X-Amz-Meta-Mixed":  "tea or =?UTF-8?B?Y2Fmw6k=?= =?UTF-8?B?IOKYlQ==?=",
		"X-Amz-Meta-Long":   mime.BEncoding.Encode("UTF-8", long),
		"X-Amz-Meta-Raw":    "中文",
		"X-Amz-Meta-Ascii":  "plain =? text",
		"X-Amz-Meta-Kanji":  "=?Shift_JIS?B?gqA=?=", // a charset not decoded: kept as sent
		"X-Amz-Meta-Broken": "=?UTF-8?B?not base64?=",
	}
	want := map[string]string{
		"x-amz-meta-word": "café", "x-amz-meta-q": "naïve text", "x-amz-meta-latin": "café",
		"x-amz-meta-mixed": "tea or café ☕", "x-amz-meta-long": long, "x-amz-meta-raw": "中文",
		"x-amz-meta-ascii": "plain =? text", "x-amz-meta-kanji": "=?Shift_JIS?B?gqA=?=",
		"x-amz-meta-broken": "=?UTF-8?B?not base64?=",
	}
	check := func(path string) {
		t.Helper()
		info, err := ts.c.Store.Stat(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		stored := map[string]string{}
		for k, v := range info.User {
			if strings.HasPrefix(k, metaPrefix) {
				stored[k] = v
			}
		}
		if !maps.Equal(stored, want) {
			t.Errorf("%s: stored %q, want %q", path, stored, want)
		}
		for _, method := range []string{"HEAD", "GET"} {
			r := ts.must(200, method, path, nil, nil)
			if got := metaHeaders(t, r.Header); !maps.Equal(got, want) {
				t.Errorf("%s %s: decoded metadata %q, want %q", method, path, got, want)
			}
			if w := r.Header.Get("X-Amz-Meta-Word"); w != "=?UTF-8?B?Y2Fmw6k=?=" {
				t.Errorf("%s %s: x-amz-meta-word %q, want =?UTF-8?B?Y2Fmw6k=?=", method, path, w)
			}
			if a := r.Header.Get("X-Amz-Meta-Ascii"); a != "plain =? text" {
				t.Errorf("%s %s: x-amz-meta-ascii %q, want it as sent", method, path, a)
			}
		}
	}
	ts.must(200, "PUT", "/bkt/k", []byte("x"), sent)
	check("/bkt/k")

	// CopyObject: COPY keeps the stored values, REPLACE decodes its own.
	ts.must(200, "PUT", "/bkt/copy", nil, map[string]string{"X-Amz-Copy-Source": "/bkt/k"})
	check("/bkt/copy")
	repl := maps.Clone(sent)
	repl["X-Amz-Copy-Source"], repl["X-Amz-Metadata-Directive"] = "/bkt/copy", "REPLACE"
	ts.must(200, "PUT", "/bkt/replaced", nil, repl)
	check("/bkt/replaced")

	// A multipart upload's object.
	id := ts.createUpload("/bkt/mpu", sent)
	etag := ts.must(200, "PUT", "/bkt/mpu?partNumber=1&uploadId="+id, []byte("part"), nil).Header.Get("ETag")
	ts.must(200, "POST", "/bkt/mpu?uploadId="+id, completeBody([]int{1}, []string{etag}), nil)
	check("/bkt/mpu")

	// The decoded value is what is bounded, and must be UTF-8.
	ts.fails(400, "MetadataTooLarge", "PUT", "/bkt/big", []byte("x"),
		map[string]string{"X-Amz-Meta-Big": mime.BEncoding.Encode("UTF-8", strings.Repeat("é", maxUserMeta/2))})
	ts.fails(400, "InvalidArgument", "PUT", "/bkt/bad", []byte("x"), map[string]string{"X-Amz-Meta-Bad": "=?UTF-8?B?/w==?="})
}

// An x-amz-meta- header without a name is accepted and not stored, as
// AWS does: GET and HEAD then answer x-amz-missing-meta: 1 (the entries
// not returned) besides the metadata that was named. It was stored
// under "x-amz-meta-" and sent back as a header that SDKs read as
// metadata with an empty name.
func TestMetadataEmptyName(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	hdr := map[string]string{"X-Amz-Meta-": "nameless", "X-Amz-Meta-Ok": "kept"}
	check := func(path, missing string) {
		t.Helper()
		info, err := ts.c.Store.Stat(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := info.User[metaPrefix]; ok || info.User["x-amz-meta-ok"] != "kept" {
			t.Errorf("%s: stored %q, want x-amz-meta-ok only", path, info.User)
		}
		for _, method := range []string{"HEAD", "GET"} {
			r := ts.must(200, method, path, nil, nil)
			if got := metaHeaders(t, r.Header); len(got) != 1 || got["x-amz-meta-ok"] != "kept" {
				t.Errorf("%s %s: metadata %q, want x-amz-meta-ok only", method, path, got)
			}
			if m := r.Header.Get("X-Amz-Missing-Meta"); m != missing {
				t.Errorf("%s %s: x-amz-missing-meta %q, want %q", method, path, m, missing)
			}
		}
	}
	ts.must(200, "PUT", "/bkt/k", []byte("x"), hdr)
	check("/bkt/k", "1")
	ts.must(200, "PUT", "/bkt/copy", nil, map[string]string{"X-Amz-Copy-Source": "/bkt/k"})
	check("/bkt/copy", "1")
	ts.must(200, "PUT", "/bkt/replaced", nil, map[string]string{"X-Amz-Copy-Source": "/bkt/k",
		"X-Amz-Metadata-Directive": "REPLACE", "X-Amz-Meta-Ok": "kept"})
	check("/bkt/replaced", "")
	id := ts.createUpload("/bkt/mpu", hdr)
	etag := ts.must(200, "PUT", "/bkt/mpu?partNumber=1&uploadId="+id, []byte("part"), nil).Header.Get("ETag")
	ts.must(200, "POST", "/bkt/mpu?uploadId="+id, completeBody([]int{1}, []string{etag}), nil)
	check("/bkt/mpu", "1")
}
