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

// TestLookupDoesNotSearchForASlotOfAHungNode: a lookup that finds every
// slot of an object but one placed on a node known to hang stops there:
// no other node holds that slot. Regression: with one node hung, a stat
// or a get of an object with an archive on it asked every node of the
// later probe windows for the missing slot (an open of each: with 10
// nodes and a small object, 2.8 more requests per stat on average, and
// stats at 535/s against 1360 healthy through the gateway).
func TestLookupDoesNotSearchForASlotOfAHungNode(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 256}
	for _, tc := range []struct {
		name string
		hint int64 // announced size: small objects are stored 1+M
		size int
	}{{"small", 5, 5}, {"large", 0, 3000}} {
		t.Run(tc.name, func(t *testing.T) {
			c, fs := faultyCluster(t, 10, g, func(o *Options) { o.SuspectFor = time.Hour })
			path := "/lk/" + tc.name
			body := bytes.Repeat([]byte("x"), tc.size)
			putHint(t, c.store, path, body, tc.hint)
			info, err := c.store.Stat(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			hung := c.slotNode(t, path, 1)
			nodes := slices.Clone(c.nodes)
			var opens []*node.Rule // count the opens of the object's path
			for i := range nodes {
				if i == hung {
					nodes[i] = node.Wrap(fs[i], node.Inject(node.OpAny, node.Hang()))
					continue
				}
				r := node.Inject(node.OpOpen, node.Delay(0)).Path(func(p string) bool { return p == path })
				opens = append(opens, r)
				nodes[i] = node.Wrap(fs[i], r)
			}
			s, err := New(nodes, c.store.opts)
			if err != nil {
				t.Fatal(err)
			}
			s.MarkHung(nodes[hung].ID())
			// The lookup asks whole probe windows: the first that holds
			// every slot is asked, and no more.
			ranked := s.rank(path)
			last := 0
			for _, id := range info.Placement {
				last = max(last, slices.IndexFunc(ranked, func(n node.Node) bool { return n.ID() == id })+1)
			}
			window := len(ranked)
			for _, w := range s.probeWindows(len(ranked)) {
				if w >= last {
					window = min(window, w)
				}
			}
			want := int64(window - 1) // but the hung node
			for _, op := range []string{"stat", "get"} {
				var n int64
				for _, r := range opens {
					n -= r.Fired()
				}
				if op == "stat" {
					if got, err := s.Stat(ctx, path); err != nil || got.Version != info.Version {
						t.Fatalf("stat with the node of slot 1 hung: %+v, %v", got, err)
					}
				} else if got, err := get(s, path); err != nil || !bytes.Equal(got, body) {
					t.Fatalf("get with the node of slot 1 hung: %d bytes, %v", len(got), err)
				}
				for _, r := range opens {
					n += r.Fired()
				}
				t.Logf("%s with the node of slot 1 hung: the object opened on %d of %d nodes (its slots are in the first %d ranked)", op, n, len(opens), window)
				if n > want {
					t.Errorf("%s opened the object on %d nodes; want at most the %d of the probe window that holds its slots", op, n, want)
				}
			}
		})
	}
}
