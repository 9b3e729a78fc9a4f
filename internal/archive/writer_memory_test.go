package archive

import (
	"archive/zip"
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/ecstore/ecstore/internal/erasure"
	"github.com/ecstore/ecstore/internal/layout"
)

// TestWriterMemoryPerBlock bounds what the writer keeps per chunk until
// its Close: a gateway writes k+m archives per put, and a 1 TiB object has
// 131,072 blocks at 8+2 with 1 MiB chunks. Regression: with archive/zip's
// writer, about 200 bytes a block (a 1 TiB put held ~250 MiB).
func TestWriterMemoryPerBlock(t *testing.T) {
	const blocks = 100_000
	chunk := []byte{7}
	crc := erasure.ChunkChecksum(chunk)
	pages := AppendPageCRCs(nil, chunk)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w := NewWriter(io.Discard, testTime)
	for b := range int64(blocks) {
		if err := w.WriteChunkPages(b, int(b%10), chunk, crc, pages); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perBlock := float64(after.HeapAlloc-before.HeapAlloc) / blocks
	runtime.KeepAlive(w)
	t.Logf("%.1f bytes of heap per block", perBlock)
	if perBlock > 32 {
		t.Errorf("the writer keeps %.1f bytes per block, want at most 32", perBlock)
	}
}

// TestCloseAgainAfterRefusedMetadata: a Close refused for its metadata
// (too large for readers) may be followed by one with other metadata;
// the archive then holds each page-checksum entry once. Regression: the
// second Close wrote the last group's page entry again, empty, under the
// same name.
func TestCloseAgainAfterRefusedMetadata(t *testing.T) {
	g := layout.Geometry{K: 2, M: 1, ChunkSize: 8}
	l := layout.Layout{Geometry: g, Size: 40}
	var buf bytes.Buffer
	w := NewWriter(&buf, testTime)
	for b := range l.Blocks() {
		d := bytes.Repeat([]byte{byte(b)}, int(l.ChunkLen(b)))
		if err := w.WriteChunk(b, g.Stripe(b, 0), d, erasure.ChunkChecksum(d)); err != nil {
			t.Fatal(err)
		}
	}
	big := testMeta(l, 0)
	big.User = map[string]string{"x": string(bytes.Repeat([]byte("x"), maxMetadataSize))}
	if err := w.Close(big); !errors.Is(err, ErrMetadataTooLarge) {
		t.Fatalf("Close with metadata readers refuse: %v", err)
	}
	if err := w.Close(testMeta(l, 0)); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]int{}
	for _, f := range zr.File {
		names[f.Name]++
	}
	for name, n := range names {
		if n != 1 {
			t.Errorf("entry %s written %d times", name, n)
		}
	}
	if _, err := parseBytes(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
}
