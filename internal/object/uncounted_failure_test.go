package object

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
)

// Regression (CI, under the race detector): a slot that failed was let go
// by Close (its droppedC closed) before the failure was counted, so a
// Close that came in between committed a write short of its quorum:
// 2 of 6 archives lost at quorum 5, and Close returned nil. The window
// was the node-error event and the warning between the two; a slow event
// handler holds it open here.
func TestFailedSlotIsCountedBeforeCloseGoesOn(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 4096}
	c, fs := faultyCluster(t, 6, g, func(o *Options) {
		o.Events.NodeError = func(string, string, error) { time.Sleep(300 * time.Millisecond) }
	})
	ctx := context.Background()
	data := randBytes(rand.New(rand.NewPCG(seed(t), 22)), 4*g.BlockSize())
	w, err := c.store.Create(ctx, "/o", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data[:g.BlockSize()]); err != nil {
		t.Fatal(err)
	}
	fs[0].SetDown(true)
	fs[1].SetDown(true)
	_, werr := w.Write(data[g.BlockSize():])
	cerr := w.Close()
	if !errors.Is(errors.Join(werr, cerr), ErrQuorum) {
		t.Fatalf("write with 2 of 6 nodes down mid-way (quorum 5): write %v, close %v; want quorum loss", werr, cerr)
	}
	fs[0].SetDown(false)
	fs[1].SetDown(false)
	if _, err := c.store.Stat(ctx, "/o"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("stat of the failed write: %v, want not found", err)
	}
}
