package object

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
)

// TestRemoveAndRenameSkipAHungNode: once a node is known to hang,
// removing, renaming (onto a free name and onto an object), making and
// removing directories do not ask it: each is done in milliseconds, and
// once the node answers again (keeping what it held) what they did
// stands. Regression: every step of them that asks all nodes (the
// removal, the tombstones, the renames) waited the hung node's shortened
// deadline (HedgeDelay, 250 ms): an rm took 0.5 s, an mv 0.75 s, an mv
// onto an object 1.25 s, for as long as the node hung.
func TestRemoveAndRenameSkipAHungNode(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 256}
	c, fs := faultyCluster(t, 8, g, func(o *Options) {
		o.HedgeDelay = 250 * time.Millisecond
		o.MetadataTimeout, o.ProbeTimeout = 2*time.Second, 2*time.Second
		o.SuspectFor = time.Hour
	})
	bodies := map[string][]byte{}
	for i := range 3 {
		p := fmt.Sprintf("/hr/o%d", i)
		bodies[p] = bytes.Repeat([]byte{byte('a' + i)}, 3000)
		put(t, c.store, p, bodies[p])
	}
	put(t, c.store, "/hr/small", []byte("small")) // 1+M copies
	if err := c.store.Mkdir(ctx, "/hr/gone"); err != nil {
		t.Fatal(err)
	}
	victim := c.slotNode(t, "/hr/small", 0) // holds a copy, and likely archives of the others
	nodes := slices.Clone(c.nodes)
	nodes[victim] = node.Wrap(fs[victim], node.Inject(node.OpAny, node.Hang()))
	s, err := New(nodes, c.store.opts)
	if err != nil {
		t.Fatal(err)
	}
	s.MarkHung(nodes[victim].ID()) // as after its first timeout
	ops := []struct {
		name string
		fn   func() error
	}{
		{"rm", func() error { return s.Remove(ctx, "/hr/o0") }},
		{"mv", func() error { return s.Rename(ctx, "/hr/o1", "/hr/moved") }},
		{"mv onto an object", func() error { return s.Rename(ctx, "/hr/o2", "/hr/moved") }},
		{"rm of a small object", func() error { return s.Remove(ctx, "/hr/small") }},
		{"mkdir", func() error { return s.Mkdir(ctx, "/hr/dir") }},
		{"rmdir", func() error { return s.Rmdir(ctx, "/hr/gone") }},
	}
	for _, op := range ops {
		start := time.Now()
		err := op.fn()
		d := time.Since(start)
		t.Logf("%s with node %s known to hang: %v", op.name, nodes[victim].ID(), d)
		if err != nil {
			t.Fatalf("%s with a node known to hang: %v", op.name, err)
		}
		if d > 100*time.Millisecond {
			t.Errorf("%s took %v with a node known to hang: it waited for the node", op.name, d)
		}
	}

	// The node answers again, with whatever it kept. (It keeps /hr/gone
	// too, as a node that timed out did: an rmdir leaves the directory on
	// the nodes it could not reach, and says so in a warning.)
	s = c.store
	for _, p := range []string{"/hr/o0", "/hr/o1", "/hr/o2", "/hr/small"} {
		if info, err := s.Stat(ctx, p); !errors.Is(err, ErrNotExist) {
			t.Errorf("%s is back once the hung node answers: %+v, %v", p, info, err)
		}
	}
	got, err := get(s, "/hr/moved")
	if err != nil || !bytes.Equal(got, bodies["/hr/o2"]) {
		t.Errorf("/hr/moved once the hung node answers: %.20q..., %v; want o2's bytes", got, err)
	}
	if info, err := s.Stat(ctx, "/hr/dir"); err != nil || !info.IsDir {
		t.Errorf("/hr/dir once the hung node answers: %+v, %v", info, err)
	}
}
