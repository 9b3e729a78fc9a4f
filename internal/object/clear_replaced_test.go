package object

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
)

// Regression (found by the fault suite's TestFenceMidTransfer, a node cut
// off the network 200 ms into a put): a write that dropped a node that
// hung mid-write committed degraded, then asked that very node, among
// the first nodes readers look at, whether it held an older version to
// clear (clearReplaced), and held the client's close until the lookup
// timed out (MetadataTimeout, 2 s by default). The node the write dropped
// is now asked in the background.
func TestCloseDoesNotWaitForTheDroppedNodeToClearReplaced(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 4096}
	c, fs := faultyCluster(t, 6, g)
	// The node ranked first for the path: in every window readers ask.
	first := c.store.rank("/x")[0].ID()
	i := slices.IndexFunc(c.nodes, func(n node.Node) bool { return n.ID() == first })
	nodes := slices.Clone(c.nodes)
	nodes[i] = node.Wrap(fs[i], node.Inject(node.OpWrite, node.Hang()).FromIndex(2), node.Inject(node.OpOpen|node.OpStat|node.OpRemove, node.Hang()).FromIndex(1))
	const metadataTimeout = 3 * time.Second
	var missing []int
	s := c.storeOver(t, nodes, func(o *Options) {
		// No spares: the first window readers ask (M+1 nodes) is
		// smaller than K, so the degraded write holds fewer than K there.
		o.Spares = -1
		o.WriteLag = 200 * time.Millisecond
		o.WriteTimeout = 10 * time.Second // the hung write does not time out first
		o.MetadataTimeout = metadataTimeout
		o.Events.DegradedWrite = func(_ string, m []int) { missing = m }
	})
	w, err := s.Create(context.Background(), "/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(randBytes(rand.New(rand.NewPCG(1, 5)), 12*g.BlockSize())); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := w.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if d := time.Since(start); d >= metadataTimeout {
		t.Errorf("close took %v: it waited for the node the write dropped (lookup timeout %v)", d.Round(time.Millisecond), metadataTimeout)
	}
	if !slices.Equal(missing, []int{0}) {
		t.Fatalf("the write missed slots %v, want the hung node's slot 0 alone", missing)
	}
	s.Drain()
	if _, err := get(c.store, "/x"); err != nil {
		t.Errorf("read after the degraded write: %v", err)
	}
}

// TestCloseDoesNotWaitForAHungNodeToClearReplaced: a put with a node known
// to hang (not placed on it) does not wait for it to say whether it holds
// an older version among the first nodes readers ask. Regression (found
// by the fault suite's TestFencedNode: a 3 MiB put took 0.33 s with a node
// fenced against 0.09 s healthy): clearReplaced asked it, and the close
// waited its shortened deadline (HedgeDelay) at every put whose first
// windows held it. (Asked in the background instead, it held the path's
// next write, the overwrite here, as long.)
func TestCloseDoesNotWaitForAHungNodeToClearReplaced(t *testing.T) {
	g := layout.Geometry{K: 8, M: 2, ChunkSize: 4096}
	const hedge = 500 * time.Millisecond
	c, fs := faultyCluster(t, 12, g, func(o *Options) {
		o.HedgeDelay = hedge
		o.Spares = 2 // the first window (M+1+spares nodes) is smaller than K
	})
	body := make([]byte, 3*4096*8)
	paths := []string{"/y/a", "/y/a"} // a new object, then its overwrite
	// The node ranked first for the path: in every window readers ask.
	hung := slices.IndexFunc(c.nodes, func(n node.Node) bool { return n.ID() == c.store.rank("/y/a")[0].ID() })
	nodes := slices.Clone(c.nodes)
	nodes[hung] = node.Wrap(fs[hung], node.Inject(node.OpAny, node.Hang()))
	s := c.storeOver(t, nodes, func(o *Options) { o.Spares = 2 })
	s.MarkHung(nodes[hung].ID()) // as after its first timeout
	for _, p := range paths {
		start := time.Now()
		put(t, s, p, body)
		d := time.Since(start)
		t.Logf("put %s with node %s known to hang: %v", p, nodes[hung].ID(), d)
		if d > hedge/2 {
			t.Errorf("put %s took %v with a node known to hang: its close waited for the node (hedge delay %v)", p, d, hedge)
		}
		if got, err := get(s, p); err != nil || len(got) != len(body) {
			t.Errorf("get %s: %d bytes, %v", p, len(got), err)
		}
	}
}
