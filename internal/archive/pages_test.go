package archive

import (
	"bytes"
	"testing"

	"github.com/ecstore/ecstore/internal/erasure"
	"github.com/ecstore/ecstore/internal/layout"
)

// TestWriteChunkPagesKeepsTheCallersChecksums checks that the writer
// stores the page checksums its caller took with the chunk's CRC-32, not
// ones of the bytes it is handed later: bytes damaged in between then
// fail both (found by review: the writer computed them itself).
func TestWriteChunkPagesKeepsTheCallersChecksums(t *testing.T) {
	g := layout.Geometry{K: 1, M: 0, ChunkSize: 10000}
	l := layout.Layout{Geometry: g, Size: 10000}
	good := chunkData(l, 0, 0)
	pages := AppendPageCRCs(nil, good)
	crc := erasure.ChunkChecksum(good)
	damaged := bytes.Clone(good)
	damaged[5000] ^= 1

	var buf bytes.Buffer
	w := NewWriter(&buf, testTime)
	if err := w.WriteChunkPages(0, 0, damaged, crc, pages[:4]); err == nil {
		t.Fatal("page checksums of the wrong length accepted")
	}
	if err := w.WriteChunkPages(0, 0, damaged, crc, pages); err != nil {
		t.Fatal(err)
	}
	meta := testMeta(l, 0)
	if err := w.Close(meta); err != nil {
		t.Fatal(err)
	}
	idx := mustParse(t, buf.Bytes())
	ps, ok := idx.Pages(0)
	if !ok {
		t.Fatal("no page checksums")
	}
	if got := buf.Bytes()[ps.CRCs : ps.CRCs+int64(len(pages))]; !bytes.Equal(got, pages) {
		t.Fatalf("stored page checksums %x, want the caller's %x", got, pages)
	}
	page := buf.Bytes()[ps.Data+4096 : ps.Data+8192]
	if PageCRC(page) == PageCRC(good[4096:8192]) {
		t.Fatal("the damaged page's checksum matches the good page's")
	}
}
