package object

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
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
)

// tempFiles lists the temporary files left in the nodes' directories.
func (c *cluster) tempFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, d := range c.dirs {
		err := filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && node.IsTemp(e.Name()) {
				out = append(out, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// Regression (fault suite, TestGatewayKillDuringPuts): a writer that died
// after renaming some of its archives into place, and before the K-th,
// left a version that no reader could read and nothing completed. A
// writer dies here as far as the nodes can tell: the renames of `stuck`
// nodes fail, and so do their aborts, so their finished temporary
// archives stay. A fresh store (another gateway) completes the commit
// when it reads, if enough archives are there; otherwise it leaves
// everything as it is.
func TestInterruptedCommitIsCompleted(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 256}
	r := rand.New(rand.NewPCG(seed(t), 13))
	data := randBytes(r, 3*g.BlockSize()+17)
	old := randBytes(r, 2*g.BlockSize())
	for _, tc := range []struct {
		name       string
		old        bool // the path held an older version
		stuck      int  // nodes whose rename and abort fail
		lost       int  // of which their temporary archive is lost too
		completed  bool
		wantTemps  int
		wantVisibl int // archives at the path after the read
	}{
		{name: "new path", stuck: 3, completed: true, wantVisibl: 6},
		{name: "overwrite", old: true, stuck: 3, completed: true, wantVisibl: 6},
		{name: "overwrite, old version still whole enough", old: true, stuck: 4, wantTemps: 4, wantVisibl: 6},
		{name: "one archive lost", stuck: 3, lost: 1, completed: true, wantVisibl: 5},
		{name: "too few", stuck: 5, lost: 3, wantTemps: 2, wantVisibl: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, fs := faultyCluster(t, 6, g, func(o *Options) { o.Spares = -1; o.WriteQuorum = 6 })
			if tc.old {
				put(t, c.store, "/rf", old)
			}
			nodes := slices.Clone(c.nodes)
			for i := range tc.stuck {
				nodes[i] = node.Wrap(fs[i], node.Inject(node.OpCommit|node.OpAbort, node.Fail(errors.New("gateway gone"))))
			}
			s, err := New(nodes, c.store.opts)
			if err != nil {
				t.Fatal(err)
			}
			w, err := s.Create(ctx, "/rf", nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(data); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); !errors.Is(err, ErrQuorum) {
				t.Fatalf("close with %d renames failing: %v; want a quorum error", tc.stuck, err)
			}
			temps := c.tempFiles(t)
			if len(temps) != tc.stuck {
				t.Fatalf("%d temporary files after the interrupted commit, want %d: %v", len(temps), tc.stuck, temps)
			}
			for _, p := range temps[:tc.lost] {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			}

			fresh, err := New(c.nodes, c.store.opts)
			if err != nil {
				t.Fatal(err)
			}
			got, err := get(fresh, "/rf")
			switch {
			case tc.completed && (err != nil || !bytes.Equal(got, data)):
				t.Errorf("read after the interrupted commit: %d bytes, %v; want the new version", len(got), err)
			case !tc.completed && tc.old && (err != nil || !bytes.Equal(got, old)):
				t.Errorf("read after an overwrite interrupted early: %d bytes, %v; want the old version", len(got), err)
			case !tc.completed && !tc.old && err == nil:
				t.Errorf("read of a version short of archives succeeded (%d bytes)", len(got))
			}
			if left := c.tempFiles(t); len(left) != tc.wantTemps {
				t.Errorf("%d temporary files left, want %d: %v", len(left), tc.wantTemps, left)
			}
			if n := len(c.archivesOf("/rf")); n != tc.wantVisibl {
				t.Errorf("%d archives at the path, want %d", n, tc.wantVisibl)
			}
			// RollForward (repair's entry) finds nothing more to do.
			done, err := fresh.RollForward(ctx, "/rf")
			if len(done) != 0 || err != nil {
				t.Errorf("RollForward after the read: %v, %v; want nothing done", done, err)
			}
		})
	}
}

// completingNode renames the temporary file of each upload into place
// just before the upload's own commit, as a reader completing the commit
// (taking the writer for dead) would: the upload's rename then fails.
type completingNode struct {
	node.Node
	dir       string // the node's directory
	completed int
}

type completingUpload struct {
	node.Upload
	n    *completingNode
	path string
}

func (n *completingNode) Create(ctx context.Context, path string) (node.Upload, error) {
	up, err := n.Node.Create(ctx, path)
	if err != nil {
		return nil, err
	}
	return &completingUpload{Upload: up, n: n, path: path}, nil
}

func (u *completingUpload) Commit(ctx context.Context) error {
	dir, base := node.Split(u.path)
	ents, err := os.ReadDir(filepath.Join(u.n.dir, filepath.FromSlash(dir)))
	if err != nil {
		return err
	}
	for _, e := range ents {
		if target, ok := node.TempTarget(e.Name()); ok && target == base {
			if err := u.n.Node.Rename(ctx, node.Join(dir, e.Name()), u.path); err != nil {
				return fmt.Errorf("test: complete the commit: %w", err)
			}
			u.n.completed++
		}
	}
	return u.Upload.Commit(ctx)
}

// A writer that is only slow, not dead, still reports success when a
// reader completed its commit first: a failed rename counts as done when
// the node holds the writer's version.
func TestCommitCompletedByAnotherCountsAsDone(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 2, M: 1, ChunkSize: 256}
	c := newCluster(t, 3, g, func(o *Options) { o.Spares = -1; o.WriteQuorum = 3 })
	nodes := slices.Clone(c.nodes)
	cn := &completingNode{Node: c.nodes[0], dir: c.dirs[0]}
	nodes[0] = cn
	opts := c.store.opts
	var degraded []int
	opts.Events.DegradedWrite = func(_ string, failed []int) { degraded = failed }
	s, err := New(nodes, opts)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Create(ctx, "/cc/f", nil)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("x"), 1000)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("close: %v; want success, the commit was completed by another", err)
	}
	if cn.completed != 1 {
		t.Fatalf("the test completed %d commits, want 1", cn.completed)
	}
	if degraded != nil {
		t.Errorf("the write reported slots %v missing; every archive is in place", degraded)
	}
	if got, err := get(s, "/cc/f"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read: %d bytes, %v", len(got), err)
	}
	if n := len(c.archivesOf("/cc/f")); n != 3 {
		t.Errorf("%d archives, want 3", n)
	}
	if left := c.tempFiles(t); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// Regression (fault suite, TestGatewayKillDuringPuts, seed
// 479806718310469573): an overwrite cut after at most M renames leaves the
// older version readable and, on the nodes that renamed, an archive of the
// newer one where the older one's was. Rebuilding the older version's
// missing slots sent them back to those nodes, whose newer archive the
// fence then refused to replace: repair failed until the debris was old
// enough to be removed. The slots must go to nodes holding no newer
// archive.
func TestRebuildAvoidsNodesHoldingANewerVersion(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 256}
	r := rand.New(rand.NewPCG(seed(t), 14))
	old := randBytes(r, 2*g.BlockSize()+5)
	c, fs := faultyCluster(t, 8, g, func(o *Options) { o.Spares = -1; o.WriteQuorum = 6 })
	put(t, c.store, "/rb", old)
	// The overwrite's renames fail on the old version's slots 0-3: slots
	// 4 and 5 of the new version are renamed into place.
	nodes := slices.Clone(c.nodes)
	for sl := range 4 {
		i := c.slotNode(t, "/rb", sl)
		nodes[i] = node.Wrap(fs[i], node.Inject(node.OpCommit|node.OpAbort, node.Fail(errors.New("gateway gone"))))
	}
	s, err := New(nodes, c.store.opts)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Create(ctx, "/rb", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(randBytes(r, 3*g.BlockSize())); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); !errors.Is(err, ErrQuorum) {
		t.Fatalf("close with 4 renames failing: %v; want a quorum error", err)
	}
	if got, err := get(c.store, "/rb"); err != nil || !bytes.Equal(got, old) {
		t.Fatalf("read after the cut overwrite: %d bytes, %v; want the old version", len(got), err)
	}
	in, err := c.store.Inspect(ctx, "/rb", false)
	if err != nil {
		t.Fatal(err)
	}
	var missing []int
	for _, sl := range in.Slots {
		if sl.FoundOn == "" {
			missing = append(missing, sl.Slot)
		}
	}
	if !slices.Equal(missing, []int{4, 5}) {
		t.Fatalf("old version misses slots %v, want [4 5]", missing)
	}
	res, err := c.store.Rebuild(ctx, "/rb", missing, RebuildOptions{})
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	info, err := c.store.Stat(ctx, "/rb")
	if err != nil {
		t.Fatal(err)
	}
	for _, sl := range missing {
		if on := res.Rebuilt[sl]; on == "" || on == info.Placement[4] || on == info.Placement[5] {
			t.Errorf("slot %d rebuilt on %q, want one of the nodes holding no newer archive", sl, on)
		}
	}
	in, err = c.store.Inspect(ctx, "/rb", true)
	if err != nil || in.Health != Healthy {
		t.Fatalf("after the rebuild: %v, %v; want healthy", in.Health, err)
	}
	if got, err := get(c.store, "/rb"); err != nil || !bytes.Equal(got, old) {
		t.Errorf("read after the rebuild: %d bytes, %v; want the old version", len(got), err)
	}
}

// Regression (found by review): a read that completed an interrupted
// commit could bring back an object removed while it looked for the
// commit's temporary archives. It completes the commit only while a node
// still holds the version.
func TestRollForwardDoesNotUndoARemoval(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 256}
	c, fs := faultyCluster(t, 6, g, func(o *Options) { o.Spares = -1; o.WriteQuorum = 6 })
	nodes := slices.Clone(c.nodes)
	for i := range 3 {
		nodes[i] = node.Wrap(fs[i], node.Inject(node.OpCommit|node.OpAbort, node.Fail(errors.New("gateway gone"))))
	}
	s := c.storeOver(t, nodes, nil)
	w, err := s.Create(ctx, "/rf", nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(randBytes(rand.New(rand.NewPCG(seed(t), 14)), 2*g.BlockSize()))
	if err := w.Close(); !errors.Is(err, ErrQuorum) {
		t.Fatalf("close with 3 renames failing: %v", err)
	}
	// The reader lists the directories for the temporary archives slowly;
	// the removal happens meanwhile.
	slow := slices.Clone(c.nodes)
	for i := range fs {
		slow[i] = node.Wrap(fs[i], node.Inject(node.OpList, node.Delay(200*time.Millisecond)))
	}
	reader := c.storeOver(t, slow, nil)
	rolled := make(chan []RolledForward, 1)
	go func() {
		done, err := reader.RollForward(ctx, "/rf")
		if err != nil {
			t.Error(err)
		}
		rolled <- done
	}()
	time.Sleep(100 * time.Millisecond)
	if err := c.store.Remove(ctx, "/rf"); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if done := <-rolled; len(done) != 0 {
		t.Errorf("the removed object's commit was completed: %v", done)
	}
	if _, err := c.store.Stat(ctx, "/rf"); !errors.Is(err, ErrNotExist) {
		t.Errorf("stat after the removal: %v; want ErrNotExist", err)
	}
}
