package xrootd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// minStreamWrite is the smallest write payload handed to a
// FileStreamWriter; smaller ones are buffered, which costs little. It is
// well below the 256 KiB that clients commonly split large writes into,
// so that the remainder of such a split streams too.
const minStreamWrite = 64 << 10

// streamWrite serves a large kXR_write or kXR_pgwrite to a file that
// implements FileStreamWriter by handing it the connection: the payload
// goes from the socket into the file's own buffers, and the connection is
// not read further until the file has taken it (backpressure instead of
// buffering). It runs on the reading goroutine, after the file's queued
// operations, and holds the file's worker until it is done so that later
// operations stay in order.
//
// It reports whether it served the request (false: use the buffered path)
// and whether the connection can go on.
func (s *session) streamWrite(h RequestHeader) (served, ok bool) {
	if h.ID != ReqWrite && h.ID != ReqPgWrite || h.Dlen < minStreamWrite {
		return false, true
	}
	fh := handleAt(&h.Params, 0)
	off := int64(binary.BigEndian.Uint64(h.Params[4:12]))
	dataLen := int64(h.Dlen)
	if h.ID == ReqPgWrite {
		n, wellFormed := pagesDataLen(off, int(h.Dlen))
		if !wellFormed {
			return false, true // the buffered path explains the error
		}
		dataLen = int64(n)
	}
	o := s.owner()
	o.mu.Lock()
	of := o.files[fh]
	o.mu.Unlock()
	if of == nil || !of.writable || off < 0 {
		return false, true
	}
	sw, isStream := of.f.(FileStreamWriter)
	if !isStream {
		return false, true
	}
	// A write that names a sub-stream (pathid) is answered there.
	out, err := s.pathSession(h.Params[12])
	if err != nil {
		return false, true // the buffered path explains the error
	}

	select {
	case s.slots <- struct{}{}:
	case <-s.ctx.Done():
		return true, false
	}
	s.wg.Add(1)
	defer func() {
		<-s.slots
		s.wg.Done()
	}()
	// Wait for this file's earlier operations, then keep its worker.
	turn, finished := make(chan struct{}), make(chan struct{})
	defer close(finished)
	if !s.enqueue(fh, func(*openFile) { close(turn); <-finished }) {
		return false, true // closed meanwhile: the buffered path answers
	}
	select {
	case <-turn:
	case <-s.ctx.Done():
		return true, false
	}

	s.inFrame(true)
	defer s.inFrame(false)
	payload := &countingReader{r: io.LimitReader(s.in, int64(h.Dlen))}
	var data io.Reader = payload
	var pages *pageReader
	if h.ID == ReqPgWrite {
		pages = &pageReader{r: payload, off: off, raw: int64(h.Dlen)}
		data = pages
	}
	if of.closed {
		err = Errorf(ErrFileNotOpen, "%v: file handle %x is closed", h.ID, fh)
	} else {
		var n int64
		n, err = sw.WriteFrom(s.ctx, data, off, dataLen)
		if err == nil && n != dataLen {
			err = Errorf(ErrIOError, "write %s at %d: short write of %d of %d bytes", of.name, off, n, dataLen)
		}
	}
	// Keep the stream in step: skip what the file did not take.
	if rest := int64(h.Dlen) - payload.n; rest > 0 {
		if _, derr := io.CopyN(io.Discard, s.in, rest); derr != nil {
			s.log.Debug("xrootd write payload unreadable; closing", "req", h.ID, "err", derr)
			return true, false
		}
	}
	if payload.err != nil && !errors.Is(payload.err, io.EOF) {
		// The connection broke inside the payload.
		s.log.Debug("xrootd write payload unreadable; closing", "req", h.ID, "err", payload.err)
		return true, false
	}
	switch {
	case err != nil:
		if pages != nil && pages.bad != nil {
			err = &Error{Code: ErrChkSumErr, Message: fmt.Sprintf("pgwrite %s: %v", of.name, pages.bad)}
		} else {
			err = fmt.Errorf("write %s at %d: %w", of.name, off, err)
		}
		out.fail(h.StreamID, h.ID, err)
	case h.ID == ReqPgWrite:
		info := make([]byte, 8)
		putU64(info, uint64(off))
		out.sendStatus(h.StreamID, ReqPgWrite, RespFinal, info, nil)
	default:
		out.sendOK(h.StreamID, nil)
	}
	return true, true
}

// countingReader counts the bytes read and remembers the first error.
type countingReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

// pageReader yields the data of a kXR_pgwrite payload (pages each led by
// their CRC32C), verifying every page as its last byte passes.
type pageReader struct {
	r        io.Reader
	off      int64 // file offset of the next data byte
	raw      int64 // payload bytes left, checksums included
	pageLeft int   // data bytes left in the current page
	pageOff  int64 // file offset of the current page
	pageLen  int
	want     uint32
	crc      uint32
	hdr      [PageCRCLen]byte
	bad      *PageError // the first page that failed its checksum
}

var _ UncheckedReader = (*pageReader)(nil)

// Unchecked implements UncheckedReader: the bytes handed out of a page
// whose checksum was not checked yet.
func (p *pageReader) Unchecked() int64 {
	if p.pageLeft > 0 {
		return int64(p.pageLen - p.pageLeft)
	}
	return 0
}

func (p *pageReader) Read(b []byte) (int, error) {
	if p.pageLeft == 0 {
		if p.raw == 0 {
			return 0, io.EOF
		}
		if _, err := io.ReadFull(p.r, p.hdr[:]); err != nil {
			return 0, truncatedEOF(err)
		}
		p.raw -= PageCRCLen
		p.pageLen = firstPageLen(p.off, int(p.raw))
		p.pageLeft, p.pageOff = p.pageLen, p.off
		p.want, p.crc = binary.BigEndian.Uint32(p.hdr[:]), 0
	}
	n, err := p.r.Read(b[:min(len(b), p.pageLeft)])
	p.crc = crc32.Update(p.crc, castagnoli, b[:n])
	p.pageLeft -= n
	p.raw -= int64(n)
	p.off += int64(n)
	if p.pageLeft == 0 && p.crc != p.want {
		p.bad = &PageError{Offset: p.pageOff, Want: p.want, Got: p.crc, PageLength: p.pageLen}
		return n, p.bad
	}
	if errors.Is(err, io.EOF) {
		if p.pageLeft > 0 || p.raw > 0 {
			return n, truncatedEOF(err)
		}
		err = nil
	}
	return n, err
}
