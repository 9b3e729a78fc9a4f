package xrootd

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Page checksums, as the specification's kXR_pgread and kXR_pgwrite
// sections define them.
//
// Data travels as a sequence of pages, each preceded by the big-endian
// CRC32C (Castagnoli) of its bytes. Pages are aligned on file offsets that
// are multiples of PageSize: when the transfer starts at an unaligned
// offset the first page holds only the bytes up to the next page boundary,
// and the last page may be short because the data ends.

// firstPageLen returns the length of the first page of n bytes at off.
func firstPageLen(off int64, n int) int {
	return min(PageSize-int(off%PageSize), n)
}

// PagesLen returns the encoded length of n data bytes at file offset off,
// CRCs included.
func PagesLen(off int64, n int) int {
	if n <= 0 {
		return 0
	}
	first := firstPageLen(off, n)
	pages := 1 + (n-first+PageSize-1)/PageSize
	return n + pages*PageCRCLen
}

// AppendPages appends data, which starts at file offset off, to dst as a
// sequence of CRC32C-prefixed pages.
func AppendPages(dst []byte, off int64, data []byte) []byte {
	for len(data) > 0 {
		n := firstPageLen(off, len(data))
		dst = binary.BigEndian.AppendUint32(dst, crc32.Checksum(data[:n], castagnoli))
		dst = append(dst, data[:n]...)
		data = data[n:]
		off += int64(n)
	}
	return dst
}

// PagesInPlace turns n data bytes, starting at file offset off, into the
// page sequence AppendPages would make, without a second buffer: buf must
// hold PagesLen(off, n) bytes with the data at its end (the n bytes
// before that length); the result is buf[:PagesLen(off, n)]. Each page
// moves towards the front by the CRCs before it, never over data not yet
// moved.
func PagesInPlace(buf []byte, off int64, n int) []byte {
	total := PagesLen(off, n)
	out := buf[:total]
	src, dst := total-n, 0
	for src < total {
		pn := firstPageLen(off, total-src)
		crc := crc32.Checksum(out[src:src+pn], castagnoli)
		copy(out[dst+PageCRCLen:], out[src:src+pn])
		binary.BigEndian.PutUint32(out[dst:], crc)
		dst += PageCRCLen + pn
		src += pn
		off += int64(pn)
	}
	return out
}

// PageError reports the first page whose CRC32C does not match; it wraps
// ErrChecksum.
type PageError struct {
	Offset     int64  // file offset of the page
	Want, Got  uint32 // CRC32C of the page's data
	PageLength int    // data bytes in the page
}

// Error describes the bad page.
func (e *PageError) Error() string {
	return fmt.Sprintf("xrootd: page at offset %d (%d bytes): crc32c %08x, computed %08x", e.Offset, e.PageLength, e.Want, e.Got)
}

// Unwrap returns ErrChecksum.
func (e *PageError) Unwrap() error { return ErrChecksum }

// DecodePages verifies the CRC32C-prefixed pages in raw, which start at
// file offset off, and appends their data to dst. A page that fails its
// checksum gives a *PageError; a trailing fragment too short to hold a CRC
// and at least one byte gives an error wrapping ErrMalformed.
func DecodePages(dst []byte, off int64, raw []byte) ([]byte, error) {
	for len(raw) > 0 {
		if len(raw) <= PageCRCLen {
			return dst, fmt.Errorf("%w: %d trailing bytes after the last page", ErrMalformed, len(raw))
		}
		n := firstPageLen(off, len(raw)-PageCRCLen)
		want := binary.BigEndian.Uint32(raw)
		page := raw[PageCRCLen : PageCRCLen+n]
		if got := crc32.Checksum(page, castagnoli); got != want {
			return dst, &PageError{Offset: off, Want: want, Got: got, PageLength: n}
		}
		dst = append(dst, page...)
		raw = raw[PageCRCLen+n:]
		off += int64(n)
	}
	return dst, nil
}

// pagesDataLen returns how many data bytes raw holds if it is a well-formed
// page sequence at off, without verifying checksums.
func pagesDataLen(off int64, raw int) (int, bool) {
	n := 0
	for raw > 0 {
		if raw <= PageCRCLen {
			return 0, false
		}
		p := firstPageLen(off, raw-PageCRCLen)
		raw -= PageCRCLen + p
		n += p
		off += int64(p)
	}
	return n, true
}
