package archive

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/ecstore/ecstore/internal/layout"
)

// TestParseTruncated cuts a small archive at every length: each prefix
// must be rejected with ErrFormat.
func TestParseTruncated(t *testing.T) {
	for _, tc := range []struct {
		g    layout.Geometry
		size int64
	}{
		{layout.Geometry{K: 2, M: 1, ChunkSize: 8}, 37},
		{layout.Geometry{K: 1, M: 0, ChunkSize: 4}, 0},
	} {
		data, _ := buildArchive(t, tc.g, tc.size, 1%tc.g.Width())
		z64 := toZip64(t, data)
		for name, data := range map[string][]byte{"zip32": data, "zip64": z64} {
			mustParse(t, data)
			for n := range len(data) {
				if _, err := parseBytes(data[:n]); !errors.Is(err, ErrFormat) {
					t.Fatalf("%s %v size %d cut at %d/%d: err %v, want ErrFormat", name, tc.g, tc.size, n, len(data), err)
				}
			}
		}
	}
}

// toZip64 rewrites a small archive with ZIP64 end records, as archive/zip
// writes them for big archives.
func toZip64(t testing.TB, data []byte) []byte {
	t.Helper()
	body, recs := splitArchive(t, data)
	return joinArchive(body, recs, ends{zip64: true})
}

// TestParseFlip flips bytes at every position of the metadata entry, the
// central directory and the end records (32-bit and ZIP64 forms). Parse
// must either fail with a package error or return the original metadata
// and chunk entries that are either unchanged (and read back intact) or
// refused by ReadChunk: no flip may make ReadChunk accept wrong bytes.
func TestParseFlip(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 2, M: 1, ChunkSize: 8}
	l := layout.Layout{Geometry: g, Size: 37}
	data, meta := buildArchive(t, g, l.Size, 2)
	for name, data := range map[string][]byte{"zip32": data, "zip64": toZip64(t, data)} {
		t.Run(name, func(t *testing.T) {
			want := mustParse(t, data)
			last := want.Chunks[len(want.Chunks)-1]
			dirStart := last.Offset + last.Span() // the metadata entry
			var accepted, rejected int
			for pos := dirStart; pos < int64(len(data)); pos++ {
				for _, mask := range []byte{0x01, 0x80, 0xff} {
					bad := bytes.Clone(data)
					bad[pos] ^= mask
					idx, err := parseBytes(bad)
					if err != nil {
						if !isFormatError(err) {
							t.Fatalf("flip %#x at %d: unexpected error %v", mask, pos, err)
						}
						rejected++
						continue
					}
					accepted++
					// The metadata is verified by Parse; chunk entries
					// only when read.
					if !metaEqual(idx.Meta, meta) || len(idx.Chunks) != len(want.Chunks) {
						t.Fatalf("flip %#x at %d: accepted a different index", mask, pos)
					}
					for i, c := range idx.Chunks {
						got, err := ReadChunk(ctx, memFile(bad), &c, nil)
						if c != want.Chunks[i] {
							// A changed entry must not yield data.
							if !isFormatError(err) {
								t.Fatalf("flip %#x at %d: changed entry %+v: ReadChunk error %v", mask, pos, c, err)
							}
							continue
						}
						if err != nil || !bytes.Equal(got, chunkData(l, c.Block, c.Stripe)) {
							t.Fatalf("flip %#x at %d: ReadChunk %s: %v", mask, pos, c.Name, err)
						}
					}
				}
			}
			t.Logf("%d flips rejected, %d accepted with a consistent index", rejected, accepted)
		})
	}
}

// TestParseMalformed feeds the parser archives that break one rule each.
func TestParseMalformed(t *testing.T) {
	g := layout.Geometry{K: 2, M: 1, ChunkSize: 8}
	l := layout.Layout{Geometry: g, Size: 40} // 3 blocks, the last one short
	const slot = 1
	good, meta := buildArchive(t, g, l.Size, slot)
	mustParse(t, good)
	chunks := chunkEntries(l, slot)
	metaWith := func(f func(m *Metadata)) rawEntry {
		m := *meta
		f(&m)
		return metaEntry(t, &m)
	}
	u32 := func(v uint32) *uint32 { return &v }
	cat := func(es ...any) []rawEntry {
		var out []rawEntry
		for _, e := range es {
			switch e := e.(type) {
			case rawEntry:
				out = append(out, e)
			case []rawEntry:
				out = append(out, e...)
			}
		}
		return out
	}
	withSize := func(e rawEntry, n int) rawEntry {
		e.data = append(bytes.Clone(e.data), make([]byte, n)...)[:n]
		return e
	}
	wrongStripe := chunks[1]
	wrongStripe.name = ChunkName(1, (l.Stripe(1, slot)+1)%g.Width())

	for _, tc := range []struct {
		name    string
		data    []byte
		wantErr error // nil: Parse must succeed
	}{
		{"crafted twin of a good archive", craft(t, cat(chunks, metaEntry(t, meta))...), nil},
		{"unknown entries are ignored", craft(t, cat(rawEntry{name: "README"}, chunks[0],
			rawEntry{name: "obj.x.1", data: []byte("?")}, chunks[1:], rawEntry{name: "dir/"},
			metaEntry(t, meta), rawEntry{name: "zzz", data: []byte("later")})...), nil},
		{"empty file", nil, ErrFormat},
		{"not a zip", bytes.Repeat([]byte("ecstore!"), 100), ErrFormat},
		{"no metadata", craft(t, chunks...), ErrFormat},
		{"only metadata", craft(t, metaEntry(t, meta)), ErrFormat},
		{"two metadata entries", craft(t, cat(chunks, metaEntry(t, meta), metaEntry(t, meta))...), ErrFormat},
		{"duplicate chunk, one entry too many", craft(t, cat(chunks, chunks[1], metaEntry(t, meta))...), ErrFormat},
		{"duplicate chunk in place of another", craft(t, chunks[0], chunks[1], chunks[1], metaEntry(t, meta)), ErrFormat},
		{"missing middle block", craft(t, chunks[0], chunks[2], metaEntry(t, meta)), ErrFormat},
		{"missing last block", craft(t, chunks[0], chunks[1], metaEntry(t, meta)), ErrFormat},
		{"extra block", craft(t, cat(chunks, rawEntry{name: ChunkName(3, l.Stripe(3, slot)), data: make([]byte, 8)}, metaEntry(t, meta))...), ErrFormat},
		{"block past the end instead of a missing one", craft(t, chunks[0], chunks[1], rawEntry{name: ChunkName(5, l.Stripe(5, slot)), data: chunks[2].data}, metaEntry(t, meta)), ErrFormat},
		{"wrong stripe for the slot", craft(t, chunks[0], wrongStripe, chunks[2], metaEntry(t, meta)), ErrFormat},
		{"short chunk", craft(t, chunks[0], withSize(chunks[1], 7), chunks[2], metaEntry(t, meta)), ErrFormat},
		{"last chunk padded to a full chunk", craft(t, chunks[0], chunks[1], withSize(chunks[2], 8), metaEntry(t, meta)), ErrFormat},
		{"compressed chunk", craft(t, chunks[0], rawEntry{name: chunks[1].name, data: chunks[1].data, method: 8}, chunks[2], metaEntry(t, meta)), ErrFormat},
		{"metadata from a newer format", craft(t, cat(chunks, metaWith(func(m *Metadata) { m.Format = FormatVersion + 1 }))...), ErrVersion},
		{"metadata format 0", craft(t, cat(chunks, metaWith(func(m *Metadata) { m.Format = 0 }))...), ErrFormat},
		{"metadata with a bad CRC", craft(t, cat(chunks, rawEntry{name: MetadataName, data: metaEntry(t, meta).data, crc: u32(0x12345678)})...), ErrChecksum},
		{"metadata with a local extra field", craft(t, cat(chunks, rawEntry{name: MetadataName, data: metaEntry(t, meta).data, extra: []byte{0xfe, 0xca, 0, 0}})...), ErrFormat},
		{"metadata not JSON", craft(t, cat(chunks, rawEntry{name: MetadataName, data: []byte("k=2 m=1")})...), ErrFormat},
		{"metadata too big", craft(t, cat(chunks, rawEntry{name: MetadataName, data: make([]byte, maxMetadataSize+1)})...), ErrFormat},
		{"metadata compressed", craft(t, cat(chunks, rawEntry{name: MetadataName, data: metaEntry(t, meta).data, method: 8})...), ErrFormat},
		{"metadata with a bad slot", craft(t, cat(chunks, metaWith(func(m *Metadata) { m.Slot = 3 }))...), ErrFormat},
		{"metadata with a bad geometry", craft(t, cat(chunks, metaWith(func(m *Metadata) { m.K, m.M = 0, 3 }))...), ErrFormat},
		{"metadata with a bad version", craft(t, cat(chunks, metaWith(func(m *Metadata) { m.Version = "yesterday" }))...), ErrFormat},
		{"metadata with a negative size", craft(t, cat(chunks, metaWith(func(m *Metadata) { m.Size = -1 }))...), ErrFormat},
		{"metadata with huge size", craft(t, cat(chunks, metaWith(func(m *Metadata) { m.Size = 1 << 62 }))...), ErrFormat},
		{"metadata with an mtime that cannot be encoded", craft(t, cat(chunks, rawEntry{name: MetadataName,
			data: bytes.Replace(metaEntry(t, meta).data, []byte("23:00:00.123456789Z"), []byte("23:00:00+24:00"), 1)})...), ErrFormat},
		{"metadata with a bad checksum field", craft(t, cat(chunks, metaWith(func(m *Metadata) { m.CRC32C = "0" }))...), ErrFormat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idx, err := parseBytes(tc.data)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				if !metaEqual(idx.Meta, meta) || !sameChunks(idx.Chunks, mustParse(t, good).Chunks) {
					t.Fatal("different index")
				}
				for _, c := range idx.Chunks {
					if _, err := ReadChunk(context.Background(), memFile(tc.data), &c, nil); err != nil {
						t.Fatal(err)
					}
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
		})
	}
}

// TestReadChunkMalformed checks what ReadChunk verifies in a chunk's local
// header, which Parse does not read, and that it refuses chunks no
// archive can hold.
func TestReadChunkMalformed(t *testing.T) {
	g := layout.Geometry{K: 2, M: 1, ChunkSize: 8}
	l := layout.Layout{Geometry: g, Size: 40}
	const slot = 0
	type rcCase struct {
		name string
		data []byte
		c    Chunk
	}
	chunks := chunkEntries(l, slot)
	withExtra := chunks[1]
	withExtra.extra = []byte{0xfe, 0xca, 0, 0}
	crafted := craft(t, chunks[0], withExtra, chunks[2], metaEntry(t, testMeta(l, slot)))
	cases := []rcCase{
		{"local extra field", crafted, mustParse(t, crafted).Chunks[1]},
		{"negative size", nil, Chunk{Name: "obj.0.0", Size: -100}},
		{"negative offset", nil, Chunk{Name: "obj.0.0", Offset: -1, Size: 1}},
		{"huge size", nil, Chunk{Name: "obj.0.0", Size: 1 << 62}},
	}
	patch := func(name string, f func(p []byte, c *Chunk)) {
		data, _ := buildArchive(t, g, l.Size, slot)
		c := mustParse(t, data).Chunks[1]
		f(data, &c)
		cases = append(cases, rcCase{name, data, c})
	}
	patch("local CRC differs", func(p []byte, c *Chunk) { p[c.Offset+14] ^= 1 })
	patch("local header names another chunk", func(p []byte, c *Chunk) { p[c.Offset+localHeaderLen+4] = '7' })
	patch("bad local signature", func(p []byte, c *Chunk) { p[c.Offset] = 0 })
	patch("past the end of the file", func(p []byte, c *Chunk) { c.Offset = int64(len(p)) - 5 })
	patch("offset 2^62", func(p []byte, c *Chunk) { c.Offset = 1 << 62 })
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ReadChunk(context.Background(), memFile(tc.data), &tc.c, nil); !errors.Is(err, ErrFormat) {
				t.Fatalf("err %v, want ErrFormat", err)
			}
			if _, err := ChunkIn(tc.data, &tc.c); !errors.Is(err, ErrFormat) {
				t.Fatalf("ChunkIn: err %v, want ErrFormat", err)
			}
		})
	}
}

// TestParseCentralDirectory edits the central directory of a good archive:
// its order does not matter, but every entry must be where it claims.
func TestParseCentralDirectory(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 2, M: 1, ChunkSize: 8}
	l := layout.Layout{Geometry: g, Size: 40}
	data, meta := buildArchive(t, g, l.Size, 0)
	want := mustParse(t, data)
	body, recs := splitArchive(t, data)
	// Without the page checksums' entry (records: 3 chunks, the
	// metadata), which only Index.Pages reads: an archive written
	// before them.
	if _, ok := parsePageEntryName(string(recs[3].name)); !ok || len(recs) != 5 {
		t.Fatalf("record 3 of %d is %q, want the page checksums", len(recs), string(recs[3].name))
	}
	recs = slices.Delete(recs, 3, 4)
	edit := func(f func([]cdRecord) []cdRecord) []cdRecord {
		c := make([]cdRecord, len(recs))
		copy(c, recs)
		return f(c)
	}
	metaOff := int64(le32(recs[3].fixed[42:]))
	for _, tc := range []struct {
		name string
		recs []cdRecord
		e    ends
		want error // nil: parses to the original index
	}{
		{"as written", recs, ends{}, nil},
		{"zip64 end records", recs, ends{zip64: true}, nil},
		{"reversed order", edit(func(r []cdRecord) []cdRecord {
			return []cdRecord{r[3], r[2], r[1], r[0]}
		}), ends{}, nil},
		{"zip64 extra fields", edit(func(r []cdRecord) []cdRecord {
			for i := range r {
				n := uint64(le32(r[i].fixed[24:]))
				r[i].setZip64(n, n, uint64(le32(r[i].fixed[42:])))
			}
			return r
		}), ends{zip64: true}, nil},
		{"comments and unknown extra fields", edit(func(r []cdRecord) []cdRecord {
			for i := range r {
				r[i].extra = []byte{0x55, 0x54, 1, 0, 7}
				r[i].comment = []byte("hello")
			}
			return r
		}), ends{}, nil},
		{"duplicate directory entry", edit(func(r []cdRecord) []cdRecord {
			return []cdRecord{r[0], r[1], r[1], r[3]}
		}), ends{}, ErrFormat},
		{"missing directory entry", edit(func(r []cdRecord) []cdRecord {
			return []cdRecord{r[0], r[2], r[3]}
		}), ends{}, ErrFormat},
		{"entry overlapping the directory", edit(func(r []cdRecord) []cdRecord {
			r[3].setOffset(uint32(len(body)) - 10)
			return r
		}), ends{}, ErrFormat},
		{"metadata offset near 2^63 (overflow)", edit(func(r []cdRecord) []cdRecord {
			n := uint64(le32(r[3].fixed[24:]))
			r[3].setZip64(n, n, 1<<63-100)
			return r
		}), ends{zip64: true}, ErrFormat},
		{"chunk offset near 2^63 (overflow)", edit(func(r []cdRecord) []cdRecord {
			r[1].setZip64(8, 8, 1<<63-40)
			return r
		}), ends{zip64: true}, ErrFormat},
		{"metadata size near 2^63 (overflow)", edit(func(r []cdRecord) []cdRecord {
			r[3].setZip64(1<<63-10, 1<<63-10, uint64(metaOff))
			return r
		}), ends{zip64: true}, ErrFormat},
		{"negative zip64 size", edit(func(r []cdRecord) []cdRecord {
			r[0].setZip64(1<<64-1, 1<<64-1, 0)
			return r
		}), ends{zip64: true}, ErrFormat},
		{"short zip64 extra field", edit(func(r []cdRecord) []cdRecord {
			r[0].setZip64(8, 8, 0)
			r[0].extra = r[0].extra[:12]
			binary.LittleEndian.PutUint16(r[0].extra[2:], 8)
			return r
		}), ends{zip64: true}, ErrFormat},
		{"truncated extra field", edit(func(r []cdRecord) []cdRecord {
			r[0].extra = []byte{0x55, 0x54, 9, 0, 7}
			return r
		}), ends{}, ErrFormat},
		{"sizes differ", edit(func(r []cdRecord) []cdRecord {
			binary.LittleEndian.PutUint32(r[0].fixed[20:], 7)
			return r
		}), ends{}, ErrFormat},
		{"0xffff entries in a small directory", recs, ends{entries: 0xffff}, ErrFormat},
		{"2^60 entries (zip64)", recs, ends{zip64: true, entries: 1 << 60}, ErrFormat},
		{"2^64-1 entries (zip64)", recs, ends{zip64: true, entries: 1<<64 - 1}, ErrFormat},
		{"2^60-byte directory (zip64)", recs, ends{zip64: true, dirSize: 1 << 60}, ErrFormat},
		{"2^60 entries in a 2^60-byte directory (zip64)", recs, ends{zip64: true, entries: 1 << 60, dirSize: 1 << 60}, ErrFormat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := joinArchive(body, tc.recs, tc.e)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			idx, err := parseBytes(bad)
			runtime.ReadMemStats(&after)
			// Parse allocates its tail buffer (the whole of a small
			// archive), the directory and the index; never from a count.
			if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
				t.Errorf("Parse allocated %d bytes", n)
			}
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("err %v, want %v", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !metaEqual(idx.Meta, meta) || !sameChunks(idx.Chunks, want.Chunks) {
				t.Fatal("different index")
			}
			for _, c := range idx.Chunks {
				got, err := ReadChunk(ctx, memFile(bad), &c, nil)
				if err != nil || !bytes.Equal(got, chunkData(l, c.Block, c.Stripe)) {
					t.Fatalf("chunk %s: %v", c.Name, err)
				}
			}
		})
	}
}

// TestParseEndRecord patches the fields of the end record one at a time.
func TestParseEndRecord(t *testing.T) {
	g := layout.Geometry{K: 2, M: 1, ChunkSize: 8}
	data, _ := buildArchive(t, g, 40, 0)
	e := len(data) - endLen
	for _, tc := range []struct {
		name  string
		off   int // within the end record
		value uint32
		width int
	}{
		{"0 entries", 10, 0, 2},
		{"fewer entries", 10, uint32(le16(data[e+10:])) - 1, 2},
		{"more entries", 10, uint32(le16(data[e+10:])) + 1, 2},
		{"directory one byte short", 12, le32(data[e+12:]) - 1, 4},
		{"directory one byte long", 12, le32(data[e+12:]) + 1, 4},
		{"directory one byte early", 16, le32(data[e+16:]) - 1, 4},
		{"directory one byte late", 16, le32(data[e+16:]) + 1, 4},
		{"directory past the end", 16, 1 << 31, 4},
		{"comment past the end", 20, 1, 2},
	} {
		bad := bytes.Clone(data)
		if tc.width == 2 {
			binary.LittleEndian.PutUint16(bad[e+tc.off:], uint16(tc.value))
		} else {
			binary.LittleEndian.PutUint32(bad[e+tc.off:], tc.value)
		}
		if _, err := parseBytes(bad); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: err %v, want ErrFormat", tc.name, err)
		}
	}
}

// TestParseZip64Locator checks the ZIP64 end-record locator's bounds.
func TestParseZip64Locator(t *testing.T) {
	g := layout.Geometry{K: 1, M: 0, ChunkSize: 8}
	data, _ := buildArchive(t, g, 20, 0)
	z := toZip64(t, data)
	locOff := len(z) - endLen - locator64Len
	for _, off := range []uint64{0, uint64(locOff) - end64Len + 1, uint64(len(z)), 1 << 62, 1<<64 - 1} {
		bad := bytes.Clone(z)
		binary.LittleEndian.PutUint64(bad[locOff+8:], off)
		if _, err := parseBytes(bad); !errors.Is(err, ErrFormat) {
			t.Errorf("locator pointing at %d: err %v", off, err)
		}
	}
	// An end record whose signature is wrong.
	bad := bytes.Clone(z)
	bad[locOff-end64Len] ^= 1
	if _, err := parseBytes(bad); !errors.Is(err, ErrFormat) {
		t.Errorf("bad zip64 end signature: err %v", err)
	}
}

// TestParseHugeMetadataCounts checks that metadata claiming a huge object
// does not make Parse allocate from it.
func TestParseHugeMetadataCounts(t *testing.T) {
	for _, size := range []int64{1 << 40, 1 << 62, 1<<63 - 1} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			g := layout.Geometry{K: 1, M: 0, ChunkSize: 1}
			m := testMeta(layout.Layout{Geometry: g}, 0)
			m.Size = size
			data := craft(t, rawEntry{name: "obj.0.0", data: []byte{1}}, metaEntry(t, m))
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := parseBytes(data)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("err %v", err)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
				t.Errorf("Parse allocated %d bytes", n)
			}
		})
	}
}

// ChunkIn returns what ReadChunk reads, from the archive's bytes in
// place, and refuses a chunk whose data does not match its CRC.
func TestChunkIn(t *testing.T) {
	g := layout.Geometry{K: 2, M: 1, ChunkSize: 8}
	data, _ := buildArchive(t, g, 40, 1)
	idx := mustParse(t, data)
	for i := range idx.Chunks {
		c := &idx.Chunks[i]
		want, err := ReadChunk(context.Background(), memFile(data), c, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ChunkIn(data, c)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("chunk %d: %q, %v; want %q", i, got, err, want)
		}
		if cap(got) != len(got) {
			t.Errorf("chunk %d: capacity %d beyond its %d bytes: an append would overwrite the archive", i, cap(got), len(got))
		}
		bad := bytes.Clone(data)
		bad[c.Offset+c.Span()-1] ^= 0x40
		var ce *ChecksumError
		if _, err := ChunkIn(bad, c); !errors.As(err, &ce) || ce.Block != c.Block {
			t.Fatalf("chunk %d with a flipped byte: %v, want a ChecksumError", i, err)
		}
	}
}
