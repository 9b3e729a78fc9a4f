package archive

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"testing"
	"time"
)

// Regression (found by review): the writer wrote archives whose central
// directory readers refuse (maxDirSize, about 1.5 million entries: an
// 8+2 object over ~12 TiB at 1 MiB chunks, or ~50 GiB at 4 KiB): the
// write committed, and every read then failed. The writer refuses the
// chunk that would take the directory past the bound, and what it wrote
// below the bound parses.
func TestDirectoryBeyondWhatReadersTakeIsRefused(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, time.Unix(0, 0))
	w.dirLimit = 4096
	chunk := []byte{1}
	crc := crc32.ChecksumIEEE(chunk)
	var err error
	n := int64(0)
	for ; n < 1000 && err == nil; n++ {
		err = w.WriteChunk(n, 0, chunk, crc)
	}
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("1000 entries under a 4 KiB directory bound: %v", err)
	}
	if w.dirSize > w.dirLimit {
		t.Errorf("directory of %d bytes counted, bound %d", w.dirSize, w.dirLimit)
	}

	// Below the bound, with room for the metadata entry, the archive is
	// written and parses.
	buf.Reset()
	w = NewWriter(&buf, time.Unix(0, 0))
	w.dirLimit = 4096
	blocks := int64(40)
	for b := range blocks {
		if err := w.WriteChunk(b, 0, chunk, crc); err != nil {
			t.Fatal(err)
		}
	}
	m := &Metadata{Path: "/x", Version: NewVersion(time.Now()), Size: blocks, K: 1, M: 0, ChunkSize: 1, Placement: []string{"n"}, MTime: time.Unix(1, 0), Adler32: "00000001", CRC32C: "00000000"}
	if err := w.Close(m); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(context.Background(), memFile(buf.Bytes()), int64(buf.Len())); err != nil {
		t.Errorf("parse: %v", err)
	}
	if w.dirSize > w.dirLimit {
		t.Errorf("directory of %d bytes counted, bound %d", w.dirSize, w.dirLimit)
	}
}
