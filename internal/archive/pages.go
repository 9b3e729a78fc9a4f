package archive

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"

	"github.com/ecstore/ecstore/internal/erasure"
)

// Page checksums. Besides the CRC-32 of each chunk (its ZIP entry's),
// an archive holds the CRC-32C of every PageSize bytes of each chunk, so
// that a reader can verify part of a chunk without reading all of it: a
// read of a few KB at a random offset (ROOT reading baskets) then reads
// those pages and their checksums, not the whole chunk.
//
// The checksums of the chunks of PageGroup consecutive blocks form one
// entry, written after the last chunk of the group and named
// "pages.<first block>.crc32c" (not of the chunk form, so readers that
// do not know page checksums ignore it): for each block in order, the
// big-endian CRC-32C (as XRootD's kXR_pgread sends them) of each page of
// its chunk, the last page of a chunk being as long as what is left.
// The metadata's page_crc32c is the page size when the archive has them.
const (
	PageSize  = erasure.PagedSize // 4096; the writer derives the object's CRC-32C from these
	PageGroup = 64
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// pageEntryName is the name of the page checksums of the group starting
// at block first.
func pageEntryName(first int64) string {
	return "pages." + strconv.FormatInt(first, 10) + ".crc32c"
}

// parsePageEntryName returns the first block of a page checksum entry's
// name.
func parsePageEntryName(name string) (int64, bool) {
	rest, ok := strings.CutPrefix(name, "pages.")
	if !ok {
		return 0, false
	}
	first, ok := strings.CutSuffix(rest, ".crc32c")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(first, 10, 64)
	if err != nil || v < 0 || v%PageGroup != 0 {
		return 0, false
	}
	return v, true
}

// pagesOf is the number of pages of a chunk of n bytes.
func pagesOf(n int64) int64 { return (n + PageSize - 1) / PageSize }

// AppendPageCRCs appends the big-endian CRC-32C of each page of chunk.
func AppendPageCRCs(dst, chunk []byte) []byte {
	for len(chunk) > 0 {
		p := chunk[:min(len(chunk), PageSize)]
		dst = binary.BigEndian.AppendUint32(dst, crc32.Checksum(p, castagnoli))
		chunk = chunk[len(p):]
	}
	return dst
}

// PageCRC is the CRC-32C of one page, as the page checksums hold it.
func PageCRC(page []byte) uint32 { return crc32.Checksum(page, castagnoli) }

// PageSpan is where a read of part of chunk b finds what it needs: the
// file offset of the chunk's data, and of its page checksums, which lie
// in Entry.
type PageSpan struct {
	Data, CRCs int64
	Entry      PageEntry
}

// PageEntry is a stored entry of page checksums: those of the chunks of
// the PageGroup blocks from First, Size bytes at file offset Offset,
// whose CRC-32 (its ZIP entry's) is CRC32. A reader that reads it whole
// can check it (Check) and keep it for the reads of the whole group.
type PageEntry struct {
	First, Offset, Size int64
	CRC32               uint32
}

// Check verifies b, the entry's bytes, against the entry's CRC-32.
func (e PageEntry) Check(b []byte) error {
	if int64(len(b)) != e.Size {
		return fmt.Errorf("%w: page checksums of block %d: %d bytes, want %d", ErrChecksum, e.First, len(b), e.Size)
	}
	if got := erasure.ChunkChecksum(b); got != e.CRC32 {
		return fmt.Errorf("%w: page checksums of block %d: CRC-32 %08x, want %08x", ErrChecksum, e.First, got, e.CRC32)
	}
	return nil
}

// Pages returns where the data and the page checksums of block b's chunk
// are, or false when the archive has no page checksums for it (it was
// written before them, or the entry is malformed: the chunk is then read
// whole).
func (x *Index) Pages(b int64) (PageSpan, bool) {
	if x.Meta.PageCRC32C != PageSize || b < 0 || b >= int64(len(x.Chunks)) {
		return PageSpan{}, false
	}
	g := b / PageGroup
	if g >= int64(len(x.pages)) || x.pages[g].Offset < 0 {
		return PageSpan{}, false
	}
	e := x.pages[g]
	per := pagesOf(x.Meta.ChunkSize) // every chunk before the last block's is full
	c := &x.Chunks[b]
	return PageSpan{Data: c.DataOffset(), CRCs: e.Offset + (b%PageGroup)*per*4, Entry: e}, true
}

// DataOffset is the file offset of the chunk's data.
func (c *Chunk) DataOffset() int64 { return c.Offset + localHeaderLen + int64(len(c.Name)) }

// indexPages records the page checksum entries of an archive with the
// chunks of m: x.pages[g] is the entry of group g's checksums, with
// Offset -1 when the group has none or its entry is not as long as its chunks'
// pages need (ignored then, not an error: the chunks are read whole).
func (x *Index) indexPages(entries []Chunk) error {
	m := x.Meta
	if m.PageCRC32C == 0 {
		return nil
	}
	if m.PageCRC32C != PageSize {
		return nil // another page size: not understood, chunks read whole
	}
	n := int64(len(x.Chunks))
	groups := (n + PageGroup - 1) / PageGroup
	x.pages = make([]PageEntry, groups)
	for g := range x.pages {
		x.pages[g].Offset = -1
	}
	for _, e := range entries {
		first, _ := parsePageEntryName(e.Name)
		g := first / PageGroup
		if g >= groups {
			continue
		}
		var want int64
		for b := first; b < min(first+PageGroup, n); b++ {
			want += pagesOf(x.Chunks[b].Size) * 4
		}
		if e.Size != want {
			continue
		}
		if x.pages[g].Offset >= 0 {
			return fmt.Errorf("%w: two page checksum entries for block %d", ErrFormat, first)
		}
		x.pages[g] = PageEntry{First: first, Offset: e.DataOffset(), Size: e.Size, CRC32: e.CRC32}
	}
	return nil
}
