package object

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
)

// spaceCountingNode counts Space calls and can refuse new uploads.
type spaceCountingNode struct {
	node.Node
	asked  atomic.Int32
	refuse atomic.Bool
}

func (n *spaceCountingNode) Space(ctx context.Context) (node.Space, error) {
	n.asked.Add(1)
	return n.Node.Space(ctx)
}

func (n *spaceCountingNode) Create(ctx context.Context, path string) (node.Upload, error) {
	if n.refuse.Load() {
		return nil, errors.New("refused")
	}
	return n.Node.Create(ctx, path)
}

// countingNodes returns n local nodes wrapped to count Space calls.
func countingNodes(t *testing.T, n int, g layout.Geometry) ([]*spaceCountingNode, []node.Node) {
	c := newCluster(t, n, g)
	counted := make([]*spaceCountingNode, len(c.nodes))
	nodes := make([]node.Node, len(c.nodes))
	for i, nd := range c.nodes {
		counted[i] = &spaceCountingNode{Node: nd}
		nodes[i] = counted[i]
	}
	return counted, nodes
}

// Writes within SpaceTTL of each other place objects from one answer of
// the nodes; a node failing an open makes the next write ask again.
func TestSpaceIsAskedOncePerTTL(t *testing.T) {
	g := layout.Geometry{K: 2, M: 1, ChunkSize: 4096}
	counted, nodes := countingNodes(t, 5, g)
	s, err := New(nodes, Options{Geometry: g, MinFree: -1, SpaceTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	asked := func() (total int) {
		for _, n := range counted {
			total += int(n.asked.Load())
		}
		return total
	}
	for i := range 5 {
		put(t, s, fmt.Sprintf("/o%d", i), []byte("data"))
	}
	if got := asked(); got != len(nodes) {
		t.Fatalf("5 writes asked the nodes for space %d times, want %d (once each)", got, len(nodes))
	}

	// A node refusing an upload may be full: the next write asks again.
	for _, n := range counted {
		n.refuse.Store(true)
	}
	if w, err := s.Create(context.Background(), "/refused", nil); err == nil {
		w.Abort()
		t.Fatal("create succeeded with every node refusing")
	}
	for _, n := range counted {
		n.refuse.Store(false)
	}
	put(t, s, "/after", []byte("data"))
	if got := asked(); got != 2*len(nodes) {
		t.Fatalf("after a refused open the nodes were asked %d times in all, want %d", got, 2*len(nodes))
	}

	// A negative SpaceTTL asks on every write.
	s2, err := New(nodes, Options{Geometry: g, MinFree: -1, SpaceTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	before := asked()
	put(t, s2, "/p1", []byte("data"))
	put(t, s2, "/p2", []byte("data"))
	if got := asked() - before; got != 2*len(nodes) {
		t.Fatalf("with SpaceTTL < 0, two writes asked %d times, want %d", got, 2*len(nodes))
	}
}

// Concurrent writes finding the answer stale ask the nodes once between
// them.
func TestSpaceQueriesAreShared(t *testing.T) {
	g := layout.Geometry{K: 2, M: 1, ChunkSize: 4096}
	counted, nodes := countingNodes(t, 4, g)
	s, err := New(nodes, Options{Geometry: g, MinFree: -1, SpaceTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	for range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			s.spaces(context.Background())
		}()
	}
	for range 8 {
		<-done
	}
	if got := counted[0].asked.Load(); got != 1 {
		t.Fatalf("8 concurrent placements asked node 0 %d times, want 1", got)
	}
}

// An exclusive create fails on a readable object or a directory and
// succeeds on a free path.
func TestExclusiveCreate(t *testing.T) {
	c := newCluster(t, 4, layout.Geometry{K: 2, M: 1, ChunkSize: 4096})
	ctx := context.Background()
	put(t, c.store, "/d/obj", []byte("data"))
	excl := &CreateOptions{Exclusive: true}
	if _, err := c.store.Create(ctx, "/d/obj", excl); !errors.Is(err, ErrExist) {
		t.Errorf("exclusive create of an object: %v, want ErrExist", err)
	}
	if _, err := c.store.Create(ctx, "/d", excl); !errors.Is(err, ErrIsDir) {
		t.Errorf("exclusive create of a directory: %v, want ErrIsDir", err)
	}
	w, err := c.store.Create(ctx, "/d/new", excl)
	if err != nil {
		t.Fatalf("exclusive create of a free path: %v", err)
	}
	if _, err := w.Write([]byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// Without Exclusive an object is replaced.
	put(t, c.store, "/d/obj", []byte("replaced"))
	if got, err := get(c.store, "/d/obj"); err != nil || string(got) != "replaced" {
		t.Errorf("after the overwrite: %q, %v", got, err)
	}
	// The archives a refused create opened while it checked the path are
	// gone.
	c.store.Drain()
	for _, dir := range c.dirs {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && node.IsTemp(d.Name()) {
				t.Errorf("temporary file %s left by a refused create", p)
			}
			return nil
		})
	}
}

// gatedNode holds every Open of path until open is closed, counting them.
type gatedNode struct {
	node.Node
	path    string
	open    chan struct{}
	arrived *atomic.Int32
}

func (n *gatedNode) Open(ctx context.Context, path string) (node.File, error) {
	if path == n.path {
		n.arrived.Add(1)
		select {
		case <-n.open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return n.Node.Open(ctx, path)
}

// An exclusive create, which expects the path to be absent and so needs
// every node's answer, asks every node at once rather than in windows
// (one round trip instead of one per window).
func TestExclusiveCreateAsksEveryNodeAtOnce(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 4096}
	c := newCluster(t, 8, g)
	var arrived atomic.Int32
	gate := make(chan struct{})
	nodes := make([]node.Node, len(c.nodes))
	for i, nd := range c.nodes {
		nodes[i] = &gatedNode{Node: nd, path: "/new", open: gate, arrived: &arrived}
	}
	// Windows would wait (almost) forever for the first one's answers.
	s, err := New(nodes, Options{Geometry: g, MinFree: -1, Spares: -1, HedgeDelay: time.Hour, ProbeTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if w := s.probeWindows(len(nodes)); len(w) < 2 {
		t.Fatalf("probe windows %v: the test needs more than one", w)
	}
	created := make(chan error, 1)
	go func() {
		w, err := s.Create(context.Background(), "/new", &CreateOptions{Exclusive: true})
		if err == nil {
			err = w.Abort()
		}
		created <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for arrived.Load() < int32(len(nodes)) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	got := arrived.Load()
	close(gate)
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	if got != int32(len(nodes)) {
		t.Errorf("%d of %d nodes asked before any answered; want all", got, len(nodes))
	}
}

// An exclusive create opens the new archives while it looks for the
// object; when it finds one, the archives it opened are removed again.
func TestRefusedCreateRemovesItsArchives(t *testing.T) {
	g := layout.Geometry{K: 2, M: 1, ChunkSize: 4096}
	c := newCluster(t, 4, g)
	put(t, c.store, "/obj", []byte("data"))
	temps := func() (n int) {
		for _, dir := range c.dirs {
			filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && node.IsTemp(d.Name()) {
					n++
				}
				return nil
			})
		}
		return n
	}
	var arrived atomic.Int32
	gate := make(chan struct{})
	nodes := make([]node.Node, len(c.nodes))
	for i, nd := range c.nodes {
		nodes[i] = &gatedNode{Node: nd, path: "/obj", open: gate, arrived: &arrived}
	}
	s, err := New(nodes, Options{Geometry: g, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	created := make(chan error, 1)
	go func() {
		_, err := s.Create(context.Background(), "/obj", &CreateOptions{Exclusive: true})
		created <- err
	}()
	// The lookup waits at the gate until the archives are open.
	deadline := time.Now().Add(5 * time.Second)
	for temps() < g.Width() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := temps(); n != g.Width() {
		t.Fatalf("%d archives open while the lookup waits; want %d", n, g.Width())
	}
	close(gate)
	if err := <-created; !errors.Is(err, ErrExist) {
		t.Fatalf("exclusive create of an object: %v, want ErrExist", err)
	}
	s.Drain()
	if n := temps(); n != 0 {
		t.Errorf("%d temporary files left by the refused create", n)
	}
}

// slowCreateNode holds every Create until ctx ends or release is closed.
type slowCreateNode struct {
	node.Node
	release chan struct{}
}

func (n *slowCreateNode) Create(ctx context.Context, path string) (node.Upload, error) {
	select {
	case <-n.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return n.Node.Create(ctx, path)
}

// An exclusive create refused while its archives are still being opened
// gives those opens up at once, and does not count them as node errors.
func TestRefusedCreateGivesUpItsOpens(t *testing.T) {
	g := layout.Geometry{K: 2, M: 1, ChunkSize: 4096}
	c := newCluster(t, 4, g)
	put(t, c.store, "/obj", []byte("data"))
	release := make(chan struct{})
	defer close(release)
	nodes := make([]node.Node, len(c.nodes))
	for i, nd := range c.nodes {
		nodes[i] = &slowCreateNode{Node: nd, release: release}
	}
	var nodeErrors atomic.Int32
	s, err := New(nodes, Options{Geometry: g, MinFree: -1, MetadataTimeout: time.Minute,
		Events: Events{NodeError: func(string, string, error) { nodeErrors.Add(1) }}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(context.Background(), "/obj", &CreateOptions{Exclusive: true}); !errors.Is(err, ErrExist) {
		t.Fatalf("exclusive create of an object: %v, want ErrExist", err)
	}
	if n := nodeErrors.Load(); n != 0 {
		t.Errorf("%d node errors for opens the refused create gave up", n)
	}
}
