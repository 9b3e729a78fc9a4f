package archive

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"hash/adler32"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/erasure"
	"github.com/ecstore/ecstore/internal/layout"
)

var seedFlag = flag.Uint64("seed", 1, "seed of the pseudo-random chunk contents")

// testTime is the commit time of every test archive.
var testTime = time.Unix(1763766000, 123456789).UTC()

// testVersion is a fixed version, so test archives are byte-for-byte
// reproducible.
const testVersion Version = "0001763766000123456789-9f86d081884c7d65"

// memFile is an in-memory archive for tests.
type memFile []byte

func (m memFile) ReadAt(_ context.Context, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("memFile: negative offset")
	}
	if off >= int64(len(m)) {
		return 0, io.EOF
	}
	n := copy(p, m[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// chunkData returns the contents of chunk (b, s) of an object of size
// bytes: pseudo-random object bytes followed by zero padding for data
// stripes, pseudo-random bytes for parity stripes (the archive does not
// care what parity holds). It depends on -seed, size, b and s only, so
// every slot of an object agrees.
func chunkData(l layout.Layout, b int64, s int) []byte {
	n := l.ChunkLen(b)
	p := make([]byte, n)
	fill := n
	if s < l.K {
		fill = l.DataLen(b, s)
	}
	r := rand.New(rand.NewPCG(*seedFlag, uint64(l.Size)<<20^uint64(b)<<8^uint64(s)))
	for i := range fill {
		p[i] = byte(r.Uint32())
	}
	return p
}

// objectBytes reassembles the object from its data chunks.
func objectBytes(l layout.Layout) []byte {
	var obj []byte
	for b := range l.Blocks() {
		for s := range l.K {
			obj = append(obj, chunkData(l, b, s)[:l.DataLen(b, s)]...)
		}
	}
	return obj
}

// testMeta returns the metadata of an object of layout l as seen by slot.
func testMeta(l layout.Layout, slot int) *Metadata {
	placement := make([]string, l.Width())
	for i := range placement {
		placement[i] = "n" + string(rune('a'+i%26)) + string(rune('0'+i/26))
	}
	obj := objectBytes(l)
	return &Metadata{Format: FormatVersion, Path: "/x/y", Version: testVersion, Size: l.Size, K: l.K, M: l.M,
		ChunkSize: l.ChunkSize, Placement: placement, Slot: slot, MTime: testTime,
		Adler32: erasure.FormatSum(adler32.Checksum(obj)),
		CRC32C:  erasure.FormatSum(erasure.CRC32C(obj))}
}

// buildArchive writes the archive of slot for an object of size bytes
// with pseudo-random chunk contents (see chunkData).
func buildArchive(t testing.TB, g layout.Geometry, size int64, slot int) ([]byte, *Metadata) {
	t.Helper()
	l := layout.Layout{Geometry: g, Size: size}
	var buf bytes.Buffer
	w := NewWriter(&buf, testTime)
	for b := range l.Blocks() {
		s := g.Stripe(b, slot)
		data := chunkData(l, b, s)
		if err := w.WriteChunk(b, s, data, erasure.ChunkChecksum(data)); err != nil {
			t.Fatal(err)
		}
	}
	m := testMeta(l, slot)
	if err := w.Close(m); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), m
}

func parseBytes(data []byte) (*Index, error) {
	return Parse(context.Background(), memFile(data), int64(len(data)))
}

func mustParse(t testing.TB, data []byte) *Index {
	t.Helper()
	idx, err := parseBytes(data)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return idx
}

// isFormatError reports whether err is one of the package's sentinels.
func isFormatError(err error) bool {
	return errors.Is(err, ErrFormat) || errors.Is(err, ErrVersion) || errors.Is(err, ErrChecksum)
}

// metaEqual compares metadata by meaning: times by instant, a nil user map
// equals an empty one.
func metaEqual(a, b *Metadata) bool {
	if a.Format != b.Format || a.Path != b.Path || a.Slot != b.Slot || !a.MTime.Equal(b.MTime) ||
		!a.SameObject(b) || !slices.Equal(a.Placement, b.Placement) || len(a.User) != len(b.User) {
		return false
	}
	for k, v := range a.User {
		if w, ok := b.User[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// sameChunks compares what two indexes say about each block's chunk,
// ignoring where in the file it is.
func sameChunks(a, b []Chunk) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Block != y.Block || x.Stripe != y.Stripe || x.Size != y.Size || x.CRC32 != y.CRC32 {
			return false
		}
	}
	return true
}

// rawEntry is one entry of a crafted archive.
type rawEntry struct {
	name   string
	data   []byte
	crc    *uint32 // CRC-32 to record; nil means the true one
	method uint16
	extra  []byte // written to both headers
}

// craft writes a ZIP archive with archive/zip, entry by entry, with none
// of Writer's checks. It builds archives Writer refuses to write.
func craft(t testing.TB, entries ...rawEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		crc := erasure.ChunkChecksum(e.data)
		if e.crc != nil {
			crc = *e.crc
		}
		fw, err := zw.CreateRaw(&zip.FileHeader{Name: e.name, Method: e.method, CRC32: crc,
			CompressedSize64: uint64(len(e.data)), UncompressedSize64: uint64(len(e.data)),
			ReaderVersion: 20, CreatorVersion: 3<<8 | 20, Extra: e.extra})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fw.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// chunkEntries returns the chunk entries of slot for layout l, as Writer
// would write them.
func chunkEntries(l layout.Layout, slot int) []rawEntry {
	var es []rawEntry
	for b := range l.Blocks() {
		s := l.Stripe(b, slot)
		es = append(es, rawEntry{name: ChunkName(b, s), data: chunkData(l, b, s)})
	}
	return es
}

func metaEntry(t testing.TB, m *Metadata) rawEntry {
	t.Helper()
	p, err := m.encode()
	if err != nil {
		t.Fatal(err)
	}
	return rawEntry{name: MetadataName, data: p}
}

// cdRecord is one central directory record of an archive, split into its
// fixed part and variable fields so that tests can edit it.
type cdRecord struct {
	fixed                [centralLen]byte
	name, extra, comment []byte
}

func (r *cdRecord) setOffset(off uint32) { binary.LittleEndian.PutUint32(r.fixed[42:], off) }

// setZip64 moves the record's sizes and offset into a ZIP64 extended
// information extra field (APPNOTE 4.5.3).
func (r *cdRecord) setZip64(usize, csize, off uint64) {
	binary.LittleEndian.PutUint32(r.fixed[20:], uint32max)
	binary.LittleEndian.PutUint32(r.fixed[24:], uint32max)
	binary.LittleEndian.PutUint32(r.fixed[42:], uint32max)
	e := binary.LittleEndian.AppendUint16(nil, zip64ExtraID)
	e = binary.LittleEndian.AppendUint16(e, 24)
	e = binary.LittleEndian.AppendUint64(e, usize)
	e = binary.LittleEndian.AppendUint64(e, csize)
	e = binary.LittleEndian.AppendUint64(e, off)
	r.extra = e
}

// splitArchive splits a well-formed archive into the bytes before its
// central directory and the directory's records.
func splitArchive(t testing.TB, data []byte) ([]byte, []cdRecord) {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	end := data[len(data)-endLen:]
	if le32(end) != sigEnd || le16(end[10:]) == 0xffff {
		t.Fatal("splitArchive: needs a small non-ZIP64 archive")
	}
	off := int64(le32(end[16:]))
	dir := data[off : off+int64(le32(end[12:]))]
	recs := make([]cdRecord, len(zr.File))
	for i := range recs {
		r := &recs[i]
		copy(r.fixed[:], dir)
		n, x, c := int(le16(dir[28:])), int(le16(dir[30:])), int(le16(dir[32:]))
		r.name = dir[centralLen : centralLen+n]
		r.extra = dir[centralLen+n : centralLen+n+x]
		r.comment = dir[centralLen+n+x : centralLen+n+x+c]
		dir = dir[centralLen+n+x+c:]
	}
	return data[:off], recs
}

// ends describes the end records joinArchive writes.
type ends struct {
	zip64   bool   // write a ZIP64 end record and locator
	entries uint64 // entry count to record; 0 means the true one
	dirSize uint64 // directory size to record; 0 means the true one
}

// joinArchive writes body, the records as the central directory and the
// end records.
func joinArchive(body []byte, recs []cdRecord, e ends) []byte {
	out := bytes.Clone(body)
	dirOff := uint64(len(out))
	for _, r := range recs {
		binary.LittleEndian.PutUint16(r.fixed[28:], uint16(len(r.name)))
		binary.LittleEndian.PutUint16(r.fixed[30:], uint16(len(r.extra)))
		binary.LittleEndian.PutUint16(r.fixed[32:], uint16(len(r.comment)))
		out = append(out, r.fixed[:]...)
		out = append(out, r.name...)
		out = append(out, r.extra...)
		out = append(out, r.comment...)
	}
	entries, dirSize := uint64(len(recs)), uint64(len(out))-dirOff
	if e.entries != 0 {
		entries = e.entries
	}
	if e.dirSize != 0 {
		dirSize = e.dirSize
	}
	le := binary.LittleEndian
	if e.zip64 {
		end64 := uint64(len(out))
		out = le.AppendUint32(out, sigEnd64)
		out = le.AppendUint64(out, end64Len-12)
		out = le.AppendUint16(out, 45)
		out = le.AppendUint16(out, 45)
		out = le.AppendUint32(out, 0)
		out = le.AppendUint32(out, 0)
		out = le.AppendUint64(out, entries)
		out = le.AppendUint64(out, entries)
		out = le.AppendUint64(out, dirSize)
		out = le.AppendUint64(out, dirOff)
		out = le.AppendUint32(out, sigLocator64)
		out = le.AppendUint32(out, 0)
		out = le.AppendUint64(out, end64)
		out = le.AppendUint32(out, 1)
		entries, dirSize, dirOff = 0xffff, uint32max, uint32max
	}
	out = le.AppendUint32(out, sigEnd)
	out = le.AppendUint32(out, 0)
	out = le.AppendUint16(out, uint16(min(entries, 0xffff)))
	out = le.AppendUint16(out, uint16(min(entries, 0xffff)))
	out = le.AppendUint32(out, uint32(min(dirSize, uint32max)))
	out = le.AppendUint32(out, uint32(min(dirOff, uint32max)))
	out = le.AppendUint16(out, 0)
	return out
}
