package archive

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ecstore/ecstore/internal/erasure"
	"github.com/ecstore/ecstore/internal/layout"
)

// Errors of the archive reader. Test with errors.Is.
var (
	// ErrFormat means the bytes are not a well-formed ecstore archive.
	ErrFormat = errors.New("archive: malformed archive")
	// ErrVersion means the archive was written by a newer ecstore.
	ErrVersion = errors.New("archive: unsupported format version")
	// ErrChecksum means a chunk's bytes do not match its CRC-32.
	ErrChecksum = errors.New("archive: checksum mismatch")
)

// ChecksumError reports a chunk whose bytes fail their CRC-32. It
// unwraps to ErrChecksum.
type ChecksumError struct {
	Block     int64
	Stripe    int
	Want, Got uint32
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("archive: chunk %d.%d: crc32 %08x, want %08x", e.Block, e.Stripe, e.Got, e.Want)
}

// Unwrap returns ErrChecksum.
func (e *ChecksumError) Unwrap() error { return ErrChecksum }

// ReaderAt reads an archive file; node.File satisfies it.
type ReaderAt interface {
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
}

// Chunk locates one chunk entry inside an archive.
type Chunk struct {
	Block  int64
	Stripe int
	Name   string
	Offset int64 // offset of the entry's local header
	Size   int64
	CRC32  uint32
}

// Span is the byte range ReadChunk reads: the local header, name and data.
func (c *Chunk) Span() int64 { return localHeaderLen + int64(len(c.Name)) + c.Size }

// Index is a parsed archive: its metadata and where each block's chunk is.
type Index struct {
	Meta   *Metadata
	Chunks []Chunk // Chunks[b] holds block b's chunk
	Size   int64   // archive file size
	// Whole is the entire archive when parsing read all of it at once
	// (archives up to TailSize, as small objects' are); nil otherwise.
	// Chunks are then read from memory: see Source.
	Whole []byte
	// pages[g] is the entry holding the page checksums of block group g
	// (PageGroup blocks), with a negative Offset where there is none (see
	// Pages).
	pages []PageEntry
}

// Source returns where to read x's chunks from: the archive bytes held in
// memory when x has them, r otherwise.
func (x *Index) Source(r ReaderAt) ReaderAt {
	if x.Whole != nil {
		return wholeArchive(x.Whole)
	}
	return r
}

// wholeArchive is an archive held in memory.
type wholeArchive []byte

func (w wholeArchive) ReadAt(_ context.Context, p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(w)) {
		return 0, fmt.Errorf("%w: read at %d of a %d-byte archive", ErrFormat, off, len(w))
	}
	n := copy(p, w[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// TailSize is the largest archive Parse reads whole, in one read; its
// chunks then need no further read (small objects' archives are no
// larger).
const TailSize = 128 << 10

// FirstTail is how many bytes at the end of a larger archive Parse reads
// first: the metadata entry and the central directory of an object of up
// to about 200 blocks (1.6 GiB at 8+2, 1 MiB chunks) fit in it, and what
// does not is read next. A larger first read would cost a copy and a
// cleared buffer per archive opened, and, in an archive just written with
// O_DIRECT, whose last few pages only are in the page cache, a longer
// disk read.
const FirstTail = 16 << 10

// maxDirSize bounds the central directory a reader accepts (about 1.5
// million blocks).
const maxDirSize = 128 << 20

// ZIP record signatures and fixed sizes (APPNOTE 4.3).
const (
	sigLocal      = 0x04034b50
	sigCentral    = 0x02014b50
	sigEnd        = 0x06054b50
	sigEnd64      = 0x06064b50
	sigLocator64  = 0x07064b50
	endLen        = 22
	locator64Len  = 20
	end64Len      = 56
	centralLen    = 46
	zip64ExtraID  = 0x0001
	maxCommentLen = 1<<16 - 1
)

// Parse reads the end of an archive of size bytes and returns its index.
// Every field is treated as hostile: sizes and counts are checked against
// the file size and the metadata before anything is allocated from them.
func Parse(ctx context.Context, r ReaderAt, size int64) (*Index, error) {
	if size < endLen {
		return nil, fmt.Errorf("%w: %d bytes is too short", ErrFormat, size)
	}
	n := size
	if size > TailSize {
		n = FirstTail
	}
	for {
		tail := make([]byte, n)
		if err := ReadFull(ctx, r, tail, size-n); err != nil {
			return nil, err
		}
		idx, err := ParseTail(ctx, r, size, tail)
		if errors.Is(err, errNoEnd) && n < min(size, endLen+maxCommentLen) {
			// A comment may hide the end record further back.
			n = min(size, endLen+maxCommentLen)
			continue
		}
		return idx, err
	}
}

// ParseTail is Parse for a caller that already holds the last len(tail)
// bytes of the archive. r is used only for what lies before the tail. The
// tail must hold at least the end of central directory record. A tail that
// is the whole archive is kept as the Index's Whole: the caller must not
// change it.
func ParseTail(ctx context.Context, r ReaderAt, size int64, tail []byte) (*Index, error) {
	if int64(len(tail)) > size {
		return nil, fmt.Errorf("%w: %d-byte tail of a %d-byte archive", ErrFormat, len(tail), size)
	}
	p := &parser{ctx: ctx, r: r, size: size, tail: tail, tailOff: size - int64(len(tail))}
	return p.parse()
}

type parser struct {
	ctx     context.Context
	r       ReaderAt
	size    int64
	tail    []byte
	tailOff int64
}

// read returns n bytes at off, from the tail when it covers them.
func (p *parser) read(off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off > p.size || n > p.size-off {
		return nil, fmt.Errorf("%w: range %d+%d outside %d-byte archive", ErrFormat, off, n, p.size)
	}
	if off >= p.tailOff {
		return p.tail[off-p.tailOff : off-p.tailOff+n], nil
	}
	if p.r == nil {
		return nil, fmt.Errorf("%w: range %d+%d not in tail", ErrFormat, off, n)
	}
	b := make([]byte, n)
	if err := ReadFull(p.ctx, p.r, b, off); err != nil {
		return nil, err
	}
	return b, nil
}

func (p *parser) parse() (*Index, error) {
	endPos, err := p.findEnd()
	if err != nil {
		return nil, err
	}
	end, _ := p.read(endPos, endLen)
	entries := int64(le16(end[10:]))
	dirSize := int64(le32(end[12:]))
	dirOff := int64(le32(end[16:]))
	dirEnd := endPos
	if endPos >= locator64Len {
		if loc, err := p.read(endPos-locator64Len, locator64Len); err == nil && le32(loc) == sigLocator64 {
			off64 := int64(le64(loc[8:]))
			if off64 < 0 || off64 > endPos-locator64Len-end64Len {
				return nil, fmt.Errorf("%w: bad zip64 end record offset %d", ErrFormat, off64)
			}
			e64, err := p.read(off64, end64Len)
			if err != nil {
				return nil, err
			}
			if le32(e64) != sigEnd64 {
				return nil, fmt.Errorf("%w: missing zip64 end record", ErrFormat)
			}
			entries = int64(le64(e64[32:]))
			dirSize = int64(le64(e64[40:]))
			dirOff = int64(le64(e64[48:]))
			dirEnd = off64
		}
	}
	if dirSize < 0 || dirOff < 0 || dirSize > maxDirSize || dirOff > dirEnd || dirSize > dirEnd-dirOff {
		return nil, fmt.Errorf("%w: central directory %d+%d out of bounds", ErrFormat, dirOff, dirSize)
	}
	if entries < 1 || entries > dirSize/centralLen {
		return nil, fmt.Errorf("%w: %d entries cannot fit a %d-byte central directory", ErrFormat, entries, dirSize)
	}
	dir, err := p.read(dirOff, dirSize)
	if err != nil {
		return nil, err
	}
	var (
		meta   *Chunk
		chunks = make([]Chunk, 0, min(entries, 1<<16))
		pages  []Chunk
	)
	for i := int64(0); i < entries; i++ {
		c, rest, err := parseCentral(dir)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		dir = rest
		// Written so that hostile 64-bit offsets and sizes cannot overflow.
		if room := dirOff - c.Offset; c.Offset > dirOff || c.Size > room || c.Span() > room {
			return nil, fmt.Errorf("%w: entry %q overlaps the central directory", ErrFormat, c.Name)
		}
		if c.Name == MetadataName {
			if meta != nil {
				return nil, fmt.Errorf("%w: two metadata entries", ErrFormat)
			}
			meta = &c
			continue
		}
		if _, ok := parsePageEntryName(c.Name); ok {
			pages = append(pages, c)
			continue
		}
		b, s, ok := parseChunkName(c.Name)
		if !ok {
			continue // unknown entries are allowed and ignored
		}
		c.Block, c.Stripe = b, s
		chunks = append(chunks, c)
	}
	if meta == nil {
		return nil, fmt.Errorf("%w: no metadata entry", ErrFormat)
	}
	m, err := p.readMeta(meta)
	if err != nil {
		return nil, err
	}
	idx := &Index{Meta: m, Size: p.size}
	if p.tailOff == 0 {
		idx.Whole = p.tail
	}
	if idx.Chunks, err = orderChunks(m, chunks); err != nil {
		return nil, err
	}
	if err := idx.indexPages(pages); err != nil {
		return nil, err
	}
	return idx, nil
}

// errNoEnd is findEnd's error.
var errNoEnd = fmt.Errorf("%w: no end of central directory record", ErrFormat)

// findEnd locates the end-of-central-directory record within the tail.
func (p *parser) findEnd() (int64, error) {
	t := p.tail
	lo := max(0, len(t)-endLen-maxCommentLen)
	for i := len(t) - endLen; i >= lo; i-- {
		if le32(t[i:]) == sigEnd && int(le16(t[i+20:])) == len(t)-i-endLen {
			return p.tailOff + int64(i), nil
		}
	}
	return 0, errNoEnd
}

func parseCentral(b []byte) (Chunk, []byte, error) {
	if len(b) < centralLen || le32(b) != sigCentral {
		return Chunk{}, nil, fmt.Errorf("%w: bad central directory header", ErrFormat)
	}
	method := le16(b[10:])
	crc := le32(b[16:])
	csize, usize := int64(le32(b[20:])), int64(le32(b[24:]))
	nameLen, extraLen, commentLen := int(le16(b[28:])), int(le16(b[30:])), int(le16(b[32:]))
	off := int64(le32(b[42:]))
	total := centralLen + nameLen + extraLen + commentLen
	if len(b) < total {
		return Chunk{}, nil, fmt.Errorf("%w: truncated central directory", ErrFormat)
	}
	name := string(b[centralLen : centralLen+nameLen])
	extra := b[centralLen+nameLen : centralLen+nameLen+extraLen]
	for len(extra) >= 4 {
		id, sz := le16(extra), int(le16(extra[2:]))
		if 4+sz > len(extra) {
			return Chunk{}, nil, fmt.Errorf("%w: %q: truncated extra field", ErrFormat, name)
		}
		if id == zip64ExtraID {
			f := extra[4 : 4+sz]
			next := func(v *int64) error {
				if *v != uint32max {
					return nil
				}
				if len(f) < 8 {
					return fmt.Errorf("%w: %q: short zip64 extra field", ErrFormat, name)
				}
				*v, f = int64(le64(f)), f[8:]
				return nil
			}
			for _, v := range []*int64{&usize, &csize, &off} {
				if err := next(v); err != nil {
					return Chunk{}, nil, err
				}
			}
		}
		extra = extra[4+sz:]
	}
	switch {
	case method != 0:
		return Chunk{}, nil, fmt.Errorf("%w: %q is compressed (method %d)", ErrFormat, name, method)
	case csize != usize || csize < 0 || off < 0:
		return Chunk{}, nil, fmt.Errorf("%w: %q: bad sizes", ErrFormat, name)
	}
	return Chunk{Name: name, Offset: off, Size: csize, CRC32: crc}, b[total:], nil
}

// parseChunkName parses "<prefix>.<block>.<stripe>".
func parseChunkName(name string) (block int64, stripe int, ok bool) {
	rest, s, ok1 := cutLast(name)
	_, b, ok2 := cutLast(rest)
	if !ok1 || !ok2 {
		return 0, 0, false
	}
	bv, err1 := strconv.ParseInt(b, 10, 64)
	sv, err2 := strconv.Atoi(s)
	if err1 != nil || err2 != nil || bv < 0 || sv < 0 {
		return 0, 0, false
	}
	return bv, sv, true
}

func cutLast(s string) (before, after string, ok bool) {
	i := strings.LastIndexByte(s, '.')
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

func (p *parser) readMeta(c *Chunk) (*Metadata, error) {
	if c.Size > maxMetadataSize {
		return nil, fmt.Errorf("%w: metadata entry of %d bytes", ErrFormat, c.Size)
	}
	span, err := p.read(c.Offset, c.Span())
	if err != nil {
		return nil, err
	}
	data, err := checkLocal(span, c)
	if err != nil {
		return nil, err
	}
	if got := erasure.ChunkChecksum(data); got != c.CRC32 {
		return nil, fmt.Errorf("%w: metadata entry: crc32 %08x, want %08x", ErrChecksum, got, c.CRC32)
	}
	return decodeMetadata(data)
}

// orderChunks checks the chunk entries against the metadata and returns
// them indexed by block.
func orderChunks(m *Metadata, chunks []Chunk) ([]Chunk, error) {
	l := m.Layout()
	n := l.Blocks()
	if int64(len(chunks)) != n {
		return nil, fmt.Errorf("%w: %d chunk entries, object has %d blocks", ErrFormat, len(chunks), n)
	}
	out := make([]Chunk, n)
	seen := make([]bool, n)
	for _, c := range chunks {
		if c.Block >= n || seen[c.Block] {
			return nil, fmt.Errorf("%w: unexpected or duplicate chunk %q", ErrFormat, c.Name)
		}
		if want := l.Stripe(c.Block, m.Slot); c.Stripe != want {
			return nil, fmt.Errorf("%w: chunk %q in slot %d, want stripe %d", ErrFormat, c.Name, m.Slot, want)
		}
		if want := l.ChunkLen(c.Block); c.Size != want {
			return nil, fmt.Errorf("%w: chunk %q has %d bytes, want %d", ErrFormat, c.Name, c.Size, want)
		}
		seen[c.Block] = true
		out[c.Block] = c
	}
	return out, nil
}

// checkLocal validates the local header at the start of span against the
// central directory entry and returns the entry's data.
func checkLocal(span []byte, c *Chunk) ([]byte, error) {
	if len(span) < localHeaderLen || le32(span) != sigLocal {
		return nil, fmt.Errorf("%w: %q: bad local header", ErrFormat, c.Name)
	}
	nameLen, extraLen := int(le16(span[26:])), int(le16(span[28:]))
	if nameLen != len(c.Name) || string(span[localHeaderLen:localHeaderLen+nameLen]) != c.Name {
		return nil, fmt.Errorf("%w: %q: local header names another entry", ErrFormat, c.Name)
	}
	if extraLen != 0 {
		return nil, fmt.Errorf("%w: %q: unexpected local extra field", ErrFormat, c.Name)
	}
	if le32(span[14:]) != c.CRC32 {
		return nil, fmt.Errorf("%w: %q: local and central CRC differ", ErrFormat, c.Name)
	}
	return span[localHeaderLen+nameLen:], nil
}

// ReadChunk reads chunk c from r into buf (which must have capacity for
// c.Span() bytes, or nil to allocate), verifies its CRC-32 and returns the
// chunk's bytes, a sub-slice of buf. A mismatch yields a *ChecksumError;
// unverified bytes are never returned.
func ReadChunk(ctx context.Context, r ReaderAt, c *Chunk, buf []byte) ([]byte, error) {
	if err := checkChunk(c); err != nil {
		return nil, err
	}
	n := c.Span()
	if int64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	if sr, ok := r.(SpanReaderAt); ok {
		span, err := sr.ReadSpan(ctx, buf[:cap(buf)], c.Offset, int(n))
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%w: archive truncated in chunk %q", ErrFormat, c.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("archive: read at %d: %w", c.Offset, err)
		}
		buf = span
	} else {
		buf = buf[:n]
		if err := ReadFull(ctx, r, buf, c.Offset); err != nil {
			return nil, err
		}
	}
	return verifyChunk(buf, c)
}

// ChunkIn returns chunk c of an archive held whole in memory
// (Index.Whole), verified as ReadChunk verifies it: a sub-slice of whole,
// without a copy.
func ChunkIn(whole []byte, c *Chunk) ([]byte, error) {
	if err := checkChunk(c); err != nil {
		return nil, err
	}
	n := c.Span()
	if c.Offset > int64(len(whole))-n {
		return nil, fmt.Errorf("%w: archive truncated in chunk %q", ErrFormat, c.Name)
	}
	end := c.Offset + n
	return verifyChunk(whole[c.Offset:end:end], c)
}

// checkChunk refuses a chunk whose place in the archive cannot be right.
func checkChunk(c *Chunk) error {
	if c.Offset < 0 || c.Size < 0 || c.Size > max(layout.MaxChunkSize, maxMetadataSize) {
		return fmt.Errorf("%w: %q: bad offset %d or size %d", ErrFormat, c.Name, c.Offset, c.Size)
	}
	return nil
}

// verifyChunk checks span, chunk c's local header, name and data, and
// returns the data if its CRC-32 is c's.
func verifyChunk(span []byte, c *Chunk) ([]byte, error) {
	data, err := checkLocal(span, c)
	if err != nil {
		return nil, err
	}
	if got := erasure.ChunkChecksum(data); got != c.CRC32 {
		return nil, &ChecksumError{Block: c.Block, Stripe: c.Stripe, Want: c.CRC32, Got: got}
	}
	return data, nil
}

// SpanReaderAt is a ReaderAt that can read a span into a part of a buffer
// of its choosing (node.SpanReader): ReadChunk gives it the whole
// capacity of its buffer, so that a buffer with room beyond the span lets
// it read from the device directly.
type SpanReaderAt interface {
	ReaderAt
	ReadSpan(ctx context.Context, buf []byte, off int64, n int) ([]byte, error)
}

// ReadFull fills p from r at off, reading again after a short read; a
// file that ends first is ErrFormat (the archive is truncated).
func ReadFull(ctx context.Context, r ReaderAt, p []byte, off int64) error {
	for done := 0; done < len(p); {
		n, err := r.ReadAt(ctx, p[done:], off+int64(done))
		done += n
		if done == len(p) {
			return nil
		}
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: archive truncated at %d", ErrFormat, off+int64(done))
		}
		if err != nil {
			return fmt.Errorf("archive: read at %d: %w", off+int64(done), err)
		}
		if n == 0 {
			return fmt.Errorf("archive: read at %d: no progress", off+int64(done))
		}
	}
	return nil
}

func le16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }
func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
