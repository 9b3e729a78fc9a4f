package xrootd

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
)

// FattrOp is the subcode of a kXR_fattr request.
type FattrOp uint8

// kXR_fattr subcodes (xfaSubCode).
const (
	FattrDel  FattrOp = 0 // kXR_fattrDel
	FattrGet  FattrOp = 1 // kXR_fattrGet
	FattrList FattrOp = 2 // kXR_fattrList
	FattrSet  FattrOp = 3 // kXR_fattrSet
)

// kXR_fattr options.
const (
	FattrIsNew      = 0x01 // set: only attributes that do not exist yet
	FattrListValues = 0x10 // list: with the values
)

// kXR_fattr limits (xfaLimits).
const (
	MaxFattrAttrs = 16    // attributes per request
	MaxFattrName  = 248   // bytes of an attribute name
	MaxFattrValue = 65536 // bytes of an attribute value
)

// FattrRequest is kXR_fattr: delete, get, list or set extended attributes
// of the file at Path, or, with an empty Path, of the open file Handle.
// Names (every operation but list) and Values (set only, one per name)
// travel as the protocol's name and value vectors.
type FattrRequest struct {
	Handle  FileHandle
	Op      FattrOp
	Options uint8
	Path    string // path, optionally followed by ?CGI; empty: Handle
	Names   []string
	Values  [][]byte
}

// RequestID returns ReqFattr.
func (*FattrRequest) RequestID() RequestID { return ReqFattr }

func (r *FattrRequest) marshal(p *[16]byte) []byte {
	copy(p[0:4], r.Handle[:])
	p[4], p[5], p[6] = byte(r.Op), byte(len(r.Names)), r.Options
	b := append([]byte(r.Path), 0)
	for _, n := range r.Names {
		b = append(b, 0, 0)
		b = append(b, n...)
		b = append(b, 0)
	}
	for _, v := range r.Values {
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	return b
}

// parseFattr decodes a kXR_fattr request as an xrootd server checks it:
// a known subcode, 1 to MaxFattrAttrs names (none for list), each marked
// by two zero bytes and NUL-terminated, values (for set) within
// MaxFattrValue, and nothing left over.
func parseFattr(p *[16]byte, pl []byte) (Request, error) {
	r := &FattrRequest{Handle: handleAt(p, 0), Op: FattrOp(p[4]), Options: p[6]}
	n := int(p[5])
	switch {
	case r.Op > FattrSet:
		return nil, fmt.Errorf("%w: fattr subcode %d", ErrMalformed, r.Op)
	case r.Op == FattrList && n != 0, r.Op != FattrList && (n == 0 || n > MaxFattrAttrs):
		return nil, fmt.Errorf("%w: fattr with %d attributes", ErrMalformed, n)
	}
	if len(pl) == 0 {
		if n != 0 {
			return nil, fmt.Errorf("%w: fattr without its arguments", ErrMalformed)
		}
		return r, nil
	}
	end := bytes.IndexByte(pl, 0)
	if end < 0 {
		return nil, fmt.Errorf("%w: fattr path not terminated", ErrMalformed)
	}
	r.Path, pl = string(pl[:end]), pl[end+1:]
	for range n {
		if len(pl) < 3 || pl[0] != 0 || pl[1] != 0 {
			return nil, fmt.Errorf("%w: fattr name vector", ErrMalformed)
		}
		end := bytes.IndexByte(pl[2:], 0)
		if end <= 0 || end > MaxFattrName {
			return nil, fmt.Errorf("%w: fattr name of bad length", ErrMalformed)
		}
		r.Names = append(r.Names, string(pl[2:2+end]))
		pl = pl[2+end+1:]
	}
	if r.Op == FattrSet {
		for range n {
			if len(pl) < 4 {
				return nil, fmt.Errorf("%w: fattr value vector", ErrMalformed)
			}
			vl := int(int32(getU32(pl)))
			if vl < 0 || vl > MaxFattrValue || vl > len(pl)-4 {
				return nil, fmt.Errorf("%w: fattr value of bad length", ErrMalformed)
			}
			r.Values = append(r.Values, pl[4:4+vl])
			pl = pl[4+vl:]
		}
	}
	if len(pl) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the fattr arguments", ErrMalformed, len(pl))
	}
	return r, nil
}

// Attr is one extended attribute in a kXR_fattr answer: its value, or
// why the server could not get, set or delete it.
type Attr struct {
	Name  string
	Value []byte
	Err   error // an *Error (ErrNotFound for a missing attribute), or nil
}

// GetAttrs gets the named extended attributes of path (kXR_fattr get);
// the answer has one Attr per name, in order. A plain xrootd keeps them
// on disk as user.U.<name>.
func (c *Client) GetAttrs(ctx context.Context, path string, names ...string) ([]Attr, error) {
	return c.fattr(ctx, &FattrRequest{Op: FattrGet, Path: path, Names: names})
}

// SetAttrs sets extended attributes of path (kXR_fattr set); with
// onlyNew, an attribute that exists is left as it is and its Attr says
// so. The answer has one Attr per attribute, in order.
func (c *Client) SetAttrs(ctx context.Context, path string, attrs []Attr, onlyNew bool) ([]Attr, error) {
	r := setRequest(attrs, onlyNew)
	r.Path = path
	return c.fattr(ctx, r)
}

// DelAttrs deletes the named extended attributes of path (kXR_fattr
// del); the answer has one Attr per name, in order.
func (c *Client) DelAttrs(ctx context.Context, path string, names ...string) ([]Attr, error) {
	return c.fattr(ctx, &FattrRequest{Op: FattrDel, Path: path, Names: names})
}

// GetAttrs gets the named extended attributes of the open file, as
// Client.GetAttrs does by path.
func (f *ClientFile) GetAttrs(ctx context.Context, names ...string) ([]Attr, error) {
	return f.c.fattr(ctx, &FattrRequest{Op: FattrGet, Handle: f.fh, Names: names})
}

// SetAttrs sets extended attributes of the file, which must be open for
// writing, as Client.SetAttrs does by path. A server may make them durable
// only with the file's next sync or close (ecstore node does).
func (f *ClientFile) SetAttrs(ctx context.Context, attrs []Attr, onlyNew bool) ([]Attr, error) {
	r := setRequest(attrs, onlyNew)
	r.Handle = f.fh
	return f.c.fattr(ctx, r)
}

// AllAttrs lists the extended attributes of path with their values
// (kXR_fattr list with kXR_fa_aData; xrdfs xattr PATH list).
func (c *Client) AllAttrs(ctx context.Context, path string) ([]Attr, error) {
	return c.listAttrs(ctx, &FattrRequest{Op: FattrList, Options: FattrListValues, Path: path})
}

// AllAttrs lists the extended attributes of the open file, as
// Client.AllAttrs does by path.
func (f *ClientFile) AllAttrs(ctx context.Context) ([]Attr, error) {
	return f.c.listAttrs(ctx, &FattrRequest{Op: FattrList, Options: FattrListValues, Handle: f.fh})
}

// listAttrs sends the kXR_fattr list r and decodes its answer.
func (c *Client) listAttrs(ctx context.Context, r *FattrRequest) ([]Attr, error) {
	what := r.Path
	if what == "" {
		what = fmt.Sprintf("handle %x", r.Handle)
	}
	body, err := c.collect(ctx, r, fattrAnswerMax(r))
	if err != nil {
		return nil, fmt.Errorf("xrootd: fattr list %s: %w", what, err)
	}
	attrs, err := ParseFattrListResponse(body, r.Options&FattrListValues != 0)
	if err != nil {
		return nil, fmt.Errorf("xrootd: fattr list %s: %w", what, err)
	}
	return attrs, nil
}

// DelAttrs deletes the named extended attributes of the file, which must
// be open for writing, as Client.DelAttrs does by path.
func (f *ClientFile) DelAttrs(ctx context.Context, names ...string) ([]Attr, error) {
	return f.c.fattr(ctx, &FattrRequest{Op: FattrDel, Handle: f.fh, Names: names})
}

// setRequest is the kXR_fattr set of attrs.
func setRequest(attrs []Attr, onlyNew bool) *FattrRequest {
	r := &FattrRequest{Op: FattrSet}
	if onlyNew {
		r.Options = FattrIsNew
	}
	for _, a := range attrs {
		r.Names = append(r.Names, a.Name)
		r.Values = append(r.Values, a.Value)
	}
	return r
}

// fattr sends a get, set or del request and decodes its answer.
func (c *Client) fattr(ctx context.Context, r *FattrRequest) ([]Attr, error) {
	what := r.Path
	if what == "" {
		what = fmt.Sprintf("handle %x", r.Handle)
	}
	if err := checkFattr(r); err != nil {
		return nil, fmt.Errorf("xrootd: fattr %s: %w", what, err)
	}
	body, err := c.collect(ctx, r, fattrAnswerMax(r))
	if err != nil {
		return nil, fmt.Errorf("xrootd: fattr %s: %w", what, err)
	}
	attrs, err := ParseFattrResponse(body, r.Op, r.Names)
	if err != nil {
		return nil, fmt.Errorf("xrootd: fattr %s: %w", what, err)
	}
	return attrs, nil
}

// fattrAnswerMax bounds the answer to r: a status and name per attribute,
// and with a get, its value; a list's answer, all of a file's attributes,
// is bounded by MaxResponse alone.
func fattrAnswerMax(r *FattrRequest) int {
	switch r.Op {
	case FattrList:
		return math.MaxInt
	case FattrGet:
		return len(r.Names)*(MaxFattrName+MaxFattrValue+16) + smallAnswer
	}
	return len(r.Names)*(MaxFattrName+16) + smallAnswer
}

// checkFattr refuses what a server would: too many or too few
// attributes, names empty, too long or holding a NUL, values too long.
func checkFattr(r *FattrRequest) error {
	if len(r.Names) == 0 || len(r.Names) > MaxFattrAttrs {
		return fmt.Errorf("%d attributes: want 1 to %d", len(r.Names), MaxFattrAttrs)
	}
	for _, n := range r.Names {
		if n == "" || len(n) > MaxFattrName || strings.IndexByte(n, 0) >= 0 {
			return fmt.Errorf("attribute name %q: want 1 to %d bytes, no NUL", n, MaxFattrName)
		}
	}
	for _, v := range r.Values {
		if len(v) > MaxFattrValue {
			return fmt.Errorf("attribute value of %d bytes exceeds %d", len(v), MaxFattrValue)
		}
	}
	return nil
}

// ParseFattrResponse decodes the answer to a kXR_fattr get, set or del
// request for names: the error count and the attribute count, the name
// vector with each entry's status, and for get the value vector.
func ParseFattrResponse(body []byte, op FattrOp, names []string) ([]Attr, error) {
	if len(body) < 2 || int(body[1]) != len(names) {
		return nil, fmt.Errorf("%w: fattr answer for %d attributes", ErrMalformed, len(names))
	}
	b := body[2:]
	attrs := make([]Attr, len(names))
	for i, want := range names {
		end := -1
		if len(b) >= 2 {
			end = bytes.IndexByte(b[2:], 0)
		}
		if end < 0 || string(b[2:2+end]) != want {
			return nil, fmt.Errorf("%w: fattr answer's name %d is not %q", ErrMalformed, i, want)
		}
		attrs[i].Name = want
		if code := ErrorCode(getU16(b)); code != 0 {
			attrs[i].Err = &Error{Code: code, Message: "attribute " + want}
		}
		b = b[2+end+1:]
	}
	if op == FattrGet {
		for i := range attrs {
			if len(b) < 4 {
				return nil, fmt.Errorf("%w: fattr answer's value vector", ErrMalformed)
			}
			vl := int(int32(getU32(b)))
			if vl < 0 || vl > len(b)-4 {
				return nil, fmt.Errorf("%w: fattr answer's value of bad length", ErrMalformed)
			}
			if attrs[i].Err == nil {
				attrs[i].Value = bytes.Clone(b[4 : 4+vl])
			}
			b = b[4+vl:]
		}
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the fattr answer", ErrMalformed, len(b))
	}
	return attrs, nil
}

// ParseFattrListResponse decodes the answer to a kXR_fattr list: each
// attribute's NUL-terminated name, followed with values by the value's
// 4-byte length and bytes. An empty answer lists no attribute.
func ParseFattrListResponse(body []byte, values bool) ([]Attr, error) {
	var attrs []Attr
	for b := body; len(b) > 0; {
		end := bytes.IndexByte(b, 0)
		if end <= 0 {
			return nil, fmt.Errorf("%w: fattr list answer's name %d", ErrMalformed, len(attrs))
		}
		a := Attr{Name: string(b[:end])}
		b = b[end+1:]
		if values {
			if len(b) < 4 {
				return nil, fmt.Errorf("%w: fattr list answer's value %d", ErrMalformed, len(attrs))
			}
			vl := int(int32(getU32(b)))
			if vl < 0 || vl > len(b)-4 {
				return nil, fmt.Errorf("%w: fattr list answer's value of bad length", ErrMalformed)
			}
			a.Value, b = bytes.Clone(b[4:4+vl]), b[4+vl:]
		}
		attrs = append(attrs, a)
	}
	return attrs, nil
}

// AppendFattrListResponse appends the answer to a kXR_fattr list of
// attrs, with their values if values (kXR_fa_aData), as xrootd answers:
// each name NUL-terminated, then the value's 4-byte length and bytes.
func AppendFattrListResponse(b []byte, attrs []Attr, values bool) []byte {
	for _, a := range attrs {
		b = append(append(b, a.Name...), 0)
		if values {
			b = binary.BigEndian.AppendUint32(b, uint32(len(a.Value)))
			b = append(b, a.Value...)
		}
	}
	return b
}

// Refusal is an error of an AttrKeeper or FileAttrKeeper call that
// refuses the kXR_fattr request as a whole: the server answers kXR_error
// with its code and message (Err's, as for any handler error), where
// another error of the call becomes every attribute's status, which
// tells the client the code only. For a client that may not change the
// attributes, or a file whose attributes cannot change.
type Refusal struct{ Err error }

func (r *Refusal) Error() string { return r.Err.Error() }

// Unwrap returns r.Err.
func (r *Refusal) Unwrap() error { return r.Err }

// AttrErr joins the errors of attrs, each with its attribute's name; nil
// when every one succeeded.
func AttrErr(attrs []Attr) error {
	var errs []error
	for _, a := range attrs {
		if a.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a.Name, a.Err))
		}
	}
	return errors.Join(errs...)
}

// doFattr answers kXR_fattr get, set and del by path from an AttrKeeper,
// in xrootd's format: the error count, the attribute count, the name
// vector with each attribute's status, and for get the value vector;
// list from an AttrEnumerator. Requests on a handle go to doFileFattr.
func (s *session) doFattr(ctx context.Context, sid StreamID, r *FattrRequest) error {
	if r.Op == FattrList {
		h, ok := s.srv.Handler.(AttrEnumerator)
		if !ok {
			return Errorf(ErrUnsupported, "fattr list is not supported")
		}
		name, _, err := cleanPath(r.Path)
		if err != nil {
			return err
		}
		attrs, err := h.AllAttrs(ctx, name)
		if err != nil {
			return err
		}
		return sent(s.sendOK(sid, AppendFattrListResponse(nil, attrs, r.Options&FattrListValues != 0)))
	}
	h, ok := s.srv.Handler.(AttrKeeper)
	if !ok {
		return Errorf(ErrUnsupported, "fattr request is not supported")
	}
	name, _, err := cleanPath(r.Path)
	if err != nil {
		return err
	}
	attrs, err := runFattr(r, func() ([]Attr, error) { return h.GetAttrs(ctx, name, r.Names) },
		func(in []Attr, onlyNew bool) ([]Attr, error) { return h.SetAttrs(ctx, name, in, onlyNew) },
		func() ([]Attr, error) { return h.DelAttrs(ctx, name, r.Names) })
	if err != nil {
		return err
	}
	return sent(s.sendOK(sid, AppendFattrResponse(nil, r.Op, r.Names, attrs)))
}

// doFileFattr answers kXR_fattr get, set and del on an open file, from
// its FileAttrKeeper, and list from its FileAttrEnumerator; set and del
// need the file open for writing.
func (s *session) doFileFattr(sid StreamID, of *openFile, r *FattrRequest) {
	ctx := s.ctx
	if r.Op == FattrList {
		h, ok := of.f.(FileAttrEnumerator)
		if !ok {
			s.fail(sid, ReqFattr, Errorf(ErrUnsupported, "fattr list on %s is not supported", of.name))
			return
		}
		attrs, err := h.AllAttrs(ctx)
		if err != nil {
			s.fail(sid, ReqFattr, err)
			return
		}
		s.sendOK(sid, AppendFattrListResponse(nil, attrs, r.Options&FattrListValues != 0))
		return
	}
	h, ok := of.f.(FileAttrKeeper)
	switch {
	case !ok:
		s.fail(sid, ReqFattr, Errorf(ErrUnsupported, "fattr on %s is not supported", of.name))
		return
	case r.Op != FattrGet && !of.writable:
		s.fail(sid, ReqFattr, Errorf(ErrInvalidRequest, "fattr request modifies %s, open for reading", of.name))
		return
	}
	attrs, err := runFattr(r, func() ([]Attr, error) { return h.GetAttrs(ctx, r.Names) },
		func(in []Attr, onlyNew bool) ([]Attr, error) { return h.SetAttrs(ctx, in, onlyNew) },
		func() ([]Attr, error) { return h.DelAttrs(ctx, r.Names) })
	if err != nil {
		s.fail(sid, ReqFattr, err)
		return
	}
	s.sendOK(sid, AppendFattrResponse(nil, r.Op, r.Names, attrs))
}

// runFattr runs the get, set or del r asks for and returns one Attr per
// name: an error of the whole call, or a wrong number of answers, becomes
// every attribute's error, except a *Refusal, returned to fail the
// request.
func runFattr(r *FattrRequest, get func() ([]Attr, error), set func([]Attr, bool) ([]Attr, error), del func() ([]Attr, error)) ([]Attr, error) {
	var attrs []Attr
	var err error
	switch r.Op {
	case FattrGet:
		attrs, err = get()
	case FattrSet:
		in := make([]Attr, len(r.Names))
		for i := range in {
			in[i] = Attr{Name: r.Names[i], Value: r.Values[i]}
		}
		attrs, err = set(in, r.Options&FattrIsNew != 0)
	case FattrDel:
		attrs, err = del()
	default:
		err = Errorf(ErrUnsupported, "fattr subcode %d is not supported", r.Op)
	}
	if refusal := (*Refusal)(nil); errors.As(err, &refusal) {
		return nil, refusal
	}
	if err == nil && len(attrs) != len(r.Names) {
		err = Errorf(ErrServerError, "fattr: %d answers for %d attributes", len(attrs), len(r.Names))
	}
	if err != nil {
		attrs = make([]Attr, len(r.Names))
		for i := range attrs {
			attrs[i] = Attr{Name: r.Names[i], Err: err}
		}
	}
	return attrs, nil
}

// AppendFattrResponse appends the answer to a kXR_fattr get, set or del
// of names whose outcomes are attrs (one each, in order).
func AppendFattrResponse(b []byte, op FattrOp, names []string, attrs []Attr) []byte {
	nerrs := 0
	for _, a := range attrs {
		if a.Err != nil {
			nerrs++
		}
	}
	b = append(b, byte(nerrs), byte(len(names)))
	for i, n := range names {
		code := uint16(0)
		if attrs[i].Err != nil {
			code = uint16(toProtocolError(attrs[i].Err).Code)
		}
		b = binary.BigEndian.AppendUint16(b, code)
		b = append(append(b, n...), 0)
	}
	if op == FattrGet {
		for _, a := range attrs {
			v := a.Value
			if a.Err != nil {
				v = nil
			}
			b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		}
	}
	return b
}
