package object

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/archive"
	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
)

// putHint writes data announcing hint as its size.
func putHint(t *testing.T, s *Store, path string, data []byte, hint int64) {
	t.Helper()
	w, err := s.Create(context.Background(), path, &CreateOptions{SizeHint: hint})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// Objects announced small are stored as 1+M: M+1 archives, any M of which
// may be lost, checked and rebuilt like any other object.
func TestSmallObjectsAreStoredOneplusM(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 4096}
	c := newCluster(t, 8, g, func(o *Options) { o.SmallObjectSize = 20000 })
	r := rand.New(rand.NewPCG(seed(t), 1))
	for _, size := range []int64{1, 4095, 4097, 20000} {
		data := randBytes(r, size)
		putHint(t, c.store, "/s", data, size)
		info, err := c.store.Stat(ctx, "/s")
		if err != nil {
			t.Fatal(err)
		}
		if info.Geometry.K != 1 || info.Geometry.M != 2 || len(info.Placement) != 3 {
			t.Fatalf("size %d: geometry %v placement %v, want 1+2 on 3 nodes", size, info.Geometry, info.Placement)
		}
		held := c.archivesOf("/s")
		if len(held) != 3 {
			t.Fatalf("size %d: archives on %v, want 3", size, held)
		}
		// Any two lost: still exact.
		for a := range held {
			for b := a + 1; b < len(held); b++ {
				hide := []string{held[a], held[b]}
				for _, f := range hide {
					os.Rename(f, f+".away")
				}
				got, err := get(c.store, "/s")
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("size %d without %v: %d bytes, %v", size, hide, len(got), err)
				}
				for _, f := range hide {
					os.Rename(f+".away", f)
				}
			}
		}
	}
	// Rebuild of a lost small archive, then a deep inspection is healthy.
	held := c.archivesOf("/s")
	os.Remove(held[0])
	in, err := c.store.Inspect(ctx, "/s", true)
	if err != nil || in.Health != Degraded {
		t.Fatalf("inspect after losing one of 3: %v %v", in, err)
	}
	for _, sl := range in.Slots {
		if sl.FoundOn == "" {
			if _, err := c.store.Rebuild(ctx, "/s", []int{sl.Slot}, RebuildOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if in, err := c.store.Inspect(ctx, "/s", true); err != nil || in.Health != Healthy {
		t.Fatalf("inspect after rebuild: %+v %v", in, err)
	}
	// Three lost: unrecoverable, as for any 1+2 object.
	for _, f := range c.archivesOf("/s") {
		os.Remove(f)
	}
	if _, err := get(c.store, "/s"); err == nil || !errors.Is(err, ErrNotExist) {
		t.Fatalf("get with every archive gone: %v", err)
	}
}

// A hint that understates the size costs space, never data; a hint above
// the threshold or none gives the store's geometry.
func TestSmallObjectHintIsOnlyAHint(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 4096}
	c := newCluster(t, 8, g, func(o *Options) { o.SmallObjectSize = 20000 })
	r := rand.New(rand.NewPCG(seed(t), 2))
	big := randBytes(r, 5*g.BlockSize()+3)
	putHint(t, c.store, "/lie", big, 100)
	if got, err := get(c.store, "/lie"); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("object larger than its hint: %d bytes, %v", len(got), err)
	}
	for _, hint := range []int64{0, 20001} {
		putHint(t, c.store, "/x", []byte("tiny"), hint)
		if info, _ := c.store.Stat(ctx, "/x"); info.Geometry != g {
			t.Fatalf("hint %d: geometry %v, want %v", hint, info.Geometry, g)
		}
	}
	off := newCluster(t, 8, g, func(o *Options) { o.SmallObjectSize = -1 })
	putHint(t, off.store, "/x", []byte("tiny"), 4)
	if info, _ := off.store.Stat(ctx, "/x"); info.Geometry != g {
		t.Fatalf("small path disabled: geometry %v", info.Geometry)
	}
}

func TestQuorumFollowsGeometry(t *testing.T) {
	g := layout.Geometry{K: 8, M: 2, ChunkSize: 4096}
	for _, tc := range []struct {
		quorum int
		small  layout.Geometry
		want   int
	}{
		{9, layout.Geometry{K: 1, M: 2}, 2},
		{10, layout.Geometry{K: 1, M: 2}, 3},
		{8, layout.Geometry{K: 1, M: 2}, 1},
		{9, layout.Geometry{K: 1, M: 0}, 1},
		{9, g, 9},
	} {
		s := &Store{opts: Options{Geometry: g, WriteQuorum: tc.quorum}}
		if got := s.quorum(tc.small); got != tc.want {
			t.Errorf("quorum %d of %v: %d for %v, want %d", tc.quorum, g, got, tc.small, tc.want)
		}
	}
}

// A small object (1+M) removed while M of its nodes are down leaves up to
// M whole-object archives behind. Each alone is readable (K = 1), so the
// tombstones must hide them: after the nodes return, the object is gone
// for Open, Stat, List and Inspect (which calls the remnants debris).
// Regression test for fault-suite seed 1795319577529703400.
func TestRemovedSmallObjectStaysRemoved(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 4096}
	c, faulty := faultyCluster(t, 8, g, func(o *Options) { o.SmallObjectSize = 20000 })
	data := randBytes(rand.New(rand.NewPCG(seed(t), 2)), 5000)
	putHint(t, c.store, "/d/s", data, int64(len(data)))
	putHint(t, c.store, "/d/keep", data, int64(len(data)))
	down := []int{c.slotNode(t, "/d/s", 0), c.slotNode(t, "/d/s", 1)}
	for _, i := range down {
		faulty[i].SetDown(true)
	}
	if err := c.store.Remove(ctx, "/d/s"); err != nil {
		t.Fatalf("remove with two of its nodes down: %v", err)
	}
	for _, i := range down {
		faulty[i].SetDown(false)
	}
	if n := len(c.archivesOf("/d/s")); n == 0 {
		t.Fatal("no remnants on the returned nodes: the test tests nothing")
	}
	if _, err := get(c.store, "/d/s"); !errors.Is(err, ErrNotExist) {
		t.Errorf("open of the removed object: %v, want ErrNotExist", err)
	}
	if _, err := c.store.Stat(ctx, "/d/s"); !errors.Is(err, ErrNotExist) {
		t.Errorf("stat of the removed object: %v, want ErrNotExist", err)
	}
	infos, err := c.store.List(ctx, "/d")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Name != "keep" {
		t.Errorf("list /d: %v, want only keep", infos)
	}
	in, err := c.store.Inspect(ctx, "/d/s", false)
	if err != nil || in.Health != Removed {
		t.Errorf("inspect: %+v, %v; want removed", in, err)
	}
	// A new object at the path is readable again.
	putHint(t, c.store, "/d/s", data[:100], 100)
	if got, err := get(c.store, "/d/s"); err != nil || !bytes.Equal(got, data[:100]) {
		t.Errorf("rewritten object: %d bytes, %v", len(got), err)
	}
}

// Moving an older small object onto a newer one while a node is down
// leaves a tombstone for the replaced (newer) version at the destination.
// The moved object keeps its older version and is degraded (a node of
// its own was down too); it must stay visible, and fsck must not call it
// removed. Regression test for fault-suite seed 1795320206031874684.
func TestSmallObjectMovedOntoNewerStaysVisible(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 4096}
	c, faulty := faultyCluster(t, 8, g, func(o *Options) { o.SmallObjectSize = 20000 })
	r := rand.New(rand.NewPCG(seed(t), 3))
	src, dst := randBytes(r, 1035), randBytes(r, 3000)
	putHint(t, c.store, "/d/src", src, int64(len(src)))
	putHint(t, c.store, "/d/dst", dst, int64(len(dst)))
	down := c.slotNode(t, "/d/src", 2)
	faulty[down].SetDown(true)
	if err := c.store.Rename(ctx, "/d/src", "/d/dst"); err != nil {
		t.Fatalf("mv with a node down: %v", err)
	}
	if got, err := get(c.store, "/d/dst"); err != nil || !bytes.Equal(got, src) {
		t.Fatalf("moved object: %d bytes, %v", len(got), err)
	}
	infos, err := c.store.List(ctx, "/d")
	if err != nil || len(infos) != 1 || infos[0].Name != "dst" {
		t.Fatalf("list /d: %v, %v; want dst", infos, err)
	}
	if in, err := c.store.Inspect(ctx, "/d/dst", false); err != nil || in.Health == Removed {
		t.Fatalf("inspect: %+v, %v", in, err)
	}
}

// Moving a large object onto a small one while a node holding the small
// one is down: when that node returns, its archive of the replaced small
// object (readable alone, and newer) is debris hidden by the tombstone;
// the moved object is the one to read, list and keep. Regression test for
// fault-suite seed 1795321216969545084.
func TestLargeObjectMovedOntoSmallOne(t *testing.T) {
	ctx := context.Background()
	c, big := moveLargeOntoSmallWithANodeDown(t, 4, 1519)
	if got, err := get(c.store, "/d/x"); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("moved object: %d bytes, %v", len(got), err)
	}
	infos, err := c.store.List(ctx, "/d")
	if err != nil || len(infos) != 1 || infos[0].Name != "x" || infos[0].Size != int64(len(big)) {
		t.Fatalf("list /d: %v, %v; want x of %d bytes", infos, err, len(big))
	}
	in, err := c.store.Inspect(ctx, "/d/x", false)
	if err != nil || in.Health == Removed || in.Info == nil || in.Info.Size != int64(len(big)) {
		t.Fatalf("inspect: %+v, %v", in, err)
	}
	if len(in.Stale) == 0 {
		t.Errorf("inspect reports no stale archive: the returned node's copy of the replaced object is debris")
	}
}

// Then moving that object on: the returned node's archive of the
// replaced small object (newer than the moved one, hidden at its path by
// the tombstone) must not move with it, where no tombstone hides it: it
// outranked the moved object there and was listed in its place.
// Regression test for fault-suite seed 490096290556648841 ("xrdfs ls -l
// /d0 lists /d0/o02 with size 2403, the model says c3(2883633 bytes)").
func TestObjectMovedOnLeavesTheReplacedCopyBehind(t *testing.T) {
	ctx := context.Background()
	c, big := moveLargeOntoSmallWithANodeDown(t, 6, 2403)
	if err := c.store.Rename(ctx, "/d/x", "/d/y"); err != nil {
		t.Fatalf("mv on: %v", err)
	}
	if got, err := get(c.store, "/d/y"); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("moved object: %d bytes, %v; want the %d moved", len(got), err, len(big))
	}
	if info, err := c.store.Stat(ctx, "/d/y"); err != nil || info.Size != int64(len(big)) {
		t.Fatalf("stat of the moved object: %+v, %v", info, err)
	}
	infos, err := c.store.List(ctx, "/d")
	if err != nil || len(infos) != 1 || infos[0].Name != "y" || infos[0].Size != int64(len(big)) {
		t.Fatalf("list /d: %+v, %v; want y of %d bytes", infos, err, len(big))
	}
	if _, err := c.store.Stat(ctx, "/d/x"); !errors.Is(err, ErrNotExist) {
		t.Errorf("stat of the old name: %v, want ErrNotExist", err)
	}
}

// moveLargeOntoSmallWithANodeDown puts a 50000-byte object at /d/big and
// a small one of smallSize bytes at /d/x, and moves the first onto the
// second while a node holding the small one is down, which then returns
// with its copy. It returns the cluster and the moved object's bytes.
func moveLargeOntoSmallWithANodeDown(t *testing.T, stream uint64, smallSize int64) (*cluster, []byte) {
	t.Helper()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 4096}
	c, faulty := faultyCluster(t, 8, g, func(o *Options) { o.SmallObjectSize = 20000 })
	r := rand.New(rand.NewPCG(seed(t), stream))
	big, small := randBytes(r, 50000), randBytes(r, smallSize)
	putHint(t, c.store, "/d/big", big, int64(len(big)))
	putHint(t, c.store, "/d/x", small, int64(len(small)))
	down := c.slotNode(t, "/d/x", 1)
	faulty[down].SetDown(true)
	if err := c.store.Rename(context.Background(), "/d/big", "/d/x"); err != nil {
		t.Fatalf("mv with a node down: %v", err)
	}
	faulty[down].SetDown(false)
	return c, big
}

// A small object overwritten while one of its nodes is down keeps its
// archive there; when the newer object is then removed (that node still
// down), the tombstone hides that older archive too once the node
// returns: it must not bring the overwritten object back. Regression
// test for fault-suite seed 1795623710602695647 ("xrdfs ls lists /d0/o07
// (size 2902), which the model says is absent").
func TestOverwrittenSmallObjectStaysRemoved(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 4096}
	c, faulty := faultyCluster(t, 8, g, func(o *Options) { o.SmallObjectSize = 20000 })
	r := rand.New(rand.NewPCG(seed(t), 5))
	small, large := randBytes(r, 2902), randBytes(r, 50000)
	putHint(t, c.store, "/d/p", small, int64(len(small)))
	down := c.slotNode(t, "/d/p", 0)
	faulty[down].SetDown(true)
	putHint(t, c.store, "/d/p", large, int64(len(large)))
	if err := c.store.Remove(ctx, "/d/p"); err != nil {
		t.Fatalf("remove with a node down: %v", err)
	}
	faulty[down].SetDown(false)
	if n := len(c.archivesOf("/d/p")); n == 0 {
		t.Fatal("no remnant on the returned node: the test tests nothing")
	}
	if got, err := get(c.store, "/d/p"); !errors.Is(err, ErrNotExist) {
		t.Errorf("open of the removed object: %d bytes, %v; want ErrNotExist", len(got), err)
	}
	if _, err := c.store.Stat(ctx, "/d/p"); !errors.Is(err, ErrNotExist) {
		t.Errorf("stat of the removed object: %v, want ErrNotExist", err)
	}
	if infos, err := c.store.List(ctx, "/d"); err != nil || len(infos) != 0 {
		t.Errorf("list /d: %v, %v; want nothing", infos, err)
	}
	if in, err := c.store.Inspect(ctx, "/d/p", false); err != nil || in.Health != Removed {
		t.Errorf("inspect: %+v, %v; want removed", in, err)
	}
}

// A tombstone records the newest removed version and, after an mv onto the
// path, the moved version, which it does not hide; removing again drops
// the exception but never lowers the removed version.
func TestTombstoneRecordsTheMovedVersion(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 4, layout.Geometry{K: 2, M: 1, ChunkSize: 4096})
	now := time.Now()
	older, moved, removed, newer := archive.NewVersion(now), archive.NewVersion(now.Add(time.Second)),
		archive.NewVersion(now.Add(2*time.Second)), archive.NewVersion(now.Add(3*time.Second))
	if n := c.store.writeTombstones(ctx, "/x", removed); n != 4 {
		t.Fatalf("%d nodes recorded the removal", n)
	}
	if !c.store.noteMoved(ctx, "/x", moved) {
		t.Fatal("the move was not recorded")
	}
	for _, n := range c.nodes {
		if got, err := readTombstone(ctx, n, "/x"); err != nil || got != (tombstone{upTo: removed, moved: moved, gen: 2}) {
			t.Fatalf("node %s: tombstone %+v, %v", n.ID(), got, err)
		}
	}
	tomb := c.store.tombstoneOf(ctx, "/x")
	for v, want := range map[archive.Version]bool{older: true, moved: false, removed: true, newer: false} {
		if got := tomb.hides(v); got != want {
			t.Errorf("hides(%s) = %v, want %v", v, got, want)
		}
	}
	// Removing the moved object: no exception, the removed version kept.
	c.store.writeTombstones(ctx, "/x", moved)
	if got := c.store.tombstoneOf(ctx, "/x"); got != (tombstone{upTo: removed, gen: 3}) {
		t.Errorf("after removing the moved version: %+v, want up to %s only", got, removed)
	}
}

// FuzzParseTombstone: any bytes a node serves as a tombstone either parse
// into what encodes back to them (trimmed) or are refused; never a panic.
func FuzzParseTombstone(f *testing.F) {
	v1, v2 := archive.NewVersion(time.Unix(1, 0)), archive.NewVersion(time.Unix(2, 0))
	for _, seed := range []string{string(v1) + "\n", string(v2) + "\nmoved " + string(v1) + "\n", "", "\n\n", "moved " + string(v1), string(v1) + "\nmoved x\n", "x",
		string(v2) + "\nmoved " + string(v1) + "\ngen 7\n", string(v1) + "\ngen 1\n", string(v1) + "\ngen 0\n", string(v1) + "\ngen 01\n", string(v1) + "\ngen 2\nmoved " + string(v1) + "\n",
		string(tombstone{upTo: v2, moved: v1, gen: 3}.encode()), string(v1) + "\ncrc32c 00000000\n", string(v1) + "\ncrc32c zz\n", "\ncrc32c 00000000"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tomb, ok := parseTombstone(b)
		if !ok {
			return
		}
		again, ok := parseTombstone(tomb.encode())
		if !ok || again != tomb {
			t.Fatalf("%q parsed as %+v, which encodes to %q, parsed as %+v", b, tomb, tomb.encode(), again)
		}
	})
}

// Regression (fault schedule, config=nodes, seed 1795639205542168412):
// an object moved onto a path with tombstones, then removed while a node
// was down, came back when the node did. The node kept the tombstone
// that excepted the moved version, the others had it rewritten without
// the exception but with the same removed version, and merging the two
// kept the exception: the node's archive of the removed object was
// listed (as unrecoverable) instead of hidden.
func TestRemovedMovedObjectStaysRemovedWhenANodeReturns(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 4096}
	c, fs := faultyCluster(t, 6, g)
	rng := rand.New(rand.NewPCG(seed(t), 31))
	put(t, c.store, "/a", randBytes(rng, 3000)) // the older version, moved later
	put(t, c.store, "/b", randBytes(rng, 3000))
	fs[5].SetDown(true)
	if err := c.store.Remove(ctx, "/b"); err != nil { // tombstones on nodes 0-4
		t.Fatal(err)
	}
	fs[5].SetDown(false)
	if err := c.store.Rename(ctx, "/a", "/b"); err != nil { // excepted on every node
		t.Fatal(err)
	}
	if _, err := get(c.store, "/b"); err != nil {
		t.Fatalf("read of the moved object: %v", err)
	}
	fs[0].SetDown(true)
	if err := c.store.Remove(ctx, "/b"); err != nil {
		t.Fatal(err)
	}
	fs[0].SetDown(false) // with its archive of /b and its old tombstone
	if info, err := c.store.Stat(ctx, "/b"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("stat of the removed object once node 0 is back: %+v, %v", info, err)
	}
	if list, err := c.store.List(ctx, "/"); err != nil || len(list) != 0 {
		t.Fatalf("listing of / once node 0 is back: %+v, %v", list, err)
	}
}

// The latest tombstone is the one of the highest generation; records of
// one generation (concurrent writers, or files written before
// generations were kept) rank by removed, then moved version, so an
// exception recorded with the same removed version is kept, as before.
func TestTombstoneOrder(t *testing.T) {
	now := time.Now()
	v1, v2, v3 := archive.NewVersion(now), archive.NewVersion(now.Add(time.Second)), archive.NewVersion(now.Add(2*time.Second))
	for _, tc := range []struct {
		later, earlier tombstone
	}{
		{tombstone{upTo: v2, gen: 3}, tombstone{upTo: v2, moved: v1, gen: 2}}, // a removal of the moved version
		{tombstone{upTo: v2, moved: v1, gen: 2}, tombstone{upTo: v2, gen: 1}}, // a move after a removal
		{tombstone{upTo: v3}, tombstone{upTo: v2, moved: v1}},
		{tombstone{upTo: v2, moved: v1}, tombstone{upTo: v2}},
		{tombstone{upTo: v1, gen: 1}, tombstone{upTo: v3}},
	} {
		if !tc.later.after(tc.earlier) || tc.earlier.after(tc.later) {
			t.Errorf("%+v should come after %+v", tc.later, tc.earlier)
		}
	}
}

// A write announced smaller than a block fills a buffer of about the
// announced size, not of a block (a small object's put held a megabyte
// block and two megabyte copies), and still takes any amount of data:
// the buffer grows to a block when the announcement falls short, through
// Write and ReadFrom alike.
func TestWriteBufferFollowsSizeHint(t *testing.T) {
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 64 << 10}
	c := newCluster(t, 5, g, func(o *Options) { o.SmallObjectSize = -1 })
	r := rand.New(rand.NewPCG(seed(t), 2))
	bs := g.BlockSize()
	for _, tc := range []struct{ hint, size int64 }{
		{1000, 1000}, {1000, 999}, {1000, 1001}, {1000, 1002}, {1000, 1003}, {1000, 5000},
		{1000, bs}, {1000, bs + 1}, {1000, 3*bs + 7}, {bs - 1, bs - 1}, {bs - 1, bs}, {bs - 2, bs + 5},
		{1, 0}, {1, 1}, {1, 2},
	} {
		data := randBytes(r, tc.size)
		for _, readFrom := range []bool{false, true} {
			ctx := context.Background()
			w, err := c.store.Create(ctx, "/h", &CreateOptions{SizeHint: tc.hint})
			if err != nil {
				t.Fatal(err)
			}
			if readFrom {
				_, err = w.ReadFrom(&smallReads{data: data, step: 777})
			} else {
				for p := data; len(p) > 0 && err == nil; {
					n := min(len(p), 333)
					_, err = w.Write(p[:n])
					p = p[n:]
				}
			}
			if err != nil {
				t.Fatalf("hint %d, %d bytes, ReadFrom %v: write: %v", tc.hint, tc.size, readFrom, err)
			}
			if tc.size <= tc.hint && tc.hint < bs/2 && w.buf != nil && int64(cap(w.buf)) >= bs {
				t.Errorf("hint %d, %d bytes: a block's buffer (%d bytes) for an object announced smaller", tc.hint, tc.size, cap(w.buf))
			}
			if err := w.Close(); err != nil {
				t.Fatalf("hint %d, %d bytes, ReadFrom %v: close: %v", tc.hint, tc.size, readFrom, err)
			}
			got, err := get(c.store, "/h")
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("hint %d, %d bytes, ReadFrom %v: read back %d bytes (%v), equal %v", tc.hint, tc.size, readFrom, len(got), err, bytes.Equal(got, data))
			}
		}
	}
}

// smallReads hands out data step bytes at a time, then io.EOF.
type smallReads struct {
	data []byte
	step int
}

func (s *smallReads) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.data[:min(len(s.data), s.step)])
	s.data = s.data[n:]
	return n, nil
}

// A removal whose archives could not be removed where enough of them
// remain for the object to stay visible (tombstones hide M at most)
// fails; fewer are left to the tombstones. Found by review: Remove
// reported success with all three copies of a small object still there.
func TestRemoveFailsWhenTheObjectStaysVisible(t *testing.T) {
	for _, failing := range []int{1, 2, 3} {
		c, fs, _ := smallLookupCluster(t, nil)
		ctx := context.Background()
		putHint(t, c.store, "/t", randBytes(rand.New(rand.NewPCG(seed(t), 79)), 3000), 3000)
		info, err := c.store.Stat(ctx, "/t")
		if err != nil {
			t.Fatal(err)
		}
		holders := map[string]bool{}
		for _, id := range info.Placement[:failing] {
			holders[id] = true
		}
		nodes := make([]node.Node, len(fs))
		for i, f := range fs {
			nodes[i] = f
			if holders[f.ID()] {
				nodes[i] = node.Wrap(f, node.Inject(node.OpRemove, node.Fail(nil)).Path(func(p string) bool { return p == "/t" }))
			}
		}
		err = c.storeOver(t, nodes, nil).Remove(ctx, "/t")
		_, serr := c.storeOver(t, nodes, nil).Stat(ctx, "/t")
		visible := serr == nil
		if visible != (failing == 3) {
			t.Fatalf("%d removals failing: visible afterwards %v (%v)", failing, visible, serr)
		}
		if (err != nil) != visible {
			t.Errorf("%d removals failing: Remove said %v, and the object is visible: %v", failing, err, visible)
		}
	}
}
