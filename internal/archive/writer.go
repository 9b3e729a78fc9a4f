package archive

import (
	"archive/zip"
	"fmt"
	"io"
	"time"

	"github.com/ecstore/ecstore/internal/erasure"
)

// localHeaderLen is the fixed part of a ZIP local file header (APPNOTE
// 4.3.7). Writer puts no extra field in local headers, so a chunk's data
// starts localHeaderLen+len(name) bytes after its header.
const localHeaderLen = 30

const (
	zipVersion20 = 20 // 2.0: stored entries
	zipVersion45 = 45 // 4.5: ZIP64
	uint32max    = 1<<32 - 1
)

// Writer writes one archive: the chunks of one placement slot, in block
// order, then the metadata entry and the central directory. It streams:
// only the central directory entries (about 200 bytes a block, as
// archive/zip keeps them) are kept in memory. It is not safe for
// concurrent use.
type Writer struct {
	zw  *zip.Writer
	off int64 // bytes written so far
	// dirSize is what the central directory's entries will take so far,
	// and dirLimit the most a reader takes (maxDirSize): an archive
	// whose directory outgrows it is refused before it is written.
	dirSize, dirLimit int64
	next              int64 // next block expected
	dosDate           uint16
	dosTime           uint16
	closed            bool
	pages             []byte // page checksums of the current group's chunks
}

// NewWriter returns a Writer that writes an archive to w. modTime is put in
// every entry's (MS-DOS) timestamp, for the benefit of unzip -l.
func NewWriter(w io.Writer, modTime time.Time) *Writer {
	d, t := dosTime(modTime)
	return &Writer{zw: zip.NewWriter(w), dosDate: d, dosTime: t, dirLimit: maxDirSize}
}

// metadataDirRoom is the central directory room kept for the metadata
// entry, written last.
const metadataDirRoom = int64(46 + len(MetadataName) + 28)

// ChunkName is the name of the entry holding chunk (block, stripe). The
// "obj.<block>.<stripe>" form follows XRootD's XrdEc.
func ChunkName(block int64, stripe int) string {
	return fmt.Sprintf("obj.%d.%d", block, stripe)
}

// WriteChunk appends chunk (block, stripe) with its IEEE CRC-32 (computed by
// the caller, typically while the chunk was hot in cache). Blocks must come
// in order 0, 1, 2, ... with one chunk each.
func (w *Writer) WriteChunk(block int64, stripe int, data []byte, crc uint32) error {
	return w.WriteChunkPages(block, stripe, data, crc, AppendPageCRCs(nil, data))
}

// WriteChunkPages is WriteChunk with the chunk's page checksums
// (AppendPageCRCs) computed by the caller, as its CRC-32 is: both then
// describe the bytes as they were when the caller took them.
func (w *Writer) WriteChunkPages(block int64, stripe int, data []byte, crc uint32, pages []byte) error {
	if int64(len(pages)) != pagesOf(int64(len(data)))*4 {
		return fmt.Errorf("archive: write chunk %d.%d: %d bytes of page checksums for %d bytes", block, stripe, len(pages), len(data))
	}
	if w.closed {
		return fmt.Errorf("archive: write chunk after close")
	}
	if block != w.next {
		return fmt.Errorf("archive: chunk of block %d written, want block %d", block, w.next)
	}
	if err := w.entry(ChunkName(block, stripe), data, crc); err != nil {
		return fmt.Errorf("archive: write chunk %d.%d: %w", block, stripe, err)
	}
	w.pages = append(w.pages, pages...)
	w.next++
	if w.next%PageGroup == 0 {
		return w.flushPages()
	}
	return nil
}

// flushPages writes the page checksums of the group of blocks that ends
// with the last chunk written.
func (w *Writer) flushPages() error {
	first := (w.next - 1) / PageGroup * PageGroup
	if err := w.entry(pageEntryName(first), w.pages, erasure.ChunkChecksum(w.pages)); err != nil {
		return fmt.Errorf("archive: write page checksums of blocks %d to %d: %w", first, w.next-1, err)
	}
	w.pages = w.pages[:0]
	return nil
}

// Blocks is the number of chunks written so far.
func (w *Writer) Blocks() int64 { return w.next }

// Close writes the metadata entry and the central directory and flushes.
// It does not close the underlying writer. meta.Format is set to
// FormatVersion.
func (w *Writer) Close(meta *Metadata) error {
	if w.closed {
		return fmt.Errorf("archive: close twice")
	}
	meta.Format = FormatVersion
	meta.PageCRC32C = 0
	if w.next > 0 {
		meta.PageCRC32C = PageSize
	}
	if err := meta.Validate(); err != nil {
		return err
	}
	if n := meta.Layout().Blocks(); n != w.next {
		return fmt.Errorf("archive: %d chunks written, object has %d blocks", w.next, n)
	}
	if w.next%PageGroup != 0 {
		if err := w.flushPages(); err != nil {
			return err
		}
	}
	p, err := meta.encode()
	if err != nil {
		return fmt.Errorf("archive: encode metadata: %w", err)
	}
	if len(p) > maxMetadataSize {
		// Readers refuse it: the archive would be unreadable.
		return fmt.Errorf("%w: metadata of %d bytes exceeds %d", ErrFormat, len(p), maxMetadataSize)
	}
	if err := w.entry(MetadataName, p, erasure.ChunkChecksum(p)); err != nil {
		return fmt.Errorf("archive: write metadata: %w", err)
	}
	w.closed = true
	if err := w.zw.Close(); err != nil {
		return fmt.Errorf("archive: write central directory: %w", err)
	}
	return nil
}

func (w *Writer) entry(name string, data []byte, crc uint32) error {
	// A central directory header: 46 bytes and the name, and a ZIP64
	// extra field (28) past 4 GiB. Room is kept for the metadata entry's.
	size := int64(46 + len(name))
	if w.off >= uint32max || int64(len(data)) >= uint32max {
		size += 28
	}
	if name != MetadataName && w.dirSize+size+metadataDirRoom > w.dirLimit {
		return fmt.Errorf("%w: the archive's directory would exceed the %d bytes readers take (%d entries): the object is too large for its chunk size", ErrFormat, w.dirLimit, w.next)
	}
	w.dirSize += size
	fh := &zip.FileHeader{
		Name:               name,
		Method:             zip.Store,
		CRC32:              crc,
		CompressedSize64:   uint64(len(data)),
		UncompressedSize64: uint64(len(data)),
		ReaderVersion:      zipVersion20,
		CreatorVersion:     3<<8 | zipVersion20, // made by Unix
		ExternalAttrs:      0o100644 << 16,
	}
	if w.off >= uint32max {
		fh.ReaderVersion = zipVersion45
		fh.CreatorVersion = 3<<8 | zipVersion45
	}
	//lint:ignore SA1019 the MS-DOS fields are what CreateRaw writes into the local header; Modified would add an extra field.
	fh.ModifiedDate, fh.ModifiedTime = w.dosDate, w.dosTime
	fw, err := w.zw.CreateRaw(fh)
	if err != nil {
		return err
	}
	if _, err := fw.Write(data); err != nil {
		return err
	}
	w.off += int64(localHeaderLen + len(name) + len(data))
	return nil
}

// dosTime converts t to MS-DOS date and time (APPNOTE 4.4.6), clamped to
// the representable years 1980..2107.
func dosTime(t time.Time) (date, tm uint16) {
	t = t.UTC()
	y := t.Year()
	if y < 1980 {
		return 1<<5 | 1, 0
	}
	if y > 2107 {
		y = 2107
	}
	date = uint16((y-1980)<<9 | int(t.Month())<<5 | t.Day())
	tm = uint16(t.Hour()<<11 | t.Minute()<<5 | t.Second()/2)
	return date, tm
}
