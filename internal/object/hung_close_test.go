package object

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
)

// Regression (found by review): the stragglers of a commit's syncs and
// renames were cut off only once the write quorum had succeeded; when
// the quorum needed a node that hung in its sync or rename (one node
// failed, another hung), Close waited for as long as it hung, holding the
// path's turn. Every slot is now bounded (4 WriteTimeouts, more for
// large archives' syncs).
func TestCloseIsBoundedWhenTheQuorumNeedsAHungNode(t *testing.T) {
	for _, op := range []node.Op{node.OpFinish, node.OpCommit} {
		t.Run(op.String(), func(t *testing.T) {
			g := layout.Geometry{K: 4, M: 2, ChunkSize: 4096}
			c, fs := faultyCluster(t, 6, g, func(o *Options) { o.WriteTimeout = 300 * time.Millisecond })
			nodes := slices.Clone(c.nodes)
			nodes[1] = node.Wrap(fs[1], node.Inject(op, node.Fail(errors.New("disk error"))))
			nodes[4] = node.Wrap(fs[4], node.Inject(op, node.Hang()))
			s, err := New(nodes, c.store.opts)
			if err != nil {
				t.Fatal(err)
			}
			w, err := s.Create(context.Background(), "/f", nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(randBytes(rand.New(rand.NewPCG(1, 2)), 3*g.BlockSize())); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- w.Close() }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("Close still waiting after 10 s for the node that hangs in its %v", op)
			}
		})
	}
}

// Regression (found by review): a failed write's Close (and any Abort)
// waited for every slot's abort, up to 10 s for a node that hangs; the
// aborts go on in the background after WriteLag.
func TestFailedCloseDoesNotWaitForAHungAbort(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 4096}
	c, fs := faultyCluster(t, 6, g)
	nodes := slices.Clone(c.nodes)
	nodes[1] = node.Wrap(fs[1], node.Inject(node.OpWrite, node.Fail(errors.New("disk error"))).FromIndex(2))
	nodes[4] = node.Wrap(fs[4], node.Inject(node.OpWrite|node.OpAbort, node.Hang()).FromIndex(2))
	s, err := New(nodes, c.store.opts)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Create(context.Background(), "/a", nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(randBytes(rand.New(rand.NewPCG(1, 4)), 20*g.BlockSize()))
	start := time.Now()
	if err := w.Close(); err == nil {
		t.Fatal("a write that lost its quorum closed without error")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the failed Close took %v", d)
	}
}
