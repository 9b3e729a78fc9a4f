package erasure

import (
	"encoding/binary"
	"hash/crc32"
)

// castagnoli is the CRC32C table (hardware accelerated on amd64 and arm64).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ChunkChecksum is the checksum stored with every chunk: the IEEE CRC-32
// that the ZIP format keeps in each entry's headers.
func ChunkChecksum(p []byte) uint32 {
	if !useIEEEFold || len(p) < foldMin {
		return crc32.ChecksumIEEE(p)
	}
	// The kernel folds the whole 64-byte rounds into 64 bytes with the
	// same CRC; hash/crc32 finishes those and the rest.
	n := len(p) &^ 63
	var state [64]byte
	ieeeFold256(^uint32(0), p[:n], &state)
	return crc32.Update(crc32.Update(^uint32(0), crc32.IEEETable, state[:]), crc32.IEEETable, p[n:])
}

// foldMin is the length from which ieeeFold256 pays for finishing its
// 64 bytes of state.
const foldMin = 512

// CRC32C returns the Castagnoli CRC of p.
func CRC32C(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }

// UpdateCRC32C extends a Castagnoli CRC with p.
func UpdateCRC32C(crc uint32, p []byte) uint32 { return crc32.Update(crc, castagnoli, p) }

// ObjectSums computes the whole-object checksums (adler32 and CRC32C) of a
// byte stream as it is written. The zero value is not ready: use
// NewObjectSums. It is not safe for concurrent use.
type ObjectSums struct {
	adler uint32
	crc   uint32
	n     int64
}

// NewObjectSums returns checksums of the empty stream.
func NewObjectSums() *ObjectSums { return &ObjectSums{adler: 1} }

// sumPiece is how much of a write both checksums take in turn: small
// enough that the second reads it from the cache the first brought it
// into.
const sumPiece = 32 << 10

// Write adds p to the checksums; it never fails.
func (s *ObjectSums) Write(p []byte) (int, error) {
	for q := p; len(q) > 0; {
		n := min(len(q), sumPiece)
		s.adler = updateAdler32(s.adler, q[:n])
		s.crc = crc32.Update(s.crc, castagnoli, q[:n])
		q = q[n:]
	}
	s.n += int64(len(p))
	return len(p), nil
}

// Adler32 is the adler32 of the bytes written so far.
func (s *ObjectSums) Adler32() uint32 { return s.adler }

// CRC32C is the CRC32C of the bytes written so far.
func (s *ObjectSums) CRC32C() uint32 { return s.crc }

// Len is the number of bytes written so far.
func (s *ObjectSums) Len() int64 { return s.n }

// FormatSum formats a 32-bit checksum as 8 lowercase hex digits, the form
// xrdcp and xrdadler32 print.
func FormatSum(v uint32) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	const hexd = "0123456789abcdef"
	out := make([]byte, 8)
	for i, c := range b {
		out[2*i], out[2*i+1] = hexd[c>>4], hexd[c&15]
	}
	return string(out)
}

// Adler32 is a hash.Hash32 computing adler32 as hash/adler32 does, with
// the faster updateAdler32. The zero value is not ready: use NewAdler32.
type Adler32 struct{ sum uint32 }

// NewAdler32 returns the adler32 of the empty stream.
func NewAdler32() *Adler32 { return &Adler32{sum: 1} }

// Write adds p to the checksum; it never fails.
func (a *Adler32) Write(p []byte) (int, error) {
	a.sum = updateAdler32(a.sum, p)
	return len(p), nil
}

// Sum32 is the checksum of the bytes written so far.
func (a *Adler32) Sum32() uint32 { return a.sum }

// Sum appends the checksum, big-endian, to b.
func (a *Adler32) Sum(b []byte) []byte { return binary.BigEndian.AppendUint32(b, a.sum) }

// Reset forgets the bytes written.
func (a *Adler32) Reset() { a.sum = 1 }

// Size is 4 bytes.
func (a *Adler32) Size() int { return 4 }

// BlockSize is 4: any write size is efficient.
func (a *Adler32) BlockSize() int { return 4 }
