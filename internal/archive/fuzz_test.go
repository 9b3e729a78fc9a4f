package archive

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"testing"
)

// FuzzParse parses arbitrary bytes as an archive. Parse and ReadChunk
// must fail with a package error or succeed; a chunk ReadChunk returns
// always matches its CRC-32; and an archive that reads back completely
// survives being rewritten by Writer (decode → encode → decode).
// Seeds: testdata/fuzz/FuzzParse, from real archives (go test -update).
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		idx, err := parseBytes(data)
		// Reading the archive in pieces (a first tail, then what lies
		// before it) finds what parsing it whole does.
		whole, werr := ParseTail(ctx, nil, int64(len(data)), data)
		if (err == nil) != (werr == nil) || err == nil && (!metaEqual(idx.Meta, whole.Meta) || !sameChunks(idx.Chunks, whole.Chunks)) {
			t.Fatalf("Parse: %v; parsed whole: %v, or a different index", err, werr)
		}
		if err != nil {
			if !isFormatError(err) {
				t.Fatalf("Parse error without a package sentinel: %v", err)
			}
			return
		}
		if idx.Meta.Validate() != nil || int64(len(idx.Chunks)) != idx.Meta.Layout().Blocks() {
			t.Fatalf("Parse accepted an inconsistent index: %+v", idx.Meta)
		}
		chunks := make([][]byte, len(idx.Chunks))
		complete := true
		for i, c := range idx.Chunks {
			if c.Block != int64(i) || c.Offset < 0 || c.Offset+c.Span() > idx.Size {
				t.Fatalf("chunk %d: %+v outside a %d-byte archive", i, c, idx.Size)
			}
			p, err := ReadChunk(ctx, memFile(data), &c, nil)
			if err != nil {
				if !isFormatError(err) {
					t.Fatalf("ReadChunk error without a package sentinel: %v", err)
				}
				complete = false
				continue
			}
			if int64(len(p)) != c.Size || crc32.ChecksumIEEE(p) != c.CRC32 {
				t.Fatalf("ReadChunk returned %d bytes that fail CRC %08x", len(p), c.CRC32)
			}
			chunks[i] = p
			// Page checksums, where found, lie inside the archive.
			if ps, ok := idx.Pages(c.Block); ok {
				if ps.Data != c.Offset+c.Span()-c.Size || ps.CRCs < 0 || ps.CRCs+pagesOf(c.Size)*4 > idx.Size {
					t.Fatalf("chunk %d: page checksums at %d for %d pages outside a %d-byte archive", i, ps.CRCs, pagesOf(c.Size), idx.Size)
				}
			}
		}
		if !complete {
			return
		}
		var buf bytes.Buffer
		w := NewWriter(&buf, idx.Meta.MTime)
		for i, c := range idx.Chunks {
			if err := w.WriteChunk(c.Block, c.Stripe, chunks[i], c.CRC32); err != nil {
				t.Fatal(err)
			}
		}
		m := *idx.Meta
		if err := w.Close(&m); err != nil {
			t.Fatalf("rewriting a parsed archive: %v", err)
		}
		idx2, err := parseBytes(buf.Bytes())
		if err != nil {
			t.Fatalf("parsing a rewritten archive: %v", err)
		}
		if !metaEqual(idx2.Meta, idx.Meta) || !sameChunks(idx2.Chunks, idx.Chunks) {
			t.Fatalf("rewritten archive parses to a different index")
		}
		for i, c := range idx2.Chunks {
			p, err := ReadChunk(ctx, memFile(buf.Bytes()), &c, nil)
			if err != nil || !bytes.Equal(p, chunks[i]) {
				t.Fatalf("rewritten chunk %s: %v", c.Name, err)
			}
			// The writer's page checksums are those of the chunk.
			ps, ok := idx2.Pages(c.Block)
			want := AppendPageCRCs(nil, p)
			if !ok || !bytes.Equal(buf.Bytes()[ps.CRCs:ps.CRCs+int64(len(want))], want) {
				t.Fatalf("rewritten chunk %s: page checksums missing or wrong", c.Name)
			}
		}
	})
}

// FuzzMetadata decodes arbitrary bytes as a metadata entry. What decodes
// must encode, decode to the same metadata and encode to the same bytes.
// Seeds: testdata/fuzz/FuzzMetadata (go test -update).
func FuzzMetadata(f *testing.F) {
	f.Fuzz(func(t *testing.T, p []byte) {
		m, err := decodeMetadata(p)
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrVersion) {
				t.Fatalf("decode error without a package sentinel: %v", err)
			}
			return
		}
		q, err := m.encode()
		if err != nil {
			t.Fatalf("accepted metadata does not encode: %v", err)
		}
		m2, err := decodeMetadata(q)
		if err != nil {
			t.Fatalf("encoded metadata does not decode: %v\n%s", err, q)
		}
		if !metaEqual(m, m2) {
			t.Fatalf("decode → encode → decode changed the metadata:\n%+v\n%+v", m, m2)
		}
		q2, err := m2.encode()
		if err != nil || !bytes.Equal(q, q2) {
			t.Fatalf("encoding is not stable: %v\n%s\n%s", err, q, q2)
		}
	})
}
