//go:build slow

package test

import (
	"io"
	"math/rand/v2"
)

// Sparse-ish test streams: mostly zeros, with one 1 MiB patch of random
// bytes at a seeded offset in every 64 MiB region and one over the last
// bytes of the stream, generated on the fly so that multi-GiB objects
// never sit in memory or on disk twice.
const (
	genRegion = 64 << 20
	genPatch  = 1 << 20
)

type sparseGen struct {
	seed      uint64
	size, off int64
	cache     map[int64][]byte // patch bytes by region (-1: the tail patch)
}

func newSparseGen(seed uint64, size int64) *sparseGen {
	return &sparseGen{seed: seed, size: size, cache: map[int64][]byte{}}
}

// patchStart returns the offset of region r's patch (r = -1: the tail
// patch).
func (g *sparseGen) patchStart(r int64) int64 {
	if r < 0 {
		return max(0, g.size-genPatch)
	}
	h := rand.New(rand.NewPCG(g.seed, uint64(r)))
	return r*genRegion + h.Int64N(genRegion-genPatch)
}

// patchData returns the bytes of region r's patch.
func (g *sparseGen) patchData(r int64) []byte {
	if data, ok := g.cache[r]; ok {
		return data
	}
	if len(g.cache) > 4 {
		clear(g.cache) // reads are sequential: old patches are done
	}
	var key [32]byte
	for i := range 8 {
		key[i] = byte(g.seed >> (8 * i))
		key[8+i] = byte(uint64(r) >> (8 * i))
	}
	data := make([]byte, genPatch)
	rand.NewChaCha8(key).Read(data)
	g.cache[r] = data
	return data
}

func (g *sparseGen) Read(p []byte) (int, error) {
	if g.off >= g.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), g.size-g.off))
	p = p[:n]
	clear(p)
	lo, hi := g.off, g.off+int64(n)
	overlay := func(r int64) {
		start := g.patchStart(r)
		a, b := max(lo, start), min(hi, start+genPatch, g.size)
		if a < b {
			copy(p[a-lo:b-lo], g.patchData(r)[a-start:b-start])
		}
	}
	for r := lo / genRegion; r <= (hi-1)/genRegion; r++ {
		overlay(r)
	}
	overlay(-1)
	g.off = hi
	return n, nil
}
