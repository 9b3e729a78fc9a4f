package erasure

import (
	"bytes"
	"fmt"
	"hash/crc32"
)

// goldenParity pins the CRC-32 of the parity chunks that the codec must
// produce for a fixed input (see selfTestInput). They were computed once
// with the Cauchy matrix of klauspost/reedsolomon; if a library upgrade or
// a CPU code path changes them, data written earlier would decode wrongly,
// so the process must refuse to start.
var goldenParity = []struct {
	k, m  int
	size  int
	crc32 uint32
}{
	{1, 1, 1000, 0xec7d2247},
	{4, 2, 4096, 0x8a620c0b},
	{8, 2, 65536, 0x61d0adaa},
	{10, 4, 4099, 0x2e5ad36d},
	{16, 8, 32768, 0xab1b491a},
}

// selfTestInput fills k chunks of size bytes with a fixed pseudo-random
// pattern (a 32-bit LCG), independent of math/rand's algorithm.
func selfTestInput(k, m, size int) [][]byte {
	chunks := make([][]byte, k+m)
	x := uint32(2463534242)
	for i := range chunks {
		chunks[i] = make([]byte, size)
		if i < k {
			for j := range chunks[i] {
				x = x*1664525 + 1013904223
				chunks[i][j] = byte(x >> 24)
			}
		}
	}
	return chunks
}

// SelfTest encodes fixed inputs for several geometries, compares the parity
// with golden checksums and checks that every data chunk is recovered after
// losing m chunks. It returns an error describing the first mismatch; a
// process that gets one must not serve data (MinIO does the same at start).
func SelfTest() error {
	for _, g := range goldenParity {
		got, err := selfTestOne(g.k, g.m, g.size)
		if err != nil {
			return err
		}
		if got != g.crc32 {
			return fmt.Errorf("erasure: self-test %d+%d: parity crc %08x, want %08x: unsafe to start", g.k, g.m, got, g.crc32)
		}
	}
	return nil
}

func selfTestOne(k, m, size int) (uint32, error) {
	c, err := New(k, m)
	if err != nil {
		return 0, err
	}
	chunks := selfTestInput(k, m, size)
	if err := c.Encode(chunks); err != nil {
		return 0, err
	}
	h := crc32.NewIEEE()
	for _, p := range chunks[k:] {
		h.Write(p)
	}
	// Drop the first m chunks (all data when m <= k) and recover them.
	want := selfTestInput(k, m, size)
	lost := make([][]byte, len(chunks))
	copy(lost, chunks)
	for i := 0; i < m; i++ {
		lost[i] = nil
	}
	if err := c.ReconstructData(lost); err != nil {
		return 0, fmt.Errorf("erasure: self-test %d+%d: %w", k, m, err)
	}
	for i := 0; i < k; i++ {
		if !bytes.Equal(lost[i], want[i]) {
			return 0, fmt.Errorf("erasure: self-test %d+%d: data chunk %d reconstructed wrongly: unsafe to start", k, m, i)
		}
	}
	return h.Sum32(), nil
}
