package node_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/node/nodetest"
	"github.com/ecstore/ecstore/internal/watchdog"
)

func TestGuardConformance(t *testing.T) {
	nodetest.Run(t, func(t *testing.T) node.Node {
		return node.Guard(newLocal(t, node.LocalOptions{}), node.GuardOptions{})
	})
}

// frozen is a node whose calls block, whatever their context, while it
// is frozen: a local directory on a file system that stopped answering.
// Its calls succeed once thawed; it records what was closed and aborted.
type frozen struct {
	mu      sync.Mutex
	thawed  chan struct{} // closed while thawed
	calls   atomic.Int64  // calls that reached the node
	closed  atomic.Int64  // files closed
	aborted atomic.Int64  // uploads aborted
}

func newFrozen() *frozen { return &frozen{thawed: make(chan struct{})} }

func (f *frozen) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.thawed:
	default:
		close(f.thawed)
	}
}

func (f *frozen) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.thawed = make(chan struct{})
}

func (f *frozen) wait() {
	f.calls.Add(1)
	f.mu.Lock()
	c := f.thawed
	f.mu.Unlock()
	<-c
}

func (f *frozen) ID() string { return "frozen" }
func (f *frozen) Create(context.Context, string) (node.Upload, error) {
	f.wait()
	return &frozenUpload{f: f}, nil
}
func (f *frozen) Open(context.Context, string) (node.File, error) {
	f.wait()
	return &frozenFile{f: f}, nil
}
func (f *frozen) Stat(context.Context, string) (node.FileInfo, error) {
	f.wait()
	return node.FileInfo{Name: "x"}, nil
}
func (f *frozen) List(context.Context, string) ([]node.FileInfo, error) { f.wait(); return nil, nil }
func (f *frozen) Remove(context.Context, string) error                  { f.wait(); return nil }
func (f *frozen) Rename(context.Context, string, string) error          { f.wait(); return nil }
func (f *frozen) Mkdir(context.Context, string) error                   { f.wait(); return nil }
func (f *frozen) Space(context.Context) (node.Space, error)             { f.wait(); return node.Space{}, nil }

type frozenUpload struct{ f *frozen }

func (u *frozenUpload) Write(context.Context, []byte) error { u.f.wait(); return nil }
func (u *frozenUpload) Finish(context.Context) error        { u.f.wait(); return nil }
func (u *frozenUpload) Commit(context.Context) error        { u.f.wait(); return nil }
func (u *frozenUpload) Abort(context.Context) error         { u.f.aborted.Add(1); return nil }
func (u *frozenUpload) TempPath() string                    { return "/.tmp" }

type frozenFile struct{ f *frozen }

// ReadAt fills p, late: what a read left running does to the memory it
// was given.
func (r *frozenFile) ReadAt(_ context.Context, p []byte, _ int64) (int, error) {
	r.f.wait()
	for i := range p {
		p[i] = 0xEE
	}
	return len(p), nil
}
func (r *frozenFile) Size() int64  { return 1 << 20 }
func (r *frozenFile) Close() error { r.f.closed.Add(1); return nil }

// within runs fn with a context of d and checks that it fails, wrapping
// the context's error, within a second more.
func within(t *testing.T, what string, d time.Duration, fn func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	err := fn(ctx)
	if took := time.Since(start); took > d+time.Second {
		t.Fatalf("%s took %v with a deadline of %v", what, took, d)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%s on a frozen node: %v, want an error wrapping context.DeadlineExceeded", what, err)
	}
}

// Every call of a guarded node returns by its deadline although the node
// does not; what the calls left running return once the node thaws is
// closed or aborted, and the count of stuck calls goes back to 0.
func TestGuardBoundsCallsThatBlock(t *testing.T) {
	f := newFrozen()
	var gauge atomic.Int64
	g := node.Guard(f, node.GuardOptions{Stuck: func(id string, n int) {
		if id != "frozen" {
			t.Errorf("stuck calls reported for node %q", id)
		}
		gauge.Store(int64(n))
	}})
	const d = 50 * time.Millisecond
	within(t, "Create", d, func(ctx context.Context) error { _, err := g.Create(ctx, "/a"); return err })
	within(t, "Open", d, func(ctx context.Context) error { _, err := g.Open(ctx, "/a"); return err })
	within(t, "Stat", d, func(ctx context.Context) error { _, err := g.Stat(ctx, "/a"); return err })
	within(t, "List", d, func(ctx context.Context) error { _, err := g.List(ctx, "/"); return err })
	within(t, "ListNames", d, func(ctx context.Context) error {
		_, err := g.(node.NameLister).ListNames(ctx, "/")
		return err
	})
	within(t, "Remove", d, func(ctx context.Context) error { return g.Remove(ctx, "/a") })
	within(t, "Rename", d, func(ctx context.Context) error { return g.Rename(ctx, "/a", "/b") })
	within(t, "Mkdir", d, func(ctx context.Context) error { return g.Mkdir(ctx, "/d") })
	within(t, "Space", d, func(ctx context.Context) error { _, err := g.Space(ctx); return err })
	if n := gauge.Load(); n != 9 {
		t.Fatalf("%d stuck calls reported, want 9", n)
	}
	f.thaw()
	for deadline := time.Now().Add(5 * time.Second); gauge.Load() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls still stuck after the node thawed", gauge.Load())
		}
	}
	if f.aborted.Load() != 1 || f.closed.Load() != 1 {
		t.Errorf("after the thaw: %d uploads aborted, %d files closed; want the late upload and file, 1 each",
			f.aborted.Load(), f.closed.Load())
	}
	// Thawed, the node's calls go through.
	if _, err := g.Stat(context.Background(), "/a"); err != nil {
		t.Errorf("Stat after the thaw: %v", err)
	}
}

// A read left running fails with ErrLeftRunning, which tells its caller
// that the read still holds the buffer (it fills it once the file system
// answers); a read that returns in time fills the caller's buffer.
func TestGuardReadLeftRunning(t *testing.T) {
	f := newFrozen()
	f.thaw() // open at once
	g := node.Guard(f, node.GuardOptions{})
	file, err := g.Open(context.Background(), "/a")
	if err != nil {
		t.Fatal(err)
	}
	f.freeze()
	p := make([]byte, 64<<10)
	within(t, "ReadAt", 50*time.Millisecond, func(ctx context.Context) error {
		_, err := file.ReadAt(ctx, p, 0)
		if !errors.Is(err, node.ErrLeftRunning) {
			t.Errorf("read left running: %v, want an error wrapping node.ErrLeftRunning", err)
		}
		return err
	})
	f.thaw()
	q := make([]byte, 64<<10) // p is the late read's (see node.ErrLeftRunning)
	n, err := file.ReadAt(context.Background(), q, 0)
	if err != nil || n != len(q) || q[0] != 0xEE || q[len(q)-1] != 0xEE {
		t.Fatalf("read of a thawed file: %d, %v, bytes %x…%x", n, err, q[0], q[len(q)-1])
	}
}

// Past MaxStuck stuck calls, calls fail at once with ErrStuck without
// reaching the node (each would hold one more thread in the kernel).
func TestGuardMaxStuck(t *testing.T) {
	f := newFrozen()
	defer f.thaw()
	g := node.Guard(f, node.GuardOptions{MaxStuck: 3})
	for range 3 {
		within(t, "Stat", 20*time.Millisecond, func(ctx context.Context) error { _, err := g.Stat(ctx, "/a"); return err })
	}
	start := time.Now()
	_, err := g.Stat(context.Background(), "/a")
	if !errors.Is(err, node.ErrStuck) || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("Stat with 3 calls stuck: %v after %v, want ErrStuck at once", err, time.Since(start))
	}
	if n := f.calls.Load(); n != 3 {
		t.Fatalf("%d calls reached the node, want 3", n)
	}
}

// An upload whose write is left running fails its later calls; its
// Abort fails with ErrStuck and aborts the upload once the write returns.
func TestGuardUploadWithACallStuck(t *testing.T) {
	f := newFrozen()
	f.thaw()
	g := node.Guard(f, node.GuardOptions{})
	u, err := g.Create(context.Background(), "/a")
	if err != nil {
		t.Fatal(err)
	}
	f.freeze()
	within(t, "Write", 50*time.Millisecond, func(ctx context.Context) error { return u.Write(ctx, []byte("x")) })
	if err := u.Finish(context.Background()); !errors.Is(err, node.ErrStuck) {
		t.Fatalf("Finish after a stuck write: %v, want ErrStuck", err)
	}
	if err := u.Abort(context.Background()); !errors.Is(err, node.ErrStuck) {
		t.Fatalf("Abort while the write is stuck: %v, want ErrStuck", err)
	}
	if f.aborted.Load() != 0 {
		t.Fatal("the upload was aborted while its write was still running")
	}
	f.thaw()
	for deadline := time.Now().Add(5 * time.Second); f.aborted.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the upload was not aborted once its stuck write returned")
		}
	}
}

// A call whose context has no deadline is bounded by MaxCall.
func TestGuardMaxCall(t *testing.T) {
	f := newFrozen()
	defer f.thaw()
	g := node.Guard(f, node.GuardOptions{MaxCall: 50 * time.Millisecond})
	start := time.Now()
	if err := g.Mkdir(context.Background(), "/d"); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Fatalf("Mkdir without a deadline on a frozen node: %v after %v, want DeadlineExceeded after MaxCall", err, time.Since(start))
	}
}

// A guarded listing of a large directory is bounded by how long the file
// system goes silent, not by how long the listing takes: Local reports
// progress to the watchdogs of its context every listBatch entries. The
// idle timeout here is a third of the time the whole listing takes, so a
// listing that reported nothing until its end would be cut off.
func TestGuardedListOfALargeDirectory(t *testing.T) {
	dir := t.TempDir()
	l, err := node.NewLocal("n", dir, node.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	const n = 20000
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Links of one file: entries without an inode each, quick to make.
	first := filepath.Join(dir, "d", "f00000")
	if err := os.WriteFile(first, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < n; i++ {
		if err := os.Link(first, filepath.Join(dir, "d", fmt.Sprintf("f%05d", i))); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	for _, list := range []struct {
		name string
		fn   func(ctx context.Context, n node.Node) ([]node.FileInfo, error)
	}{
		{"List", func(ctx context.Context, n node.Node) ([]node.FileInfo, error) { return n.List(ctx, "/d") }},
		{"ListNames", func(ctx context.Context, n node.Node) ([]node.FileInfo, error) {
			return n.(node.NameLister).ListNames(ctx, "/d")
		}},
	} {
		t.Run(list.name, func(t *testing.T) {
			whole := time.Hour
			for range 3 {
				start := time.Now()
				if fis, err := list.fn(ctx, l); err != nil || len(fis) != n {
					t.Fatalf("unguarded: %d entries, %v", len(fis), err)
				}
				whole = min(whole, time.Since(start))
			}
			// (At least 20 ms: a names-only listing of n entries takes
			// a few ms, too little to time its batches against.)
			// A listing that reports nothing until its end fails every
			// try; one pause of the machine (a loaded CI host) fails
			// one, so three are allowed.
			idle := max(whole/3, 20*time.Millisecond)
			var fails []string
			for range 3 {
				wctx, stop := watchdog.WithIdleTimeout(ctx, idle)
				fis, err := list.fn(wctx, node.Guard(l, node.GuardOptions{}))
				stop()
				if err == nil && len(fis) == n {
					return
				}
				fails = append(fails, fmt.Sprintf("%d entries, %v", len(fis), err))
			}
			t.Fatalf("guarded, idle timeout %v (the whole listing takes %v): %s", idle, whole, strings.Join(fails, "; "))
		})
	}
}

// TestGuardWarnsOnlyWhenOutOfTime: a call left running because its
// caller gave up (a refused put cancels its archive creates) is counted
// but not logged as a file system that stopped answering; a call that
// ran out of time is, and its return is logged too. Regression: a put
// onto a directory logged "not answering" and "answers again" for
// healthy nodes, after the command had returned.
func TestGuardWarnsOnlyWhenOutOfTime(t *testing.T) {
	var logged lockedLog
	f := newFrozen()
	var stuck atomic.Int64
	g := node.Guard(f, node.GuardOptions{
		Logger: slog.New(slog.NewTextHandler(&logged, nil)),
		Stuck:  func(_ string, n int) { stuck.Store(int64(n)) },
	})

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for f.calls.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if _, err := g.Stat(ctx, "/a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled stat: %v", err)
	}
	if stuck.Load() != 1 {
		t.Errorf("stuck calls = %d after a cancelled call, want 1", stuck.Load())
	}
	f.thaw()
	waitFor(t, func() bool { return stuck.Load() == 0 })
	if s := logged.String(); s != "" {
		t.Errorf("a cancelled call was logged:\n%s", s)
	}

	f.freeze()
	short, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelShort()
	if _, err := g.Stat(short, "/b"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stat out of time: %v", err)
	}
	if s := logged.String(); !strings.Contains(s, "not answering") {
		t.Errorf("a call out of time was not logged:\n%s", s)
	}
	f.thaw()
	waitFor(t, func() bool { return strings.Contains(logged.String(), "answers again") })
}

// lockedLog is a log destination safe for concurrent writers.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10 s")
		}
	}
}

// TestGuardObservesCalls checks what a guarded node tells
// GuardOptions.Observe: each call once, named, with its data bytes, a
// missing path as ErrNotExist, and a call left running as such.
func TestGuardObservesCalls(t *testing.T) {
	var mu sync.Mutex
	var ops []node.Operation
	observe := func(op node.Operation) {
		mu.Lock()
		defer mu.Unlock()
		ops = append(ops, op)
	}
	take := func() []node.Operation {
		mu.Lock()
		defer mu.Unlock()
		got := ops
		ops = nil
		return got
	}
	ctx := context.Background()
	g := node.Guard(newLocal(t, node.LocalOptions{}), node.GuardOptions{Observe: observe})
	small := []byte("a small archive")
	large := make([]byte, node.WholeRead+1000)
	for name, data := range map[string][]byte{"/small": small, "/large": large} {
		u, err := g.Create(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := u.Write(ctx, data); err != nil {
			t.Fatal(err)
		}
		if err := u.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var written int64
	for _, op := range take() {
		if op.Err != nil || op.Read != 0 {
			t.Errorf("%s: %+v", op.Name, op)
		}
		written += op.Written
	}
	if want := int64(len(small) + len(large)); written != want {
		t.Errorf("%d bytes written observed, want %d", written, want)
	}

	for name, size := range map[string]int{"/small": len(small), "/large": len(large)} {
		f, err := g.Open(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.ReadAt(ctx, make([]byte, size), 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
		var read int64
		for _, op := range take() {
			read += op.Read
		}
		// A small file is read whole by its open, and its reads are
		// of memory: the open moved its bytes.
		if read != int64(size) {
			t.Errorf("%s: %d bytes read observed, want %d", name, read, size)
		}
	}

	if _, err := g.Stat(ctx, "/missing"); !errors.Is(err, node.ErrNotExist) {
		t.Fatalf("stat of a missing path: %v", err)
	}
	if got := take(); len(got) != 1 || got[0].Name != "stat" || !errors.Is(got[0].Err, node.ErrNotExist) {
		t.Errorf("stat of a missing path observed as %+v", got)
	}

	f := newFrozen()
	f.freeze()
	defer f.thaw()
	fg := node.Guard(f, node.GuardOptions{Observe: observe})
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := fg.Remove(short, "/x"); !errors.Is(err, node.ErrLeftRunning) {
		t.Fatalf("remove on a frozen node: %v", err)
	}
	if got := take(); len(got) != 1 || got[0].Name != "remove" || !errors.Is(got[0].Err, node.ErrLeftRunning) || got[0].Duration < 10*time.Millisecond {
		t.Errorf("a call left running observed as %+v", got)
	}

	// An upload call refused because an earlier one is stuck is
	// observed too (found by review).
	f.thaw()
	u, err := fg.Create(ctx, "/u")
	if err != nil {
		t.Fatal(err)
	}
	f.freeze()
	short2, cancel2 := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel2()
	if err := u.Write(short2, []byte("x")); !errors.Is(err, node.ErrLeftRunning) {
		t.Fatalf("write on a frozen node: %v", err)
	}
	take()
	if err := u.Finish(ctx); !errors.Is(err, node.ErrStuck) {
		t.Fatalf("finish after a stuck write: %v", err)
	}
	if got := take(); len(got) != 1 || got[0].Name != "finish" || !errors.Is(got[0].Err, node.ErrStuck) {
		t.Errorf("a call refused for a stuck upload observed as %+v", got)
	}
}
