package s3

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// A request payload is read through a chain of verifying readers, each
// with a sticky error (like archive/zip's checksumReader):
//
//	body → framing (aws-chunked: chunk signatures, trailer) or SHA-256
//	     → x-amz-checksum-* → size limit, Content-MD5 and the MD5 for the ETag
//
// Bytes are handed on before the check that covers them completes (a
// hash is known only at the end of its chunk or of the body), so a
// consumer must discard everything it read when Read returns an error
// other than io.EOF. Object writes do: they Abort the object.Writer, and
// nothing becomes visible.

// payload is a request body being read and verified.
type payload struct {
	r       io.Reader
	md5     hash.Hash
	wantMD5 []byte // Content-MD5, if given
	size    int64  // declared (decoded) length; -1 unknown
	max     int64
	n       int64
	err     error
}

// newPayload wraps r's body according to the payload hash a declared.
// max bounds the decoded size (EntityTooLarge beyond).
func newPayload(r *http.Request, a *auth, max int64) (*payload, error) {
	p := &payload{md5: md5.New(), size: r.ContentLength, max: max}
	if v := r.Header.Get("Content-MD5"); v != "" {
		d, err := base64.StdEncoding.DecodeString(v)
		if err != nil || len(d) != md5.Size {
			return nil, ErrInvalidDigest
		}
		p.wantMD5 = d
	}
	var body io.Reader = transportReader{r.Body}
	switch mode := a.payload; mode {
	case unsignedPayload:
	case streamingSigned, streamingSignedTrailer, streamingUnsignedTrailer:
		dl := r.Header.Get("X-Amz-Decoded-Content-Length")
		if dl == "" {
			return nil, ErrMissingContentLength.with("aws-chunked uploads need the x-amz-decoded-content-length header")
		}
		n, err := strconv.ParseInt(dl, 10, 64)
		if err != nil || n < 0 {
			return nil, ErrInvalidArgument.with("x-amz-decoded-content-length %q is not a length", dl)
		}
		p.size = n
		cr := &chunkedReader{br: bufio.NewReaderSize(body, 64<<10), trailer: mode != streamingSigned}
		if mode != streamingUnsignedTrailer {
			cr.signer = &chunkSigner{key: a.key, amzDate: a.amzDate, scope: a.scope, prev: a.signature}
		}
		if cr.trailer {
			name := strings.ToLower(strings.TrimSpace(r.Header.Get("X-Amz-Trailer")))
			if name != "" {
				newSum, ok := checksums[name]
				if !ok {
					return nil, ErrInvalidRequest.with("unsupported x-amz-trailer %q", name)
				}
				cr.sumName, cr.sum = name, newSum()
			}
		}
		body = cr
	default: // a hex SHA-256 of the whole body
		want, _ := hex.DecodeString(mode)
		body = &hashReader{r: body, h: sha256.New(), want: want, mismatch: ErrContentSHA256Mismatch}
	}
	// A checksum sent as a header (flexible checksums without a trailer).
	for name, newSum := range checksums {
		v := r.Header.Get(name)
		if v == "" {
			continue
		}
		want, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil, ErrInvalidDigest.with("%s is not base64", name)
		}
		body = &hashReader{r: body, h: newSum(), want: want, mismatch: ErrBadDigest.with("The %s you specified did not match the calculated checksum.", name)}
	}
	if p.size > max {
		return nil, ErrEntityTooLarge.with("Your proposed upload of %d bytes exceeds the maximum allowed size of %d bytes.", p.size, max)
	}
	p.r = body
	return p, nil
}

// Read reads verified payload bytes; see the contract above.
func (p *payload) Read(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	n, err := p.r.Read(b)
	p.md5.Write(b[:n])
	p.n += int64(n)
	switch {
	case p.n > p.max:
		err = ErrEntityTooLarge.with("Your upload exceeds the maximum allowed size of %d bytes.", p.max)
	case p.size >= 0 && p.n > p.size:
		err = ErrInvalidRequest.with("the body is longer than the declared %d bytes", p.size)
	case err == io.EOF && p.size >= 0 && p.n < p.size:
		err = ErrIncompleteBody
	case err == io.EOF && p.wantMD5 != nil && !bytes.Equal(p.md5.Sum(nil), p.wantMD5):
		err = ErrBadDigest
	}
	if err != nil {
		p.err = err
	}
	return n, err
}

// MD5 is the MD5 of the payload; valid after Read returned io.EOF.
func (p *payload) MD5() []byte { return p.md5.Sum(nil) }

// Len is the number of payload bytes read.
func (p *payload) Len() int64 { return p.n }

// readAll reads a small verified body (an XML request), at most limit
// bytes.
func readAll(r *http.Request, a *auth, limit int64) ([]byte, error) {
	p, err := newPayload(r, a, limit)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(p)
}

// transportReader turns a failing request body into IncompleteBody.
type transportReader struct{ r io.Reader }

func (t transportReader) Read(b []byte) (int, error) {
	n, err := t.r.Read(b)
	if err != nil && err != io.EOF {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return n, ErrEntityTooLarge
		}
		return n, ErrIncompleteBody.with("reading the request body: %v", err)
	}
	return n, err
}

// hashReader checks the hash of everything read at EOF.
type hashReader struct {
	r        io.Reader
	h        hash.Hash
	want     []byte
	mismatch error
	err      error
}

func (h *hashReader) Read(b []byte) (int, error) {
	if h.err != nil {
		return 0, h.err
	}
	n, err := h.r.Read(b)
	h.h.Write(b[:n])
	if err == io.EOF && !bytes.Equal(h.h.Sum(nil), h.want) {
		err = h.mismatch
	}
	if err != nil {
		h.err = err
	}
	return n, err
}

// crc64NVME is the CRC-64/NVME table (reflected polynomial of
// 0xAD93D23594C93659), for x-amz-checksum-crc64nvme.
var crc64NVME = crc64.MakeTable(0x9A6C9329AC4BC9B5)

// checksums are the S3 flexible checksums by header name; each Sum is the
// big-endian digest that S3 sends in base64.
var checksums = map[string]func() hash.Hash{
	"x-amz-checksum-crc32":     func() hash.Hash { return crc32.NewIEEE() },
	"x-amz-checksum-crc32c":    func() hash.Hash { return crc32.New(crc32.MakeTable(crc32.Castagnoli)) },
	"x-amz-checksum-crc64nvme": func() hash.Hash { return crc64.New(crc64NVME) },
	"x-amz-checksum-sha1":      sha1.New,
	"x-amz-checksum-sha256":    sha256.New,
}

// chunkSigner computes the signature chain of an aws-chunked body: each
// chunk's signature covers its data and the previous signature, starting
// from the request's (seed) signature.
type chunkSigner struct {
	key     []byte
	amzDate string
	scope   string
	prev    string
}

// chunk returns the signature of the next chunk, whose data hashes to
// dataHash, and advances the chain.
func (s *chunkSigner) chunk(dataHash []byte) string {
	sts := "AWS4-HMAC-SHA256-PAYLOAD\n" + s.amzDate + "\n" + s.scope + "\n" + s.prev + "\n" +
		emptySHA256 + "\n" + hex.EncodeToString(dataHash)
	s.prev = hex.EncodeToString(hmacSHA256(s.key, sts))
	return s.prev
}

// trailer returns the signature of the trailing headers, given in their
// canonical form ("name:value\n" each).
func (s *chunkSigner) trailer(canonical string) string {
	h := sha256.Sum256([]byte(canonical))
	sts := "AWS4-HMAC-SHA256-TRAILER\n" + s.amzDate + "\n" + s.scope + "\n" + s.prev + "\n" + hex.EncodeToString(h[:])
	s.prev = hex.EncodeToString(hmacSHA256(s.key, sts))
	return s.prev
}

const (
	trailerSignatureHeader = "x-amz-trailer-signature"
	maxChunkLine           = 4096
	maxTrailers            = 16
)

// chunkedReader decodes an aws-chunked body:
//
//	<hex size>[;chunk-signature=<sig>]\r\n<data>\r\n ... 0[;chunk-signature=<sig>]\r\n
//	[<trailer>:<value>\r\n ...][x-amz-trailer-signature:<sig>\r\n]\r\n
//
// With a signer, every chunk's signature is checked when its data ends
// (and the final, empty chunk's and the trailer's before EOF); bytes of a
// chunk are returned before its check, see the payload contract. The
// declared trailing checksum is checked before EOF.
type chunkedReader struct {
	br      *bufio.Reader
	signer  *chunkSigner // nil: unsigned chunks
	trailer bool         // trailers may follow the final chunk
	sumName string       // the declared trailing checksum, if any
	sum     hash.Hash

	left    int64 // data bytes left in the current chunk
	inChunk bool
	hash    hash.Hash // SHA-256 of the current chunk
	sig     string    // the current chunk's claimed signature
	err     error
}

func (c *chunkedReader) Read(b []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if len(b) == 0 {
		return 0, nil
	}
	for c.left == 0 {
		if c.inChunk {
			if err := c.endChunk(); err != nil {
				c.err = err
				return 0, err
			}
		}
		if err := c.startChunk(); err != nil {
			c.err = err
			return 0, err
		}
	}
	if int64(len(b)) > c.left {
		b = b[:c.left]
	}
	n, err := c.br.Read(b)
	c.left -= int64(n)
	c.hash.Write(b[:n])
	if c.sum != nil {
		c.sum.Write(b[:n])
	}
	if err == io.EOF {
		err = ErrIncompleteBody.with("the aws-chunked body ends inside a chunk")
	}
	if err != nil {
		c.err = err
	}
	return n, err
}

// endChunk checks the CRLF after a chunk's data and its signature.
func (c *chunkedReader) endChunk() error {
	c.inChunk = false
	var crlf [2]byte
	if _, err := io.ReadFull(c.br, crlf[:]); err != nil {
		return ErrIncompleteBody.with("the aws-chunked body ends after a chunk's data")
	}
	if crlf != [2]byte{'\r', '\n'} {
		return ErrInvalidRequest.with("malformed aws-chunked body: chunk data not followed by CRLF")
	}
	return c.checkSig()
}

func (c *chunkedReader) checkSig() error {
	if c.signer == nil {
		return nil
	}
	if want := c.signer.chunk(c.hash.Sum(nil)); !equalHex(want, c.sig) {
		return ErrSignatureDoesNotMatch.with("the signature of an aws-chunked chunk does not match")
	}
	return nil
}

// startChunk reads a chunk header. On the final chunk it reads the
// trailer and returns io.EOF when everything verified.
func (c *chunkedReader) startChunk() error {
	line, err := c.line()
	if err != nil {
		return err
	}
	sizeHex, ext, _ := strings.Cut(line, ";")
	size, err := strconv.ParseUint(sizeHex, 16, 62)
	if err != nil || sizeHex == "" {
		return ErrInvalidRequest.with("malformed aws-chunked body: bad chunk size %q", sizeHex)
	}
	c.sig = ""
	if c.signer != nil {
		sig, ok := strings.CutPrefix(ext, "chunk-signature=")
		if !ok {
			return ErrSignatureDoesNotMatch.with("an aws-chunked chunk has no chunk-signature")
		}
		c.sig = sig
	}
	c.hash = sha256.New()
	if size > 0 {
		c.left, c.inChunk = int64(size), true
		return nil
	}
	if err := c.checkSig(); err != nil {
		return err
	}
	if err := c.readTrailer(); err != nil {
		return err
	}
	return io.EOF
}

// readTrailer reads the trailing headers up to the empty line, checks
// their signature and the declared checksum.
func (c *chunkedReader) readTrailer() error {
	var canonical strings.Builder
	var got map[string]string
	sig := ""
	for {
		line, err := c.line()
		if errors.Is(err, ErrIncompleteBody) && canonical.Len() == 0 && sig == "" && c.sumName == "" {
			return nil // some clients end the body right after the final chunk
		}
		if err != nil {
			return err
		}
		if line == "" {
			if _, err := c.br.Peek(1); err != io.EOF {
				return ErrInvalidRequest.with("malformed aws-chunked body: data after its end")
			}
			break
		}
		if !c.trailer {
			return ErrInvalidRequest.with("malformed aws-chunked body: trailing data after the final chunk")
		}
		name, val, ok := strings.Cut(line, ":")
		name, val = strings.ToLower(strings.TrimSpace(name)), strings.TrimSpace(val)
		switch {
		case !ok || name == "":
			return ErrInvalidRequest.with("malformed aws-chunked trailer %q", line)
		case sig != "":
			return ErrSignatureDoesNotMatch.with("a trailer follows the trailer signature")
		case name == trailerSignatureHeader:
			sig = val
			continue
		case len(got) == maxTrailers:
			return ErrInvalidRequest.with("too many trailers")
		}
		if got == nil {
			got = map[string]string{}
		}
		got[name] = val
		canonical.WriteString(name + ":" + val + "\n")
	}
	if c.signer != nil && c.trailer {
		if sig == "" {
			return ErrSignatureDoesNotMatch.with("the aws-chunked trailer is not signed")
		}
		if want := c.signer.trailer(canonical.String()); !equalHex(want, sig) {
			return ErrSignatureDoesNotMatch.with("the aws-chunked trailer signature does not match")
		}
	}
	if c.sumName != "" {
		v, ok := got[c.sumName]
		if !ok {
			return ErrInvalidRequest.with("the declared trailer %s is missing", c.sumName)
		}
		want, err := base64.StdEncoding.DecodeString(v)
		if err != nil || !bytes.Equal(want, c.sum.Sum(nil)) {
			return ErrBadDigest.with("The %s you specified did not match the calculated checksum.", c.sumName)
		}
	}
	return nil
}

// line reads one CRLF-terminated line of at most maxChunkLine bytes.
func (c *chunkedReader) line() (string, error) {
	l, err := c.br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull) || len(l) > maxChunkLine:
		return "", ErrInvalidRequest.with("malformed aws-chunked body: line too long")
	case err == io.EOF:
		return "", ErrIncompleteBody.with("the aws-chunked body ends early")
	case err != nil:
		return "", err
	case len(l) < 2 || l[len(l)-2] != '\r':
		return "", ErrInvalidRequest.with("malformed aws-chunked body: line not ended by CRLF")
	}
	return string(l[:len(l)-2]), nil
}

// equalHex compares a computed hex signature with a claimed one in
// constant time.
func equalHex(want, got string) bool {
	return subtle.ConstantTimeCompare([]byte(want), []byte(strings.ToLower(got))) == 1
}
