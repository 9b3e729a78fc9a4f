package webdav

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ecstore/ecstore/internal/erasure"
	"github.com/ecstore/ecstore/internal/object"
)

// maxContentType bounds the Content-Type kept with an object, which GET
// and HEAD (and S3's) send back: what S3 keeps of a PUT's headers at
// most (AWS's limit on them), well within the header lines clients read.
const maxContentType = 8 << 10

// contentTypeMeta is the user metadata that keeps the Content-Type ct
// with an object (nil for none), or a 400 for one that cannot be kept.
func contentTypeMeta(ct string) (map[string]string, error) {
	switch {
	case ct == "":
		return nil, nil
	case !utf8.ValidString(ct):
		// Kept in a JSON string (the metadata entry), where each
		// byte that is not UTF-8 would become U+FFFD.
		return nil, errorf(http.StatusBadRequest, "the Content-Type is not UTF-8")
	case len(ct) > maxContentType:
		return nil, errorf(http.StatusBadRequest, "the Content-Type has %d bytes; the limit is %d", len(ct), maxContentType)
	}
	return map[string]string{contentTypeKey: ct}, nil
}

// put stores the request body as the object at the path, streaming it
// into an object.Writer. The object is committed only when the body
// arrived complete (as long as Content-Length says, or to the end of a
// chunked body) and matches the Digest header if one was sent; any other
// outcome aborts the write and leaves the previous version, or nothing,
// visible. Missing parent directories are created, as XRootD's HTTP
// server and dCache do; a parent that is an object is a 409 Conflict.
func (h *handler) put(req *request) error {
	r := req.r
	if req.slash || req.path == "/" {
		return errorf(http.StatusMethodNotAllowed, "PUT to a collection URL")
	}
	if r.Header.Get("Content-Range") != "" {
		return errorf(http.StatusBadRequest, "partial PUT (Content-Range) is not supported: objects are written whole")
	}
	check, err := newDigestCheck(r.Header.Get("Digest"))
	if err != nil {
		return err
	}
	info, err := h.store.Stat(req.ctx, req.path)
	existed := err == nil
	switch {
	case existed && info.IsDir:
		return errorf(http.StatusMethodNotAllowed, "%s is a collection", req.path)
	case errors.Is(err, object.ErrUnrecoverable):
		existed, info = true, nil // an unreadable object may be replaced
	case err != nil && !errors.Is(err, object.ErrNotExist):
		return err
	}
	etag := ""
	if info != nil {
		etag = etagOf(info)
	}
	if preconditions(r, etag, modTime(info)) != 0 {
		return errorf(http.StatusPreconditionFailed, "a precondition (If-Match or If-None-Match) failed")
	}
	if err := h.noObjectAbove(req, req.path); err != nil {
		return err
	}
	meta, err := contentTypeMeta(r.Header.Get("Content-Type"))
	if err != nil {
		return err
	}
	w, err := h.store.Create(req.ctx, req.path, &object.CreateOptions{User: meta, SizeHint: max(r.ContentLength, 0),
		Exclusive: req.createOnly, Precondition: createOnlyAtCommit(req, req.path)})
	if err != nil {
		return createOnlyErr(req, err)
	}
	body := &bodyReader{r: r.Body, check: check}
	n, err := w.ReadFrom(body)
	if h.opts.Hooks.Bytes != nil && n > 0 {
		h.opts.Hooks.Bytes("write", int(n))
	}
	switch {
	case body.err != nil:
		_ = w.Abort()
		return wrapf(body.err, http.StatusBadRequest, "the request body broke off after %d bytes; nothing was stored", n)
	case err != nil:
		_ = w.Abort()
		return fmt.Errorf("webdav: put %s: %w", req.path, err)
	case r.ContentLength >= 0 && n != r.ContentLength:
		_ = w.Abort()
		return errorf(http.StatusBadRequest, "the body has %d bytes, Content-Length says %d; nothing was stored", n, r.ContentLength)
	}
	if err := check.verify(); err != nil {
		_ = w.Abort()
		return err
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("webdav: put %s: %w", req.path, err)
	}
	req.w.Header().Set("Content-Length", "0")
	if existed {
		req.w.WriteHeader(http.StatusNoContent)
	} else {
		req.w.WriteHeader(http.StatusCreated)
	}
	return nil
}

// bodyReader reads a request body, keeping its first read error (so that
// a broken body is told apart from a failing engine) and feeding the
// digest check.
type bodyReader struct {
	r     io.Reader
	check *digestCheck
	err   error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.check.write(p[:n])
	if err != nil && !errors.Is(err, io.EOF) && b.err == nil {
		b.err = err
	}
	return n, err
}

// digestCheck verifies a PUT body against the instance digests of its
// Digest header (RFC 3230 section 4.3.2), for the algorithms served.
type digestCheck struct {
	sums map[string]hash.Hash32
	want map[string][]byte
}

// newDigestCheck parses a request's Digest header. Unknown algorithms
// are ignored; a malformed value of a known one is a 400.
func newDigestCheck(h string) (*digestCheck, error) {
	c := &digestCheck{}
	if strings.TrimSpace(h) == "" {
		return c, nil
	}
	for _, item := range strings.Split(h, ",") {
		alg, val, ok := strings.Cut(strings.TrimSpace(item), "=")
		alg = strings.ToLower(strings.TrimSpace(alg))
		if !ok {
			continue
		}
		var want []byte
		var hs hash.Hash32
		switch alg {
		case "adler32":
			want = parseSum(val, false)
			hs = erasure.NewAdler32()
		case "crc32c":
			want = parseSum(val, true)
			hs = crc32.New(crc32.MakeTable(crc32.Castagnoli))
		default:
			continue
		}
		if want == nil {
			return nil, errorf(http.StatusBadRequest, "bad %s value %q in the Digest header", alg, val)
		}
		if c.sums == nil {
			c.sums, c.want = map[string]hash.Hash32{}, map[string][]byte{}
		}
		c.sums[alg], c.want[alg] = hs, want
	}
	return c, nil
}

// parseSum decodes a 32-bit checksum given as 8 hex digits or (for
// crc32c, as XRootD sends it) the base64 of its 4 big-endian bytes.
func parseSum(v string, base64OK bool) []byte {
	v = strings.TrimSpace(v)
	if b, err := hex.DecodeString(v); err == nil && len(b) == 4 {
		return b
	}
	if base64OK {
		if b, err := base64.StdEncoding.DecodeString(v); err == nil && len(b) == 4 {
			return b
		}
	}
	return nil
}

// modTime is the modification time of an object that may not exist.
func modTime(info *object.Info) time.Time {
	if info == nil {
		return time.Time{}
	}
	return info.MTime
}

func (c *digestCheck) write(p []byte) {
	for _, h := range c.sums {
		h.Write(p)
	}
}

// verify compares the digests of the body read with the header's.
func (c *digestCheck) verify() error {
	for alg, h := range c.sums {
		if got := h.Sum(nil); string(got) != string(c.want[alg]) {
			return errorf(http.StatusBadRequest, "the body does not match its Digest header (%s %x, received %x); nothing was stored", alg, c.want[alg], got)
		}
	}
	return nil
}

// createOnlyErr explains the failure of an exclusive create made because
// the request's credentials allow creating only.
func createOnlyErr(req *request, err error) error {
	if req.createOnly && errors.Is(err, object.ErrExist) {
		return wrapf(err, http.StatusForbidden, "%s exists, and your credentials allow creating only", req.path)
	}
	return err
}

// createOnlyAtCommit is the CreateOptions.Precondition of a write to path
// that the request's credentials allow only as a creation (nil for
// others): Exclusive is checked when the write opens, and an object
// written at path meanwhile must not be replaced when it commits.
func createOnlyAtCommit(req *request, path string) func(*object.Info) error {
	if !req.createOnly {
		return nil
	}
	return func(cur *object.Info) error {
		if cur != nil && !cur.IsDir {
			return errorf(http.StatusForbidden, "%s was written meanwhile, and your credentials allow creating it only", path)
		}
		return nil
	}
}
