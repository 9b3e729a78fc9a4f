package object

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/ecstore/ecstore/internal/layout"
)

// A client reading one byte at the start of each block (each read is
// "sequential": it starts a block) leaves every block it touched in the
// reader's cache, whole, while it keeps reading: readAhead+pipelineDepth
// blocks, against the one block the reader counts for the memory limit.
// Regression (found by review): the cache kept readAhead+16 blocks
// whatever the reads in flight, 17 blocks (4.2x the allowance) here. It
// keeps one block per read in flight now.
func TestPartialBlockReadsDoNotFillTheCache(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 64 << 10}
	c := newCluster(t, 6, g)
	ctx := context.Background()
	bs := g.BlockSize()
	data := randBytes(rand.New(rand.NewPCG(1, 2)), 40*bs)
	w, err := c.store.Create(ctx, "/big", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// Another transfer open: the reader uses the plain ReadAhead.
	other, err := c.store.Open(ctx, "/big")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	r, err := c.store.Open(ctx, "/big")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := make([]byte, 1)
	for b := int64(1); b < 40; b++ {
		if _, err := r.ReadAt(ctx, p, b*bs); err != nil {
			t.Fatal(err)
		}
	}
	r.mu.Lock()
	var held int64
	for _, f := range r.cache {
		<-f.done
		for _, ch := range f.chunks {
			held += int64(len(ch))
		}
	}
	blocks := len(r.cache)
	r.mu.Unlock()
	t.Logf("cached blocks %d, chunk bytes held %d; reader counts %d bytes (memory limit allows 4x: %d)", blocks, held, r.memory, 4*r.memory)
	if held > 4*r.memory {
		t.Fatalf("reader holds %d bytes of block data (%.1f blocks), %.1fx the %d bytes the memory limit allows it", held, float64(held)/float64(bs), float64(held)/float64(4*r.memory), 4*r.memory)
	}
}
