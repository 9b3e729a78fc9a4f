package xrootd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/ecstore/ecstore/internal/bufpool"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Default limits of the codec.
const (
	// DefaultMaxPayload is the default largest request payload accepted:
	// 16 MiB of data plus room for the CRC32C of every page of a pgwrite.
	DefaultMaxPayload = 16<<20 + 64<<10
	// readChunk is the step in which payloads larger than it are read, so
	// that a frame that declares a large length but ends early costs
	// memory in proportion to the bytes actually received.
	readChunk = 1 << 20
)

// handshake is the client's initial handshake: five int32 values 0, 0, 0,
// 4, 2012 (section 2.1).
var handshake = [HandshakeLen]byte{
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0x07, 0xdc,
}

// AppendHandshake appends the client's initial 20-byte handshake to b.
func AppendHandshake(b []byte) []byte { return append(b, handshake[:]...) }

// ReadHandshake reads the client's 20-byte handshake from r and checks it.
// It returns an error wrapping ErrBadHandshake for anything else.
func ReadHandshake(r io.Reader) error {
	var b [HandshakeLen]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return fmt.Errorf("read handshake: %w", truncated(err))
	}
	if b != handshake {
		return fmt.Errorf("%w: % x", ErrBadHandshake, b)
	}
	return nil
}

// AppendHandshakeResponse appends the server's answer to the handshake: a
// response header with stream id 0 and an 8-byte body holding the protocol
// version and the server type.
func AppendHandshakeResponse(b []byte, version, kind int32) []byte {
	b = AppendResponseHeader(b, StreamID{}, StatusOK, 8)
	b = binary.BigEndian.AppendUint32(b, uint32(version))
	return binary.BigEndian.AppendUint32(b, uint32(kind))
}

// ParseHandshakeResponse returns the protocol version and server type of
// the server's handshake answer.
func ParseHandshakeResponse(f *ResponseFrame) (version, kind int32, err error) {
	if f.Status != StatusOK || len(f.Body) != 8 {
		return 0, 0, fmt.Errorf("%w: handshake response status %v, %d bytes", ErrBadHandshake, f.Status, len(f.Body))
	}
	return int32(binary.BigEndian.Uint32(f.Body)), int32(binary.BigEndian.Uint32(f.Body[4:])), nil
}

// truncated maps the io errors of a short read to ErrTruncated; a clean
// io.EOF before any byte stays io.EOF.
func truncated(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %w", ErrTruncated, err)
	}
	return err
}

// RequestHeader is the fixed 24-byte header of a client request (section
// 2.3): streamid[2], requestid, 16 bytes of request-specific parameters
// and the payload length.
type RequestHeader struct {
	StreamID StreamID  // echoed in every response frame
	ID       RequestID // request code
	Params   [16]byte  // request-specific parameters
	Dlen     int32     // declared payload length
}

// ParseRequestHeader decodes a request header.
func ParseRequestHeader(b *[RequestHeaderLen]byte) RequestHeader {
	var h RequestHeader
	copy(h.StreamID[:], b[0:2])
	h.ID = RequestID(binary.BigEndian.Uint16(b[2:4]))
	copy(h.Params[:], b[4:20])
	h.Dlen = int32(binary.BigEndian.Uint32(b[20:24]))
	return h
}

// AppendTo appends the encoded header to b.
func (h RequestHeader) AppendTo(b []byte) []byte {
	b = append(b, h.StreamID[:]...)
	b = binary.BigEndian.AppendUint16(b, uint16(h.ID))
	b = append(b, h.Params[:]...)
	return binary.BigEndian.AppendUint32(b, uint32(h.Dlen))
}

// RequestFrame is one client request as it travels on the wire.
type RequestFrame struct {
	StreamID StreamID  // echoed in every response frame
	ID       RequestID // request code
	Params   [16]byte  // request-specific parameters
	Payload  []byte    // the dlen bytes after the header
}

// Header returns the frame's header, with Dlen set from the payload.
func (f *RequestFrame) Header() RequestHeader {
	return RequestHeader{StreamID: f.StreamID, ID: f.ID, Params: f.Params, Dlen: int32(len(f.Payload))}
}

// AppendTo appends the encoded frame to b.
func (f *RequestFrame) AppendTo(b []byte) []byte {
	return append(f.Header().AppendTo(b), f.Payload...)
}

// FrameError describes a request frame that was delimited badly: its
// header was read, so its stream id is known and the peer can be told, but
// the connection cannot continue because the payload cannot be skipped.
type FrameError struct {
	StreamID StreamID  // stream of the bad frame
	ID       RequestID // request code of the bad frame
	Err      error     // what is wrong
}

// Error describes the frame and the problem.
func (e *FrameError) Error() string {
	return fmt.Sprintf("xrootd: %v request on stream %v: %v", e.ID, e.StreamID, e.Err)
}

// Unwrap returns the underlying error (ErrFrameTooLarge, ErrMalformed or
// ErrTruncated).
func (e *FrameError) Unwrap() error { return e.Err }

// checkRequestHeader validates the declared payload length.
func checkRequestHeader(h RequestHeader, maxPayload int) error {
	switch {
	case h.Dlen < 0:
		return &FrameError{StreamID: h.StreamID, ID: h.ID, Err: fmt.Errorf("%w: negative dlen %d", ErrMalformed, h.Dlen)}
	case int64(h.Dlen) > int64(maxPayload):
		return &FrameError{StreamID: h.StreamID, ID: h.ID, Err: fmt.Errorf("%w: dlen %d exceeds limit %d", ErrFrameTooLarge, h.Dlen, maxPayload)}
	}
	return nil
}

// ReadRequestFrame reads one request frame from r. The payload length is
// checked against maxPayload before any payload byte is read; an oversized
// or negative length gives a *FrameError. A frame cut short gives an error
// wrapping ErrTruncated; io.EOF is returned only when r ends cleanly
// between frames.
func ReadRequestFrame(r io.Reader, maxPayload int) (*RequestFrame, error) {
	var hb [RequestHeaderLen]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return nil, truncated(err)
	}
	h := ParseRequestHeader(&hb)
	if err := checkRequestHeader(h, maxPayload); err != nil {
		return nil, err
	}
	p, err := readPayload(r, int(h.Dlen))
	if err != nil {
		return nil, &FrameError{StreamID: h.StreamID, ID: h.ID, Err: err}
	}
	return &RequestFrame{StreamID: h.StreamID, ID: h.ID, Params: h.Params, Payload: p}, nil
}

// readPayload reads exactly n bytes, growing the buffer in steps so that a
// peer that declares much and sends little cannot make us allocate n. A
// recycled buffer (package bufpool) is used when one is pooled; the caller
// may hand the result back to bufpool.Put when done with it.
func readPayload(r io.Reader, n int) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	if p, ok := bufpool.TryGet(n); ok {
		if _, err := io.ReadFull(r, p); err != nil {
			bufpool.Put(p)
			return nil, truncatedEOF(err)
		}
		return p, nil
	}
	if n < bufpool.Granule {
		p := make([]byte, n)
		if _, err := io.ReadFull(r, p); err != nil {
			return nil, truncatedEOF(err)
		}
		return p, nil
	}
	if n <= readChunk {
		p := make([]byte, n, bufpool.Class(n))
		if _, err := io.ReadFull(r, p); err != nil {
			return nil, truncatedEOF(err)
		}
		return p, nil
	}
	p := make([]byte, 0, readChunk)
	for len(p) < n {
		step := min(n-len(p), readChunk)
		if cap(p)-len(p) < step {
			np := make([]byte, len(p), min(bufpool.Class(n), 2*cap(p)))
			copy(np, p)
			p = np
		}
		if _, err := io.ReadFull(r, p[len(p):len(p)+step]); err != nil {
			return nil, truncatedEOF(err)
		}
		p = p[:len(p)+step]
	}
	return p, nil
}

// truncatedEOF maps any end of input inside a frame to ErrTruncated.
func truncatedEOF(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %w", ErrTruncated, io.ErrUnexpectedEOF)
	}
	return err
}

// AppendResponseHeader appends an 8-byte response header (section 2.4).
func AppendResponseHeader(b []byte, sid StreamID, st Status, dlen int) []byte {
	b = append(b, sid[:]...)
	b = binary.BigEndian.AppendUint16(b, uint16(st))
	return binary.BigEndian.AppendUint32(b, uint32(int32(dlen)))
}

// ResponseFrame is one server response frame. For kXR_status frames, Body
// holds the status body and its info (the header's dlen bytes) and Data
// holds the raw bytes that follow, whose length the status body declares;
// for every other status Data is empty.
type ResponseFrame struct {
	StreamID StreamID // stream of the request answered
	Status   Status   // response status
	Body     []byte   // the header's dlen bytes
	Data     []byte   // kXR_status only: raw data after the body

	inPlace bool // Body was received straight into the caller's buffer
}

// AppendTo appends the encoded frame to b.
func (f *ResponseFrame) AppendTo(b []byte) []byte {
	b = AppendResponseHeader(b, f.StreamID, f.Status, len(f.Body))
	b = append(b, f.Body...)
	return append(b, f.Data...)
}

// ReadResponseFrame reads one response frame from r. The header's dlen and,
// for kXR_status, the status body's dlen are each checked against maxBody
// before they are read.
func ReadResponseFrame(r io.Reader, maxBody int) (*ResponseFrame, error) {
	f, dlen, err := readResponseHeader(r, maxBody)
	if err != nil {
		return nil, err
	}
	if err := readResponseBody(r, f, dlen, maxBody); err != nil {
		return nil, err
	}
	return f, nil
}

// readResponseHeader reads a response header and checks its dlen against
// maxBody; it returns the frame without its body and the body's length.
func readResponseHeader(r io.Reader, maxBody int) (*ResponseFrame, int, error) {
	var hb [ResponseHeaderLen]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return nil, 0, truncated(err)
	}
	f := &ResponseFrame{Status: Status(binary.BigEndian.Uint16(hb[2:4]))}
	copy(f.StreamID[:], hb[0:2])
	dlen := int32(binary.BigEndian.Uint32(hb[4:8]))
	if dlen < 0 {
		return nil, 0, fmt.Errorf("%w: negative response dlen %d", ErrMalformed, dlen)
	}
	if int64(dlen) > int64(maxBody) {
		return nil, 0, fmt.Errorf("%w: response dlen %d exceeds limit %d", ErrFrameTooLarge, dlen, maxBody)
	}
	return f, int(dlen), nil
}

// readResponseBody reads the dlen body bytes of f and, for kXR_status,
// the data that follows.
func readResponseBody(r io.Reader, f *ResponseFrame, dlen, maxBody int) error {
	body, err := readPayload(r, dlen)
	if err != nil {
		return err
	}
	f.Body = body
	if f.Status != StatusStatus {
		return nil
	}
	if len(body) < StatusBodyLen {
		return fmt.Errorf("%w: kXR_status body of %d bytes", ErrMalformed, len(body))
	}
	n := int32(binary.BigEndian.Uint32(body[12:16]))
	if n < 0 {
		return fmt.Errorf("%w: negative kXR_status data length %d", ErrMalformed, n)
	}
	if int64(n) > int64(maxBody) {
		return fmt.Errorf("%w: kXR_status data length %d exceeds limit %d", ErrFrameTooLarge, n, maxBody)
	}
	f.Data, err = readPayload(r, int(n))
	return err
}

// StatusBody is the body of a kXR_status response
// (ServerResponseBody_Status, section 2.4.8) plus the request-specific
// info that follows it. Its CRC32C covers every byte after the CRC field
// up to the end of Info.
type StatusBody struct {
	StreamID  StreamID  // same as the response header's
	RequestID RequestID // full request code; sent as code - 3000
	RespType  uint8     // RespFinal, RespPartial or RespProgress
	DataLen   int32     // length of the raw data after the body
	Info      []byte    // request-specific info, e.g. the pgread offset
}

// AppendTo appends the encoded status body, computing its CRC32C.
func (s *StatusBody) AppendTo(b []byte) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	b = append(b, s.StreamID[:]...)
	b = append(b, byte(s.RequestID-ReqAuth), s.RespType, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(s.DataLen))
	b = append(b, s.Info...)
	binary.BigEndian.PutUint32(b[start:], crc32.Checksum(b[start+4:], castagnoli))
	return b
}

// ParseStatusBody decodes and verifies a kXR_status body. The returned
// Info aliases body.
func ParseStatusBody(body []byte) (StatusBody, error) {
	var s StatusBody
	if len(body) < StatusBodyLen {
		return s, fmt.Errorf("%w: kXR_status body of %d bytes", ErrMalformed, len(body))
	}
	if want, got := binary.BigEndian.Uint32(body), crc32.Checksum(body[4:], castagnoli); want != got {
		return s, fmt.Errorf("%w: kXR_status body crc32c %08x, computed %08x", ErrChecksum, want, got)
	}
	copy(s.StreamID[:], body[4:6])
	s.RequestID = ReqAuth + RequestID(body[6])
	s.RespType = body[7]
	s.DataLen = int32(binary.BigEndian.Uint32(body[12:16]))
	if s.DataLen < 0 {
		return s, fmt.Errorf("%w: negative kXR_status data length", ErrMalformed)
	}
	s.Info = body[16:]
	return s, nil
}

// putInt64 and friends keep the request encoders short.
func putU16(b []byte, v uint16) { binary.BigEndian.PutUint16(b, v) }
func putU32(b []byte, v uint32) { binary.BigEndian.PutUint32(b, v) }
func putU64(b []byte, v uint64) { binary.BigEndian.PutUint64(b, v) }
func getU16(b []byte) uint16    { return binary.BigEndian.Uint16(b) }
func getU32(b []byte) uint32    { return binary.BigEndian.Uint32(b) }
func getU64(b []byte) uint64    { return binary.BigEndian.Uint64(b) }
