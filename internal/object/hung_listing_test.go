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

// TestListingAsksHungNodesWhenTooManyAreMissing: nodes known to hang are
// left out of a listing only while that leaves it whole: with M nodes
// marked hung, one of which answers again, and another node down, the
// listing asks the hung ones too. Regression (fault schedule, seed
// 97096861976144071): "quorum not reached: 3 of 12 nodes could not list
// it", one of the three a node that had answered again since SIGCONT.
func TestListingAsksHungNodesWhenTooManyAreMissing(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 256}
	c, fs := faultyCluster(t, 7, g, func(o *Options) {
		o.HedgeDelay = 50 * time.Millisecond
		o.MetadataTimeout, o.ProbeTimeout = time.Second, time.Second
		o.SuspectFor = time.Hour
	})
	put(t, c.store, "/hl/a", []byte("aaa"))
	nodes := slices.Clone(c.nodes)
	nodes[1] = node.Wrap(fs[1], node.Inject(node.OpAny, node.Hang()))
	s, err := New(nodes, c.store.opts)
	if err != nil {
		t.Fatal(err)
	}
	s.MarkHung(nodes[1].ID()) // hangs
	s.MarkHung(nodes[2].ID()) // hung once, answers again
	fs[3].SetDown(true)
	infos, err := s.List(ctx, "/hl")
	if err != nil || len(infos) != 1 {
		t.Fatalf("list with one node hung, one marked hung that answers and one down: %d entries, %v", len(infos), err)
	}
}
