package repair

import (
	"bytes"
	"context"
	"testing"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/testcluster"
)

// Regression (found by review): when the drained node's own probe failed
// (one read error on the disk being drained), the inspection listed no
// slot on the node and Drain removed its archive as "stale" without
// rebuilding it anywhere, and reported success. The archive is kept and
// the drain reports it.
func TestDrainKeepsAnArchiveItCouldNotRead(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 512}
	c := testcluster.New(t, 5, g) // every object has an archive on every node
	const drained = 2
	glitch := node.Inject(node.OpOpen, node.Fail(nil)).Path(func(p string) bool { return p == "/dr/o" }).OnIndex(0)
	nodes := make([]node.Node, len(c.Nodes))
	for i, n := range c.Nodes {
		if i == drained {
			nodes[i] = node.Wrap(n, glitch)
		} else {
			nodes[i] = n
		}
	}
	s, err := object.New(nodes, object.Options{Geometry: g, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("drain me "), 400)
	put(t, s, "/dr/o", data)
	id := c.Nodes[drained].ID()
	rep, err := Drain(ctx, s, id, DrainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("drain: moved %d, removed %d, failed %v, left %v (glitch fired %d)", rep.Moved, rep.Removed, rep.Failed, rep.Left, glitch.Fired())
	in, err := s.Inspect(ctx, "/dr/o", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failed) == 0 && len(rep.Left) == 0 && in.Health != object.Healthy {
		t.Fatalf("drain reported success (exit 0) but the object is %v: %v", in.Health, in.Problems())
	}
}
