package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ecstore/ecstore/internal/jwtauth"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// Extended attributes over root:// (kXR_fattr: xrdcp --xattr, xrdfs
// xattr, the python bindings' File.set_xattr) are kept in the object's
// user metadata (archive.Metadata.User, docs/FORMAT.md §5), written with
// the object and read back from its metadata, never from its data. As
// objects are immutable, so are their attributes: they are set (or
// deleted) on the handle of an open for writing, before its close, which
// commits them with the object; a committed object's are only got and
// listed. The names are those on the wire, which XRootD clients send
// without the "U." of xrootd's user namespace (xrootd keeps an attribute
// foo on disk as user.U.foo; xrdcp --xattr sends a local file's
// user.foo as foo).

// attrKeyPrefix starts the user metadata key of an attribute: foo is kept
// as "xrootd.U.foo". S3 keeps its metadata under lower-case header names
// (x-amz-meta-*, content-type) and "s3-*" keys, which never start so.
const attrKeyPrefix = "xrootd.U."

// An attribute's value is kept as "t:" and the value when it is UTF-8
// text, else as "b:" and its standard base64 (JSON strings hold text).
const (
	attrText   = "t:"
	attrBase64 = "b:"
)

// Limits of the attributes of one object, besides xrootd's per request
// (xrootd.MaxFattrAttrs, MaxFattrName, MaxFattrValue): they keep an
// object's metadata entry well within what readers accept (1 MiB).
const (
	MaxObjectAttrs     = 256      // attributes
	MaxObjectAttrBytes = 64 << 10 // bytes of their names and values together
)

// encodeAttrValue is the user metadata value of an attribute's value v.
func encodeAttrValue(v []byte) string {
	if utf8.Valid(v) {
		return attrText + string(v)
	}
	return attrBase64 + base64.StdEncoding.EncodeToString(v)
}

// decodeAttrValue is the value an attribute kept as s has; false when s
// is not an encoded value.
func decodeAttrValue(s string) ([]byte, bool) {
	switch {
	case strings.HasPrefix(s, attrText):
		return []byte(s[len(attrText):]), true
	case strings.HasPrefix(s, attrBase64):
		v, err := base64.StdEncoding.DecodeString(s[len(attrBase64):])
		return v, err == nil
	}
	return nil, false
}

// attrsOf returns the attributes kept in user metadata, by name. Entries
// that do not decode are left out.
func attrsOf(user map[string]string) map[string][]byte {
	attrs := map[string][]byte{}
	for k, s := range user {
		if name, ok := strings.CutPrefix(k, attrKeyPrefix); ok && name != "" {
			if v, ok := decodeAttrValue(s); ok {
				attrs[name] = v
			}
		}
	}
	return attrs
}

// listAttrs lists attrs by name, as a kXR_fattr list answers.
func listAttrs(attrs map[string][]byte) []xrootd.Attr {
	list := make([]xrootd.Attr, 0, len(attrs))
	for _, n := range slices.Sorted(maps.Keys(attrs)) {
		list = append(list, xrootd.Attr{Name: n, Value: attrs[n]})
	}
	return list
}

// getAttrs answers a get of names from attrs, of the object called what.
func getAttrs(attrs map[string][]byte, what string, names []string) []xrootd.Attr {
	out := make([]xrootd.Attr, len(names))
	for i, n := range names {
		out[i].Name = n
		if v, ok := attrs[n]; ok {
			out[i].Value = v
		} else {
			out[i].Err = xrootd.Errorf(xrootd.ErrAttrNotFound, "%s has no attribute %s", what, n)
		}
	}
	return out
}

// immutable refuses to change the attributes of the committed object
// name (op is "set" or "del").
func immutable(op, name string) error {
	return &xrootd.Refusal{Err: xrootd.Errorf(xrootd.ErrUnsupported,
		"xattr %s %s: objects are immutable, and so are their attributes: set them when writing the object (xrdcp --xattr); re-write it to change them", op, name)}
}

// GetAttrs implements xrootd.AttrKeeper: the attributes of the object
// name, from its metadata (an object without user metadata, as its
// archives' summaries tell, needs no archive read). A directory has none.
func (f *FS) GetAttrs(ctx context.Context, name string, names []string) (_ []xrootd.Attr, err error) {
	defer func(start time.Time) { f.hooks.done("fattr", start, err) }(time.Now())
	if err := f.allow(ctx, jwtauth.Read, "xattr get", name); err != nil {
		return nil, &xrootd.Refusal{Err: err}
	}
	attrs, err := f.objectAttrs(ctx, name)
	if err != nil {
		return nil, err
	}
	return getAttrs(attrs, name, names), nil
}

// AllAttrs implements xrootd.AttrEnumerator, as GetAttrs reads them.
func (f *FS) AllAttrs(ctx context.Context, name string) (_ []xrootd.Attr, err error) {
	defer func(start time.Time) { f.hooks.done("fattr", start, err) }(time.Now())
	if err := f.allow(ctx, jwtauth.Read, "xattr list", name); err != nil {
		return nil, err
	}
	attrs, err := f.objectAttrs(ctx, name)
	if err != nil {
		return nil, err
	}
	return listAttrs(attrs), nil
}

// SetAttrs implements xrootd.AttrKeeper: a client that may modify name
// is told that a committed object's attributes cannot change (a missing
// one that it is missing, for each attribute, as xrootd says).
func (f *FS) SetAttrs(ctx context.Context, name string, _ []xrootd.Attr, _ bool) ([]xrootd.Attr, error) {
	return nil, f.refuseChange(ctx, "set", name)
}

// DelAttrs implements xrootd.AttrKeeper, refusing as SetAttrs does.
func (f *FS) DelAttrs(ctx context.Context, name string, _ []string) ([]xrootd.Attr, error) {
	return nil, f.refuseChange(ctx, "del", name)
}

// refuseChange is the error of a set or del (op) of the attributes of
// name by path.
func (f *FS) refuseChange(ctx context.Context, op, name string) (err error) {
	defer func(start time.Time) { f.hooks.done("fattr", start, err) }(time.Now())
	if err := f.allow(ctx, jwtauth.Modify, "xattr "+op, name); err != nil {
		return &xrootd.Refusal{Err: err}
	}
	info, err := f.store.StatBrief(ctx, name)
	switch {
	case err != nil:
		return mapErr(err)
	case info.IsDir:
		return &xrootd.Refusal{Err: xrootd.Errorf(xrootd.ErrUnsupported,
			"xattr %s %s: directories have no attributes here", op, name)}
	}
	return immutable(op, name)
}

// objectAttrs reads the attributes of the object name; a directory has
// none.
func (f *FS) objectAttrs(ctx context.Context, name string) (map[string][]byte, error) {
	info, err := f.store.StatBrief(ctx, name)
	if err != nil {
		return nil, mapErr(err)
	}
	if info.IsDir || info.NoUserMeta {
		return nil, nil
	}
	if info.User == nil {
		// The summaries do not hold the user metadata: the metadata does.
		if info, err = f.store.Stat(ctx, name); err != nil {
			return nil, mapErr(err)
		}
	}
	return attrsOf(info.User), nil
}

var (
	_ xrootd.AttrKeeper         = (*FS)(nil)
	_ xrootd.AttrEnumerator     = (*FS)(nil)
	_ xrootd.FileAttrKeeper     = (*readFile)(nil)
	_ xrootd.FileAttrEnumerator = (*readFile)(nil)
	_ xrootd.FileAttrKeeper     = (*writeFile)(nil)
	_ xrootd.FileAttrEnumerator = (*writeFile)(nil)
)

// GetAttrs implements xrootd.FileAttrKeeper: from the metadata of the
// version being read.
func (rf *readFile) GetAttrs(_ context.Context, names []string) ([]xrootd.Attr, error) {
	info := rf.r.Info()
	return getAttrs(attrsOf(info.User), info.Path, names), nil
}

// AllAttrs implements xrootd.FileAttrEnumerator, as GetAttrs reads them.
func (rf *readFile) AllAttrs(context.Context) ([]xrootd.Attr, error) {
	return listAttrs(attrsOf(rf.r.Info().User)), nil
}

// SetAttrs implements xrootd.FileAttrKeeper; the server does not ask a
// file open for reading, whose attributes cannot change.
func (rf *readFile) SetAttrs(context.Context, []xrootd.Attr, bool) ([]xrootd.Attr, error) {
	return nil, immutable("set", rf.r.Info().Path)
}

// DelAttrs implements xrootd.FileAttrKeeper, refusing as SetAttrs does.
func (rf *readFile) DelAttrs(context.Context, []string) ([]xrootd.Attr, error) {
	return nil, immutable("del", rf.r.Info().Path)
}

// pendingAttrs are the attributes of an object being written: kept with
// it when it is committed.
type pendingAttrs struct {
	mu    sync.Mutex
	attrs map[string][]byte
}

// GetAttrs implements xrootd.FileAttrKeeper: the attributes set so far.
func (wf *writeFile) GetAttrs(_ context.Context, names []string) ([]xrootd.Attr, error) {
	wf.attrs.mu.Lock()
	defer wf.attrs.mu.Unlock()
	return getAttrs(wf.attrs.attrs, wf.name, names), nil
}

// AllAttrs implements xrootd.FileAttrEnumerator: the attributes set so
// far.
func (wf *writeFile) AllAttrs(context.Context) ([]xrootd.Attr, error) {
	wf.attrs.mu.Lock()
	defer wf.attrs.mu.Unlock()
	return listAttrs(wf.attrs.attrs), nil
}

// SetAttrs implements xrootd.FileAttrKeeper: the attributes are kept with
// the object when Close commits it. They are set in order (with onlyNew,
// one that exists, or was set earlier in attrs, is left alone and its
// answer says so); names that are not UTF-8 are refused each. A request
// that would take the object's attributes past MaxObjectAttrs or
// MaxObjectAttrBytes is refused whole, setting none.
func (wf *writeFile) SetAttrs(_ context.Context, attrs []xrootd.Attr, onlyNew bool) ([]xrootd.Attr, error) {
	if wf.committed {
		// Committed when its connection broke (writeFile.Abort): an
		// attribute its client sends again, or for the first time
		// (xrdcp --xattr sets them after the last write), would be
		// lost.
		return nil, immutable("set", wf.name)
	}
	wf.attrs.mu.Lock()
	defer wf.attrs.mu.Unlock()
	next := maps.Clone(wf.attrs.attrs)
	if next == nil {
		next = map[string][]byte{}
	}
	out := make([]xrootd.Attr, len(attrs))
	for i, a := range attrs {
		out[i].Name = a.Name
		_, exists := next[a.Name]
		switch {
		case !utf8.ValidString(a.Name):
			out[i].Err = xrootd.Errorf(xrootd.ErrArgInvalid, "attribute name %q is not UTF-8", a.Name)
		case onlyNew && exists:
			out[i].Err = xrootd.Errorf(xrootd.ErrItExists, "%s has attribute %s", wf.name, a.Name)
		default:
			next[a.Name] = bytes.Clone(a.Value) // the request's buffer is reused
		}
	}
	size := 0
	for n, v := range next {
		size += len(n) + len(v)
	}
	if len(next) > MaxObjectAttrs || size > MaxObjectAttrBytes {
		return nil, &xrootd.Refusal{Err: xrootd.Errorf(xrootd.ErrArgTooLong,
			"xattr set %s: an object keeps at most %d attributes of %d bytes (names and values) in all; these would be %d of %d bytes",
			wf.name, MaxObjectAttrs, MaxObjectAttrBytes, len(next), size)}
	}
	wf.attrs.attrs = next
	return out, nil
}

// DelAttrs implements xrootd.FileAttrKeeper: the attributes are not kept
// with the object.
func (wf *writeFile) DelAttrs(_ context.Context, names []string) ([]xrootd.Attr, error) {
	if wf.committed {
		return nil, immutable("del", wf.name)
	}
	wf.attrs.mu.Lock()
	defer wf.attrs.mu.Unlock()
	out := make([]xrootd.Attr, len(names))
	for i, n := range names {
		out[i].Name = n
		if _, ok := wf.attrs.attrs[n]; ok {
			delete(wf.attrs.attrs, n)
		} else {
			out[i].Err = xrootd.Errorf(xrootd.ErrAttrNotFound, "%s has no attribute %s", wf.name, n)
		}
	}
	return out, nil
}

// commitAttrs hands the attributes set to the object's writer, before its
// Close.
func (wf *writeFile) commitAttrs() {
	wf.attrs.mu.Lock()
	defer wf.attrs.mu.Unlock()
	for n, v := range wf.attrs.attrs {
		wf.w.SetUser(attrKeyPrefix+n, encodeAttrValue(v))
	}
}
