package xrootd

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// attrFS keeps fixed attributes: it lists and gets them, refuses a set
// as a request (Refusal) and fails a del per attribute.
type attrFS struct {
	*memFS
	attrs []Attr
}

func (a attrFS) Open(ctx context.Context, name string, o OpenOptions) (File, error) {
	f, err := a.memFS.Open(ctx, name, o)
	if err != nil {
		return nil, err
	}
	return attrFile{File: f, attrs: a.attrs}, nil
}

func (a attrFS) GetAttrs(_ context.Context, _ string, names []string) ([]Attr, error) {
	out := make([]Attr, len(names))
	for i, n := range names {
		out[i] = Attr{Name: n, Err: Errorf(ErrAttrNotFound, "no %s", n)}
		for _, have := range a.attrs {
			if have.Name == n {
				out[i] = have
			}
		}
	}
	return out, nil
}

func (a attrFS) SetAttrs(_ context.Context, name string, _ []Attr, _ bool) ([]Attr, error) {
	return nil, &Refusal{Err: Errorf(ErrNotAuthorized, "%s: attributes are fixed here", name)}
}

func (a attrFS) DelAttrs(_ context.Context, name string, _ []string) ([]Attr, error) {
	return nil, Errorf(ErrIOError, "%s: cannot delete", name)
}

func (a attrFS) AllAttrs(_ context.Context, name string) ([]Attr, error) {
	if name != "/f" {
		return nil, Errorf(ErrNotFound, "%s: no such file", name)
	}
	return a.attrs, nil
}

// attrFile lists its attributes, and keeps none otherwise.
type attrFile struct {
	File
	attrs []Attr
}

func (f attrFile) AllAttrs(context.Context) ([]Attr, error) { return f.attrs, nil }

// kXR_fattr list answers every attribute with its value, by path and on
// a handle; a handler's Refusal fails the request with its message,
// where its other errors are each attribute's.
func TestFattrListAndRefusal(t *testing.T) {
	m := newMemFS()
	m.put("/f", []byte("x"))
	attrs := []Attr{{Name: "U.yyy", Value: []byte("2")}, {Name: "foo", Value: []byte("bar")}, {Name: "empty", Value: []byte{}}}
	addr, _ := startServer(t, attrFS{memFS: m, attrs: attrs}, Limits{})
	c := dial(t, addr, nil)
	ctx := testCtx(t)
	same := func(got []Attr) bool { return fmt.Sprint(got) == fmt.Sprint(attrs) }
	if got, err := c.AllAttrs(ctx, "/f"); err != nil || !same(got) {
		t.Errorf("list by path: %+v %v", got, err)
	}
	_, err := c.AllAttrs(ctx, "/nofile")
	wantCode(t, err, ErrNotFound)
	f, err := c.Open(ctx, "/f", OpenRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := f.AllAttrs(ctx); err != nil || !same(got) {
		t.Errorf("list on a handle: %+v %v", got, err)
	}
	_, err = f.GetAttrs(ctx, "foo")
	wantCode(t, err, ErrUnsupported) // attrFile is no FileAttrKeeper
	_, err = c.SetAttrs(ctx, "/f", []Attr{{Name: "foo", Value: []byte("x")}}, false)
	wantCode(t, err, ErrNotAuthorized)
	if err == nil || !strings.Contains(err.Error(), "attributes are fixed here") {
		t.Errorf("refused set: %v, want the handler's message", err)
	}
	del, err := c.DelAttrs(ctx, "/f", "foo", "empty")
	if err != nil || len(del) != 2 {
		t.Fatalf("del: %+v %v", del, err)
	}
	for _, a := range del {
		wantCode(t, a.Err, ErrIOError)
	}
	if err := c.Ping(ctx); err != nil {
		t.Errorf("connection did not survive: %v", err)
	}
}

// The answers of a real xrootd 5.5.3 to kXR_fattr list, without and
// with values (kXR_fa_aData), for attributes U.yyy=2, zzz=1, foo=bar,
// baz=qux; and an empty list.
func TestParseFattrListResponse(t *testing.T) {
	want := []Attr{{Name: "U.yyy", Value: []byte("2")}, {Name: "zzz", Value: []byte("1")},
		{Name: "foo", Value: []byte("bar")}, {Name: "baz", Value: []byte("qux")}}
	names := "U.yyy\x00zzz\x00foo\x00baz\x00"
	values := "U.yyy\x00\x00\x00\x00\x012zzz\x00\x00\x00\x00\x011foo\x00\x00\x00\x00\x03barbaz\x00\x00\x00\x00\x03qux"
	got, err := ParseFattrListResponse([]byte(names), false)
	if err != nil || len(got) != 4 {
		t.Fatalf("names: %+v %v", got, err)
	}
	for i := range got {
		if got[i].Name != want[i].Name || got[i].Value != nil {
			t.Errorf("names: %d is %+v, want %s", i, got[i], want[i].Name)
		}
	}
	if got, err := ParseFattrListResponse([]byte(values), true); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("values: %+v %v", got, err)
	}
	if b := AppendFattrListResponse(nil, want, true); string(b) != values {
		t.Errorf("encoded with values: %q", b)
	}
	if b := AppendFattrListResponse(nil, want, false); string(b) != names {
		t.Errorf("encoded names: %q", b)
	}
	if got, err := ParseFattrListResponse(nil, true); err != nil || len(got) != 0 {
		t.Errorf("empty: %+v %v", got, err)
	}
	for _, bad := range []string{"\x00", "foo", "foo\x00\x00\x00", "foo\x00\x00\x00\x00\x04bar", "foo\x00\xff\xff\xff\xffbar"} {
		if got, err := ParseFattrListResponse([]byte(bad), true); err == nil {
			t.Errorf("%q: %+v, want an error", bad, got)
		}
	}
}
