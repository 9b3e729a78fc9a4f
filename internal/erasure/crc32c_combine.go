package erasure

import (
	"encoding/binary"
	"hash/crc32"
	"sync"
)

// The CRC-32C of a concatenation A‖B follows from the CRCs of A and B and
// the length of B: crc(A‖B) = crc(A)·x^(8·|B|) + crc(B) over GF(2) modulo
// the Castagnoli polynomial (the initial and final inversions cancel), as
// zlib's crc32_combine computes it. The writer uses this to derive the
// object's CRC-32C from the page CRC-32Cs it computes for the archives
// anyway, instead of reading every byte a second time.

// castagnoliReflected is the Castagnoli polynomial in the bit order of
// hash/crc32 (bit 31 is the coefficient of x^0).
const castagnoliReflected = 0x82f63b78

// gfMul multiplies a and b, polynomials in that bit order, modulo the
// Castagnoli polynomial.
func gfMul(a, b uint32) uint32 { return gfMulMod(a, b, castagnoliReflected) }

// gfMulMod multiplies a and b modulo poly, all three in hash/crc32's
// bit order.
func gfMulMod(a, b, poly uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ poly
		} else {
			b >>= 1
		}
	}
	return p
}

// xPow8n is x^(8n) modulo the Castagnoli polynomial: the factor that
// moves a CRC past n bytes.
func xPow8n(n int64) uint32 {
	p := uint32(1) << 31  // x^0
	sq := uint32(1) << 23 // x^8, squared at every bit of n
	for ; n > 0; n >>= 1 {
		if n&1 != 0 {
			p = gfMul(sq, p)
		}
		sq = gfMul(sq, sq)
	}
	return p
}

// CombineCRC32C returns the CRC-32C of A‖B given crcA, crcB (the CRC-32Cs
// of A and B) and lenB, the length of B.
func CombineCRC32C(crcA, crcB uint32, lenB int64) uint32 {
	return gfMul(xPow8n(lenB), crcA) ^ crcB
}

// crcShift multiplies by a fixed power of x with four table lookups (the
// product is linear in each byte of the CRC): a CRC moved past a page
// costs a few nanoseconds instead of gfMul's 32 steps.
type crcShift [4][256]uint32

func newCRCShift(n int64) *crcShift {
	c := xPow8n(n)
	t := new(crcShift)
	for i := range t {
		for b := range t[i] {
			t[i][b] = gfMul(c, uint32(b)<<(8*i))
		}
	}
	return t
}

func (t *crcShift) apply(crc uint32) uint32 {
	return t[0][crc&0xff] ^ t[1][crc>>8&0xff] ^ t[2][crc>>16&0xff] ^ t[3][crc>>24]
}

// pageShift is the shift past one page of PagedSize bytes.
var pageShift = sync.OnceValue(func() *crcShift { return newCRCShift(PagedSize) })

// PagedSize is the page size whose CRC-32Cs WritePaged takes: that of the
// archives' page checksums.
const PagedSize = 4096

// WritePaged adds chunk[:n] to the checksums, as Write(chunk[:n]) would,
// taking its CRC-32C from pageCRCs, the big-endian CRC-32Cs of chunk's
// consecutive pages of PagedSize bytes (the last one shorter when
// len(chunk) is not a multiple), as the archives store them: only the
// page that n ends in, when it is not the chunk's end, is read for the
// CRC. pageCRCs must describe chunk (4 bytes per page); n must not
// exceed len(chunk).
func (s *ObjectSums) WritePaged(chunk []byte, n int, pageCRCs []byte) {
	for q := chunk[:n]; len(q) > 0; {
		m := min(len(q), sumPiece)
		s.adler = updateAdler32(s.adler, q[:m])
		q = q[m:]
	}
	s.addPagedCRC(chunk, n, pageCRCs)
}

// addPagedCRC adds chunk[:n] to the CRC-32C and the length, from the
// chunk's page CRC-32Cs (see WritePaged).
func (s *ObjectSums) addPagedCRC(chunk []byte, n int, pageCRCs []byte) {
	p := chunk[:n]
	shift := pageShift()
	for start := 0; start < n; start += PagedSize {
		end := min(start+PagedSize, len(chunk))
		if end > n {
			// The page runs past the bytes taken (a block's padding).
			s.crc = crc32.Update(s.crc, castagnoli, p[start:])
			break
		}
		page := binary.BigEndian.Uint32(pageCRCs[start/PagedSize*4:])
		if end-start == PagedSize {
			s.crc = shift.apply(s.crc) ^ page
		} else {
			s.crc = CombineCRC32C(s.crc, page, int64(end-start))
		}
	}
	s.n += int64(n)
}
