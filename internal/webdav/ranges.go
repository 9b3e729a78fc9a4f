package webdav

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/ecstore/ecstore/internal/bufpool"
	"github.com/ecstore/ecstore/internal/object"
)

// Several ranges are read rangeBatch at a time, each into a buffer of its
// own, when they are at most rangeBuffered bytes (ROOT's baskets, a few KB
// to a few hundred): their reads from the nodes then overlap, where one
// after the other each would wait for its own. A longer range is streamed
// on its own, as a single range is.
const (
	rangeBatch    = 8
	rangeBuffered = 1 << 20
)

// multipartBody is the framing of a multipart/byteranges answer: each
// part's delimiter and headers, and the closing delimiter.
type multipartBody struct {
	boundary string
	parts    []string
	closing  string
	length   int64 // of the whole body, data included
}

// maxPartType is the longest Content-Type repeated in every part; an
// object stored with a longer one gets application/octet-stream there.
const maxPartType = 256

// newMultipartBody frames ranges of an object of size bytes whose media
// type is ctype. Each part has its Content-Type and then its
// Content-Range: davix (ROOT's TDavixFile, XRootD's HTTP client plug-in)
// takes a part's header block to end with its Content-Range, as XrdHttp
// and nginx write them (mime/multipart would sort them the other way).
func newMultipartBody(ranges []byteRange, ctype string, size int64) (*multipartBody, error) {
	boundary, err := newBoundary()
	if err != nil {
		return nil, err
	}
	if len(ctype) > maxPartType {
		ctype = "application/octet-stream"
	}
	m := &multipartBody{boundary: boundary, parts: make([]string, len(ranges)), closing: "\r\n--" + boundary + "--\r\n"}
	head := "--" + boundary + "\r\nContent-Type: " + ctype + "\r\nContent-Range: "
	m.length = int64(len(m.closing))
	for i, r := range ranges {
		m.parts[i] = head + contentRange(r, size) + "\r\n\r\n"
		if i > 0 {
			m.parts[i] = "\r\n" + m.parts[i]
		}
		m.length += int64(len(m.parts[i])) + r.length
	}
	return m, nil
}

// sendRanges answers a request for several ranges of an object with the
// multipart/byteranges body m (RFC 9110 section 14.6): one part per
// range, in the order asked. The body's length is known beforehand, and
// sent as Content-Length, so that a client sees a body cut short by a
// failed read as incomplete.
func sendRanges(req *request, rd *object.Reader, ranges []byteRange, m *multipartBody, head bool) error {
	info := rd.Info()
	hdr := req.w.Header()
	hdr.Set("Content-Type", "multipart/byteranges; boundary="+m.boundary)
	hdr.Set("Content-Length", strconv.FormatInt(m.length, 10))
	req.w.WriteHeader(http.StatusPartialContent)
	if head {
		return nil
	}
	for done := 0; done < len(ranges); {
		n := batchOf(ranges[done:])
		bufs, err := readRanges(req, rd, ranges[done:done+n])
		for i, r := range ranges[done : done+n] {
			if err != nil {
				break
			}
			if _, err = io.WriteString(req.w, m.parts[done+i]); err != nil {
				break
			}
			if bufs[i] != nil {
				_, err = req.w.Write(bufs[i])
			} else if _, err = rd.WriteRange(req.ctx, req.w, r.start, r.length); err != nil {
				err = fmt.Errorf("send %s [%d, %d): %w", info.Path, r.start, r.start+r.length, err)
			}
		}
		for _, b := range bufs {
			if b != nil {
				bufpool.Put(b)
			}
		}
		if err != nil {
			return err
		}
		done += n
	}
	_, err := io.WriteString(req.w, m.closing)
	return err
}

// newBoundary returns a random multipart boundary (30 hex digits: RFC
// 2046 allows 70 characters, and davix takes no more).
func newBoundary() (string, error) {
	var b [15]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("multipart boundary: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// batchOf returns how many of ranges go into the next batch: up to
// rangeBatch short ones, or one long one.
func batchOf(ranges []byteRange) int {
	n := 0
	for n < len(ranges) && n < rangeBatch && ranges[n].length <= rangeBuffered {
		n++
	}
	return max(n, 1)
}

// readRanges reads the short ranges of a batch at once, each into a
// pooled buffer (nil for a long range, which is streamed). On error the
// buffers read so far are returned too, to be given back.
func readRanges(req *request, rd *object.Reader, ranges []byteRange) ([][]byte, error) {
	bufs := make([][]byte, len(ranges))
	errs := make([]error, len(ranges))
	var wg sync.WaitGroup
	for i, r := range ranges {
		if r.length > rangeBuffered {
			continue
		}
		bufs[i] = bufpool.Get(int(r.length))
		wg.Go(func() {
			n, err := rd.ReadAt(req.ctx, bufs[i], r.start)
			if n == len(bufs[i]) {
				err = nil // io.EOF with the range's last byte the object's
			} else if err == nil {
				err = io.ErrUnexpectedEOF
			}
			if err != nil {
				errs[i] = fmt.Errorf("read %s [%d, %d): %w", rd.Info().Path, r.start, r.start+r.length, err)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return bufs, err
		}
	}
	return bufs, nil
}
