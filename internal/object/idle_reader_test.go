package object

import (
	"context"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
)

// Regression (found by review): a reader kept every block a read began
// and did not finish (up to readAhead+16) until the file was closed: a
// one-byte read at each of 39 block boundaries left 19 blocks cached,
// ten times the memory the reader counts, in each of the files a
// connection may hold open. Once no read has used it for idleTrim, a
// reader keeps only what read-ahead does.
func TestIdleReaderLetsItsBlocksGo(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 64 << 10}
	bs := g.BlockSize()
	c := newCluster(t, 6, g, func(o *Options) { o.SmallObjectSize = -1 })
	s, ctx := c.store, context.Background()
	put(t, s, "/big", make([]byte, 40*bs))
	r, err := s.Open(ctx, "/big")
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
	held := func() (int, int64) {
		r.mu.Lock()
		defer r.mu.Unlock()
		var n int64
		for _, f := range r.cache {
			<-f.done
			for _, ch := range f.chunks {
				n += int64(len(ch))
			}
		}
		return len(r.cache), n
	}
	if blocks, _ := held(); blocks <= r.readAhead+1 {
		t.Logf("only %d blocks cached right after the reads", blocks)
	}
	time.Sleep(idleTrim + 500*time.Millisecond)
	blocks, bytes := held()
	if blocks > r.readAhead+1 || bytes > 2*r.memory {
		t.Errorf("idle for %v: %d blocks cached, %d bytes held; the reader counts %d", idleTrim, blocks, bytes, r.memory)
	}
	// It reads on as before.
	if _, err := r.ReadAt(ctx, p, 3*bs+5); err != nil {
		t.Fatal(err)
	}
}
