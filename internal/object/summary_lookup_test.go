package object

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
	"golang.org/x/sys/unix"
)

// lookupCounters counts the opens and summary reads of every node of a
// store.
type lookupCounters struct{ opens, attrs []*node.Rule }

func (c lookupCounters) total(rules []*node.Rule) int {
	n := 0
	for _, r := range rules {
		n += int(r.Fired())
	}
	return n
}

// countedStore returns a store over the nodes of c (Faulty, from
// faultyCluster) that counts their opens and summary reads.
func countedStore(t *testing.T, c *cluster, fs []*node.Faulty, mod func(*Options)) (*Store, lookupCounters) {
	t.Helper()
	var lc lookupCounters
	nodes := make([]node.Node, len(fs))
	for i := range fs {
		open, attrs := node.Inject(node.OpOpen, node.Delay(0)), node.Inject(node.OpReadAttrs, node.Delay(0))
		lc.opens, lc.attrs = append(lc.opens, open), append(lc.attrs, attrs)
		nodes[i] = node.Wrap(fs[i], open, attrs)
	}
	return c.storeOver(t, nodes, mod), lc
}

// smallLookupCluster is 8 local nodes (4+2, small objects up to 20000
// bytes, 2 spares: the first lookup window is 5 nodes) with a small
// object at /s.
func smallLookupCluster(t *testing.T, mod func(*Options)) (*cluster, []*node.Faulty, []byte) {
	t.Helper()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 4096}
	c, fs := faultyCluster(t, 8, g, func(o *Options) {
		o.SmallObjectSize = 20000
		if mod != nil {
			mod(o)
		}
	})
	data := randBytes(rand.New(rand.NewPCG(seed(t), 71)), 3000)
	putHint(t, c.store, "/s", data, int64(len(data)))
	return c, fs, data
}

// A small object is found by opening one archive and reading the others'
// summaries: one request per node on remote nodes instead of three (an
// open, a read, a close). Its other copies are opened only if a read
// needs them.
func TestSmallObjectIsLocatedBySummaries(t *testing.T) {
	c, fs, data := smallLookupCluster(t, nil)
	s, lc := countedStore(t, c, fs, nil)
	info, err := s.Stat(context.Background(), "/s")
	if err != nil {
		t.Fatal(err)
	}
	if info.Archives != 3 || info.Geometry.K != 1 || info.Size != int64(len(data)) {
		t.Errorf("stat: %d archives, geometry %v, size %d; want 3, 1+2, %d", info.Archives, info.Geometry, info.Size, len(data))
	}
	if o, a := lc.total(lc.opens), lc.total(lc.attrs); o != 1 || a != 4 {
		t.Errorf("stat opened %d archives and read %d summaries; want 1 and the 4 other nodes' of the window", o, a)
	}
	got, err := get(s, "/s")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get: %d bytes, %v", len(got), err)
	}
	if o := lc.total(lc.opens); o != 2 {
		t.Errorf("stat and get opened %d archives; want 2", o)
	}
}

// A copy known by its summary only serves the read when the copy opened
// is damaged: it is opened then.
func TestLazyCopyServesWhenTheFirstIsDamaged(t *testing.T) {
	var mu sync.Mutex
	var degraded [][]int
	c, fs, data := smallLookupCluster(t, nil)
	s, lc := countedStore(t, c, fs, func(o *Options) {
		o.Events.DegradedRead = func(_ string, _ int64, slots []int) {
			mu.Lock()
			degraded = append(degraded, slots)
			mu.Unlock()
		}
	})
	first := s.rank("/s")[0].ID()
	info, err := c.store.Stat(context.Background(), "/s")
	if err != nil {
		t.Fatal(err)
	}
	if info.Placement[0] != first {
		t.Fatalf("slot 0 on %s, not on the first node in rank order %s", info.Placement[0], first)
	}
	i := slices.IndexFunc(c.nodes, func(n node.Node) bool { return n.ID() == first })
	corrupt(t, filepath.Join(c.dirs[i], "s"), 1000)
	got, err := get(s, "/s")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get with the first copy damaged: %d bytes, %v", len(got), err)
	}
	// The failed read starts the other copies' (both, at once).
	if o, a := lc.total(lc.opens), lc.total(lc.attrs); o < 2 || o > 3 || a != 4 {
		t.Errorf("get opened %d archives and read %d summaries; want the damaged one and one or two more, and 4", o, a)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(degraded) != 1 || !slices.Equal(degraded[0], []int{0}) {
		t.Errorf("degraded reads %v; want one, of slot 0", degraded)
	}
}

// A copy known by its summary that is gone by the time the read needs it
// is missing, and another copy serves.
func TestLazyCopyGoneAnotherServes(t *testing.T) {
	c, fs, data := smallLookupCluster(t, nil)
	s, _ := countedStore(t, c, fs, nil)
	ctx := context.Background()
	r, err := s.Open(ctx, "/s")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if len(r.loc.lazy) != 2 {
		t.Fatalf("%d copies known by summary; want 2", len(r.loc.lazy))
	}
	// Damage the copy opened and remove one known by summary.
	first := r.loc.slots[0].node.ID()
	for i, n := range c.nodes {
		switch {
		case n.ID() == first:
			corrupt(t, filepath.Join(c.dirs[i], "s"), 1000)
		case n.ID() == r.loc.lazy[1].ID():
			if err := os.Remove(filepath.Join(c.dirs[i], "s")); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The damaged copy was read whole by the open: drop it, as if the
	// node had lost it meanwhile.
	r.loc.slots[0].file.Close()
	r.loc.slots[0] = nil
	got := make([]byte, len(data))
	if _, err := r.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read with one copy gone and one known by summary gone: %v", err)
	}
	if r.slotRef(2) == nil {
		t.Error("slot 2 was not opened, yet only it could serve")
	}
	// Slot 1's open may have been cut short by the read's end (slot 2
	// answered first); opened again it is found gone, and stays so.
	if _, err := r.openLazy(ctx, 1); !errors.Is(err, errMissing) || !r.lazyGone[1].Load() {
		t.Errorf("open of the removed copy: %v, marked gone %v; want errMissing and gone", err, r.lazyGone[1].Load())
	}
}

// A newer version that a write left on other nodes of the first window
// (the nodes of the older one being unavailable to it) is not overlooked
// by the lookup by summaries, even though the older version is whole.
func TestSummaryLookupSeesANewerVersion(t *testing.T) {
	c, fs, _ := smallLookupCluster(t, func(o *Options) { o.Spares = 3 })
	ranked := c.store.rank("/s")
	holders := map[string]bool{}
	for _, n := range ranked[:3] {
		holders[n.ID()] = true
	}
	// A store whose first three nodes in rank order refuse creates
	// writes the new version on the next three.
	nodes := make([]node.Node, len(fs))
	for i, f := range fs {
		nodes[i] = f
		if holders[f.ID()] {
			nodes[i] = node.Wrap(f, node.Inject(node.OpCreate, node.Fail(node.ErrNoSpace)))
		}
	}
	w := c.storeOver(t, nodes, nil)
	newer := randBytes(rand.New(rand.NewPCG(seed(t), 72)), 2000)
	putHint(t, w, "/s", newer, int64(len(newer)))
	s, lc := countedStore(t, c, fs, nil)
	got, err := get(s, "/s")
	if err != nil || !bytes.Equal(got, newer) {
		t.Fatalf("get: %d bytes (%v); want the newer version's %d", len(got), err, len(newer))
	}
	if lc.total(lc.attrs) == 0 {
		t.Error("no summary was read: the lookup by summaries was not tried")
	}
}

// Archives without a summary (written before it was kept, or on a node
// that keeps none) are found by probing them.
func TestSummaryLookupWithoutSummaries(t *testing.T) {
	c, fs, data := smallLookupCluster(t, nil)
	for _, p := range c.archivesOf("/s") {
		if err := unix.Removexattr(p, "user.ecstore"); err != nil {
			t.Skipf("removexattr: %v", err)
		}
	}
	s, lc := countedStore(t, c, fs, nil)
	got, err := get(s, "/s")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get: %d bytes, %v", len(got), err)
	}
	if o := lc.total(lc.opens); o < 3 {
		t.Errorf("%d archives opened; want every copy probed", o)
	}
}

// corrupt flips the byte at off of the file at p.
func corrupt(t *testing.T, p string, off int64) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// An object is removed by reading its archives' summaries, not the
// archives: with every archive removed, no tombstone is needed.
func TestRemoveBySummaryReadsNoArchive(t *testing.T) {
	c, fs, _ := smallLookupCluster(t, nil)
	large := randBytes(rand.New(rand.NewPCG(seed(t), 73)), 3*c.store.Geometry().BlockSize())
	put(t, c.store, "/l", large)
	s, lc := countedStore(t, c, fs, nil)
	ctx := context.Background()
	for _, p := range []string{"/s", "/l"} {
		opens, attrs := lc.total(lc.opens), lc.total(lc.attrs)
		if err := s.Remove(ctx, p); err != nil {
			t.Fatalf("remove %s: %v", p, err)
		}
		if o, a := lc.total(lc.opens)-opens, lc.total(lc.attrs)-attrs; o != 0 || a != len(fs) {
			t.Errorf("remove %s opened %d files and read %d summaries; want none and every node's", p, o, a)
		}
		if left := c.archivesOf(p); len(left) != 0 {
			t.Errorf("remove %s left %v", p, left)
		}
		if _, err := s.Stat(ctx, p); !errors.Is(err, ErrNotExist) {
			t.Errorf("stat of removed %s: %v; want ErrNotExist", p, err)
		}
		if left := c.archivesOf(tombstonePath(p)); len(left) != 0 {
			t.Errorf("remove %s wrote tombstones %v", p, left)
		}
	}
	opens := lc.total(lc.opens)
	if err := s.Remove(ctx, "/s"); !errors.Is(err, ErrNotExist) {
		t.Errorf("second remove: %v; want ErrNotExist", err)
	}
	if o := lc.total(lc.opens) - opens; o != 0 {
		t.Errorf("remove of a missing object opened %d files; want none", o)
	}
}

// An archive that cannot be removed is hidden by tombstones.
func TestRemoveBySummaryRecordsTombstonesWhenAnArchiveStays(t *testing.T) {
	c, fs, _ := smallLookupCluster(t, nil)
	ctx := context.Background()
	holder := c.store.rank("/s")[1].ID()
	nodes := make([]node.Node, len(fs))
	for i, f := range fs {
		nodes[i] = f
		if f.ID() == holder {
			nodes[i] = node.Wrap(f, node.Inject(node.OpRemove, node.Fail(errors.New("injected"))).Path(func(p string) bool { return p == "/s" }))
		}
	}
	s := c.storeOver(t, nodes, nil)
	if err := s.Remove(ctx, "/s"); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if left := c.archivesOf("/s"); len(left) != 1 {
		t.Errorf("archives left: %v; want the one that could not be removed", left)
	}
	if left := c.archivesOf(tombstonePath("/s")); len(left) < 3 {
		t.Errorf("tombstones %v; want at least M+1", left)
	}
	if _, err := get(s, "/s"); !errors.Is(err, ErrNotExist) {
		t.Errorf("read of the removed object: %v; want ErrNotExist", err)
	}
}

// A node that fails to answer an rm by summaries may hold archives:
// tombstones record the removal, as when Remove probes.
func TestRemoveBySummaryWithANodeDown(t *testing.T) {
	c, fs, _ := smallLookupCluster(t, nil)
	ctx := context.Background()
	holders := map[string]bool{}
	info, err := c.store.Stat(ctx, "/s")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range info.Placement {
		holders[id] = true
	}
	i := slices.IndexFunc(fs, func(f *node.Faulty) bool { return !holders[f.ID()] })
	fs[i].SetDown(true)
	s, lc := countedStore(t, c, fs, nil)
	if err := s.Remove(ctx, "/s"); err != nil {
		t.Fatalf("remove with a node down: %v", err)
	}
	if a := lc.total(lc.attrs); a != len(fs) {
		t.Errorf("remove read %d summaries; want every node's", a)
	}
	if left := c.archivesOf("/s"); len(left) != 0 {
		t.Errorf("archives left: %v", left)
	}
	if ts := c.archivesOf(tombstonePath("/s")); len(ts) < 3 {
		t.Errorf("tombstones on %d nodes; want at least M+1", len(ts))
	}
	fs[i].SetDown(false)
	if _, err := s.Stat(ctx, "/s"); !errors.Is(err, ErrNotExist) {
		t.Errorf("stat after rm: %v; want ErrNotExist", err)
	}
}

// A node that hangs when asked for a summary holds a lookup up for the
// window's patience, not longer.
func TestSummaryLookupGivesUpOnAHungSummary(t *testing.T) {
	hedge := 200 * time.Millisecond
	c, fs, data := smallLookupCluster(t, nil)
	second := c.store.rank("/s")[1].ID()
	nodes := make([]node.Node, len(fs))
	for i, f := range fs {
		nodes[i] = f
		if f.ID() == second {
			nodes[i] = node.Wrap(f, node.Inject(node.OpReadAttrs, node.Hang()))
		}
	}
	s := c.storeOver(t, nodes, func(o *Options) { o.HedgeDelay = hedge })
	start := time.Now()
	got, err := get(s, "/s")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get with a node hung on summaries: %d bytes, %v", len(got), err)
	}
	if d := time.Since(start); d > 2*hedge {
		t.Errorf("get took %v; want at most the window's patience (%v) and a probe", d, hedge)
	}
}

// A stat of a path that holds nothing (xrdcp makes one before every put)
// asks each node once: the nodes whose summary read found nothing are not
// probed again.
func TestStatOfAMissingPathAsksEachNodeOnce(t *testing.T) {
	c, fs, _ := smallLookupCluster(t, nil)
	s, lc := countedStore(t, c, fs, nil)
	if _, err := s.Stat(context.Background(), "/nothing"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("stat: %v; want ErrNotExist", err)
	}
	if o, a := lc.total(lc.opens), lc.total(lc.attrs); o+a != len(fs) || a == 0 {
		t.Errorf("%d opens and %d summary reads for %d nodes; want one request per node", o, a, len(fs))
	}
}
