package erasure

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkReconstructData measures rebuilding lost data chunks of one
// block from the survivors (what a degraded read does per block), for
// the default geometry and a wide one. Bytes are the block's data bytes.
func BenchmarkReconstructData(b *testing.B) {
	for _, g := range []struct{ k, m, chunk, lost int }{
		{8, 2, 1 << 20, 1}, {8, 2, 1 << 20, 2}, {10, 4, 1 << 20, 4},
	} {
		b.Run(fmt.Sprintf("k=%d/m=%d/chunk=%dMiB/lost=%d", g.k, g.m, g.chunk>>20, g.lost), func(b *testing.B) {
			c, err := New(g.k, g.m)
			if err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, uint64(g.k)))
			full := make([][]byte, g.k+g.m)
			for i := range full {
				full[i] = make([]byte, g.chunk)
				for j := 0; j < g.chunk; j += 8 {
					full[i][j] = byte(r.Uint32())
				}
			}
			if err := c.Encode(full); err != nil {
				b.Fatal(err)
			}
			spare := make([][]byte, g.lost) // buffers the rebuilt chunks go into
			for i := range spare {
				spare[i] = make([]byte, 0, g.chunk)
			}
			chunks := make([][]byte, len(full))
			run := func() {
				copy(chunks, full)
				for i := range g.lost {
					chunks[i] = spare[i][:0] // missing: zero length, capacity reused
				}
				if err := c.ReconstructData(chunks); err != nil {
					b.Fatal(err)
				}
			}
			run() // warm up
			b.SetBytes(int64(g.k * g.chunk))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				run()
			}
		})
	}
}
