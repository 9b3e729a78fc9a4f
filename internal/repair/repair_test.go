package repair

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/placement"
	"github.com/ecstore/ecstore/internal/testcluster"
)

func mustCheckClean(t *testing.T, s *object.Store, deep bool) {
	t.Helper()
	rep, err := Check(context.Background(), s, CheckOptions{Deep: deep, DebrisAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Clean() {
		for _, in := range rep.Objects {
			if in.Health != object.Healthy || len(in.Stale) > 0 {
				t.Errorf("%s: %v %v", in.Path, in.Health, in.Problems())
			}
		}
		t.Fatalf("check after repair is not clean (%d debris)", len(rep.Debris))
	}
}

// flipByte flips the bits of the byte at off in file f.
func flipByte(t *testing.T, f string, off int) {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x5a
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRepairRebuildsMissingAndCorrupt(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 512}
	c := testcluster.New(t, 8, g)
	r := rand.New(rand.NewPCG(3, 3))
	objs := map[string][]byte{}
	for i := range 6 {
		p := fmt.Sprintf("/r/o%d", i)
		objs[p] = testcluster.Rand(r, int64(i)*3*g.BlockSize()+int64(r.IntN(1000)))
		c.Put(t, p, objs[p])
	}
	stat := func(p string) *object.Info {
		info, err := c.Store.Stat(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	// Two archives gone from o1, one from o2, one corrupt chunk in o3.
	for _, sl := range []int{0, 5} {
		os.Remove(c.Archive(c.NodeIndex(stat("/r/o1").Placement[sl]), "/r/o1"))
	}
	os.Remove(c.Archive(c.NodeIndex(stat("/r/o2").Placement[3]), "/r/o2"))
	af := c.Archive(c.NodeIndex(stat("/r/o3").Placement[2]), "/r/o3")
	flipByte(t, af, 100) // inside the first chunk

	var events []RepairEvent
	rep, err := Repair(ctx, c.Store, RepairOptions{CheckOptions: CheckOptions{Deep: true, DebrisAge: -1}, RemoveDebris: true,
		Event: func(ev RepairEvent) { events = append(events, ev) }})
	if err != nil {
		t.Fatal(err)
	}
	if f := rep.Failed(); len(f) > 0 {
		t.Fatalf("failed: %+v", f)
	}
	if len(rep.Outcomes) != 3 || rep.Bytes == 0 {
		t.Fatalf("outcomes %+v, bytes %d", rep.Outcomes, rep.Bytes)
	}
	mustCheckClean(t, c.Store, true)
	for p, want := range objs {
		if got, err := c.Get(p); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s after repair: %v", p, err)
		}
	}
	// A second repair has nothing to do.
	rep2, err := Repair(ctx, c.Store, RepairOptions{CheckOptions: CheckOptions{Deep: true}})
	if err != nil || len(rep2.Outcomes) != 0 {
		t.Fatalf("second repair: %+v %v", rep2.Outcomes, err)
	}
}

func TestRepairMovesSlotOffDeadNode(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 1024}
	base := testcluster.New(t, 7, g)
	faulty := make([]*node.Faulty, len(base.Nodes))
	nodes := make([]node.Node, len(base.Nodes))
	for i, n := range base.Nodes {
		faulty[i] = node.Wrap(n)
		nodes[i] = faulty[i]
	}
	s, err := object.New(nodes, object.Options{Geometry: g, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	data := testcluster.Rand(rand.New(rand.NewPCG(4, 4)), 10*g.BlockSize()+3)
	w, _ := s.Create(ctx, "/dead", nil)
	w.Write(data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	info, _ := s.Stat(ctx, "/dead")
	dead := base.NodeIndex(info.Placement[1])
	faulty[dead].SetDown(true)
	rep, err := Repair(ctx, s, RepairOptions{CheckOptions: CheckOptions{DebrisAge: -1}})
	if err != nil {
		t.Fatal(err)
	}
	if f := rep.Failed(); len(f) > 0 || len(rep.Outcomes) != 1 {
		t.Fatalf("outcomes %+v", rep.Outcomes)
	}
	if to := rep.Outcomes[0].Rebuilt[1]; to == "" || to == info.Placement[1] {
		t.Fatalf("slot 1 rebuilt on %q (dead node %s)", to, info.Placement[1])
	}
	in, err := s.Inspect(ctx, "/dead", true)
	if err != nil || in.Health != object.Healthy {
		t.Fatalf("after repair with the node still down: %v %v", in.Health, err)
	}
	// The node comes back with its old archive: reads stay correct and a
	// repair removes the duplicate.
	faulty[dead].SetDown(false)
	if _, err := Repair(ctx, s, RepairOptions{CheckOptions: CheckOptions{DebrisAge: -1}, RemoveDebris: true}); err != nil {
		t.Fatal(err)
	}
	mustCheckClean(t, s, true)
}

// Another copy of a slot's archive (a rebuild's, left on a node other
// than the placement's) is kept while the object is degraded, for it may
// be what readers and the rebuild need: here the slot's own archive fails
// its checksum in block 0 and two other slots are lost, so block 0 is
// readable only with the copy. Before, repair removed the copy as a
// duplicate first, then failed to rebuild: the object was lost.
func TestRepairKeepsTheCopyOfASlotWhileDegraded(t *testing.T) {
	ctx := context.Background()
	c, data, info, _ := corruptSlotWithCopy(t, "/copy", 7)
	for _, id := range info.Placement[1:3] {
		if err := os.Remove(c.Archive(c.NodeIndex(id), "/copy")); err != nil {
			t.Fatal(err)
		}
	}
	for _, deep := range []bool{false, true} {
		rep, err := Repair(ctx, c.Store, RepairOptions{CheckOptions: CheckOptions{Deep: deep, DebrisAge: -1}, RemoveDebris: true})
		if err != nil {
			t.Fatal(err)
		}
		if f := rep.Failed(); len(f) > 0 {
			t.Fatalf("deep %v: repair failed: %+v", deep, f)
		}
		if got, err := c.Get("/copy"); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("after a repair (deep %v): %d bytes, %v", deep, len(got), err)
		}
	}
	mustCheckClean(t, c.Store, true)
}

// A shallow repair of an object that looks healthy does not remove the
// copy of a slot (a rebuild's) before a deep check: here the slot's own
// archive is silently corrupt and the copy is the intact one. The deep
// repair then rebuilds the slot, and only after that is the copy removed.
func TestRepairKeepsTheIntactCopyOfACorruptSlot(t *testing.T) {
	ctx := context.Background()
	c, data, _, copyPath := corruptSlotWithCopy(t, "/copy2", 8)
	if _, err := Repair(ctx, c.Store, RepairOptions{CheckOptions: CheckOptions{DebrisAge: -1}, RemoveDebris: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(copyPath); err != nil {
		t.Fatalf("a shallow repair removed the intact copy of a corrupt slot: %v", err)
	}
	rep, err := Repair(ctx, c.Store, RepairOptions{CheckOptions: CheckOptions{Deep: true, DebrisAge: -1}, RemoveDebris: true})
	if err != nil || len(rep.Failed()) > 0 {
		t.Fatalf("deep repair: %+v, %v", rep.Failed(), err)
	}
	if got, err := c.Get("/copy2"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after the deep repair: %d bytes, %v", len(got), err)
	}
	mustCheckClean(t, c.Store, true)
}

// corruptSlotWithCopy stores an object at path (4+2, 3 blocks and a bit,
// on 8 nodes), copies its slot 0 archive to a node outside the
// placement, as a rebuild would, and then flips a byte of slot 0's own
// archive in its chunk of block 0. It returns the cluster, the object's
// bytes and info, and the copy's file.
func corruptSlotWithCopy(t *testing.T, path string, seed uint64) (*testcluster.Cluster, []byte, *object.Info, string) {
	t.Helper()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 1024}
	c := testcluster.New(t, 8, g)
	data := testcluster.Rand(rand.New(rand.NewPCG(seed, seed)), 3*g.BlockSize()+5)
	c.Put(t, path, data)
	info, err := c.Store.Stat(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	free := -1
	for i, n := range c.Nodes {
		if !slices.Contains(info.Placement, n.ID()) {
			free = i
			break
		}
	}
	home := c.Archive(c.NodeIndex(info.Placement[0]), path)
	b, err := os.ReadFile(home)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := c.Archive(free, path)
	if err := os.WriteFile(copyPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	b[100] ^= 0xff // in slot 0's chunk of block 0
	if err := os.WriteFile(home, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return c, data, info, copyPath
}

func TestRepairNeverClaimsUnrecoverable(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 3, M: 1, ChunkSize: 256}
	c := testcluster.New(t, 5, g)
	c.Put(t, "/gone", bytes.Repeat([]byte("x"), 5000))
	info, _ := c.Store.Stat(ctx, "/gone")
	for _, id := range info.Placement[:2] {
		os.Remove(c.Archive(c.NodeIndex(id), "/gone"))
	}
	rep, err := Repair(ctx, c.Store, RepairOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := rep.Failed()
	if len(f) != 1 || f[0].Path != "/gone" || f[0].After != object.Unrecoverable {
		t.Fatalf("failed = %+v", f)
	}
}

// TestRandomCorruptionCampaign flips random single bytes across archives
// (chunks, metadata, directories alike), round after round: every read
// returns the right bytes or a clear error, deep fsck finds every damaged
// object, repair fixes them, and fsck is then clean.
func TestRandomCorruptionCampaign(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 300}
	c := testcluster.New(t, 7, g)
	r := rand.New(rand.NewPCG(11, 12))
	objs := map[string][]byte{}
	var paths []string
	for i := range 12 {
		p := fmt.Sprintf("/camp/o%02d", i)
		objs[p] = testcluster.Rand(r, int64(r.IntN(8000)))
		c.Put(t, p, objs[p])
		paths = append(paths, p)
	}
	rounds, flips := 15, 0
	if testing.Short() {
		rounds = 4
	}
	for round := range rounds {
		damaged := map[string]bool{}
		for _, p := range paths {
			info, err := c.Store.Stat(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			// One byte in one archive per object per round: never more
			// than M damaged archives at once.
			af := c.Archive(c.NodeIndex(info.Placement[r.IntN(g.Width())]), p)
			b, err := os.ReadFile(af)
			if err != nil {
				t.Fatal(err)
			}
			b[r.IntN(len(b))] ^= byte(1 + r.IntN(255))
			os.WriteFile(af, b, 0o644)
			flips++
			damaged[p] = true
		}
		for _, p := range paths {
			got, err := c.Get(p)
			if err != nil {
				t.Fatalf("round %d: %s: %v", round, p, err)
			}
			if !bytes.Equal(got, objs[p]) {
				t.Fatalf("round %d: %s: wrong bytes returned", round, p)
			}
		}
		rep, err := Repair(ctx, c.Store, RepairOptions{CheckOptions: CheckOptions{Deep: true, DebrisAge: -1}, RemoveDebris: true})
		if err != nil {
			t.Fatal(err)
		}
		if f := rep.Failed(); len(f) > 0 {
			t.Fatalf("round %d: repair failed: %+v", round, f)
		}
		// Every object whose flip hit a checked byte was found. (A flip in
		// an unused byte, such as the DOS time, changes nothing checked.)
		t.Logf("round %d: %d objects repaired, %d debris removed", round, len(rep.Outcomes), rep.DebrisRemoved)
		if len(rep.Outcomes) == 0 {
			t.Fatalf("round %d: %d flips and nothing found", round, len(damaged))
		}
		mustCheckClean(t, c.Store, true)
	}
	t.Logf("%d single-byte corruptions over %d rounds: all reads correct, all repaired", flips, rounds)
}

// A commit whose writer died between renames (archives of some slots in
// place, the others finished under temporary names) is completed by
// repair, not reported unrecoverable, and its temporary archives are not
// counted as debris.
func TestRepairCompletesInterruptedCommit(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 512}
	c := testcluster.New(t, 6, g)
	data := testcluster.Rand(rand.New(rand.NewPCG(5, 5)), 5*g.BlockSize()+7)
	c.Put(t, "/ic/o", data)
	// Three of six archives back under temporary names: fewer than K in
	// place.
	for i := range 3 {
		a := c.Archive(i, "/ic/o")
		tmp := filepath.Join(filepath.Dir(a), node.TempName("o", fmt.Sprintf("%016x", i)))
		if err := os.Rename(a, tmp); err != nil {
			t.Fatal(err)
		}
	}
	check, err := Check(ctx, c.Store, CheckOptions{DebrisAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	if n := check.Count(object.Unrecoverable); n != 1 || len(check.Debris) != 3 {
		t.Fatalf("check before repair: %d unrecoverable, %d debris; want 1 and 3", n, len(check.Debris))
	}
	rep, err := Repair(ctx, c.Store, RepairOptions{CheckOptions: CheckOptions{DebrisAge: -1}, RemoveDebris: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.RolledForward != 3 || rep.DebrisRemoved != 0 || len(rep.Failed()) != 0 {
		t.Errorf("repair: %d rolled forward, %d debris removed, failed %v; want 3, 0, none",
			rep.RolledForward, rep.DebrisRemoved, rep.Failed())
	}
	if got, err := c.Get("/ic/o"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after repair: %d bytes, %v", len(got), err)
	}
	mustCheckClean(t, c.Store, true)
}

// An overwrite cut after M of its renames leaves the old version readable
// without those M slots, and the new version's archives at their place.
// With as many nodes as slots, the only nodes the old slots can be
// rebuilt on hold those newer archives, which the rebuild must not
// replace while they may be a commit in progress. Once they are older
// than DebrisAge, one repair removes them and then rebuilds (before, the
// rebuild failed and only a second run succeeded).
func TestRepairRemovesNewerDebrisBeforeRebuilding(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 256}
	c := testcluster.New(t, 6, g, func(o *object.Options) { o.Spares = -1 })
	r := rand.New(rand.NewPCG(9, 9))
	old := testcluster.Rand(r, 2*g.BlockSize()+5)
	c.Put(t, "/cut", old)
	info, err := c.Store.Stat(ctx, "/cut")
	if err != nil {
		t.Fatal(err)
	}
	_, fs := c.Faulty(t, g)
	nodes := make([]node.Node, len(fs))
	for i := range fs {
		nodes[i] = fs[i]
	}
	// The overwrite's renames fail on the old version's slots 0-3.
	for sl := range 4 {
		i := c.NodeIndex(info.Placement[sl])
		nodes[i] = node.Wrap(fs[i], node.Inject(node.OpCommit|node.OpAbort, node.Fail(errors.New("gateway gone"))))
	}
	s, err := object.New(nodes, object.Options{Geometry: g, MinFree: -1, Spares: -1, WriteQuorum: 6})
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Create(ctx, "/cut", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(testcluster.Rand(r, 3*g.BlockSize())); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); !errors.Is(err, object.ErrQuorum) {
		t.Fatalf("close with 4 renames failing: %v; want a quorum error", err)
	}
	rep, err := Repair(ctx, c.Store, RepairOptions{CheckOptions: CheckOptions{DebrisAge: -1}, RemoveDebris: true})
	if err != nil {
		t.Fatal(err)
	}
	if f := rep.Failed(); len(f) != 0 {
		t.Fatalf("repair failed: %+v", f)
	}
	if got, err := c.Get("/cut"); err != nil || !bytes.Equal(got, old) {
		t.Fatalf("read after repair: %d bytes, %v; want the old version", len(got), err)
	}
	mustCheckClean(t, c.Store, true)
}

// A slot whose archive sits away from its placement node (an earlier
// rebuild put it elsewhere) and holds a corrupt chunk, while its
// placement node holds another slot, is rebuilt where it sits. Rebuilt
// on yet another node, the corrupt copy stayed beside it; a lookup takes
// whichever copy answers first, so the re-inspection often found the
// corrupt one and every repair failed "still degraded" (fault schedule,
// local config: "final repair --deep ... did not succeed").
func TestRepairReplacesCorruptArchiveAwayFromItsNode(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 512}
	c := testcluster.New(t, 9, g)
	data := testcluster.Rand(rand.New(rand.NewPCG(11, 11)), 3*g.BlockSize()+17)
	const p = "/away/o"
	c.Put(t, p, data)
	info, err := c.Store.Stat(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	home := func(sl int) int { return c.NodeIndex(info.Placement[sl]) }
	// The nodes a rebuild of slot 1 may use, in the order it would try
	// them: slot 2's placement node and the three the object does not use.
	free := map[string]bool{info.Placement[2]: true}
	for _, n := range c.Nodes {
		if !slices.Contains(info.Placement, n.ID()) {
			free[n.ID()] = true
		}
	}
	var ps []placement.Node
	for _, n := range c.Nodes {
		ps = append(ps, placement.Node{ID: n.ID()})
	}
	var order []string
	for _, n := range placement.Rank(p, ps) {
		if free[n.ID] {
			order = append(order, n.ID)
		}
	}
	// Slot 1's archive goes to a free node that is not the first choice,
	// slot 2's to slot 1's placement node; then slot 1's is damaged.
	away := c.NodeIndex(order[1])
	move := func(from, to int) {
		dst := c.Archive(to, p)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(c.Archive(from, p), dst); err != nil {
			t.Fatal(err)
		}
	}
	move(home(1), away)
	move(home(2), home(1))
	af := c.Archive(away, p)
	flipByte(t, af, 100) // inside the first chunk

	rep, err := Repair(ctx, c.Store, RepairOptions{CheckOptions: CheckOptions{Deep: true, DebrisAge: -1}, RemoveDebris: true})
	if err != nil {
		t.Fatal(err)
	}
	if f := rep.Failed(); len(f) > 0 || len(rep.Outcomes) != 1 {
		t.Fatalf("outcomes %+v", rep.Outcomes)
	}
	if got, want := rep.Outcomes[0].Rebuilt[1], order[1]; got != want {
		t.Errorf("slot 1 rebuilt on node %s; want %s, where its damaged archive was", got, want)
	}
	for i := range c.Nodes {
		if i == away || slices.Contains(info.Placement, c.Nodes[i].ID()) {
			continue
		}
		if _, err := os.Stat(c.Archive(i, p)); err == nil {
			t.Errorf("node %s holds a second archive of slot 1", c.Nodes[i].ID())
		}
	}
	mustCheckClean(t, c.Store, true)
	if got, err := c.Get(p); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after repair: %d bytes, %v", len(got), err)
	}
}

// An object moved onto a path whose older version was left, whole, on the
// nodes a read asks first (what a removal missed): a read's lookup can
// stop at that older version, but Inspect asks every node and finds the
// moved one, with a damaged chunk. The rebuild looks the same way as the
// inspection and rebuilds the moved version, not the older one's slot.
func TestRepairRebuildsTheVersionItInspected(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 512}
	c := testcluster.New(t, 10, g, func(o *object.Options) { o.Spares = -1 })
	r := rand.New(rand.NewPCG(12, 12))
	var ps []placement.Node
	for _, n := range c.Nodes {
		ps = append(ps, placement.Node{ID: n.ID()})
	}
	top := func(p string, n int) []string {
		var ids []string
		for _, pn := range placement.Rank(p, ps)[:n] {
			ids = append(ids, pn.ID)
		}
		return ids
	}
	// /p's first three nodes hold none of the moved object's archives.
	const p = "/mv/p"
	var q string
	for i := 0; q == ""; i++ {
		cand := fmt.Sprintf("/mv/q%d", i)
		if !slices.ContainsFunc(top(cand, g.Width()), func(id string) bool { return slices.Contains(top(p, 3), id) }) {
			q = cand
		}
	}
	// The older version: a small object, 1+M archives on /p's first nodes.
	old := testcluster.Rand(r, 300)
	w, err := c.Store.Create(ctx, p, &object.CreateOptions{SizeHint: int64(len(old))})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(old)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	saved := map[int][]byte{}
	for _, id := range top(p, 3) {
		i := c.NodeIndex(id)
		b, err := os.ReadFile(c.Archive(i, p))
		if err != nil {
			t.Fatalf("the small object is not on node %s: %v", id, err)
		}
		saved[i] = b
	}
	moved := testcluster.Rand(r, 3*g.BlockSize()+7)
	c.Put(t, q, moved)
	if err := c.Store.Rename(ctx, q, p); err != nil {
		t.Fatal(err)
	}
	for i, b := range saved { // what the removal missed
		if err := os.WriteFile(c.Archive(i, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in, err := c.Store.Inspect(ctx, p, true)
	if err != nil || in.Info.Size != int64(len(moved)) {
		t.Fatalf("inspection: %+v, %v; want the moved object", in, err)
	}
	af := c.Archive(c.NodeIndex(in.Slots[0].FoundOn), p)
	flipByte(t, af, 100) // inside slot 0's first chunk

	// Before removing any debris (Repair removes stale archives first,
	// which hides the older version; a stale archive that cannot be
	// removed, or one written meanwhile, would not be).
	if _, err := c.Store.Rebuild(ctx, p, []int{0}, object.RebuildOptions{Version: in.Info.Version}); err != nil {
		t.Fatalf("rebuild of slot 0: %v", err)
	}
	after, err := c.Store.Inspect(ctx, p, true)
	if err != nil || after.Health != object.Healthy || after.Info.Version != in.Info.Version {
		t.Fatalf("after the rebuild: %v %v, %v", after.Health, after.Problems(), err)
	}
	rep, err := Repair(ctx, c.Store, RepairOptions{CheckOptions: CheckOptions{Deep: true, DebrisAge: -1}, RemoveDebris: true})
	if err != nil || len(rep.Failed()) > 0 {
		t.Fatalf("repair: %+v, %v", rep.Outcomes, err)
	}
	mustCheckClean(t, c.Store, true)
	if got, err := c.Get(p); err != nil || !bytes.Equal(got, moved) {
		t.Fatalf("read after repair: %d bytes, %v; want the moved object", len(got), err)
	}
}

// An object's archives keep the path they were written at in their
// metadata; after an mv the object lives elsewhere. Rebuilding a damaged
// slot of a moved object once asked the nodes about the old path, where a
// newer object now sits on every node: each node seemed to hold a newer
// version of the moved object, so the slot found no node ("no node left
// to hold slot 3"), or went to a node beside the damaged archive, which
// stayed (fault schedule, local config: mv /d0/o00 -> /d0/o03, then a
// put of /d0/o00).
func TestRepairOfAMovedObject(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 512}
	c := testcluster.New(t, 6, g, func(o *object.Options) { o.Spares = -1 })
	r := rand.New(rand.NewPCG(13, 13))
	moved := testcluster.Rand(r, 3*g.BlockSize()+9)
	c.Put(t, "/a/old", moved)
	if err := c.Store.Rename(ctx, "/a/old", "/a/new"); err != nil {
		t.Fatal(err)
	}
	newer := testcluster.Rand(r, 2*g.BlockSize())
	c.Put(t, "/a/old", newer) // on every node: there are only 6
	in, err := c.Store.Inspect(ctx, "/a/new", true)
	if err != nil {
		t.Fatal(err)
	}
	af := c.Archive(c.NodeIndex(in.Slots[3].FoundOn), "/a/new")
	flipByte(t, af, 100) // inside slot 3's first chunk
	rep, err := Repair(ctx, c.Store, RepairOptions{CheckOptions: CheckOptions{Deep: true, DebrisAge: -1}, RemoveDebris: true})
	if err != nil {
		t.Fatal(err)
	}
	if f := rep.Failed(); len(f) > 0 || len(rep.Outcomes) != 1 {
		t.Fatalf("outcomes %+v", rep.Outcomes)
	}
	if got, want := rep.Outcomes[0].Rebuilt[3], in.Slots[3].FoundOn; got != want {
		t.Errorf("slot 3 rebuilt on node %s; want %s, where it was", got, want)
	}
	mustCheckClean(t, c.Store, true)
	for p, want := range map[string][]byte{"/a/new": moved, "/a/old": newer} {
		if got, err := c.Get(p); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s after repair: %d bytes, %v", p, len(got), err)
		}
	}
}

// Regression (fault schedule, seed 1795636409194872651): a slot's only
// copy was a damaged one on a node outside the placement (it had been
// rebuilt there while the placement's node hung). The deep repair rebuilt
// the slot onto the placement's node and left the damaged copy beside
// it, so the next check was not clean.
func TestRepairRemovesTheDamagedCopyItReplaced(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 256}
	s, _, c := faultyStore(t, 7, g)
	put(t, s, "/x", bytes.Repeat([]byte("copy "), 500))
	placed, outside := -1, -1
	for i := range 7 {
		if _, err := os.Stat(c.Archive(i, "/x")); err == nil {
			placed = max(placed, i)
		} else {
			outside = i
		}
	}
	if placed < 0 || outside < 0 {
		t.Fatalf("test setup: placed %d, outside %d", placed, outside)
	}
	b, err := os.ReadFile(c.Archive(placed, "/x"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.Archive(outside, "/x"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	flipByte(t, c.Archive(outside, "/x"), 100) // in chunk 0's data
	if err := os.Remove(c.Archive(placed, "/x")); err != nil {
		t.Fatal(err)
	}
	rr, err := Repair(ctx, s, RepairOptions{CheckOptions: CheckOptions{Deep: true}, RemoveDebris: true})
	if err != nil {
		t.Fatal(err)
	}
	if f := rr.Failed(); len(f) != 0 {
		t.Fatalf("repair failed: %v", f)
	}
	mustCheckClean(t, s, true)
	if _, err := os.Stat(c.Archive(outside, "/x")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the damaged copy outside the placement is still there: %v", err)
	}
}
