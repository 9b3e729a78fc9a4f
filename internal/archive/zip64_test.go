package archive

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/testtool"
)

// sparseBuf is an io.Writer that keeps the bytes written to it except
// runs of zeros, which it records as holes, so that a test can write an
// archive of several GiB of zero chunks in little memory and time. It
// reads back through io.ReaderAt and, via sparseAt, archive.ReaderAt.
type sparseBuf struct {
	segs []sparseSeg // contiguous, in file order
	size int64
	// zero holds buffers known to be all zeros: a write from within one
	// is a hole without a scan (scanning 4 GiB is slow under -race).
	zero [][]byte
}

// knownZero registers p, which must hold only zeros.
func (s *sparseBuf) knownZero(p []byte) {
	if !bytes.Equal(p, make([]byte, len(p))) {
		panic("sparseBuf: knownZero of non-zero bytes")
	}
	s.zero = append(s.zero, p)
}

// inZero reports whether p lies within a registered zero buffer.
func (s *sparseBuf) inZero(p []byte) bool {
	a := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	for _, z := range s.zero {
		b := uintptr(unsafe.Pointer(unsafe.SliceData(z)))
		if len(p) > 0 && a >= b && a+uintptr(len(p)) <= b+uintptr(len(z)) {
			return true
		}
	}
	return false
}

// sparseSeg is a run of bytes at off; data is nil for a hole of n zeros.
type sparseSeg struct {
	off, n int64
	data   []byte
}

// sparseWindow is the granularity of hole detection.
const sparseWindow = 64 << 10

var zeroWindow [sparseWindow]byte

func (s *sparseBuf) Write(p []byte) (int, error) {
	zero := s.inZero(p)
	for i := 0; i < len(p); i += sparseWindow {
		w := p[i:min(len(p), i+sparseWindow)]
		last := len(s.segs) - 1
		if zero || bytes.Equal(w, zeroWindow[:len(w)]) {
			if last >= 0 && s.segs[last].data == nil {
				s.segs[last].n += int64(len(w))
			} else {
				s.segs = append(s.segs, sparseSeg{off: s.size, n: int64(len(w))})
			}
		} else if last >= 0 && s.segs[last].data != nil {
			s.segs[last].data = append(s.segs[last].data, w...)
			s.segs[last].n += int64(len(w))
		} else {
			s.segs = append(s.segs, sparseSeg{off: s.size, n: int64(len(w)), data: bytes.Clone(w)})
		}
		s.size += int64(len(w))
	}
	return len(p), nil
}

// ReadAt implements io.ReaderAt.
func (s *sparseBuf) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("sparseBuf: negative offset")
	}
	done := 0
	i := sort.Search(len(s.segs), func(i int) bool { return s.segs[i].off+s.segs[i].n > off })
	for ; done < len(p) && i < len(s.segs); i++ {
		sg := s.segs[i]
		at := off + int64(done) - sg.off
		n := int(min(int64(len(p)-done), sg.n-at))
		if sg.data == nil {
			clear(p[done : done+n])
		} else {
			copy(p[done:done+n], sg.data[at:])
		}
		done += n
	}
	if done < len(p) {
		return done, io.EOF
	}
	return done, nil
}

// stored is the number of bytes the buffer holds in memory.
func (s *sparseBuf) stored() (n int64) {
	for _, sg := range s.segs {
		n += int64(len(sg.data))
	}
	return n
}

// sparseAt adapts a sparseBuf to archive.ReaderAt.
type sparseAt struct{ s *sparseBuf }

func (a sparseAt) ReadAt(_ context.Context, p []byte, off int64) (int, error) {
	return a.s.ReadAt(p, off)
}

func TestSparseBuf(t *testing.T) {
	var s sparseBuf
	z := make([]byte, 3*sparseWindow)
	s.knownZero(z[sparseWindow:])
	var want []byte
	for _, p := range [][]byte{
		[]byte("head"), make([]byte, 3*sparseWindow+5), []byte("x"), make([]byte, 10),
		append(make([]byte, sparseWindow), 'y'), make([]byte, 2*sparseWindow),
		z[sparseWindow+7:], []byte("z"), z[:sparseWindow],
	} {
		s.Write(p)
		want = append(want, p...)
	}
	if s.size != int64(len(want)) || s.stored() >= int64(len(want))/2 {
		t.Fatalf("size %d, stored %d of %d", s.size, s.stored(), len(want))
	}
	for off := 0; off < len(want); off += 997 {
		for _, n := range []int{1, 100, sparseWindow + 3} {
			p := make([]byte, n)
			got, err := s.ReadAt(p, int64(off))
			wantN := min(n, len(want)-off)
			if got != wantN || (got < n) != (err == io.EOF) || !bytes.Equal(p[:got], want[off:off+got]) {
				t.Fatalf("ReadAt(%d, %d) = %d, %v", n, off, got, err)
			}
		}
	}
}

// TestZip64 writes an archive whose last chunks lie past 4 GiB (257 zero
// chunks of 16 MiB and a short one, into a sparseBuf) and reads it back
// with Parse, ReadChunk, archive/zip and, if present, unzip.
func TestZip64(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 2, M: 1, ChunkSize: 16 << 20}
	const slot = 1
	// 258 blocks, the last of 501-byte chunks. Block 255 straddles 4 GiB,
	// blocks 256 and 257 start past it. Only the last is not zeros.
	const first64 = 256
	l := layout.Layout{Geometry: g, Size: 257*g.BlockSize() + 1001}
	zero := make([]byte, g.ChunkSize)
	zeroCRC := crc32.ChecksumIEEE(zero)
	lastBlock := l.Blocks() - 1
	last := chunkData(l, lastBlock, l.Stripe(lastBlock, slot))
	chunk := func(b int64) ([]byte, uint32) {
		if b == lastBlock {
			return last, crc32.ChecksumIEEE(last)
		}
		return zero, zeroCRC
	}
	var s sparseBuf
	s.knownZero(zero)
	w := NewWriter(&s, testTime)
	for b := range l.Blocks() {
		p, crc := chunk(b)
		if err := w.WriteChunk(b, l.Stripe(b, slot), p, crc); err != nil {
			t.Fatal(err)
		}
	}
	meta := testMeta(layout.Layout{Geometry: g}, slot) // checksums of the empty object: fine for this test
	meta.Size = l.Size
	if err := w.Close(meta); err != nil {
		t.Fatal(err)
	}
	t.Logf("archive of %d bytes, %d stored", s.size, s.stored())
	// Stored: the last chunk, the page checksums (4 MiB: 4 bytes per 4
	// KiB page), the metadata and the central directory.
	if s.size <= 1<<32 || s.stored() > 6<<20 {
		t.Fatalf("archive of %d bytes, %d stored", s.size, s.stored())
	}

	// Parse and ReadChunk.
	idx, err := Parse(ctx, sparseAt{&s}, s.size)
	if err != nil {
		t.Fatal(err)
	}
	if !metaEqual(idx.Meta, meta) || int64(len(idx.Chunks)) != l.Blocks() {
		t.Fatalf("index %+v", idx.Meta)
	}
	if c := idx.Chunks[first64-1]; c.Offset >= uint32max || c.Offset+c.Span() <= 1<<32 || idx.Chunks[first64].Offset < uint32max {
		t.Fatalf("chunk offsets %d, %d do not straddle 4 GiB", c.Offset, idx.Chunks[first64].Offset)
	}
	buf := make([]byte, 0, idx.Chunks[0].Span())
	for _, b := range []int64{first64 - 1, first64, lastBlock} {
		c := idx.Chunks[b]
		want, crc := chunk(b)
		got, err := ReadChunk(ctx, sparseAt{&s}, &c, buf)
		if err != nil || c.CRC32 != crc || !bytes.Equal(got, want) {
			t.Fatalf("chunk %s: %v", c.Name, err)
		}
	}

	// archive/zip reads it too and checks the CRCs: each chunk, the page
	// checksums after each group of PageGroup blocks, the metadata.
	zr, err := zip.NewReader(&s, s.size)
	if err != nil {
		t.Fatal(err)
	}
	groups := (len(idx.Chunks) + PageGroup - 1) / PageGroup
	if len(zr.File) != len(idx.Chunks)+groups+1 {
		t.Fatalf("archive/zip sees %d entries, want %d", len(zr.File), len(idx.Chunks)+groups+1)
	}
	zipped := map[string]*zip.File{}
	for _, f := range zr.File {
		zipped[f.Name] = f
	}
	// The writer asks for version 4.5 (ZIP64) exactly for the entries
	// whose local header starts at or past 0xffffffff.
	offsets := []int64{}
	for _, f := range zr.File {
		off, err := f.DataOffset()
		if err != nil {
			t.Fatal(err)
		}
		offsets = append(offsets, off-localHeaderLen-int64(len(f.Name)))
	}
	for i, c := range idx.Chunks {
		if f := zipped[c.Name]; f == nil || offsets[slices.Index(zr.File, f)] != c.Offset {
			t.Fatalf("archive/zip: chunk %d not at %d", i, c.Offset)
		}
	}
	for _, off := range offsets {
		var h [localHeaderLen]byte
		if _, err := s.ReadAt(h[:], off); err != nil || le32(h[:]) != sigLocal {
			t.Fatalf("no local header at %d: %v", off, err)
		}
		want := uint16(20)
		if off >= uint32max {
			want = 45
		}
		if got := le16(h[4:]); got != want {
			t.Errorf("local header at %d: version needed %d, want %d", off, got, want)
		}
		// Local headers never carry sizes as 0xffffffff nor an extra field.
		if le32(h[18:]) == uint32max || le16(h[28:]) != 0 {
			t.Errorf("local header at %d: ZIP64 fields in local header", off)
		}
	}
	// The ZIP64 end record and locator precede the end record.
	var tail [end64Len + locator64Len + endLen]byte
	s.ReadAt(tail[:], s.size-int64(len(tail)))
	if le32(tail[:]) != sigEnd64 || le32(tail[end64Len:]) != sigLocator64 || le32(tail[end64Len+locator64Len+16:]) != uint32max {
		t.Errorf("end records: % x", tail)
	}

	for i, f := range zr.File {
		want := uint16(20)
		if offsets[i] >= uint32max {
			want = 45
		}
		if f.ReaderVersion != want {
			t.Errorf("archive/zip %s: version %d", f.Name, f.ReaderVersion)
		}
	}
	for _, b := range []int64{first64, lastBlock} {
		// Stream the entry: archive/zip checks its CRC at EOF.
		rc, err := zipped[idx.Chunks[b].Name].Open()
		if err != nil {
			t.Fatal(err)
		}
		h := crc32.NewIEEE()
		_, err = io.Copy(h, rc)
		rc.Close()
		if _, want := chunk(b); err != nil || h.Sum32() != want {
			t.Fatalf("archive/zip: chunk %d: %v", b, err)
		}
	}
	if m, err := decodeMetadata(readZipEntry(t, zr.File[len(zr.File)-1])); err != nil || !metaEqual(m, meta) {
		t.Fatalf("archive/zip: metadata: %v", err)
	}

	// unzip lists the archive and tests its entries past 4 GiB, from a
	// sparse file.
	unzip := testtool.Need(t, "unzip")
	path := filepath.Join(t.TempDir(), "big.zip")
	if err := writeSparseFile(path, &s); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Sys().(*syscall.Stat_t).Blocks*512 > 64<<20 {
		t.Skipf("temp dir does not keep sparse files: %v", err)
	}
	out, err := exec.Command(unzip, "-l", path).CombinedOutput()
	if err != nil || !strings.Contains(string(out), " "+idx.Chunks[lastBlock].Name+"\n") || !strings.Contains(string(out), fmt.Sprintf(" %d files", len(zr.File))) {
		t.Fatalf("unzip -l: %v\n%s", err, out)
	}
	out, err = exec.Command(unzip, "-t", path, idx.Chunks[lastBlock].Name, MetadataName).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "No errors detected") {
		t.Fatalf("unzip -t: %v\n%s", err, out)
	}
}

func writeSparseFile(path string, s *sparseBuf) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	for _, sg := range s.segs {
		if sg.data != nil {
			if _, err := f.WriteAt(sg.data, sg.off); err != nil {
				f.Close()
				return err
			}
		}
	}
	if err := f.Truncate(s.size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TestZip64Boundary checks where the writer switches to version 4.5: at
// the first entry whose local header starts at or past 0xffffffff, as
// archive/zip switches to a ZIP64 extra field.
func TestZip64Boundary(t *testing.T) {
	var s sparseBuf
	w := NewWriter(&s, testTime)
	// Stand in for 4 GiB of earlier entries: only the offset matters.
	w.off = uint32max - 1
	var h [localHeaderLen]byte
	for i, want := range []uint16{20, 45} {
		start := s.size
		if err := w.entry(ChunkName(int64(i), 0), 0, []byte{1}, crc32.ChecksumIEEE([]byte{1})); err != nil {
			t.Fatal(err)
		}
		w.bw.Flush()
		s.ReadAt(h[:], start)
		if got := binary.LittleEndian.Uint16(h[4:]); got != want {
			t.Errorf("entry %d at %#x: version needed %d, want %d", i, w.off, got, want)
		}
		w.off = uint32max
	}
}
