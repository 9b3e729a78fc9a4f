package object

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
)

// TestListingsAndDirStatsSkipAHungNode: once a node is known to hang (a
// call timed out), listings and stats of directories leave it out, as
// lookups do. Regression (found by review): they asked it and waited
// HedgeDelay (250 ms by default) for it every time, as long as it hung.
func TestListingsAndDirStatsSkipAHungNode(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 256}
	c, fs := faultyCluster(t, 7, g, func(o *Options) {
		o.HedgeDelay = 250 * time.Millisecond
		o.MetadataTimeout, o.ProbeTimeout = 2*time.Second, 2*time.Second
		o.SuspectFor = time.Hour
	})
	put(t, c.store, "/hn/a", []byte("aaa"))
	nodes := slices.Clone(c.nodes)
	nodes[1] = node.Wrap(fs[1], node.Inject(node.OpAny, node.Hang()))
	s, err := New(nodes, c.store.opts)
	if err != nil {
		t.Fatal(err)
	}
	s.MarkHung(nodes[1].ID()) // as after its first timeout
	for i := range 3 {
		start := time.Now()
		if _, err := s.List(ctx, "/hn"); err != nil {
			t.Fatal(err)
		}
		l := time.Since(start)
		start = time.Now()
		if _, err := s.Stat(ctx, "/hn"); err != nil {
			t.Fatal(err)
		}
		st := time.Since(start)
		start = time.Now()
		if _, err := s.Stat(ctx, "/hn/a"); err != nil {
			t.Fatal(err)
		}
		so := time.Since(start)
		t.Logf("round %d: list %v, stat dir %v, stat object %v", i, l, st, so)
		if l > 100*time.Millisecond || st > 100*time.Millisecond {
			t.Errorf("round %d: list took %v, stat of a directory %v with a node known to hang", i, l, st)
		}
	}
}
