package erasure

import (
	"encoding/binary"
	"hash/crc32"
)

// ChunkSums are the checksums the writer takes of one chunk: its ZIP
// CRC-32, the CRC-32C of each of its pages, and the adler32 of its object
// bytes (for the whole-object adler32, see ObjectSums.AddChunk).
type ChunkSums struct {
	// CRC32 is the chunk's IEEE CRC-32, as ChunkChecksum returns it.
	CRC32 uint32
	// Adler32 is the adler32 of the chunk's object bytes: its first n
	// bytes, the n given to NewChunkSummer (1, the empty stream's, for
	// none).
	Adler32 uint32
	// Pages holds the big-endian CRC-32C of each PagedSize page of the
	// chunk (the last one shorter when the chunk is), as the archives'
	// page checksums store them.
	Pages []byte
}

// SumPiece is the piece of a chunk that the writer takes through parity
// and every checksum in turn (Encode of the pieces of a block's chunks,
// then ChunkSummer.Write of each): a whole number of pages and of
// ieeeFold256's 64-byte rounds, small enough that the K+M pieces of a
// block stay in the L2 cache while the checksums read them again.
const SumPiece = 8 * PagedSize

// ChunkSummer takes the checksums of one chunk a piece at a time, in
// order. The zero value is not ready: use NewChunkSummer. It is not safe
// for concurrent use.
type ChunkSummer struct {
	sums  ChunkSums
	off   int // bytes of the chunk taken so far
	n     int // object bytes in the chunk
	state [64]byte
}

// NewChunkSummer returns a summer for a chunk whose first n bytes are
// object bytes (0 for a parity chunk), appending its page CRC-32Cs to
// pages, which may be nil.
func NewChunkSummer(n int, pages []byte) *ChunkSummer {
	return &ChunkSummer{sums: ChunkSums{Adler32: 1, Pages: pages}, n: n}
}

// Write adds the chunk's next piece. Every piece but the chunk's last
// must be a whole number of pages long.
func (c *ChunkSummer) Write(piece []byte) {
	c.sums.CRC32 = updateIEEE(c.sums.CRC32, piece, &c.state)
	for p := piece; len(p) > 0; {
		page := p[:min(len(p), PagedSize)]
		c.sums.Pages = binary.BigEndian.AppendUint32(c.sums.Pages, crc32.Checksum(page, castagnoli))
		p = p[len(page):]
	}
	if c.off < c.n {
		c.sums.Adler32 = updateAdler32(c.sums.Adler32, piece[:min(len(piece), c.n-c.off)])
	}
	c.off += len(piece)
}

// Sums returns the checksums of the pieces written.
func (c *ChunkSummer) Sums() ChunkSums { return c.sums }

// updateIEEE extends the IEEE CRC-32 crc with p, as crc32.Update with
// crc32.IEEETable does, through ieeeFold256 where ChunkChecksum uses it;
// state is its scratch space.
func updateIEEE(crc uint32, p []byte, state *[64]byte) uint32 {
	if !useIEEEFold || len(p) < foldMin {
		return crc32.Update(crc, crc32.IEEETable, p)
	}
	n := len(p) &^ 63
	// The fold takes the CRC register, which is the inverted CRC.
	ieeeFold256(^crc, p[:n], state)
	return crc32.Update(crc32.Update(^uint32(0), crc32.IEEETable, state[:]), crc32.IEEETable, p[n:])
}

// CombineAdler32 returns the adler32 of A‖B given adlerA and adlerB, the
// adler32s of A and B, and lenB, the length of B. With a = 1 + the sum
// of the bytes and b = the sum of the running values of a, B's bytes add
// their own sum to a (less B's starting 1), and every one of B's lenB
// steps adds A's a, less the 1 that B's own b counts.
func CombineAdler32(adlerA, adlerB uint32, lenB int64) uint32 {
	aA, bA := uint64(adlerA&0xffff), uint64(adlerA>>16)
	aB, bB := uint64(adlerB&0xffff), uint64(adlerB>>16)
	n := uint64(lenB % adlerMod)
	a := (aA + aB + adlerMod - 1) % adlerMod
	b := (bA + bB + n*((aA+adlerMod-1)%adlerMod)) % adlerMod
	return uint32(b<<16 | a)
}

// AddChunk adds chunk[:n] to the checksums, as Write(chunk[:n]) would,
// from the ChunkSums of a ChunkSummer for its first n bytes: the adler32 comes
// from sums.Adler32 and the CRC-32C from sums.Pages, so that only the
// page that n ends in, when it is not the chunk's end, is read.
func (s *ObjectSums) AddChunk(chunk []byte, n int, sums ChunkSums) {
	s.adler = CombineAdler32(s.adler, sums.Adler32, int64(n))
	s.addPagedCRC(chunk, n, sums.Pages)
}
