package erasure

import "golang.org/x/sys/cpu"

// useAdler32Vector selects the AVX2 kernel of adler32_amd64.s.
var useAdler32Vector = cpu.X86.HasAVX2

// adler32Blocks sums the 32-byte blocks of p (len(p) a multiple of 32,
// at most adlerBlocks blocks): sum is the sum of all bytes, prefix the
// sum over blocks of the bytes in the blocks before each, and weighted
// the sum over blocks of each byte weighted 32, 31, ..., 1 by its place
// in its block.
//
//go:noescape
func adler32Blocks(p []byte) (sum, prefix, weighted uint32)
