package object

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
)

// listsNoAttrs is a node whose listings carry no attributes, as a remote
// node's kXR_dirlist, while it reads them by path (ReadAttrs). listed, if
// set, runs after each listing.
type listsNoAttrs struct {
	*node.Faulty
	listed func()
}

func (n listsNoAttrs) List(ctx context.Context, dir string) ([]node.FileInfo, error) {
	fis, err := n.Faulty.List(ctx, dir)
	for i := range fis {
		fis[i].Attrs = nil
	}
	if n.listed != nil {
		n.listed()
	}
	return fis, err
}

// listCluster is 8 local nodes (4+2, small objects up to 20000 bytes)
// holding small and large objects under /d, and a store over them that
// lists no attributes and counts opens and summary reads. rules adds
// rules to the nodes, by index, before the counting ones (the first rule
// that matches a call acts); listed(i), if set, runs after each
// listing of node i.
func listCluster(t *testing.T, rules map[int][]*node.Rule, listed func(c *cluster, i int), mod func(*Options)) (*cluster, *Store, lookupCounters, map[string][]byte) {
	t.Helper()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 4096}
	c, fs := faultyCluster(t, 8, g, func(o *Options) { o.SmallObjectSize = 20000 })
	rnd := rand.New(rand.NewPCG(seed(t), 73))
	objects := map[string][]byte{}
	for i := range 6 {
		size := int64(3000)
		if i%2 == 1 {
			size = 50000 // two blocks of K chunks
		}
		p := fmt.Sprintf("/d/o%d", i)
		objects[p] = randBytes(rnd, size)
		putHint(t, c.store, p, objects[p], size)
	}
	var lc lookupCounters
	nodes := make([]node.Node, len(fs))
	for i, f := range fs {
		open, attrs := node.Inject(node.OpOpen, node.Delay(0)), node.Inject(node.OpReadAttrs, node.Delay(0))
		lc.opens, lc.attrs = append(lc.opens, open), append(lc.attrs, attrs)
		n := listsNoAttrs{Faulty: node.Wrap(f, append(rules[i], open, attrs)...)}
		if listed != nil {
			n.listed = func() { listed(c, i) }
		}
		nodes[i] = n
	}
	return c, c.storeOver(t, nodes, mod), lc, objects
}

// checkListing fails t unless infos describe exactly objects.
func checkListing(t *testing.T, infos []Info, objects map[string][]byte) {
	t.Helper()
	if len(infos) != len(objects) {
		t.Fatalf("listed %d entries; want %d", len(infos), len(objects))
	}
	for _, in := range infos {
		data, ok := objects[in.Path]
		if !ok || in.Size != int64(len(data)) || in.Version == "" {
			t.Errorf("listed %s of %d bytes, version %q; want one of the objects, of %d bytes", in.Path, in.Size, in.Version, len(data))
		}
	}
}

// wantSummariesOnly fails t unless the store counted by lc opened no
// archive and read one summary per archive of objects (held by c).
func wantSummariesOnly(t *testing.T, c *cluster, lc lookupCounters, objects map[string][]byte) {
	t.Helper()
	archives := 0
	for p := range objects {
		archives += len(c.archivesOf(p))
	}
	if o, a := lc.total(lc.opens), lc.total(lc.attrs); o != 0 || a != archives {
		t.Errorf("opened %d archives and read %d summaries; want none and %d", o, a, archives)
	}
}

// A listing on nodes whose listings carry no attributes reads the
// summaries by path: one request per archive, and no archive opened.
func TestListReadsSummariesOfRemoteNodes(t *testing.T) {
	c, s, lc, objects := listCluster(t, nil, nil, nil)
	infos, err := s.List(context.Background(), "/d")
	if err != nil {
		t.Fatal(err)
	}
	checkListing(t, infos, objects)
	wantSummariesOnly(t, c, lc, objects)
}

// A node whose summary reads fail, or hang, is asked no more by the
// listing (a hung one is marked suspect); the entries with an archive on
// it are stated, and the listing is still whole and right.
func TestListStatsWhenSummaryReadsFail(t *testing.T) {
	for _, tc := range []struct {
		name   string
		action node.Action
	}{{"fail", node.Fail(nil)}, {"hang", node.Hang()}} {
		t.Run(tc.name, func(t *testing.T) {
			bad := node.Inject(node.OpReadAttrs, tc.action)
			_, s, lc, objects := listCluster(t, map[int][]*node.Rule{3: {bad}}, nil,
				func(o *Options) { o.MetadataTimeout = 300 * time.Millisecond })
			start := time.Now()
			infos, err := s.List(context.Background(), "/d")
			if err != nil {
				t.Fatal(err)
			}
			checkListing(t, infos, objects)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("listing took %v", d)
			}
			if bad.Fired() == 0 {
				t.Fatal("node 3 was not asked for a summary")
			}
			if lc.total(lc.opens) == 0 {
				t.Error("no archive was opened: the entries on node 3 were not stated")
			}
			if id := s.nodes[3].ID(); tc.name == "hang" && !s.isSuspect(id) {
				t.Errorf("node %s hung on the listing's summary reads and is not suspect", id)
			}
		})
	}
}

// An object whose archives are all removed between the listing and the
// reads of their summaries is not listed (its entry is stated).
func TestListOfAnObjectRemovedMeanwhile(t *testing.T) {
	_, s, lc, objects := listCluster(t, nil, func(c *cluster, i int) {
		os.Remove(filepath.Join(c.dirs[i], "d", "o0"))
	}, nil)
	delete(objects, "/d/o0")
	infos, err := s.List(context.Background(), "/d")
	if err != nil {
		t.Fatal(err)
	}
	checkListing(t, infos, objects)
	if lc.total(lc.attrs) == 0 {
		t.Error("no summary was read")
	}
}

// ListNames reads nothing but the node listings; DescribeListed then
// reads the summaries of the archives of the objects named, and of no
// others, and describes them as List does.
func TestListNamesDescribesOnlyTheNamesAsked(t *testing.T) {
	c, s, lc, objects := listCluster(t, nil, nil, nil)
	ctx := context.Background()
	l, err := s.ListNames(ctx, "/d")
	if err != nil {
		t.Fatal(err)
	}
	entries := l.Entries()
	if len(entries) != len(objects) {
		t.Fatalf("ListNames: %d entries; want %d", len(entries), len(objects))
	}
	for _, e := range entries {
		if _, ok := objects[e.Path]; !ok || e.IsDir || e.Version != "" || e.Size != 0 {
			t.Errorf("ListNames entry %+v; want an object, not described", e)
		}
	}
	if o, a := lc.total(lc.opens), lc.total(lc.attrs); o != 0 || a != 0 {
		t.Fatalf("ListNames opened %d archives and read %d summaries; want none", o, a)
	}
	names := []string{"o4", "nothing-here", "o1"}
	got := s.DescribeListed(ctx, l, names)
	want, err := s.List(ctx, "/d")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "o4" || got[1].Name != "o1" {
		t.Fatalf("DescribeListed(%q) = %+v; want o4 and o1, in that order", names, got)
	}
	for _, g := range got {
		for _, w := range want {
			if w.Name == g.Name && (w.Size != g.Size || w.Version != g.Version || !w.MTime.Equal(g.MTime) || w.Archives != g.Archives) {
				t.Errorf("DescribeListed: %+v; List: %+v", g, w)
			}
		}
	}
	// The counts from before the List above.
	archives := len(c.archivesOf("/d/o4")) + len(c.archivesOf("/d/o1"))
	all := 0
	for p := range objects {
		all += len(c.archivesOf(p))
	}
	if a := lc.total(lc.attrs) - all; a != archives {
		t.Errorf("DescribeListed read %d summaries; want %d (the archives of o4 and o1)", a, archives)
	}
}

// Describe completes a listed entry from one archive of the listed
// version: the same Info as a Stat, for one open and no summary read.
// When the version was replaced or removed since the listing, it answers
// as a Stat does.
func TestDescribeReadsOneArchive(t *testing.T) {
	c, s, lc, objects := listCluster(t, nil, nil, nil)
	ctx := context.Background()
	infos, err := s.List(ctx, "/d")
	if err != nil {
		t.Fatal(err)
	}
	checkListing(t, infos, objects)
	for i := range infos {
		in := &infos[i]
		opens, attrs := lc.total(lc.opens), lc.total(lc.attrs)
		got, err := s.Describe(ctx, in)
		if err != nil {
			t.Fatalf("Describe %s: %v", in.Path, err)
		}
		if o, a := lc.total(lc.opens)-opens, lc.total(lc.attrs)-attrs; o != 1 || a != 0 {
			t.Errorf("Describe %s opened %d archives and read %d summaries; want 1 and none", in.Path, o, a)
		}
		want, err := s.Stat(ctx, in.Path)
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != want.Version || got.Size != want.Size || got.Adler32 != want.Adler32 || got.CRC32C != want.CRC32C ||
			fmt.Sprint(got.Placement) != fmt.Sprint(want.Placement) || got.Geometry != want.Geometry {
			t.Errorf("Describe %s = %+v; Stat: %+v", in.Path, got, want)
		}
	}

	// o2 overwritten and o3 removed after the listing.
	data := randBytes(rand.New(rand.NewPCG(seed(t), 74)), 4000)
	putHint(t, c.store, "/d/o2", data, int64(len(data)))
	if err := c.store.Remove(ctx, "/d/o3"); err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		got, err := s.Describe(ctx, &in)
		switch in.Name {
		case "o2":
			if err != nil || got.Size != int64(len(data)) || got.Version == in.Version {
				t.Errorf("Describe of the overwritten o2 = %+v, %v; want the new version, of %d bytes", got, err, len(data))
			}
		case "o3":
			if !errors.Is(err, ErrNotExist) {
				t.Errorf("Describe of the removed o3 = %+v, %v; want ErrNotExist", got, err)
			}
		}
	}
}

// relists is a node as an ecstore node is to the store: its name
// listings carry no attributes, its full listings carry them all in one
// request (node.AttrsLister); lists counts the full listings.
type relists struct {
	*node.Faulty
	lists *atomic.Int32
}

func (n relists) List(ctx context.Context, dir string) ([]node.FileInfo, error) {
	n.lists.Add(1)
	return n.Faulty.List(ctx, dir)
}

func (relists) ListsAttrs() bool { return true }

// Describing many of a directory's objects lists each node again with
// attributes, one request per node, instead of reading the summaries
// one by one; describing a few reads them one by one.
func TestDescribeListedRelistsForMany(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 4096}
	c, fs := faultyCluster(t, 8, g, func(o *Options) { o.SmallObjectSize = 20000 })
	rnd := rand.New(rand.NewPCG(seed(t), 75))
	var names []string
	for i := range 40 {
		name := fmt.Sprintf("o%02d", i)
		data := randBytes(rnd, 100)
		putHint(t, c.store, "/d/"+name, data, int64(len(data)))
		names = append(names, name)
	}
	var lists atomic.Int32
	var attrs []*node.Rule
	nodes := make([]node.Node, len(fs))
	for i, f := range fs {
		r := node.Inject(node.OpReadAttrs, node.Delay(0))
		attrs = append(attrs, r)
		nodes[i] = relists{Faulty: node.Wrap(f, r), lists: &lists}
	}
	reads := func() int {
		n := 0
		for _, r := range attrs {
			n += int(r.Fired())
		}
		return n
	}
	s := c.storeOver(t, nodes, nil)
	ctx := context.Background()

	l, err := s.ListNames(ctx, "/d")
	if err != nil {
		t.Fatal(err)
	}
	infos := s.DescribeListed(ctx, l, names)
	if len(infos) != len(names) {
		t.Fatalf("described %d objects; want %d", len(infos), len(names))
	}
	for _, in := range infos {
		if in.Size != 100 || in.Version == "" {
			t.Errorf("%s: %+v; want 100 bytes described by summaries", in.Name, in)
		}
	}
	if n, r := lists.Load(), reads(); n != int32(len(nodes)) || r != 0 {
		t.Errorf("describing every object listed %d nodes again and read %d summaries; want %d and none", n, r, len(nodes))
	}

	lists.Store(0)
	l, err = s.ListNames(ctx, "/d")
	if err != nil {
		t.Fatal(err)
	}
	if infos := s.DescribeListed(ctx, l, names[:1]); len(infos) != 1 || infos[0].Version == "" {
		t.Fatalf("DescribeListed(%s) = %+v", names[0], infos)
	}
	if n, r := lists.Load(), reads(); n != 0 || r != len(c.archivesOf("/d/"+names[0])) {
		t.Errorf("describing one object listed %d nodes again and read %d summaries; want none and %d", n, r, len(c.archivesOf("/d/"+names[0])))
	}
}

// listsNoAttrsAfterAll is a node that says it may list with attributes
// until it is asked to, as a plain xrootd before its first
// kXR_Unsupported: its full listings carry none.
type listsNoAttrsAfterAll struct {
	*node.Faulty
	asked *atomic.Bool
}

func (n listsNoAttrsAfterAll) List(ctx context.Context, dir string) ([]node.FileInfo, error) {
	n.asked.Store(true)
	return listsNoAttrs{Faulty: n.Faulty}.List(ctx, dir)
}

func (n listsNoAttrsAfterAll) ListsAttrs() bool { return !n.asked.Load() }

// describeAll lists dir by name on s and describes every entry.
func describeAll(t *testing.T, s *Store, dir string) []Info {
	t.Helper()
	ctx := context.Background()
	l, err := s.ListNames(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range l.Entries() {
		names = append(names, e.Name)
	}
	return s.DescribeListed(ctx, l, names)
}

// A node listed again that turns out to list without attributes has them
// read by path: every object is still described by its summaries.
func TestDescribeListedReadsWhenARelistHasNoAttrs(t *testing.T) {
	c, s, lc, objects := listCluster(t, nil, nil, nil)
	nodes := make([]node.Node, len(s.nodes))
	for i, n := range s.nodes {
		nodes[i] = listsNoAttrsAfterAll{Faulty: n.(listsNoAttrs).Faulty, asked: new(atomic.Bool)}
	}
	checkListing(t, describeAll(t, c.storeOver(t, nodes, nil), "/d"), objects)
	wantSummariesOnly(t, c, lc, objects)
	for i, n := range nodes {
		if n.(node.AttrsLister).ListsAttrs() {
			t.Errorf("node %d was not listed again", i)
		}
	}
}

// relistFails is a relists node whose listings with attributes fail at
// once (not a timeout).
type relistFails struct{ relists }

func (n relistFails) List(ctx context.Context, dir string) ([]node.FileInfo, error) {
	n.lists.Add(1)
	return nil, fmt.Errorf("list %s: connection reset", dir)
}

// A relisting that fails without a timeout falls back to reading the
// summaries by path: every object is still described by them.
func TestDescribeListedReadsWhenARelistFails(t *testing.T) {
	c, s, lc, objects := listCluster(t, nil, nil, nil)
	var lists atomic.Int32
	nodes := make([]node.Node, len(s.nodes))
	for i, n := range s.nodes {
		nodes[i] = relistFails{relists{Faulty: n.(listsNoAttrs).Faulty, lists: &lists}}
	}
	checkListing(t, describeAll(t, c.storeOver(t, nodes, nil), "/d"), objects)
	wantSummariesOnly(t, c, lc, objects)
	if lists.Load() == 0 {
		t.Error("no node was listed again")
	}
}
