// Package layout holds the erasure-coding geometry of an object and the pure
// arithmetic that maps object offsets to blocks, stripe indexes, chunks and
// the placement slots (archives) that hold them.
//
// Terms follow DESIGN.md section 2. An object of Size bytes is cut into
// blocks of K×ChunkSize bytes. Every block is split into K data chunks and
// encoded into M parity chunks. The last block is shortened: its chunks are
// ceil(r/K) bytes long, where r is the number of object bytes in it, and
// the data chunks are zero-padded to that length before encoding. So every
// chunk of one block has the same length, and a small object costs K+M
// small chunks rather than K+M full ones.
//
// Chunk (b, s) is stored in the archive of placement slot (s+b) mod (K+M):
// the stripe index a slot holds rotates from block to block, so parity is
// spread over all slots and healthy reads, which skip parity, load every
// archive evenly. The package does no I/O.
package layout

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Limits on a geometry. The Reed-Solomon field GF(2^8) allows at most 256
// shards; we keep far below it so that per-block memory stays sane.
const (
	MaxData      = 64
	MaxParity    = 32
	MaxChunkSize = 64 << 20
)

// ErrGeometry reports an unusable geometry.
var ErrGeometry = errors.New("layout: invalid geometry")

// Geometry is the erasure-coding shape of an object: K data chunks and M
// parity chunks of ChunkSize bytes per block. It is immutable once an
// object is written and recorded in every archive's metadata.
type Geometry struct {
	K         int   // data chunks per block
	M         int   // parity chunks per block
	ChunkSize int64 // bytes per chunk of a full block
}

// Validate reports whether g is a geometry ecstore can encode.
func (g Geometry) Validate() error {
	switch {
	case g.K < 1 || g.K > MaxData:
		return fmt.Errorf("%w: k=%d must be in [1, %d]", ErrGeometry, g.K, MaxData)
	case g.M < 0 || g.M > MaxParity:
		return fmt.Errorf("%w: m=%d must be in [0, %d]", ErrGeometry, g.M, MaxParity)
	case g.ChunkSize < 1 || g.ChunkSize > MaxChunkSize:
		return fmt.Errorf("%w: chunk size %d must be in [1, %d]", ErrGeometry, g.ChunkSize, MaxChunkSize)
	}
	return nil
}

// Width is the number of chunks per block, K+M: the number of archives
// (placement slots) an object has.
func (g Geometry) Width() int { return g.K + g.M }

// BlockSize is the number of object bytes in a full block.
func (g Geometry) BlockSize() int64 { return int64(g.K) * g.ChunkSize }

// String formats g as "K+M/chunk", e.g. "8+2/1MiB".
func (g Geometry) String() string {
	return fmt.Sprintf("%d+%d/%s", g.K, g.M, FormatSize(g.ChunkSize))
}

// ParseEC parses an "K+M" string such as "8+2".
func ParseEC(s string) (k, m int, err error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "+")
	if !ok {
		return 0, 0, fmt.Errorf("%w: %q is not of the form K+M", ErrGeometry, s)
	}
	if k, err = strconv.Atoi(a); err != nil {
		return 0, 0, fmt.Errorf("%w: %q: bad K", ErrGeometry, s)
	}
	if m, err = strconv.Atoi(b); err != nil {
		return 0, 0, fmt.Errorf("%w: %q: bad M", ErrGeometry, s)
	}
	return k, m, nil
}

// Slot returns the placement slot whose archive holds chunk (block, stripe).
func (g Geometry) Slot(block int64, stripe int) int {
	w := int64(g.Width())
	return int((int64(stripe) + block) % w)
}

// Stripe returns the stripe index that placement slot slot holds for block.
func (g Geometry) Stripe(block int64, slot int) int {
	w := int64(g.Width())
	return int(((int64(slot)-block)%w + w) % w)
}

// Layout is a geometry applied to an object of a known size.
type Layout struct {
	Geometry
	Size int64 // object size in bytes
}

// Blocks is the number of blocks of the object (0 for an empty object).
func (l Layout) Blocks() int64 {
	if l.Size <= 0 {
		return 0
	}
	bs := l.BlockSize()
	return (l.Size + bs - 1) / bs
}

// BlockStart is the object offset of block b's first byte.
func (l Layout) BlockStart(b int64) int64 { return b * l.BlockSize() }

// BlockLen is the number of object bytes in block b.
func (l Layout) BlockLen(b int64) int64 {
	n := l.Size - l.BlockStart(b)
	return max(0, min(n, l.BlockSize()))
}

// ChunkLen is the length of every chunk (data and parity) of block b.
func (l Layout) ChunkLen(b int64) int64 {
	r := l.BlockLen(b)
	if r == l.BlockSize() {
		return l.ChunkSize
	}
	return (r + int64(l.K) - 1) / int64(l.K)
}

// DataLen is the number of object bytes held by data chunk (b, s); it is
// less than ChunkLen(b) (possibly 0) only in the last block, where the rest
// of the chunk is zero padding. It is 0 for parity stripes.
func (l Layout) DataLen(b int64, s int) int64 {
	if s >= l.K {
		return 0
	}
	cl := l.ChunkLen(b)
	n := l.BlockLen(b) - int64(s)*cl
	return max(0, min(n, cl))
}

// Locate maps object offset off (0 <= off < Size) to its block, the data
// stripe index within the block and the offset inside that chunk.
func (l Layout) Locate(off int64) (block int64, stripe int, chunkOff int64) {
	bs := l.BlockSize()
	block = off / bs
	in := off - block*bs
	cl := l.ChunkLen(block)
	return block, int(in / cl), in % cl
}

// ArchiveSize is the number of chunk bytes one archive of the object holds
// (excluding ZIP headers), the same for every slot.
func (l Layout) ArchiveSize() int64 {
	n := l.Blocks()
	if n == 0 {
		return 0
	}
	return (n-1)*l.ChunkSize + l.ChunkLen(n-1)
}
