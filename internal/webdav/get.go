package webdav

import (
	"bufio"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/ecstore/ecstore/internal/object"
)

// contentTypeKey is the user metadata entry holding an object's media
// type: the name the S3 frontend uses too, so that both serve it back.
const contentTypeKey = "content-type"

// get serves GET and HEAD: an object's content (or one range of it), or
// an HTML index of a collection.
func (h *handler) get(req *request, head bool) error {
	if req.path == "/" {
		return h.index(req, head)
	}
	rd, err := h.store.Open(req.ctx, req.path)
	if errors.Is(err, object.ErrIsDir) {
		return h.index(req, head)
	}
	if err != nil {
		return err
	}
	defer rd.Close()
	if req.slash {
		return errorf(http.StatusNotFound, "%s is an object, not a collection", req.path)
	}
	info := rd.Info()
	hdr := req.w.Header()
	etag := etagOf(info)
	hdr.Set("ETag", etag)
	hdr.Set("Last-Modified", info.MTime.UTC().Format(http.TimeFormat))
	hdr.Set("Accept-Ranges", "bytes")
	ctype := info.User[contentTypeKey]
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	hdr.Set("Content-Type", ctype)
	if want := req.r.Header.Get("Want-Digest"); want != "" {
		if d := digestHeader(want, info); d != "" {
			hdr.Set("Digest", d)
		}
	}
	switch preconditions(req.r, etag, info.MTime) {
	case http.StatusNotModified:
		hdr.Del("Content-Type")
		req.w.WriteHeader(http.StatusNotModified)
		return nil
	case http.StatusPreconditionFailed:
		return errorf(http.StatusPreconditionFailed, "a precondition (If-Match or If-Unmodified-Since) failed")
	}
	size := info.Size
	var ranges []byteRange
	if v := req.r.Header.Get("Range"); v != "" && rangeStillValid(req.r, etag, info.MTime) {
		if ranges, err = parseRanges(v, size); err != nil {
			hdr.Set("Content-Range", "bytes */"+strconv.FormatInt(size, 10))
			return err
		}
	}
	if len(ranges) > 1 {
		m, err := newMultipartBody(ranges, ctype, size)
		if err != nil {
			return err
		}
		// Parts whose framing would make the answer longer than the
		// object (many ranges of a few bytes): the object is sent whole,
		// as for ranges that overlap.
		if m.length <= size+multipartAllowance {
			return sendRanges(req, rd, ranges, m, head)
		}
		ranges = nil
	}
	start, length := int64(0), size
	if len(ranges) == 1 {
		start, length = ranges[0].start, ranges[0].length
		hdr.Set("Content-Range", contentRange(ranges[0], size))
	}
	hdr.Set("Content-Length", strconv.FormatInt(length, 10))
	if ranges != nil {
		req.w.WriteHeader(http.StatusPartialContent)
	} else {
		req.w.WriteHeader(http.StatusOK)
	}
	if head || length == 0 {
		return nil
	}
	if _, err := rd.WriteRange(req.ctx, req.w, start, length); err != nil {
		return fmt.Errorf("send %s [%d, %d): %w", info.Path, start, start+length, err)
	}
	return nil
}

// multipartAllowance is how much longer than the object a multipart
// answer may be, for the framing of its parts (about 100 bytes each):
// room for 1000 parts however small the object.
const multipartAllowance = 100 << 10

// contentRange is the Content-Range of r in an object of size bytes.
func contentRange(r byteRange, size int64) string {
	return fmt.Sprintf("bytes %d-%d/%d", r.start, r.start+r.length-1, size)
}

// index sends a minimal HTML listing of a collection (for browsers; file
// clients use PROPFIND).
func (h *handler) index(req *request, head bool) error {
	infos, err := h.store.List(req.ctx, req.path)
	if err != nil {
		return err
	}
	hdr := req.w.Header()
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	req.w.WriteHeader(http.StatusOK)
	if head {
		return nil
	}
	bw := bufio.NewWriter(req.w)
	title := html.EscapeString(req.path)
	fmt.Fprintf(bw, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of %s</title></head>\n<body><h1>Index of %s</h1>\n<table>\n", title, title)
	base := req.path
	if base != "/" {
		base += "/"
		fmt.Fprintf(bw, "<tr><td><a href=\"../\">../</a></td><td></td><td></td></tr>\n")
	}
	for _, in := range infos {
		name, size := in.Name, strconv.FormatInt(in.Size, 10)
		if in.IsDir {
			name, size = name+"/", "-"
		}
		href := (&url.URL{Path: base + name}).EscapedPath()
		fmt.Fprintf(bw, "<tr><td><a href=\"%s\">%s</a></td><td>%s</td><td>%s</td></tr>\n",
			html.EscapeString(href), html.EscapeString(name), size, in.MTime.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(bw, "</table></body></html>\n")
	return bw.Flush()
}
