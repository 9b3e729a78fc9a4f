package archive

import (
	"bufio"
	"encoding/binary"
	"errors"
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
	uint16max    = 1<<16 - 1
	uint32max    = 1<<32 - 1
	zip64Extra   = 28 // a central header's ZIP64 extra field: id, size, 3 × uint64
	// madeByUnix is a header's "version made by": Unix, and the version.
	madeByUnix = 3 << 8
	// fileMode is every entry's external attributes: a regular file, 0644.
	fileMode = 0o100644 << 16
)

// Errors of the archive writer. Test with errors.Is. Both refuse what
// readers would refuse, so that no archive is written that cannot be
// read; they come from the object's size and metadata, not from where
// the archive is written, so every archive of the object fails alike.
var (
	// ErrTooLarge means the archive's central directory would pass the
	// 128 MiB readers take: the object is too large for its chunk size.
	ErrTooLarge = errors.New("archive: object too large for its chunk size")
	// ErrMetadataTooLarge means the metadata entry would pass the 1 MiB
	// readers take.
	ErrMetadataTooLarge = errors.New("archive: metadata too large")
)

// Writer writes one archive: the chunks of one placement slot, in block
// order, then the metadata entry and the central directory. It streams,
// and writes the ZIP records itself: what it keeps of each entry for the
// central directory is 12 bytes (the names are regenerated at Close), so
// that a 1 TiB object's archives take a few MiB of a gateway's memory,
// not hundreds. It is not safe for concurrent use.
type Writer struct {
	bw  *bufio.Writer
	off int64 // bytes written so far
	// dirSize is what the central directory's entries will take so far,
	// and dirLimit the most a reader takes (maxDirSize): an archive
	// whose directory outgrows it is refused before it is written.
	dirSize, dirLimit int64
	next              int64 // next block expected
	dosDate           uint16
	dosTime           uint16
	closed            bool
	lastPages         bool      // the last, partial group's page entry is written
	failed            error     // the first write error: the archive is lost
	pages             []byte    // page checksums of the current group's chunks
	entries           []written // the chunk and page-checksum entries
	meta              written   // the metadata entry
}

// written is what the central directory needs of an entry, beyond what
// its position in the archive gives: chunk entries and page-checksum
// entries come in the order Writer writes them (a page entry after every
// PageGroup chunks and after the last), so their names follow from the
// count of chunks before them and the chunk's stripe; offsets are the
// running sum of the entries' spans.
type written struct {
	size   uint32
	crc    uint32
	stripe uint16 // a chunk's stripe; pageStripe for a page-checksum entry
}

// pageStripe marks a page-checksum entry in written.stripe (stripes are
// below layout.MaxWidth).
const pageStripe = uint16max

// NewWriter returns a Writer that writes an archive to w. modTime is put in
// every entry's (MS-DOS) timestamp, for the benefit of unzip -l.
func NewWriter(w io.Writer, modTime time.Time) *Writer {
	d, t := dosTime(modTime)
	return &Writer{bw: bufio.NewWriter(w), dosDate: d, dosTime: t, dirLimit: maxDirSize}
}

// metadataDirRoom is the central directory room kept for the metadata
// entry, written last.
const metadataDirRoom = int64(centralLen + len(MetadataName) + zip64Extra)

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
	if stripe < 0 || stripe >= int(pageStripe) {
		return fmt.Errorf("archive: chunk %d.%d: stripe out of range", block, stripe)
	}
	if err := w.entry(ChunkName(block, stripe), uint16(stripe), data, crc); err != nil {
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
	if err := w.entry(pageEntryName(first), pageStripe, w.pages, erasure.ChunkChecksum(w.pages)); err != nil {
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
	if w.next%PageGroup != 0 && !w.lastPages {
		// Once: a Close that fails after this (metadata readers would
		// refuse) may be called again with other metadata.
		if err := w.flushPages(); err != nil {
			return err
		}
		w.lastPages = true
	}
	p, err := meta.encode()
	if err != nil {
		return fmt.Errorf("archive: encode metadata: %w", err)
	}
	if len(p) > maxMetadataSize {
		// Readers refuse it: the archive would be unreadable.
		return fmt.Errorf("%w: metadata of %d bytes exceeds %d", ErrMetadataTooLarge, len(p), maxMetadataSize)
	}
	metaOff := w.off
	if err := w.entry(MetadataName, 0, p, erasure.ChunkChecksum(p)); err != nil {
		return fmt.Errorf("archive: write metadata: %w", err)
	}
	w.closed = true
	if err := w.directory(metaOff); err != nil {
		return fmt.Errorf("archive: write central directory: %w", err)
	}
	return nil
}

// entry writes one stored entry: its local header (APPNOTE 4.3.7: no
// data descriptor, no extra field) and data. The metadata entry, written
// last, is not recorded: directory writes its header from what Close has.
func (w *Writer) entry(name string, stripe uint16, data []byte, crc uint32) error {
	if w.failed != nil {
		return w.failed
	}
	if int64(len(data)) >= uint32max || len(name) > uint16max {
		return fmt.Errorf("%w: entry %s of %d bytes", ErrFormat, name, len(data))
	}
	// A central directory header: 46 bytes and the name, and a ZIP64
	// extra field past 4 GiB. Room is kept for the metadata entry's.
	size := int64(centralLen + len(name))
	if w.off >= uint32max {
		size += zip64Extra
	}
	if name != MetadataName && w.dirSize+size+metadataDirRoom > w.dirLimit {
		return fmt.Errorf("%w: the archive's directory would exceed the %d bytes readers take (%d entries)", ErrTooLarge, w.dirLimit, w.next)
	}
	w.dirSize += size
	var h [localHeaderLen]byte
	le := binary.LittleEndian
	le.PutUint32(h[0:], sigLocal)
	le.PutUint16(h[4:], w.readerVersion(w.off))
	// h[6:8] flags, h[8:10] method: 0 (stored)
	le.PutUint16(h[10:], w.dosTime)
	le.PutUint16(h[12:], w.dosDate)
	le.PutUint32(h[14:], crc)
	le.PutUint32(h[18:], uint32(len(data))) // compressed size
	le.PutUint32(h[22:], uint32(len(data))) // uncompressed size
	le.PutUint16(h[26:], uint16(len(name)))
	// h[28:30] extra field length: 0
	if err := w.write(h[:], []byte(name), data); err != nil {
		return err
	}
	if name != MetadataName {
		w.entries = append(w.entries, written{size: uint32(len(data)), crc: crc, stripe: stripe})
	} else {
		w.meta = written{size: uint32(len(data)), crc: crc}
	}
	w.off += int64(localHeaderLen + len(name) + len(data))
	return nil
}

// readerVersion is the "version needed to extract" of an entry at off:
// 4.5 (ZIP64) for one that starts past 4 GiB, whose offset the central
// directory holds in a ZIP64 extra field.
func (w *Writer) readerVersion(off int64) uint16 {
	if off >= uint32max {
		return zipVersion45
	}
	return zipVersion20
}

// write writes ps in order; the first failure is kept and returned by
// every later call, so that a short write cannot be followed by records
// at the wrong offsets.
func (w *Writer) write(ps ...[]byte) error {
	if w.failed != nil {
		return w.failed
	}
	for _, p := range ps {
		if _, err := w.bw.Write(p); err != nil {
			w.failed = err
			return err
		}
	}
	return nil
}

// directory writes the central directory (from metaOff, where the
// metadata entry starts), the ZIP64 end records when they are needed
// (APPNOTE 4.3.14-15: 65,535 entries or more, or a directory past
// 4 GiB), the end record, and flushes.
func (w *Writer) directory(metaOff int64) error {
	start := w.off
	var off, block int64
	var group int64
	for _, e := range w.entries {
		var name string
		if e.stripe == pageStripe {
			name = pageEntryName(group * PageGroup)
			group++
		} else {
			name = ChunkName(block, int(e.stripe))
			block++
		}
		if err := w.central(name, e, off); err != nil {
			return err
		}
		off += int64(localHeaderLen+len(name)) + int64(e.size)
	}
	if off != metaOff {
		return fmt.Errorf("archive: directory offsets add up to %d, metadata at %d", off, metaOff)
	}
	if err := w.central(MetadataName, w.meta, metaOff); err != nil {
		return err
	}
	end := w.off
	records := uint64(len(w.entries) + 1)
	size, dirOff := uint64(end-start), uint64(start)
	le := binary.LittleEndian
	if records >= uint16max || size >= uint32max || dirOff >= uint32max {
		var b [end64Len + locator64Len]byte
		le.PutUint32(b[0:], sigEnd64)
		le.PutUint64(b[4:], end64Len-12) // the record's size after this field
		le.PutUint16(b[12:], zipVersion45)
		le.PutUint16(b[14:], zipVersion45)
		// b[16:24]: this disk and the directory's disk, 0
		le.PutUint64(b[24:], records)
		le.PutUint64(b[32:], records)
		le.PutUint64(b[40:], size)
		le.PutUint64(b[48:], dirOff)
		l := b[end64Len:]
		le.PutUint32(l[0:], sigLocator64)
		// l[4:8]: the disk of the ZIP64 end record, 0
		le.PutUint64(l[8:], uint64(end))
		le.PutUint32(l[16:], 1) // total number of disks
		if err := w.write(b[:]); err != nil {
			return err
		}
		w.off += int64(len(b))
		records, size, dirOff = uint16max, uint32max, uint32max
	}
	var b [endLen]byte
	le.PutUint32(b[0:], sigEnd)
	// b[4:8]: this disk and the directory's disk, 0
	le.PutUint16(b[8:], uint16(records))
	le.PutUint16(b[10:], uint16(records))
	le.PutUint32(b[12:], uint32(size))
	le.PutUint32(b[16:], uint32(dirOff))
	// b[20:22]: comment length, 0
	if err := w.write(b[:]); err != nil {
		return err
	}
	w.off += endLen
	if err := w.bw.Flush(); err != nil {
		w.failed = err
		return err
	}
	return nil
}

// central writes the central directory header of the entry name (APPNOTE
// 4.3.12) whose local header is at off.
func (w *Writer) central(name string, e written, off int64) error {
	var h [centralLen + zip64Extra]byte
	le := binary.LittleEndian
	v := w.readerVersion(off)
	le.PutUint32(h[0:], sigCentral)
	le.PutUint16(h[4:], madeByUnix|v)
	le.PutUint16(h[6:], v)
	// h[8:10] flags, h[10:12] method: 0 (stored)
	le.PutUint16(h[12:], w.dosTime)
	le.PutUint16(h[14:], w.dosDate)
	le.PutUint32(h[16:], e.crc)
	le.PutUint32(h[20:], e.size)
	le.PutUint32(h[24:], e.size)
	le.PutUint16(h[28:], uint16(len(name)))
	// h[30:32] extra length (below), h[32:34] comment length, h[34:36]
	// disk, h[36:38] internal attributes: 0
	le.PutUint32(h[38:], fileMode)
	n := centralLen
	if off >= uint32max {
		// Sizes and offset in the ZIP64 extra field, the 32-bit fields
		// all ones (as archive/zip writes and reads them).
		le.PutUint32(h[20:], uint32max)
		le.PutUint32(h[24:], uint32max)
		le.PutUint16(h[30:], zip64Extra)
		le.PutUint32(h[42:], uint32max)
		x := h[centralLen:]
		le.PutUint16(x[0:], zip64ExtraID)
		le.PutUint16(x[2:], zip64Extra-4)
		le.PutUint64(x[4:], uint64(e.size))
		le.PutUint64(x[12:], uint64(e.size))
		le.PutUint64(x[20:], uint64(off))
		n += zip64Extra
	} else {
		le.PutUint32(h[42:], uint32(off))
	}
	// The header's fixed part, then the name, then the extra field.
	if err := w.write(h[:centralLen], []byte(name), h[centralLen:n]); err != nil {
		return err
	}
	w.off += int64(n + len(name))
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
