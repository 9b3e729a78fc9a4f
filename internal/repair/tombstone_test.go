package repair

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/testcluster"
)

// faultyStore wraps a test cluster's nodes so that they can be taken down.
func faultyStore(t *testing.T, n int, g layout.Geometry) (*object.Store, []*node.Faulty, *testcluster.Cluster) {
	t.Helper()
	c := testcluster.New(t, n, g)
	fs := make([]*node.Faulty, n)
	nodes := make([]node.Node, n)
	for i, nd := range c.Nodes {
		fs[i] = node.Wrap(nd)
		nodes[i] = fs[i]
	}
	s, err := object.New(nodes, object.Options{Geometry: g, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	return s, fs, c
}

func put(t *testing.T, s *object.Store, p string, data []byte) {
	t.Helper()
	w, err := s.Create(context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func get(s *object.Store, p string) ([]byte, error) {
	ctx := context.Background()
	r, err := s.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var b bytes.Buffer
	_, err = r.WriteTo(ctx, &b)
	return b.Bytes(), err
}

func TestRemoveWhileNodesDownStaysRemoved(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 256}
	s, fs, c := faultyStore(t, 6, g)
	put(t, s, "/d/x", bytes.Repeat([]byte("gone "), 1000))
	put(t, s, "/d/keep", []byte("kept"))
	fs[1].SetDown(true)
	fs[4].SetDown(true)
	if err := s.Remove(ctx, "/d/x"); err != nil {
		t.Fatalf("remove with 2 nodes down: %v", err)
	}
	fs[1].SetDown(false)
	fs[4].SetDown(false)
	// The two remnants are back, but the object stays removed.
	if _, err := os.Stat(c.Archive(1, "/d/x")); err != nil {
		t.Fatalf("test setup: remnant expected on node 1: %v", err)
	}
	if _, err := s.Open(ctx, "/d/x"); !errors.Is(err, object.ErrNotExist) {
		t.Fatalf("open after the nodes returned: %v, want not exist", err)
	}
	if _, err := s.Stat(ctx, "/d/x"); !errors.Is(err, object.ErrNotExist) {
		t.Fatalf("stat: %v", err)
	}
	ents, err := s.List(ctx, "/d")
	if err != nil || len(ents) != 1 || ents[0].Name != "keep" {
		t.Fatalf("list: %+v %v", ents, err)
	}
	if root, _ := s.List(ctx, "/"); len(root) != 1 || root[0].Name != "d" {
		t.Fatalf("list of / shows bookkeeping: %+v", root)
	}
	// fsck reports the remnants; repair removes them and the tombstones.
	rep, err := Check(ctx, s, CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Clean() || rep.Count(object.Removed) != 1 {
		t.Fatalf("check: clean %v, removed %d", rep.Clean(), rep.Count(object.Removed))
	}
	rr, err := Repair(ctx, s, RepairOptions{RemoveDebris: true})
	if err != nil {
		t.Fatal(err)
	}
	if rr.DebrisRemoved != 2 || rr.TombstonesCollected != 1 {
		t.Fatalf("repair removed %d debris, collected %d tombstones", rr.DebrisRemoved, rr.TombstonesCollected)
	}
	mustCheckClean(t, s, true)
	if ts, _ := s.Tombstones(ctx); len(ts) != 0 {
		t.Fatalf("tombstones left: %v", ts)
	}
	// The path can be used again.
	put(t, s, "/d/x", []byte("new life"))
	if got, err := get(s, "/d/x"); err != nil || string(got) != "new life" {
		t.Fatalf("re-created: %q %v", got, err)
	}
}

func TestRemoveNeedsMPlusOneNodes(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 2, M: 2, ChunkSize: 256}
	s, fs, _ := faultyStore(t, 4, g)
	put(t, s, "/x", []byte("still here"))
	fs[0].SetDown(true)
	fs[1].SetDown(true)
	// 2 nodes up: the removal cannot be recorded on M+1 = 3 nodes.
	if err := s.Remove(ctx, "/x"); !errors.Is(err, object.ErrQuorum) {
		t.Fatalf("remove with 2 of 4 nodes down: %v", err)
	}
	fs[0].SetDown(false)
	fs[1].SetDown(false)
	if got, err := get(s, "/x"); err != nil || string(got) != "still here" {
		t.Fatalf("after refused remove: %q %v", got, err)
	}
}

func TestOverwriteWhileNodesDown(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 256}
	s, fs, _ := faultyStore(t, 8, g)
	old := bytes.Repeat([]byte("old "), 700)
	put(t, s, "/o", old)
	info, _ := s.Stat(ctx, "/o")
	// Take down two nodes holding archives of the old version.
	var down []*node.Faulty
	for i, f := range fs {
		if f.ID() == info.Placement[0] || f.ID() == info.Placement[3] {
			down = append(down, fs[i])
			f.SetDown(true)
		}
	}
	newer := bytes.Repeat([]byte("new!"), 900)
	put(t, s, "/o", newer)
	for _, f := range down {
		f.SetDown(false)
	}
	for range 3 {
		got, err := get(s, "/o")
		if err != nil || !bytes.Equal(got, newer) {
			t.Fatalf("after the nodes returned: %d bytes, %v; want the new version", len(got), err)
		}
	}
	if _, err := Repair(ctx, s, RepairOptions{CheckOptions: CheckOptions{DebrisAge: -1}, RemoveDebris: true}); err != nil {
		t.Fatal(err)
	}
	mustCheckClean(t, s, true)
}

// With every node up, a remove needs no tombstone (the fast path).
func TestRemoveWithAllNodesUpWritesNoTombstone(t *testing.T) {
	ctx := context.Background()
	s, _, _ := faultyStore(t, 6, layout.Geometry{K: 4, M: 2, ChunkSize: 256})
	put(t, s, "/fast", []byte("x"))
	if err := s.Remove(ctx, "/fast"); err != nil {
		t.Fatal(err)
	}
	if ts, err := s.Tombstones(ctx); err != nil || len(ts) != 0 {
		t.Fatalf("tombstones %v, %v", ts, err)
	}
	if _, err := s.Stat(ctx, "/fast"); !errors.Is(err, object.ErrNotExist) {
		t.Fatalf("stat after remove: %v", err)
	}
}
