package object

import (
	"context"
	"errors"
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
	_, werr, cerr := writeLosingTwoNodes(t, c, fs, g, "/o", 22)
	if !errors.Is(errors.Join(werr, cerr), ErrQuorum) {
		t.Fatalf("write with 2 of 6 nodes down mid-way (quorum 5): write %v, close %v; want quorum loss", werr, cerr)
	}
	fs[0].SetDown(false)
	fs[1].SetDown(false)
	if _, err := c.store.Stat(ctx, "/o"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("stat of the failed write: %v, want not found", err)
	}
}
