package repair

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	s, fs := c.Faulty(t, g)
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

// truncate cuts the file at path to half its size.
func truncate(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
}

// Regression: an object removed while the node holding a damaged
// (unparseable) archive of it was down. Once the node is back, the damaged
// file is a remnant of a removed object, not an unrecoverable object:
// repair removes it and collects the tombstone. With another node down
// too, holding a whole archive (fault schedule, seed 354797225951167344),
// Inspect listed only the whole remnant, so one repair left the damaged
// file and the next check was not clean.
func TestRemoveLeavesDamagedRemnant(t *testing.T) {
	for _, down := range [][]int{{2}, {2, 4}} {
		t.Run(fmt.Sprintf("down=%v", down), func(t *testing.T) {
			ctx := context.Background()
			g := layout.Geometry{K: 4, M: 2, ChunkSize: 256}
			s, fs, c := faultyStore(t, 6, g)
			put(t, s, "/r/x", bytes.Repeat([]byte("doomed "), 500))
			truncate(t, c.Archive(2, "/r/x"))
			for _, i := range down {
				fs[i].SetDown(true)
			}
			if err := s.Remove(ctx, "/r/x"); err != nil {
				t.Fatalf("remove with nodes %v down: %v", down, err)
			}
			for _, i := range down {
				fs[i].SetDown(false)
			}
			if _, err := s.Open(ctx, "/r/x"); !errors.Is(err, object.ErrNotExist) {
				t.Fatalf("open after the nodes returned: %v, want not exist", err)
			}
			in, err := s.Inspect(ctx, "/r/x", false)
			if err != nil || in.Health != object.Removed || len(in.Stale) != len(down) {
				t.Fatalf("inspect: %+v, %v; want removed with %d remnants", in, err, len(down))
			}
			rep, err := Check(ctx, s, CheckOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Clean() || rep.Count(object.Removed) != 1 || rep.Count(object.Unrecoverable) != 0 {
				t.Fatalf("check: clean %v, removed %d, unrecoverable %d", rep.Clean(), rep.Count(object.Removed), rep.Count(object.Unrecoverable))
			}
			rr, err := Repair(ctx, s, RepairOptions{RemoveDebris: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(rr.Failed()) != 0 || rr.DebrisRemoved != len(down) || rr.TombstonesCollected != 1 {
				t.Fatalf("repair: failed %v, removed %d debris, collected %d tombstones", rr.Failed(), rr.DebrisRemoved, rr.TombstonesCollected)
			}
			mustCheckClean(t, s, true)
			for _, i := range down {
				if _, err := os.Stat(c.Archive(i, "/r/x")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("remnant on node %d still there: %v", i, err)
				}
			}
		})
	}
}

// Without a tombstone, a lone damaged file is kept as evidence and the
// object reported unrecoverable.
func TestLoneDamagedArchiveIsKept(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 256}
	s, _, c := faultyStore(t, 6, g)
	put(t, s, "/l/x", bytes.Repeat([]byte("lone "), 500))
	for i := range 6 {
		if i == 3 {
			truncate(t, c.Archive(i, "/l/x"))
		} else if err := os.Remove(c.Archive(i, "/l/x")); err != nil {
			t.Fatal(err)
		}
	}
	rr, err := Repair(ctx, s, RepairOptions{RemoveDebris: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rr.Failed()) != 1 || rr.DebrisRemoved != 0 {
		t.Fatalf("repair: failed %v, removed %d", rr.Failed(), rr.DebrisRemoved)
	}
	if _, err := os.Stat(c.Archive(3, "/l/x")); err != nil {
		t.Fatalf("evidence removed: %v", err)
	}
}

// Regression: a node returns with a damaged archive of a slot that was
// rebuilt elsewhere while it was down. Repair removes the damaged file, so
// a repair that succeeds is followed by a clean check.
func TestDamagedArchiveAfterRebuild(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 256}
	s, fs, c := faultyStore(t, 8, g)
	data := bytes.Repeat([]byte("rebuilt "), 700)
	put(t, s, "/u/x", data)
	info, err := s.Stat(ctx, "/u/x")
	if err != nil {
		t.Fatal(err)
	}
	v := -1
	for i, f := range fs {
		if f.ID() == info.Placement[1] {
			v = i
		}
	}
	truncate(t, c.Archive(v, "/u/x"))
	fs[v].SetDown(true)
	rr, err := Repair(ctx, s, RepairOptions{RemoveDebris: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rr.Failed()) != 0 || rr.Bytes == 0 {
		t.Fatalf("repair with the node down: failed %v, rebuilt %d bytes", rr.Failed(), rr.Bytes)
	}
	fs[v].SetDown(false)
	if got, err := get(s, "/u/x"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read with the damaged archive back: %d bytes, %v", len(got), err)
	}
	rep, err := Check(ctx, s, CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Clean() {
		t.Fatal("check does not report the damaged archive")
	}
	rr, err = Repair(ctx, s, RepairOptions{RemoveDebris: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rr.Failed()) != 0 || rr.DebrisRemoved != 1 {
		t.Fatalf("second repair: failed %v, removed %d", rr.Failed(), rr.DebrisRemoved)
	}
	mustCheckClean(t, s, true)
}
