package archive

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/erasure"
	"github.com/ecstore/ecstore/internal/layout"
)

// testGeometries are the geometries of the round-trip sweeps: degenerate
// ones (1+0, chunks of one byte), odd chunk sizes, the widest geometry
// and the usual shapes scaled down.
var testGeometries = []layout.Geometry{
	{K: 1, M: 0, ChunkSize: 1},
	{K: 1, M: 0, ChunkSize: 7},
	{K: 1, M: 1, ChunkSize: 5},
	{K: 2, M: 1, ChunkSize: 3},
	{K: 3, M: 2, ChunkSize: 10},
	{K: 4, M: 2, ChunkSize: 100},
	{K: 8, M: 2, ChunkSize: 64},
	{K: 10, M: 4, ChunkSize: 33},
	{K: 5, M: 0, ChunkSize: 2},
	{K: layout.MaxData, M: layout.MaxParity, ChunkSize: 1},
}

// testSizes returns the object sizes worth testing for g: empty, one
// byte, around a chunk, around a block and several blocks with a full or
// short last block.
func testSizes(g layout.Geometry) []int64 {
	c, bs := g.ChunkSize, g.BlockSize()
	cand := []int64{0, 1, c - 1, c, c + 1, bs - 1, bs, bs + 1, 2*bs + c + 1, 3 * bs, 3*bs - 1}
	var out []int64
	seen := map[int64]bool{}
	for _, n := range cand {
		if n >= 0 && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// TestRoundTrip writes the archive of every slot for many geometries and
// sizes, parses it back and checks every byte the format promises.
func TestRoundTrip(t *testing.T) {
	t.Logf("seed %d", *seedFlag)
	for _, g := range testGeometries {
		if testing.Short() && g.Width() > 16 {
			continue
		}
		for _, size := range testSizes(g) {
			t.Run(fmt.Sprintf("geom=%d+%d/%d/size=%d", g.K, g.M, g.ChunkSize, size), func(t *testing.T) {
				l := layout.Layout{Geometry: g, Size: size}
				stripesOfBlock := make([]map[int]bool, l.Blocks())
				for b := range stripesOfBlock {
					stripesOfBlock[b] = map[int]bool{}
				}
				for slot := range g.Width() {
					data, meta := buildArchive(t, g, size, slot)
					checkArchive(t, l, slot, data, meta)
					idx := mustParse(t, data)
					for _, c := range idx.Chunks {
						stripesOfBlock[c.Block][c.Stripe] = true
					}
				}
				// Every block's chunks are spread over the slots, one
				// stripe index each.
				for b, set := range stripesOfBlock {
					if len(set) != g.Width() {
						t.Errorf("block %d: slots hold %d distinct stripes, want %d", b, len(set), g.Width())
					}
				}
			})
		}
	}
}

// checkArchive checks one written archive against the format.
// checkPages checks that the page checksums of block b's chunk, as
// Index.Pages finds them, are those of chunk's pages.
func checkPages(t *testing.T, idx *Index, data []byte, b int64, chunk []byte) {
	t.Helper()
	ps, ok := idx.Pages(b)
	if !ok {
		t.Fatalf("block %d: no page checksums", b)
	}
	if !bytes.Equal(data[ps.Data:ps.Data+int64(len(chunk))], chunk) {
		t.Fatalf("block %d: the chunk's data is not at %d", b, ps.Data)
	}
	want := AppendPageCRCs(nil, chunk)
	if got := data[ps.CRCs : ps.CRCs+int64(len(want))]; !bytes.Equal(got, want) {
		t.Fatalf("block %d: page checksums %x, want %x", b, got, want)
	}
	// The block's checksums lie in its group's entry, which checks whole
	// and not with a byte changed.
	e := ps.Entry
	if e.First != b/PageGroup*PageGroup || ps.CRCs < e.Offset || ps.CRCs+int64(len(want)) > e.Offset+e.Size {
		t.Fatalf("block %d: checksums at %d outside their entry %+v", b, ps.CRCs, e)
	}
	entry := bytes.Clone(data[e.Offset : e.Offset+e.Size])
	if err := e.Check(entry); err != nil {
		t.Fatalf("block %d: %v", b, err)
	}
	entry[len(entry)/2] ^= 1
	if err := e.Check(entry); !errors.Is(err, ErrChecksum) {
		t.Fatalf("block %d: a damaged entry checked: %v", b, err)
	}
	if err := e.Check(entry[1:]); !errors.Is(err, ErrChecksum) {
		t.Fatalf("block %d: a short entry checked: %v", b, err)
	}
}

func checkArchive(t *testing.T, l layout.Layout, slot int, data []byte, meta *Metadata) {
	t.Helper()
	ctx := context.Background()
	idx, err := parseBytes(data)
	if err != nil {
		t.Fatalf("slot %d: %v", slot, err)
	}
	if !metaEqual(idx.Meta, meta) || idx.Meta.Format != FormatVersion {
		t.Fatalf("slot %d: metadata %+v, want %+v", slot, idx.Meta, meta)
	}
	if idx.Size != int64(len(data)) || int64(len(idx.Chunks)) != l.Blocks() {
		t.Fatalf("slot %d: index size %d with %d chunks, want %d and %d", slot, idx.Size, len(idx.Chunks), len(data), l.Blocks())
	}
	w := int64(l.Width())
	off := int64(0)
	for b, c := range idx.Chunks {
		b := int64(b)
		// Rotation: slot = (stripe + block) mod (K+M).
		wantStripe := int(((int64(slot)-b)%w + w) % w)
		// Last block: chunks of ceil(r/K) bytes.
		wantLen := l.ChunkSize
		if r := min(l.Size-b*l.BlockSize(), l.BlockSize()); r < l.BlockSize() {
			wantLen = (r + int64(l.K) - 1) / int64(l.K)
		}
		if c.Block != b || c.Stripe != wantStripe || (int64(c.Stripe)+b)%w != int64(slot) ||
			c.Name != fmt.Sprintf("obj.%d.%d", b, wantStripe) || c.Size != wantLen {
			t.Fatalf("slot %d block %d: chunk %+v, want stripe %d, %d bytes", slot, b, c, wantStripe, wantLen)
		}
		// Entries are contiguous from offset 0, in block order, with
		// 30-byte local headers and no extra field.
		if c.Offset != off {
			t.Fatalf("slot %d block %d: offset %d, want %d", slot, b, c.Offset, off)
		}
		off += c.Span()
		want := chunkData(l, b, c.Stripe)
		checkPages(t, idx, data, b, want)
		if (b+1)%PageGroup == 0 || b == l.Blocks()-1 {
			// The group's page checksums follow its last chunk.
			name := pageEntryName(b / PageGroup * PageGroup)
			if got := string(data[off+localHeaderLen : off+localHeaderLen+int64(len(name))]); got != name {
				t.Fatalf("slot %d block %d: entry %q after the chunk, want %q", slot, b, got, name)
			}
			var n int64
			for x := b / PageGroup * PageGroup; x <= b; x++ {
				n += pagesOf(idx.Chunks[x].Size) * 4
			}
			off += localHeaderLen + int64(len(name)) + n
		}
		got, err := ReadChunk(ctx, memFile(data), &c, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || c.CRC32 != erasure.ChunkChecksum(want) {
			t.Fatalf("slot %d: chunk %s: wrong bytes or CRC", slot, c.Name)
		}
		// A caller's buffer is used when big enough.
		buf := make([]byte, 0, c.Span())
		if got, err := ReadChunk(ctx, memFile(data), &c, buf); err != nil || &got[0] != &buf[:c.Span()][c.Span()-c.Size] {
			t.Fatalf("ReadChunk with buffer: %v", err)
		}
		// Any corrupted data byte is caught by the CRC.
		for _, i := range []int64{0, c.Size / 2, c.Size - 1} {
			bad := bytes.Clone(data)
			bad[c.Offset+c.Span()-c.Size+i] ^= 0x40
			_, err := ReadChunk(ctx, memFile(bad), &c, nil)
			var ce *ChecksumError
			if !errors.As(err, &ce) || !errors.Is(err, ErrChecksum) || ce.Block != b || ce.Stripe != c.Stripe || ce.Want != c.CRC32 {
				t.Fatalf("corrupt byte %d of chunk %s: err %v", i, c.Name, err)
			}
		}
	}
	// The metadata entry follows the last chunk.
	if got := bytes.Index(data, []byte(MetadataName)); int64(got) != off+localHeaderLen {
		t.Fatalf("slot %d: metadata entry at %d, want its name at %d", slot, got, off+localHeaderLen)
	}
	// archive/zip sees the same entries and verifies every CRC.
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("archive/zip rejects archive: %v", err)
	}
	// In order: each chunk, the page checksums after each group of
	// PageGroup blocks (and after the last block), the metadata.
	type entry struct {
		name string
		data []byte
	}
	var want []entry
	var pages []byte
	for b, c := range idx.Chunks {
		d := chunkData(l, c.Block, c.Stripe)
		want = append(want, entry{c.Name, d})
		pages = AppendPageCRCs(pages, d)
		if (b+1)%PageGroup == 0 || b == len(idx.Chunks)-1 {
			want = append(want, entry{pageEntryName(int64(b / PageGroup * PageGroup)), pages})
			pages = nil
		}
	}
	want = append(want, entry{MetadataName, nil})
	if len(zr.File) != len(want) {
		t.Fatalf("archive/zip sees %d entries, want %d", len(zr.File), len(want))
	}
	for i, f := range zr.File {
		wantDate, wantTime := dosTime(testTime)
		if f.Name != want[i].name || f.Method != zip.Store || f.Flags != 0 || f.ReaderVersion != 20 ||
			f.CreatorVersion != 3<<8|20 || f.ModifiedDate != wantDate || f.ModifiedTime != wantTime ||
			f.CompressedSize64 != f.UncompressedSize64 || len(f.Extra) != 0 || f.Mode() != 0o644 {
			t.Fatalf("archive/zip entry %d: %+v, want %s", i, f.FileHeader, want[i].name)
		}
		got := readZipEntry(t, f) // verifies the entry's CRC-32
		if f.Name == MetadataName {
			if m, err := decodeMetadata(got); err != nil || !metaEqual(m, meta) {
				t.Fatalf("archive/zip: metadata entry: %v", err)
			}
		} else if !bytes.Equal(got, want[i].data) {
			t.Fatalf("archive/zip: entry %s differs", f.Name)
		}
	}
}

func readZipEntry(t testing.TB, f *zip.File) []byte {
	t.Helper()
	rc, err := f.Open()
	if err != nil {
		t.Fatalf("archive/zip open %s: %v", f.Name, err)
	}
	defer rc.Close()
	p, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("archive/zip read %s: %v", f.Name, err)
	}
	return p
}

// TestZipChecksum shows that archive/zip, with no ecstore code, rejects a
// chunk whose bytes do not match the CRC-32 in its headers.
func TestZipChecksum(t *testing.T) {
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 10}
	data, _ := buildArchive(t, g, 75, 2)
	idx := mustParse(t, data)
	for i, c := range idx.Chunks {
		bad := bytes.Clone(data)
		bad[c.Offset+c.Span()-1] ^= 1
		zr, err := zip.NewReader(bytes.NewReader(bad), int64(len(bad)))
		if err != nil {
			t.Fatal(err)
		}
		rc, err := zr.File[i].Open()
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(rc)
		rc.Close()
		if !errors.Is(err, zip.ErrChecksum) {
			t.Errorf("chunk %s: archive/zip read error %v, want zip.ErrChecksum", c.Name, err)
		}
	}
}

// TestParseTail checks that ParseTail agrees with Parse for every tail
// length, reading the rest through r, and never reads beyond the tail
// when r is nil.
func TestParseTail(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 2, M: 1, ChunkSize: 16}
	data, meta := buildArchive(t, g, 100, 1)
	size := int64(len(data))
	want := mustParse(t, data)
	for n := 0; n <= len(data); n++ {
		tail := data[len(data)-n:]
		idx, err := ParseTail(ctx, memFile(data), size, tail)
		switch {
		case n < endLen:
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("tail %d: err %v, want ErrFormat (the end record must be in the tail)", n, err)
			}
		case err != nil:
			t.Fatalf("tail %d: %v", n, err)
		case !metaEqual(idx.Meta, meta) || !sameChunks(idx.Chunks, want.Chunks):
			t.Fatalf("tail %d: different index", n)
		}
		idx, err = ParseTail(ctx, nil, size, tail)
		if err != nil && !errors.Is(err, ErrFormat) {
			t.Fatalf("tail %d, no reader: %v", n, err)
		}
		if err == nil && !sameChunks(idx.Chunks, want.Chunks) {
			t.Fatalf("tail %d, no reader: different index", n)
		}
		if n == len(data) && err != nil {
			t.Fatalf("whole archive as tail, no reader: %v", err)
		}
	}
	// A tail longer than the archive is a caller error, not a panic.
	long := append(bytes.Repeat([]byte{0}, 100), data...)
	if _, err := ParseTail(ctx, nil, size, long); !errors.Is(err, ErrFormat) {
		t.Fatalf("tail longer than archive: %v", err)
	}
	for _, n := range []int64{endLen, 10, size - 100} {
		if _, err := ParseTail(ctx, nil, n, data); !errors.Is(err, ErrFormat) {
			t.Fatalf("tail longer than size %d: %v", n, err)
		}
	}
}

// TestWriterErrors checks the writer's refusals.
func TestWriterErrors(t *testing.T) {
	g := layout.Geometry{K: 2, M: 1, ChunkSize: 4}
	l := layout.Layout{Geometry: g, Size: 20}
	var buf bytes.Buffer
	w := NewWriter(&buf, testTime)
	if err := w.WriteChunk(1, 0, []byte{1}, 0); err == nil {
		t.Error("block 1 accepted before block 0")
	}
	for b := range l.Blocks() {
		d := chunkData(l, b, g.Stripe(b, 0))
		if err := w.WriteChunk(b, g.Stripe(b, 0), d, erasure.ChunkChecksum(d)); err != nil {
			t.Fatal(err)
		}
	}
	if w.Blocks() != l.Blocks() {
		t.Errorf("Blocks() = %d, want %d", w.Blocks(), l.Blocks())
	}
	short := testMeta(layout.Layout{Geometry: g, Size: 8}, 0)
	if err := w.Close(short); err == nil {
		t.Error("Close accepted metadata with fewer blocks than written")
	}
	bad := testMeta(l, 0)
	bad.Slot = 7
	if err := w.Close(bad); !errors.Is(err, ErrFormat) {
		t.Errorf("Close with bad slot: %v", err)
	}
	for _, mt := range []time.Time{
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		testTime.In(time.FixedZone("", 24*3600)),
	} {
		bad := testMeta(l, 0)
		bad.MTime = mt
		if err := w.Close(bad); !errors.Is(err, ErrFormat) {
			t.Errorf("Close with mtime %v: %v", mt, err)
		}
	}
	big := testMeta(l, 0)
	big.User = map[string]string{"x": string(bytes.Repeat([]byte("x"), maxMetadataSize))}
	if err := w.Close(big); !errors.Is(err, ErrMetadataTooLarge) {
		t.Errorf("Close with metadata readers refuse: %v", err)
	}
	m := testMeta(l, 0)
	m.Format = 99 // Close sets the format it writes
	if err := w.Close(m); err != nil {
		t.Fatal(err)
	}
	if m.Format != FormatVersion {
		t.Errorf("Close left Format %d", m.Format)
	}
	if err := w.Close(m); err == nil {
		t.Error("second Close accepted")
	}
	if err := w.WriteChunk(l.Blocks(), 0, []byte{1}, 0); err == nil {
		t.Error("WriteChunk after Close accepted")
	}
	if _, err := parseBytes(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
}

// TestDosTime checks the MS-DOS timestamps written for unzip -l.
func TestDosTime(t *testing.T) {
	for _, tc := range []struct {
		in         string
		date, time uint16
	}{
		{"1970-01-01T00:00:00Z", 1<<5 | 1, 0}, // before 1980: 1980-01-01
		{"1980-01-01T00:00:00Z", 1<<5 | 1, 0},
		{"2025-11-21T22:20:00Z", 45<<9 | 11<<5 | 21, 22<<11 | 20<<5},
		{"2025-11-21T22:20:59+01:00", 45<<9 | 11<<5 | 21, 21<<11 | 20<<5 | 29}, // UTC, 2-second steps
		{"2107-12-31T23:59:58Z", 127<<9 | 12<<5 | 31, 23<<11 | 59<<5 | 29},
		{"2200-06-01T00:00:00Z", 127<<9 | 6<<5 | 1, 0}, // clamped year
	} {
		tm, err := time.Parse(time.RFC3339, tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if d, h := dosTime(tm); d != tc.date || h != tc.time {
			t.Errorf("dosTime(%s) = %#x %#x, want %#x %#x", tc.in, d, h, tc.date, tc.time)
		}
	}
}

// countingFile counts the reads made of an in-memory archive.
type countingFile struct {
	memFile
	reads int
}

func (c *countingFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	c.reads++
	return c.memFile.ReadAt(ctx, p, off)
}

// An archive no larger than TailSize is read once, by Parse: its chunks
// come from the bytes Parse kept, still verified against their CRC.
func TestSmallArchiveReadOnce(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 2, M: 1, ChunkSize: 4096}
	data, _ := buildArchive(t, g, 20000, 1)
	f := &countingFile{memFile: memFile(data)}
	idx, err := Parse(ctx, f, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if f.reads != 1 || idx.Whole == nil {
		t.Fatalf("parse made %d reads, kept whole archive: %v", f.reads, idx.Whole != nil)
	}
	for i := range idx.Chunks {
		c := &idx.Chunks[i]
		got, err := ReadChunk(ctx, idx.Source(f), c, nil)
		if err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		want, _ := ReadChunk(ctx, memFile(data), c, nil)
		if !bytes.Equal(got, want) {
			t.Fatalf("chunk %d differs from the file's", i)
		}
	}
	if f.reads != 1 {
		t.Fatalf("reading the chunks made %d more reads", f.reads-1)
	}
	// The kept bytes are still checked: a flipped byte is a checksum error.
	c := &idx.Chunks[0]
	idx.Whole[c.Offset+c.Span()-1] ^= 1
	if _, err := ReadChunk(ctx, idx.Source(f), c, nil); !errors.As(err, new(*ChecksumError)) {
		t.Fatalf("corrupted kept chunk: %v, want a checksum error", err)
	}
	// A larger archive is read through the file.
	big, _ := buildArchive(t, layout.Geometry{K: 2, M: 1, ChunkSize: 64 << 10}, 3*TailSize, 1)
	bidx := mustParse(t, big)
	if bidx.Whole != nil {
		t.Fatalf("a %d-byte archive was kept whole", len(big))
	}
}

// sizedReads records the reads made of an in-memory archive.
type sizedReads struct {
	memFile
	sizes []int
}

func (s *sizedReads) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	s.sizes = append(s.sizes, len(p))
	return s.memFile.ReadAt(ctx, p, off)
}

// Parse reads FirstTail bytes of an archive larger than TailSize, and
// more only when its directory and metadata, or its end record behind a
// long comment, lie further back; each way it finds the same index.
func TestLargeArchiveTailReads(t *testing.T) {
	ctx := context.Background()
	withComment := func(data []byte, n int) []byte {
		out := bytes.Clone(data)
		binary.LittleEndian.PutUint16(out[len(out)-2:], uint16(n))
		return append(out, bytes.Repeat([]byte("c"), n)...)
	}
	few, _ := buildArchive(t, layout.Geometry{K: 2, M: 1, ChunkSize: 64 << 10}, 3*TailSize, 1)
	many, _ := buildArchive(t, layout.Geometry{K: 2, M: 1, ChunkSize: 512}, 2*512*600, 1) // 600 chunks
	for _, c := range []struct {
		name     string
		data     []byte
		maxReads int
	}{
		{"few chunks", few, 1},
		{"long directory", many, 3},
		{"long comment", withComment(few, 40000), 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			if len(c.data) <= TailSize {
				t.Fatalf("a %d-byte archive is read whole: the test tests nothing", len(c.data))
			}
			f := &sizedReads{memFile: memFile(c.data)}
			idx, err := Parse(ctx, f, int64(len(c.data)))
			if err != nil {
				t.Fatal(err)
			}
			if f.sizes[0] != FirstTail || len(f.sizes) > c.maxReads || (c.maxReads > 1) != (len(f.sizes) > 1) {
				t.Errorf("reads of %v bytes; want %d first, then more only beyond it (at most %d reads)", f.sizes, FirstTail, c.maxReads)
			}
			whole, err := ParseTail(ctx, nil, int64(len(c.data)), c.data)
			if err != nil {
				t.Fatal(err)
			}
			if !metaEqual(idx.Meta, whole.Meta) || !sameChunks(idx.Chunks, whole.Chunks) {
				t.Errorf("index differs from the whole archive's")
			}
		})
	}
}

// Reading a large archive in pieces finds what reading it whole does,
// also when its end is corrupt: every 53rd byte of the last 48 KiB of an
// archive whose directory is longer than FirstTail, flipped in turn.
func TestLargeArchiveTailReadsCorrupt(t *testing.T) {
	ctx := context.Background()
	data, _ := buildArchive(t, layout.Geometry{K: 2, M: 1, ChunkSize: 512}, 2*512*600, 1)
	for i := len(data) - 48<<10; i < len(data); i += 53 {
		for _, bit := range []byte{1, 0x80} {
			d := bytes.Clone(data)
			d[i] ^= bit
			idx, err := Parse(ctx, memFile(d), int64(len(d)))
			whole, werr := ParseTail(ctx, nil, int64(len(d)), d)
			if (err == nil) != (werr == nil) || err == nil && (!metaEqual(idx.Meta, whole.Meta) || !sameChunks(idx.Chunks, whole.Chunks)) {
				t.Fatalf("byte %d ^ %#x: Parse: %v; parsed whole: %v, or a different index", i, bit, err, werr)
			}
		}
	}
}
