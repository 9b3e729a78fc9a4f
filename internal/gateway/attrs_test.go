package gateway

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/testcluster"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// attrsByName maps a list's attributes by name.
func attrsByName(t *testing.T, attrs []xrootd.Attr) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, a := range attrs {
		if _, dup := m[a.Name]; dup {
			t.Errorf("attribute %s listed twice", a.Name)
		}
		m[a.Name] = string(a.Value)
	}
	return m
}

// Attributes set on the handle of an object being written (as xrdcp
// --xattr sets them, before its close) are kept with it: got and listed
// by path and on a handle open for reading, from its metadata, and
// there under their own keys (xrootd.U.*), binary values too.
func TestAttrsSetWhileWritingAreKept(t *testing.T) {
	c, cl := serve(t)
	ctx := context.Background()
	data := testcluster.Rand(rand.New(rand.NewPCG(1, 2)), 300<<10+7)
	binary := []byte{0xff, 0, 0xfe, 'x'}
	f, err := cl.Open(ctx, "/a/f", xrootd.OpenNew|xrootd.OpenMkpath|xrootd.OpenUpdate, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	set, err := f.SetAttrs(ctx, []xrootd.Attr{{Name: "foo", Value: []byte("bar")}, {Name: "bin", Value: binary},
		{Name: "empty", Value: []byte{}}, {Name: "gone", Value: []byte("soon")}}, false)
	if err != nil || xrootd.AttrErr(set) != nil {
		t.Fatalf("set on the write handle: %v %v", err, xrootd.AttrErr(set))
	}
	again, err := f.SetAttrs(ctx, []xrootd.Attr{{Name: "foo", Value: []byte("other")}, {Name: "new", Value: []byte("1")}}, true)
	if err != nil || !hasCode(again[0].Err, xrootd.ErrItExists) || again[1].Err != nil {
		t.Errorf("set with onlyNew: %v %+v, want foo ItExists, new set", err, again)
	}
	if del, err := f.DelAttrs(ctx, "gone", "never"); err != nil || del[0].Err != nil || !hasCode(del[1].Err, xrootd.ErrAttrNotFound) {
		t.Errorf("del on the write handle: %v %+v", err, del)
	}
	if got, err := f.GetAttrs(ctx, "foo", "gone"); err != nil || string(got[0].Value) != "bar" || !hasCode(got[1].Err, xrootd.ErrAttrNotFound) {
		t.Errorf("get on the write handle: %v %+v", err, got)
	}
	if _, err := f.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"foo": "bar", "bin": string(binary), "empty": "", "new": "1"}

	list, err := cl.AllAttrs(ctx, "/a/f")
	if err != nil {
		t.Fatal(err)
	}
	if got := attrsByName(t, list); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("list by path: %q, want %q", got, want)
	}
	got, err := cl.GetAttrs(ctx, "/a/f", "bin", "foo", "gone", "empty")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[0].Value, binary) || string(got[1].Value) != "bar" || !hasCode(got[2].Err, xrootd.ErrAttrNotFound) ||
		got[3].Err != nil || len(got[3].Value) != 0 {
		t.Errorf("get by path: %+v", got)
	}

	rf, err := cl.Open(ctx, "/a/f", xrootd.OpenRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rf.GetAttrs(ctx, "foo"); err != nil || string(got[0].Value) != "bar" {
		t.Errorf("get on a read handle: %v %+v", err, got)
	}
	if list, err := rf.AllAttrs(ctx); err != nil || fmt.Sprint(attrsByName(t, list)) != fmt.Sprint(want) {
		t.Errorf("list on a read handle: %v %+v", err, list)
	}
	if _, err := rf.SetAttrs(ctx, []xrootd.Attr{{Name: "foo", Value: []byte("x")}}, false); !hasCode(err, xrootd.ErrInvalidRequest) {
		t.Errorf("set on a read handle: %v, want InvalidRequest", err)
	}
	rf.Close(ctx)

	info, err := c.Store.Stat(ctx, "/a/f")
	if err != nil {
		t.Fatal(err)
	}
	if info.User["xrootd.U.foo"] != "t:bar" || info.User["xrootd.U.bin"] != "b:/wD+eA==" || len(info.User) != 4 {
		t.Errorf("user metadata: %q", info.User)
	}
	if got, err := c.Get("/a/f"); err != nil || !bytes.Equal(got, data) {
		t.Errorf("data: %d bytes, %v", len(got), err)
	}
}

// A committed object's attributes cannot change: set and del by path are
// refused as a request, saying why; a missing object's are not found, a
// directory has none. Metadata that is not an attribute (S3's, or a
// value that does not decode) is not listed.
func TestAttrsOfCommittedObjectsAreImmutable(t *testing.T) {
	c, cl := serve(t)
	ctx := context.Background()
	w, err := c.Store.Create(ctx, "/b/s3", &object.CreateOptions{User: map[string]string{
		"s3-etag": "abc", "x-amz-meta-foo": "s3", "content-type": "text/plain",
		"xrootd.U.foo": "t:xrd", "xrootd.U.bad": "not encoded", "xrootd.U.bad64": "b:!!"}})
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("data"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	upload(t, cl, "/b/plain", []byte("no user metadata"))

	if list, err := cl.AllAttrs(ctx, "/b/s3"); err != nil || len(list) != 1 || list[0].Name != "foo" || string(list[0].Value) != "xrd" {
		t.Errorf("list: %v %+v, want foo=xrd alone", err, list)
	}
	if list, err := cl.AllAttrs(ctx, "/b/plain"); err != nil || len(list) != 0 {
		t.Errorf("list without attributes: %v %+v", err, list)
	}
	for _, path := range []string{"/b/s3", "/b/plain"} {
		_, err := cl.SetAttrs(ctx, path, []xrootd.Attr{{Name: "foo", Value: []byte("new")}}, false)
		if !hasCode(err, xrootd.ErrUnsupported) || !strings.Contains(err.Error(), "immutable") {
			t.Errorf("set on committed %s: %v, want Unsupported saying immutable", path, err)
		}
		if _, err := cl.DelAttrs(ctx, path, "foo"); !hasCode(err, xrootd.ErrUnsupported) || !strings.Contains(err.Error(), "immutable") {
			t.Errorf("del on committed %s: %v, want Unsupported saying immutable", path, err)
		}
	}
	if got, err := cl.GetAttrs(ctx, "/b/s3", "foo"); err != nil || string(got[0].Value) != "xrd" {
		t.Errorf("after the refused set: %v %+v", err, got)
	}
	// A missing object, as xrootd answers: per attribute for get and
	// set, for the request for a list.
	if got, err := cl.GetAttrs(ctx, "/b/none", "foo"); err != nil || !hasCode(got[0].Err, xrootd.ErrNotFound) {
		t.Errorf("get on a missing object: %v %+v", err, got)
	}
	if got, err := cl.SetAttrs(ctx, "/b/none", []xrootd.Attr{{Name: "foo"}}, false); err != nil || !hasCode(got[0].Err, xrootd.ErrNotFound) {
		t.Errorf("set on a missing object: %v %+v", err, got)
	}
	if _, err := cl.AllAttrs(ctx, "/b/none"); !hasCode(err, xrootd.ErrNotFound) {
		t.Errorf("list on a missing object: %v", err)
	}
	if list, err := cl.AllAttrs(ctx, "/b"); err != nil || len(list) != 0 {
		t.Errorf("list of a directory: %v %+v", err, list)
	}
	if got, err := cl.GetAttrs(ctx, "/b", "foo"); err != nil || !hasCode(got[0].Err, xrootd.ErrAttrNotFound) {
		t.Errorf("get on a directory: %v %+v", err, got)
	}
	if _, err := cl.SetAttrs(ctx, "/b", []xrootd.Attr{{Name: "foo"}}, false); !hasCode(err, xrootd.ErrUnsupported) {
		t.Errorf("set on a directory: %v", err)
	}
}

// An object keeps at most MaxObjectAttrs attributes of MaxObjectAttrBytes
// in all: a set past them is refused whole and sets none; names that are
// not UTF-8 are refused each. The object is still written.
func TestAttrsBounds(t *testing.T) {
	_, cl := serve(t)
	ctx := context.Background()
	f, err := cl.Open(ctx, "/c/f", xrootd.OpenNew|xrootd.OpenMkpath|xrootd.OpenUpdate, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("v"), 20<<10)
	for i := range 3 {
		if set, err := f.SetAttrs(ctx, []xrootd.Attr{{Name: fmt.Sprint("big", i), Value: big}}, false); err != nil || xrootd.AttrErr(set) != nil {
			t.Fatalf("set big%d: %v %v", i, err, xrootd.AttrErr(set))
		}
	}
	_, err = f.SetAttrs(ctx, []xrootd.Attr{{Name: "small", Value: []byte("ok")}, {Name: "big3", Value: big}}, false)
	if !hasCode(err, xrootd.ErrArgTooLong) {
		t.Errorf("set past %d bytes: %v, want ArgTooLong", MaxObjectAttrBytes, err)
	}
	// Replacing a value counts its new size only.
	if set, err := f.SetAttrs(ctx, []xrootd.Attr{{Name: "big0", Value: big[:10]}}, false); err != nil || xrootd.AttrErr(set) != nil {
		t.Fatalf("replace big0: %v %v", err, xrootd.AttrErr(set))
	}
	bad, err := f.SetAttrs(ctx, []xrootd.Attr{{Name: "ok", Value: []byte("1")}, {Name: "\xff\xfe", Value: []byte("2")}}, false)
	if err != nil || bad[0].Err != nil || !hasCode(bad[1].Err, xrootd.ErrArgInvalid) {
		t.Errorf("set of a name that is not UTF-8: %v %+v", err, bad)
	}
	for i := 0; ; i += xrootd.MaxFattrAttrs {
		var attrs []xrootd.Attr
		for j := range xrootd.MaxFattrAttrs {
			attrs = append(attrs, xrootd.Attr{Name: fmt.Sprint("n", i+j)})
		}
		_, err := f.SetAttrs(ctx, attrs, false)
		if err != nil {
			if !hasCode(err, xrootd.ErrArgTooLong) || i+xrootd.MaxFattrAttrs <= MaxObjectAttrs-4 {
				t.Errorf("set of attributes n%d..: %v", i, err)
			}
			break
		}
	}
	if _, err := f.WriteAt(ctx, []byte("data"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	list, err := cl.AllAttrs(ctx, "/c/f")
	if err != nil {
		t.Fatal(err)
	}
	got := attrsByName(t, list)
	size := 0
	for n, v := range got {
		size += len(n) + len(v)
	}
	if len(got) > MaxObjectAttrs || size > MaxObjectAttrBytes || got["big0"] != string(big[:10]) || got["ok"] != "1" ||
		got["big2"] != string(big) {
		t.Errorf("kept %d attributes of %d bytes", len(got), size)
	}
	if _, ok := got["small"]; ok {
		t.Errorf("small was set by a refused request")
	}
}

// Reading attributes needs read access to the path, changing them write
// access, which a refusal names before anything else.
func TestAttrsNeedAccess(t *testing.T) {
	c := testcluster.New(t, 6, layout.Geometry{K: 3, M: 2, ChunkSize: 1024})
	c.Put(t, "/atlas/data/f", []byte("data"))
	c.Put(t, "/cms/f", []byte("data"))
	ctx := context.Background()
	cl := tokenClient(t, NewFS(c.Store, nil, Hooks{}).RequireToken(), "reader", "storage.read:/data")
	if got, err := cl.GetAttrs(ctx, "/atlas/data/f", "foo"); err != nil || !hasCode(got[0].Err, xrootd.ErrAttrNotFound) {
		t.Errorf("get within the read scope: %v %+v", err, got)
	}
	if _, err := cl.AllAttrs(ctx, "/atlas/data/f"); err != nil {
		t.Errorf("list within the read scope: %v", err)
	}
	if _, err := cl.GetAttrs(ctx, "/cms/f", "foo"); !hasCode(err, xrootd.ErrNotAuthorized) {
		t.Errorf("get outside the read scope: %v, want NotAuthorized", err)
	}
	if _, err := cl.AllAttrs(ctx, "/cms/f"); !hasCode(err, xrootd.ErrNotAuthorized) {
		t.Errorf("list outside the read scope: %v, want NotAuthorized", err)
	}
	if _, err := cl.SetAttrs(ctx, "/atlas/data/f", []xrootd.Attr{{Name: "foo"}}, false); !hasCode(err, xrootd.ErrNotAuthorized) {
		t.Errorf("set without a write scope: %v, want NotAuthorized", err)
	}
	if _, err := cl.DelAttrs(ctx, "/atlas/data/f", "foo"); !hasCode(err, xrootd.ErrNotAuthorized) {
		t.Errorf("del without a write scope: %v, want NotAuthorized", err)
	}
}
