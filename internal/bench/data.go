package bench

import (
	"encoding/binary"
	"math/rand/v2"
)

// generator produces the content of objects without generating bytes per
// object: piece i of object key is a window of one seeded random buffer
// (see the package documentation).
type generator struct {
	seed   uint64
	period int    // bytes of distinct random data
	buf    []byte // the random data twice, so any window of <= period bytes is contiguous
}

// newGenerator fills a buffer for pieces of at most maxPiece bytes.
func newGenerator(seed uint64, maxPiece int64) *generator {
	period := int(max(min(maxPiece, PieceSize), 4096))
	period = (period + 7) &^ 7
	buf := make([]byte, 2*period)
	r := rand.NewPCG(seed, 0x65637374_6f726521) // "ecstore!"
	for i := 0; i < period; i += 8 {
		binary.LittleEndian.PutUint64(buf[i:], r.Uint64())
	}
	copy(buf[period:], buf[:period])
	return &generator{seed: seed, period: period, buf: buf}
}

// piece returns the n bytes of piece i of object key (the bytes at
// i*PieceSize). n must not exceed the maxPiece given to newGenerator. The
// slice aliases the generator's buffer and must not be modified.
func (g *generator) piece(key uint64, i int64, n int) []byte {
	s := int(mix64(g.seed^mix64(key^mix64(uint64(i)+0x9e3779b97f4a7c15))) % uint64(g.period))
	return g.buf[s : s+n : s+n]
}

// mix64 is the SplitMix64 finalizer: a bijective 64-bit mix.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// preparedKey and workerKey name the content of objects: the prepared
// objects of get and mixed are keys 0..Objects-1; objects written by
// worker w during the timed phase have keys above 2^40.
func preparedKey(i int) uint64 { return uint64(i) }

func workerKey(w int, seq int64) uint64 { return uint64(w+1)<<40 | uint64(seq) }
