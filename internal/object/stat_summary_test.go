package object

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
)

// noAttrReader hides a node's AttrReader: a store over such nodes probes
// archives only, as before summaries were read.
type noAttrReader struct{ node.Node }

// largeStatCluster is smallLookupCluster's (8 local nodes, 4+2, small
// objects up to 20000 bytes, 2 spares) with an object of two blocks at
// /l, and the Info a store that reads no summaries gives of it.
func largeStatCluster(t *testing.T, mod func(*Options)) (*cluster, []*node.Faulty, *Info) {
	t.Helper()
	c, fs, _ := smallLookupCluster(t, mod)
	data := randBytes(rand.New(rand.NewPCG(seed(t), 74)), 50000)
	putHint(t, c.store, "/l", data, int64(len(data)))
	plain := make([]node.Node, len(fs))
	for i, f := range fs {
		plain[i] = noAttrReader{f}
	}
	want, err := c.storeOver(t, plain, nil).Stat(context.Background(), "/l")
	if err != nil {
		t.Fatal(err)
	}
	if want.Geometry.K != 4 || want.Archives != 6 {
		t.Fatalf("/l is %v with %d archives; want 4+2 with 6", want.Geometry, want.Archives)
	}
	return c, fs, want
}

// sameInfo fails t unless got describes what want does.
func sameInfo(t *testing.T, got, want *Info) {
	t.Helper()
	if got.Size != want.Size || !got.MTime.Equal(want.MTime) || got.Version != want.Version || got.Geometry != want.Geometry ||
		got.Adler32 != want.Adler32 || got.CRC32C != want.CRC32C || got.Archives != want.Archives || !slices.Equal(got.Placement, want.Placement) {
		t.Errorf("stat gave %+v; want %+v", got, want)
	}
}

// A stat of an object larger than one copy opens one archive, for the
// metadata, and reads every other node's summary: on a remote node one
// request each instead of an open, a read and a close.
func TestStatOfALargeObjectBySummaries(t *testing.T) {
	c, fs, want := largeStatCluster(t, nil)
	s, lc := countedStore(t, c, fs, nil)
	got, err := s.Stat(context.Background(), "/l")
	if err != nil {
		t.Fatal(err)
	}
	sameInfo(t, got, want)
	if o, a := lc.total(lc.opens), lc.total(lc.attrs); o != 1 || a != len(fs)-1 {
		t.Errorf("stat opened %d archives and read %d summaries; want 1 and %d", o, a, len(fs)-1)
	}
}

// wrapRanked returns fs as nodes, the one ranked i-th for path wrapped
// with rules.
func wrapRanked(c *cluster, fs []*node.Faulty, path string, i int, rules ...*node.Rule) []node.Node {
	id := c.store.rank(path)[i].ID()
	nodes := make([]node.Node, len(fs))
	for j, f := range fs {
		nodes[j] = f
		if f.ID() == id {
			nodes[j] = node.Wrap(f, rules...)
		}
	}
	return nodes
}

// putNewerBesideFirst writes a newer version of /l (60000 random bytes
// from stream) through nodes of which the one ranked first refuses its
// archive: the first lookup window then holds both versions. It returns
// the newer version's data.
func putNewerBesideFirst(t *testing.T, c *cluster, fs []*node.Faulty, stream uint64) []byte {
	t.Helper()
	nodes := wrapRanked(c, fs, "/l", 0, node.Inject(node.OpCreate, node.Fail(node.ErrNoSpace)))
	newer := randBytes(rand.New(rand.NewPCG(seed(t), stream)), 60000)
	putHint(t, c.storeOver(t, nodes, nil), "/l", newer, int64(len(newer)))
	return newer
}

// A newer version on nodes other than the first one's is not overlooked:
// the stat then probes, and describes the newer version.
func TestStatBySummariesSeesANewerVersion(t *testing.T) {
	c, fs, _ := largeStatCluster(t, func(o *Options) { o.Spares = 3 })
	newer := putNewerBesideFirst(t, c, fs, 75)
	s, lc := countedStore(t, c, fs, nil)
	got, err := s.Stat(context.Background(), "/l")
	if err != nil {
		t.Fatal(err)
	}
	if got.Size != int64(len(newer)) {
		t.Errorf("stat gave %d bytes, version %s; want the newer version's %d", got.Size, got.Version, len(newer))
	}
	if lc.total(lc.opens) < 2 {
		t.Errorf("stat opened %d archives: the newer version was not probed", lc.total(lc.opens))
	}
}

// A node outside the first window that cannot give its summary leaves
// the stat to the probes, which describe the object as before.
func TestStatBySummariesWithAFailingNode(t *testing.T) {
	c, fs, want := largeStatCluster(t, nil)
	nodes := wrapRanked(c, fs, "/l", len(fs)-1, node.Inject(node.OpReadAttrs, node.Fail(nil)))
	got, err := c.storeOver(t, nodes, nil).Stat(context.Background(), "/l")
	if err != nil {
		t.Fatal(err)
	}
	sameInfo(t, got, want)
}

// A stat by summaries asks the nodes locate would probe (its first two
// windows), not every node of a larger cluster; with a slot missing
// there it leaves the lookup to the probes, which describe the object.
func TestStatBySummariesStaysInTheProbeWindows(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 4096}
	c, fs := faultyCluster(t, 12, g, func(o *Options) { o.SmallObjectSize = 20000; o.Spares = 2 })
	data := randBytes(rand.New(rand.NewPCG(seed(t), 76)), 50000)
	putHint(t, c.store, "/l", data, int64(len(data)))
	s, lc := countedStore(t, c, fs, nil)
	windows := s.probeWindows(len(fs))
	if len(windows) != 3 || windows[1] != 8 {
		t.Fatalf("probe windows %v; want 3 of them, the second of 8 nodes", windows)
	}
	got, err := s.Stat(context.Background(), "/l")
	if err != nil {
		t.Fatal(err)
	}
	if got.Size != int64(len(data)) || got.Archives != 6 {
		t.Errorf("stat gave %d bytes and %d archives; want %d and 6", got.Size, got.Archives, len(data))
	}
	if o, a := lc.total(lc.opens), lc.total(lc.attrs); o != 1 || a != windows[1]-1 {
		t.Errorf("stat opened %d archives and read %d summaries; want 1 and %d", o, a, windows[1]-1)
	}
	// One archive gone: the probes find the other five.
	i := c.slotNode(t, "/l", 5)
	if err := os.Remove(filepath.Join(c.dirs[i], "l")); err != nil {
		t.Fatal(err)
	}
	got, err = s.Stat(context.Background(), "/l")
	if err != nil || got.Archives != 5 {
		t.Fatalf("stat with slot 5 gone: %v archives, %v; want 5", got, err)
	}
}
