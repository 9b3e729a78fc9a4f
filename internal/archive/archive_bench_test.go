package archive

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/ecstore/ecstore/internal/erasure"
	"github.com/ecstore/ecstore/internal/layout"
)

// benchMeta is the metadata of slot 0 of an object of layout l, with
// placeholder checksums (the archive does not verify them).
func benchMeta(l layout.Layout) *Metadata {
	placement := make([]string, l.Width())
	for i := range placement {
		placement[i] = fmt.Sprintf("n%02d", i)
	}
	return &Metadata{Format: FormatVersion, Path: "/bench/obj", Version: testVersion, Size: l.Size, K: l.K, M: l.M,
		ChunkSize: l.ChunkSize, Placement: placement, MTime: testTime, Adler32: "00000001", CRC32C: "00000000"}
}

// benchArchive writes slot 0's archive of an object of layout l whose
// chunks all hold the same pseudo-random bytes.
func benchArchive(b *testing.B, l layout.Layout) []byte {
	b.Helper()
	var buf bytes.Buffer
	writeBenchArchive(b, &buf, l, chunkData(l, 0, 0))
	return buf.Bytes()
}

func writeBenchArchive(b *testing.B, dst io.Writer, l layout.Layout, chunk []byte) {
	w := NewWriter(dst, testTime)
	for blk := range l.Blocks() {
		n := l.ChunkLen(blk)
		p := chunk[:n]
		if err := w.WriteChunk(blk, l.Stripe(blk, 0), p, erasure.ChunkChecksum(p)); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(benchMeta(l)); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkWriter measures writing one node's archive (ZIP headers,
// central directory, metadata entry) to io.Discard, including the CRC-32
// of each chunk (which the engine computes in its encode workers). Bytes
// are the chunk bytes written.
func BenchmarkWriter(b *testing.B) {
	for _, g := range []layout.Geometry{{K: 8, M: 2, ChunkSize: 1 << 20}, {K: 8, M: 2, ChunkSize: 64 << 10}} {
		l := layout.Layout{Geometry: g, Size: 64 << 20}
		b.Run(fmt.Sprintf("k=%d/m=%d/chunk=%s/size=64MiB", g.K, g.M, layout.FormatSize(g.ChunkSize)), func(b *testing.B) {
			chunk := chunkData(l, 0, 0)
			writeBenchArchive(b, io.Discard, l, chunk) // warm up
			b.SetBytes(l.Blocks() * g.ChunkSize)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				writeBenchArchive(b, io.Discard, l, chunk)
			}
		})
	}
}

// BenchmarkParse measures opening an archive: reading its tail and
// parsing the central directory and metadata, for archives of 8 to 8192
// blocks (a 1 GiB object at 8+2 with 1 MiB chunks has 128).
func BenchmarkParse(b *testing.B) {
	g := layout.Geometry{K: 8, M: 2, ChunkSize: 4 << 10}
	for _, blocks := range []int64{8, 128, 8192} {
		l := layout.Layout{Geometry: g, Size: blocks * int64(g.K) * g.ChunkSize}
		b.Run(fmt.Sprintf("k=%d/m=%d/chunk=4KiB/blocks=%d", g.K, g.M, blocks), func(b *testing.B) {
			data := benchArchive(b, l)
			ctx := context.Background()
			if _, err := parseBytes(data); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := Parse(ctx, memFile(data), int64(len(data))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadChunk measures reading and verifying one chunk (local
// header check, CRC-32) from an in-memory archive into a reused buffer.
func BenchmarkReadChunk(b *testing.B) {
	for _, g := range []layout.Geometry{{K: 8, M: 2, ChunkSize: 1 << 20}, {K: 8, M: 2, ChunkSize: 64 << 10}} {
		l := layout.Layout{Geometry: g, Size: 8 * int64(g.K) * g.ChunkSize}
		b.Run(fmt.Sprintf("k=%d/m=%d/chunk=%s", g.K, g.M, layout.FormatSize(g.ChunkSize)), func(b *testing.B) {
			data := benchArchive(b, l)
			idx, err := parseBytes(data)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			buf := make([]byte, idx.Chunks[0].Span())
			b.SetBytes(g.ChunkSize)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				c := &idx.Chunks[i%len(idx.Chunks)]
				if _, err := ReadChunk(ctx, memFile(data), c, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
