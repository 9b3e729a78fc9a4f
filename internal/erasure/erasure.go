// Package erasure wraps the Reed-Solomon codec used for every block of an
// object and the checksums that guard chunks and whole objects.
//
// The codec is klauspost/reedsolomon with a Cauchy matrix, which is MDS
// (any K of the K+M chunks recover the block) for every geometry that
// layout.Geometry.Validate accepts. Chunk checksums are the IEEE CRC-32 that
// also sits in every chunk's ZIP header (see docs/FORMAT.md); whole-object
// checksums are adler32 and CRC32C (Castagnoli), as XRootD clients ask for.
//
// Codecs are safe for concurrent use. Integrity is not verified by Encode or
// Reconstruct: callers verify chunk checksums before handing chunks in.
package erasure

import (
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/reedsolomon"

	"github.com/ecstore/ecstore/internal/layout"
)

// Errors returned by the codec.
var (
	// ErrTooFewChunks means fewer than K chunks of a block are available.
	ErrTooFewChunks = errors.New("erasure: too few chunks to reconstruct")
	// ErrShardSize means chunks of one block differ in length.
	ErrShardSize = errors.New("erasure: chunks of a block differ in size")
)

// Codec encodes and reconstructs the chunks of one block for a fixed K+M.
type Codec struct {
	k, m int
	enc  reedsolomon.Encoder // nil when m == 0
}

var codecs sync.Map // [2]int{k, m} -> *Codec

// New returns the codec for k data and m parity chunks. Codecs are cached:
// building the matrix inverse tables is not free.
func New(k, m int) (*Codec, error) {
	key := [2]int{k, m}
	if c, ok := codecs.Load(key); ok {
		return c.(*Codec), nil
	}
	if err := (layout.Geometry{K: k, M: m, ChunkSize: 1}).Validate(); err != nil {
		return nil, err
	}
	c := &Codec{k: k, m: m}
	if m > 0 {
		enc, err := reedsolomon.New(k, m, reedsolomon.WithCauchyMatrix())
		if err != nil {
			return nil, fmt.Errorf("erasure: new %d+%d codec: %w", k, m, err)
		}
		c.enc = enc
	}
	actual, _ := codecs.LoadOrStore(key, c)
	return actual.(*Codec), nil
}

// K is the number of data chunks per block.
func (c *Codec) K() int { return c.k }

// M is the number of parity chunks per block.
func (c *Codec) M() int { return c.m }

// Encode computes the parity chunks. chunks has K+M entries of equal
// length; the first K hold data and are not modified, the last M are
// overwritten with parity.
func (c *Codec) Encode(chunks [][]byte) error {
	if err := c.check(chunks, false); err != nil {
		return err
	}
	if c.m == 0 {
		return nil
	}
	if err := c.enc.Encode(chunks); err != nil {
		return fmt.Errorf("erasure: encode: %w", err)
	}
	return nil
}

// ReconstructData fills in the missing data chunks (nil or zero-length
// entries among the first K) from any K present chunks. Present chunks must
// already be verified: a corrupt chunk yields corrupt output. Missing
// parity chunks are left missing. Entries that are filled in are allocated
// unless they have capacity for a whole chunk (then they are reused).
func (c *Codec) ReconstructData(chunks [][]byte) error {
	return c.reconstruct(chunks, true)
}

// Reconstruct fills in every missing chunk, data and parity.
func (c *Codec) Reconstruct(chunks [][]byte) error {
	return c.reconstruct(chunks, false)
}

func (c *Codec) reconstruct(chunks [][]byte, dataOnly bool) error {
	if err := c.check(chunks, true); err != nil {
		return err
	}
	present := 0
	for _, ch := range chunks {
		if len(ch) > 0 {
			present++
		}
	}
	if present == len(chunks) {
		return nil
	}
	if present < c.k {
		return fmt.Errorf("%w: %d of %d needed", ErrTooFewChunks, present, c.k)
	}
	if c.m == 0 {
		return nil // unreachable: present < k handled above
	}
	var err error
	if dataOnly {
		err = c.enc.ReconstructData(chunks)
	} else {
		err = c.enc.Reconstruct(chunks)
	}
	if err != nil {
		return fmt.Errorf("erasure: reconstruct: %w", err)
	}
	return nil
}

func (c *Codec) check(chunks [][]byte, allowMissing bool) error {
	if len(chunks) != c.k+c.m {
		return fmt.Errorf("erasure: got %d chunks, want %d", len(chunks), c.k+c.m)
	}
	size := -1
	for i, ch := range chunks {
		if len(ch) == 0 && allowMissing {
			continue
		}
		if size == -1 {
			size = len(ch)
		} else if len(ch) != size {
			return fmt.Errorf("%w: chunk %d has %d bytes, want %d", ErrShardSize, i, len(ch), size)
		}
	}
	return nil
}
