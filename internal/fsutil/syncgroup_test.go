package fsutil

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A caller that arrives while an fsync of its directory is running does
// not take that fsync as its own (it may have started before the
// caller's change): it waits for the next one, which it shares with the
// callers that arrived with it.
func TestSyncGroupWaitsForALaterFsync(t *testing.T) {
	dir := t.TempDir()
	d, err := os.Open(dir)
	must(t, err)
	defer d.Close()

	var g SyncGroup
	var started, finished atomic.Int32
	release := []chan struct{}{make(chan struct{}), make(chan struct{})}
	g.fsync = func(*os.File) error {
		n := started.Add(1)
		<-release[n-1] // hold each fsync until the test lets it end
		finished.Add(1)
		return nil
	}

	first := make(chan error, 1)
	go func() { first <- g.Sync(d) }()
	waitFor(t, func() bool { return started.Load() == 1 })

	const late = 5
	var returned atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, late)
	for range late {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- g.Sync(d); returned.Add(1) }()
	}
	waitFor(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.waiting(d) == late })
	if n := started.Load(); n != 1 {
		t.Fatalf("%d fsyncs started while the first was held, want 1", n)
	}
	close(release[0])
	must(t, <-first)
	// The late callers now run one fsync together, and none returns
	// before it ends: the first one may have started before their changes.
	waitFor(t, func() bool { return started.Load() == 2 })
	time.Sleep(20 * time.Millisecond)
	if n := returned.Load(); n != 0 {
		t.Fatalf("%d late callers returned before their own fsync ended", n)
	}
	close(release[1])
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
	if n := finished.Load(); n != 2 {
		t.Errorf("%d fsyncs for 1 + %d callers, want 2 (the held one and one shared by the late callers)", n, late)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.dirs) != 0 {
		t.Errorf("%d directories still tracked after every caller returned", len(g.dirs))
	}
}

// Every caller that joined an fsync gets its error; callers of another
// directory do not wait for it.
func TestSyncGroupSharesErrorsPerDirectory(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	da, err := os.Open(a)
	must(t, err)
	defer da.Close()
	db, err := os.Open(b)
	must(t, err)
	defer db.Close()
	da2, err := os.Open(a) // the same directory through another descriptor
	must(t, err)
	defer da2.Close()

	var g SyncGroup
	release := make(chan struct{})
	var calls atomic.Int32
	boom := fmt.Errorf("disk on fire")
	g.fsync = func(f *os.File) error {
		calls.Add(1)
		if f.Name() == b {
			return nil
		}
		<-release
		return boom
	}
	res := make(chan error, 3)
	go func() { res <- g.Sync(da) }()
	waitFor(t, func() bool { return calls.Load() == 1 })
	// Two callers join the next fsync of a: one runs it, the other only
	// waits for it, and both get its error.
	go func() { res <- g.Sync(da2) }()
	go func() { res <- g.Sync(da) }()
	waitFor(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.waiting(da) == 2 })
	must(t, g.Sync(db)) // not held up by a's fsync
	close(release)
	for range 3 {
		if err := <-res; err != boom {
			t.Errorf("Sync of the failing directory = %v, want %v", err, boom)
		}
	}
}

// The real thing: concurrent creations in one directory, each followed by
// Sync, all return and the files are there.
func TestSyncGroupConcurrent(t *testing.T) {
	dir := t.TempDir()
	var g SyncGroup
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := filepath.Join(dir, fmt.Sprint(i))
			if err := os.WriteFile(name, nil, 0o644); err != nil {
				t.Error(err)
				return
			}
			d, err := os.Open(dir)
			if err != nil {
				t.Error(err)
				return
			}
			defer d.Close()
			if err := g.Sync(d); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	ents, err := os.ReadDir(dir)
	must(t, err)
	if len(ents) != 32 {
		t.Errorf("%d files, want 32", len(ents))
	}
	var nilGroup *SyncGroup
	d, err := os.Open(dir)
	must(t, err)
	defer d.Close()
	must(t, nilGroup.Sync(d))
}

// BenchmarkSyncDir creates files in one directory from parallel
// goroutines, each creation made durable by an fsync of the directory
// (alone, or shared through a SyncGroup), and removes them again
// without one.
func BenchmarkSyncDir(b *testing.B) {
	for _, shared := range []bool{false, true} {
		b.Run(map[bool]string{false: "alone", true: "group"}[shared], func(b *testing.B) {
			dir := b.TempDir()
			d, err := os.Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			var g *SyncGroup
			if shared {
				g = &SyncGroup{}
			}
			var seq atomic.Int64
			var fsyncs atomic.Int64
			count := func(f *os.File) error { fsyncs.Add(1); return f.Sync() }
			if g != nil {
				g.fsync = count
			}
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					name := filepath.Join(dir, fmt.Sprint(seq.Add(1)))
					if err := os.WriteFile(name, nil, 0o644); err != nil {
						b.Error(err)
						return
					}
					if g == nil {
						_ = count(d)
					} else if err := g.Sync(d); err != nil {
						b.Error(err)
						return
					}
					if err := os.Remove(name); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(fsyncs.Load())/float64(b.N), "fsyncs/op")
		})
	}
}

// waitFor polls cond until it holds, failing the test after 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5 s")
		}
	}
}
