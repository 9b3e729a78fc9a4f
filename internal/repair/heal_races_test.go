package repair

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/testcluster"
)

// putSmall writes data at p with a size hint, so that it is stored 1+M.
func putSmall(t *testing.T, s *object.Store, p string, data []byte) {
	t.Helper()
	w, err := s.Create(context.Background(), p, &object.CreateOptions{SizeHint: int64(len(data))})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestHealRacingRemoveDoesNotResurrect: a heal is rebuilding a lost
// archive of a small (1+M) object when a user removes the object (every
// node up: no tombstone). The rebuild's fence only refuses to replace a
// *newer* version; an empty path passes it, so the rebuilt archive is
// committed after the removal and the removed object reads back.
// TestHealRacingRemoveDoesNotResurrect: Regression (found by review): a heal (healer, repair or drain) that commits after an rm of the object
// in its rebuild's time brought it back: a small object's one archive is
// a whole readable copy. Rebuild checks, in the path's turn, that the
// path still holds the version rebuilt.
func TestHealRacingRemoveDoesNotResurrect(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 512}
	c := testcluster.New(t, 5, g)
	s := c.Store
	data := bytes.Repeat([]byte("removed "), 100)
	putSmall(t, s, "/rm/x", data)
	info, err := s.Stat(ctx, "/rm/x")
	if err != nil {
		t.Fatal(err)
	}
	if info.Geometry.K != 1 {
		t.Fatalf("not stored as a small object: %+v", info.Geometry)
	}
	os.Remove(c.Archive(c.NodeIndex(info.Placement[0]), "/rm/x"))
	var once sync.Once
	throttle := func(ctx context.Context, n int) error {
		once.Do(func() {
			// The user's rm lands while the healer is mid-rebuild.
			if err := s.Remove(ctx, "/rm/x"); err != nil {
				t.Errorf("remove: %v", err)
			}
			if _, err := s.Stat(ctx, "/rm/x"); !errors.Is(err, object.ErrNotExist) {
				t.Errorf("stat right after rm: %v", err)
			}
		})
		return nil
	}
	slots, res, err := Heal(ctx, s, "/rm/x", throttle)
	t.Logf("heal: slots %v res %+v err %v", slots, res, err)
	if got, err := get(s, "/rm/x"); err == nil {
		t.Fatalf("removed object is back after the heal: %d bytes (equal to the old: %v)", len(got), bytes.Equal(got, data))
	}
}

// TestHealRacingRemoveLeavesNoRemnant: the same race on a K+M
// object with two archives lost: the rebuild commits 2 archives of the
// removed version, which (no tombstone) fsck then calls unrecoverable,
// and repair keeps as evidence, forever.
// TestHealRacingRemoveLeavesNoRemnant: Regression (found by review): a heal racing an rm of a K+M object committed fewer than K archives
// of the removed version, which fsck then called unrecoverable forever.
func TestHealRacingRemoveLeavesNoRemnant(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 512}
	c := testcluster.New(t, 5, g)
	s := c.Store
	data := bytes.Repeat([]byte("removed "), 1000)
	put(t, s, "/rm/y", data)
	info, err := s.Stat(ctx, "/rm/y")
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(c.Archive(c.NodeIndex(info.Placement[0]), "/rm/y"))
	os.Remove(c.Archive(c.NodeIndex(info.Placement[4]), "/rm/y"))
	var once sync.Once
	throttle := func(ctx context.Context, n int) error {
		once.Do(func() {
			if err := s.Remove(ctx, "/rm/y"); err != nil {
				t.Errorf("remove: %v", err)
			}
		})
		return nil
	}
	slots, res, err := Heal(ctx, s, "/rm/y", throttle)
	t.Logf("heal: slots %v res %+v err %v", slots, res, err)
	rep, err := Check(ctx, s, CheckOptions{DebrisAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range rep.Objects {
		t.Logf("%s: %v %v", in.Path, in.Health, in.Problems())
	}
	if !rep.Clean() {
		t.Fatalf("fsck is not clean after a heal raced an rm of an object")
	}
}

// TestHealerBackoffHoldsDespiteItsOwnReads: a heal that fails after the
// rebuild read the object (here: the placement node refuses the commit,
// as a read-only or failing disk would) is to be tried again after waits
// that double up to MaxRetryWait. But the rebuild's own reads need
// parity for the missing slot and report DegradedRead, which re-enqueues
// the path while it is being healed; retry then finds it "reported
// again meanwhile" and keeps the Settle-old entry: the object is re-read
// and re-encoded every Settle (5 s in the gateway) for RetryFor (24 h).
// TestHealerBackoffHoldsDespiteItsOwnReads: Regression (found by review): a heal's own reads need parity for the slots it rebuilds and report
// the object degraded again; that report made a failing heal due after
// Settle every time instead of the doubling wait (113 attempts in 2.5 s
// where about 7 are due).
func TestHealerBackoffHoldsDespiteItsOwnReads(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 512}
	c := testcluster.New(t, 5, g)                   // no spare: slot 0 can only go back to its node
	data := bytes.Repeat([]byte("retry me "), 1000) // several blocks
	put(t, c.Store, "/b/x", data)
	info, err := c.Store.Stat(ctx, "/b/x")
	if err != nil {
		t.Fatal(err)
	}
	bad := c.NodeIndex(info.Placement[0])
	os.Remove(c.Archive(bad, "/b/x"))

	var mu sync.Mutex
	var attempts []time.Time
	h := NewHealer(nil, HealerOptions{Settle: 20 * time.Millisecond, MaxRetryWait: time.Hour,
		Healed: func(_ string, _ int64, ok bool) {
			mu.Lock()
			attempts = append(attempts, time.Now())
			mu.Unlock()
		}})
	nodes := make([]node.Node, len(c.Nodes))
	for i, n := range c.Nodes {
		if i == bad {
			n = node.Wrap(n, node.Inject(node.OpCommit, node.Fail(nil)))
		}
		nodes[i] = n
	}
	s, err := object.New(nodes, object.Options{Geometry: g, MinFree: -1, Events: h.Events(object.Events{})})
	if err != nil {
		t.Fatal(err)
	}
	h.SetStore(s)
	go h.Run(ctx)
	h.Enqueue("/b/x")
	time.Sleep(2500 * time.Millisecond)
	cancel()
	mu.Lock()
	n := len(attempts)
	mu.Unlock()
	// Waits of 40, 80, 160, 320, 640, 1280 ms: about 7 tries in 2.5 s.
	t.Logf("%d heal attempts in 2.5 s", n)
	if n > 10 {
		t.Fatalf("%d heal attempts in 2.5 s: the doubling wait is not applied", n)
	}
}

// TestHealRacingMoveDoesNotDuplicate: the same race with an mv: the heal
// commits the rebuilt archive at the old path after the object moved,
// and a small object then reads at both paths.
// TestHealRacingMoveDoesNotDuplicate: Regression (found by review): a heal racing an mv of a small object committed its archive at the
// old path: the object read at both names.
func TestHealRacingMoveDoesNotDuplicate(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 512}
	c := testcluster.New(t, 5, g)
	s := c.Store
	data := bytes.Repeat([]byte("moved "), 100)
	putSmall(t, s, "/mv/a", data)
	info, err := s.Stat(ctx, "/mv/a")
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(c.Archive(c.NodeIndex(info.Placement[0]), "/mv/a"))
	var once sync.Once
	throttle := func(ctx context.Context, n int) error {
		once.Do(func() {
			if err := s.Rename(ctx, "/mv/a", "/mv/b"); err != nil {
				t.Errorf("mv: %v", err)
			}
		})
		return nil
	}
	slots, res, err := Heal(ctx, s, "/mv/a", throttle)
	t.Logf("heal: slots %v res %+v err %v", slots, res, err)
	if _, err := get(s, "/mv/b"); err != nil {
		t.Fatalf("moved object: %v", err)
	}
	if _, err := get(s, "/mv/a"); err == nil {
		t.Fatalf("the object moved away reads at its old path too after the heal")
	}
}

// hookNode runs beforeCommit before each upload's Commit.
type hookNode struct {
	node.Node
	beforeCommit func(path string)
}

type hookUpload struct {
	node.Upload
	path string
	n    *hookNode
}

func (h *hookNode) Create(ctx context.Context, path string) (node.Upload, error) {
	up, err := h.Node.Create(ctx, path)
	if err != nil {
		return nil, err
	}
	return &hookUpload{Upload: up, path: path, n: h}, nil
}

func (u *hookUpload) Commit(ctx context.Context) error {
	if u.n.beforeCommit != nil {
		u.n.beforeCommit(u.path)
	}
	return u.Upload.Commit(ctx)
}

// TestHealRacingOverwriteKeepsTheNewVersion: the rebuild's fence
// (holdsNewer) and its Commit are not atomic with a writer's renames
// (Rebuild takes no path lock): an overwrite that commits in between has
// its fresh archive on that node replaced by the rebuilt archive of the
// old version, and the new object is left degraded (with a write that
// itself lost a node, at K archives: one more failure from loss).
// TestHealRacingOverwriteKeepsTheNewVersion: Regression (found by review): an overwrite committed between a heal's check for a newer version and
// its rename: the rebuilt archive of the old version replaced one of the
// new version's, which was left degraded.
func TestHealRacingOverwriteKeepsTheNewVersion(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 512}
	c := testcluster.New(t, 5, g)
	old := bytes.Repeat([]byte("old "), 1000)
	put(t, c.Store, "/o/x", old)
	info, err := c.Store.Stat(ctx, "/o/x")
	if err != nil {
		t.Fatal(err)
	}
	bad := c.NodeIndex(info.Placement[0])
	os.Remove(c.Archive(bad, "/o/x"))
	hn := &hookNode{Node: c.Nodes[bad]}
	nodes := slices.Clone(c.Nodes)
	nodes[bad] = hn
	s, err := object.New(nodes, object.Options{Geometry: g, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	newer := bytes.Repeat([]byte("new! "), 1000)
	var armed atomic.Bool
	armed.Store(true)
	done := make(chan error, 1)
	hn.beforeCommit = func(path string) {
		if path == "/o/x" && armed.CompareAndSwap(true, false) {
			// The user's overwrite, between fence and rename (a
			// Rebuild in turn holds it back until it is done).
			writeMeanwhile(ctx, s, "/o/x", newer, done)
		}
	}
	slots, res, err := Heal(ctx, s, "/o/x", nil)
	if err := <-done; err != nil {
		t.Fatalf("overwrite: %v", err)
	}
	t.Logf("heal: slots %v res %+v err %v", slots, res, err)
	if got, err := get(s, "/o/x"); err != nil || !bytes.Equal(got, newer) {
		t.Fatalf("read after overwrite: %v (new bytes: %v)", err, bytes.Equal(got, newer))
	}
	in, err := s.Inspect(ctx, "/o/x", false)
	if err != nil {
		t.Fatal(err)
	}
	if in.Health != object.Healthy {
		t.Fatalf("the overwrite, committed whole, is %v after the heal: %v", in.Health, in.Problems())
	}
}

// removeHookNode runs beforeRemove before each Remove.
type removeHookNode struct {
	node.Node
	beforeRemove func(path string)
}

func (h *removeHookNode) Remove(ctx context.Context, path string) error {
	if h.beforeRemove != nil {
		h.beforeRemove(path)
	}
	return h.Node.Remove(ctx, path)
}

// TestDebrisRemovalRacingWriteKeepsTheNewArchive: the periodic full
// repair (--heal-interval) removes a removed object's remnant by path
// after re-inspecting it; a write of the path that commits in between has
// its fresh archive on that node deleted instead.
// TestDebrisRemovalRacingWriteKeepsTheNewArchive: Regression (found by review): repair's debris removal re-inspects the path, then removes by path: a
// write of the path committed in between lost its archive on that node.
// The inspection and the removals are now in the path's turn (InTurn).
func TestDebrisRemovalRacingWriteKeepsTheNewArchive(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 512}
	c := testcluster.New(t, 5, g)
	put(t, c.Store, "/d/x", bytes.Repeat([]byte("old "), 1000))
	info, err := c.Store.Stat(ctx, "/d/x")
	if err != nil {
		t.Fatal(err)
	}
	x := c.NodeIndex(info.Placement[0])
	fx := node.Wrap(c.Nodes[x])
	hn := &removeHookNode{Node: fx}
	nodes := slices.Clone(c.Nodes)
	nodes[x] = hn
	s, err := object.New(nodes, object.Options{Geometry: g, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	fx.SetDown(true)
	if err := s.Remove(ctx, "/d/x"); err != nil {
		t.Fatalf("rm with a node down: %v", err)
	}
	fx.SetDown(false) // its archive is now a remnant, hidden by tombstones
	newer := bytes.Repeat([]byte("new! "), 1000)
	var armed atomic.Bool
	armed.Store(true)
	done := make(chan error, 1)
	hn.beforeRemove = func(path string) {
		if path == "/d/x" && armed.CompareAndSwap(true, false) {
			// A user writes the path again meanwhile (it waits for the
			// removal's turn to end).
			writeMeanwhile(ctx, s, "/d/x", newer, done)
		}
	}
	if _, err := Repair(ctx, s, RepairOptions{RemoveDebris: true}); err != nil {
		t.Fatal(err)
	}
	if armed.Load() {
		t.Fatal("the remnant was not removed")
	}
	if err := <-done; err != nil {
		t.Fatalf("write: %v", err)
	}
	if got, err := get(s, "/d/x"); err != nil || !bytes.Equal(got, newer) {
		t.Fatalf("read of the new object: %v", err)
	}
	in, err := s.Inspect(ctx, "/d/x", false)
	if err != nil {
		t.Fatal(err)
	}
	if in.Health != object.Healthy {
		t.Fatalf("the new object, committed whole, is %v after the repair: %v", in.Health, in.Problems())
	}
}

// TestHealerRetriesObjectsOutOfReachInAnOutage: an object written
// degraded (one node down) is queued; when its heal comes, more nodes are
// out (a switch reboot, say: M+1 of them) and the inspection finds it
// unrecoverable. heal returns no slots and no error, so the healer
// forgets it (no retry), and once every node is back it stays degraded,
// with nothing (Retrying 0) saying so, until it is read again or a
// repair runs.
// TestHealerRetriesObjectsOutOfReachInAnOutage: Regression (found by review): an object reported degraded, whose heal came while more than M nodes
// were out (unrecoverable for the moment), was dropped from the healer's
// queue, not retried, and stayed degraded after the nodes returned.
func TestHealerRetriesObjectsOutOfReachInAnOutage(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 512}
	c := testcluster.New(t, 5, g)
	h := NewHealer(nil, HealerOptions{Settle: 50 * time.Millisecond})
	fs := make([]*node.Faulty, len(c.Nodes))
	nodes := make([]node.Node, len(c.Nodes))
	for i, n := range c.Nodes {
		fs[i] = node.Wrap(n)
		nodes[i] = fs[i]
	}
	s, err := object.New(nodes, object.Options{Geometry: g, MinFree: -1, Events: h.Events(object.Events{})})
	if err != nil {
		t.Fatal(err)
	}
	h.SetStore(s)
	data := bytes.Repeat([]byte("outage "), 1000)
	put(t, c.Store, "/w/x", data)
	info, err := s.Stat(ctx, "/w/x")
	if err != nil {
		t.Fatal(err)
	}
	a := c.NodeIndex(info.Placement[0])
	os.Remove(c.Archive(a, "/w/x")) // what a write with node a down leaves
	h.Enqueue("/w/x")               // as its DegradedWrite does
	// Three nodes out when the heal runs.
	var out []int
	for i := range fs {
		if i != a && len(out) < 3 {
			out = append(out, i)
			fs[i].SetDown(true)
		}
	}
	go h.Run(ctx)
	deadline := time.Now().Add(5 * time.Second)
	for h.Pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	pending, retrying := h.Pending(), h.Retrying()
	for _, i := range out {
		fs[i].SetDown(false)
	}
	time.Sleep(time.Second) // well past any first retry (2×Settle) and a node-back tick
	in, err := s.Inspect(ctx, "/w/x", false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("during the outage: pending %d retrying %d; after: %v, pending %d retrying %d", pending, retrying, in.Health, h.Pending(), h.Retrying())
	if in.Health != object.Healthy {
		t.Fatalf("object reported degraded is still %v a second after the outage ended, and the healer has forgotten it (pending %d, retrying %d)",
			in.Health, h.Pending(), h.Retrying())
	}
}

// writeMeanwhile writes data at path through s from another goroutine,
// as a user would in the middle of an operation's hook, and gives it half
// a second before returning (the write may wait for the operation's turn
// of the path to end); its result goes to done.
func writeMeanwhile(ctx context.Context, s *object.Store, path string, data []byte, done chan error) {
	go func() {
		w, err := s.Create(ctx, path, nil)
		if err == nil {
			w.Write(data)
			err = w.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		done <- err
	case <-time.After(500 * time.Millisecond):
	}
}
