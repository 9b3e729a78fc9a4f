package object

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/watchdog"
)

// slowLister lists as its node does, after steps pauses of step; with
// progress it reports each pause to the context's watchdog, as a remote
// node's client does for every part of a long listing it receives.
type slowLister struct {
	node.Node
	steps    int
	step     time.Duration
	progress bool
}

func (l *slowLister) List(ctx context.Context, dir string) ([]node.FileInfo, error) {
	for range l.steps {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(l.step):
		}
		if l.progress {
			watchdog.Progress(ctx)
		}
	}
	return l.Node.List(ctx, dir)
}

// slowListingCluster is a 4+2 store on 8 local nodes with a 60 ms
// MetadataTimeout, holding /d/small and /d/large, whose nodes listed
// (by index) take 300 ms to list, reporting progress or not.
func slowListingCluster(t *testing.T, slow map[int]bool) (*Store, []string) {
	t.Helper()
	c := newCluster(t, 8, layout.Geometry{K: 4, M: 2, ChunkSize: 4096})
	put(t, c.store, "/d/small", []byte("small object"))
	put(t, c.store, "/d/large", make([]byte, 40000))
	nodes := make([]node.Node, len(c.nodes))
	for i, n := range c.nodes {
		nodes[i] = n
		if progress, ok := slow[i]; ok {
			nodes[i] = &slowLister{Node: n, steps: 15, step: 20 * time.Millisecond, progress: progress}
		}
	}
	s, err := New(nodes, Options{Geometry: c.store.Geometry(), MinFree: -1, MetadataTimeout: 60 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return s, []string{"large", "small"}
}

func listedNames(infos []Info) string {
	var names []string
	for _, info := range infos {
		names = append(names, info.Name)
	}
	return strings.Join(names, " ")
}

// A node that takes five times MetadataTimeout to list a directory, while
// sending its answer part by part, is waited for: the listing is whole,
// and no node is suspect afterwards. (Before, every node was cut off at
// MetadataTimeout and marked suspect, and a listing of 100000 objects on
// 10 nodes came out with 30000 or 50000 of them, or failed.)
func TestListingWaitsForNodesThatAnswer(t *testing.T) {
	slow := map[int]bool{}
	for i := range 8 {
		slow[i] = true
	}
	s, want := slowListingCluster(t, slow)
	start := time.Now()
	infos, err := s.List(context.Background(), "/d")
	if err != nil {
		t.Fatal(err)
	}
	if got := listedNames(infos); got != strings.Join(want, " ") {
		t.Fatalf("listed %q, want %q", got, strings.Join(want, " "))
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("listing took %v: the nodes were not slow", d)
	}
	for _, n := range s.nodes {
		if s.isSuspect(n.ID()) {
			t.Errorf("node %s is suspect after a slow but steady listing", n.ID())
		}
	}
}

// Nodes that go silent are cut off after MetadataTimeout and marked
// suspect. Up to M of them, the listing is whole from the others; with
// more, it fails with ErrQuorum instead of leaving objects out.
func TestListingWithSilentNodes(t *testing.T) {
	for _, tc := range []struct {
		silent  int
		wantErr bool
	}{{2, false}, {3, true}} {
		slow := map[int]bool{}
		for i := range tc.silent {
			slow[i] = false
		}
		s, want := slowListingCluster(t, slow)
		start := time.Now()
		infos, err := s.List(context.Background(), "/d")
		if d := time.Since(start); d > 250*time.Millisecond {
			t.Errorf("%d silent nodes: the listing took %v, more than the silence allowed", tc.silent, d)
		}
		switch {
		case tc.wantErr && !errors.Is(err, ErrQuorum):
			t.Errorf("%d silent nodes of a 4+2 store: err = %v (listed %q), want ErrQuorum", tc.silent, err, listedNames(infos))
		case !tc.wantErr && err != nil:
			t.Errorf("%d silent nodes of a 4+2 store: %v", tc.silent, err)
		case !tc.wantErr && listedNames(infos) != strings.Join(want, " "):
			t.Errorf("%d silent nodes: listed %q, want %q", tc.silent, listedNames(infos), strings.Join(want, " "))
		}
		for i := range tc.silent {
			if !s.isSuspect(s.nodes[i].ID()) {
				t.Errorf("%d silent nodes: node %d is not suspect", tc.silent, i)
			}
		}
	}
}

// partLister hands its node's listing over one entry at a time
// (node.PartLister) and fails List, which a listing must not call.
type partLister struct {
	node.Node
	parts int
}

func (l *partLister) List(ctx context.Context, dir string) ([]node.FileInfo, error) {
	return nil, errors.New("List called on a node that lists in parts")
}

func (l *partLister) ListParts(ctx context.Context, dir string, fn func([]node.FileInfo) error) error {
	fis, err := l.Node.List(ctx, dir)
	if err != nil {
		return err
	}
	for _, fi := range fis {
		l.parts++
		if err := fn([]node.FileInfo{fi}); err != nil {
			return err
		}
	}
	return nil
}

// A listing takes the entries of nodes that list in parts part by part,
// and comes out as from whole listings.
func TestListingTakesParts(t *testing.T) {
	c := newCluster(t, 8, layout.Geometry{K: 4, M: 2, ChunkSize: 4096})
	put(t, c.store, "/d/small", []byte("small object"))
	put(t, c.store, "/d/large", make([]byte, 40000))
	if err := c.store.Mkdir(context.Background(), "/d/sub"); err != nil {
		t.Fatal(err)
	}
	want, err := c.store.List(context.Background(), "/d")
	if err != nil {
		t.Fatal(err)
	}
	nodes := make([]node.Node, len(c.nodes))
	lister := make([]*partLister, len(c.nodes))
	for i, n := range c.nodes {
		lister[i] = &partLister{Node: n}
		nodes[i] = lister[i]
	}
	s, err := New(nodes, Options{Geometry: c.store.Geometry(), MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.List(context.Background(), "/d")
	if err != nil {
		t.Fatal(err)
	}
	if listedNames(got) != listedNames(want) || listedNames(got) != "large small sub" {
		t.Fatalf("listed %q in parts, %q whole", listedNames(got), listedNames(want))
	}
	for i := range got {
		if got[i].Size != want[i].Size || got[i].IsDir != want[i].IsDir || got[i].Version != want[i].Version {
			t.Errorf("%s: %+v in parts, %+v whole", got[i].Name, got[i], want[i])
		}
	}
	parts := 0
	for _, l := range lister {
		parts += l.parts
	}
	if parts < 8+6+3 { // sub on every node, large on 6, small on 3
		t.Errorf("%d parts handed over, want one per entry of every node", parts)
	}
}

// ListEach hands a directory over in batches of listBatch, in name
// order, the entries List returns; an error of its function stops it.
func TestListEachBatches(t *testing.T) {
	c := newCluster(t, 6, layout.Geometry{K: 4, M: 2, ChunkSize: 4096})
	ctx := context.Background()
	n := listBatch + listBatch/2
	for i := range n {
		w, err := c.store.Create(ctx, fmt.Sprintf("/d/o%05d", i), &CreateOptions{SizeHint: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	want, err := c.store.List(ctx, "/d")
	if err != nil || len(want) != n {
		t.Fatalf("List: %d entries, %v; want %d", len(want), err, n)
	}
	var batches []int
	var got []Info
	err = c.store.ListEach(ctx, "/d", func(infos []Info) error {
		batches = append(batches, len(infos))
		got = append(got, infos...)
		return nil
	})
	if err != nil || fmt.Sprint(batches) != fmt.Sprint([]int{listBatch, n - listBatch}) {
		t.Fatalf("ListEach: batches %v, %v; want %d and %d", batches, err, listBatch, n-listBatch)
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Size != 1 || got[i].Version != want[i].Version {
			t.Fatalf("entry %d: %+v; List says %+v", i, got[i], want[i])
		}
	}
	stop := errors.New("stop")
	calls := 0
	err = c.store.ListEach(ctx, "/d", func([]Info) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("ListEach after its function failed: %v, %d calls; want the error after 1", err, calls)
	}
}
