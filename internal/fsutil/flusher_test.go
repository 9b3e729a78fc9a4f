package fsutil

import (
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
)

func flusherOf(t *testing.T, every int64, sync func(int) error) *Flusher {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	fl := NewFlusher(f, every)
	fl.sync = sync
	return fl
}

func TestFlusherFlushesEveryNBytes(t *testing.T) {
	var flushes atomic.Int32
	fl := flusherOf(t, 100, func(int) error { flushes.Add(1); return nil })
	for range 9 {
		fl.Wrote(10)
	}
	if err := fl.Wait(); err != nil || flushes.Load() != 0 {
		t.Fatalf("after 90 of 100 bytes: %d flushes, %v; want none", flushes.Load(), err)
	}
	fl.Wrote(10)
	if err := fl.Wait(); err != nil || flushes.Load() != 1 {
		t.Fatalf("after 100 bytes: %d flushes, %v; want 1", flushes.Load(), err)
	}
	fl.Wrote(250)
	if err := fl.Wait(); err != nil || flushes.Load() != 2 {
		t.Fatalf("after 250 more: %d flushes, %v; want 2 (one at a time)", flushes.Load(), err)
	}
}

// A flush still under way is not joined by a second: the writes go on,
// and the next write after it ended starts the next flush.
func TestFlusherRunsOneFlushAtATime(t *testing.T) {
	release := make(chan struct{})
	var flushes atomic.Int32
	fl := flusherOf(t, 10, func(int) error { flushes.Add(1); <-release; return nil })
	fl.Wrote(10)
	for range 5 {
		fl.Wrote(10) // the first flush is held: none starts
	}
	close(release)
	if err := fl.Wait(); err != nil {
		t.Fatal(err)
	}
	if n := flushes.Load(); n != 1 {
		t.Fatalf("%d flushes while the first was held, want 1", n)
	}
	fl.Wrote(1) // 51 bytes since the last began: due
	fl.Wait()
	if n := flushes.Load(); n != 2 {
		t.Fatalf("%d flushes after the first ended, want 2", n)
	}
}

// A background flush that failed must fail the commit: the kernel reports
// a write-back error to one fsync, so the caller's own would succeed.
func TestFlusherKeepsAFailedFlush(t *testing.T) {
	fail := true
	fl := flusherOf(t, 10, func(int) error {
		if fail {
			return syscall.EIO
		}
		return nil
	})
	fl.Wrote(10)
	err := fl.Wait()
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("Wait after a failed flush: %v, want EIO", err)
	}
	fail = false
	fl.Wrote(10)
	if err := fl.Wait(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Wait after a good flush that followed a failed one: %v, want the EIO still", err)
	}
}

// A nil Flusher (a file written without fsync) does nothing.
func TestNilFlusher(t *testing.T) {
	var fl *Flusher
	fl.Wrote(1 << 30)
	if err := fl.Wait(); err != nil {
		t.Fatal(err)
	}
}

// The real fdatasync runs on the file's descriptor.
func TestFlusherSyncsTheFile(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fl := NewFlusher(f, 4096)
	if _, err := f.Write(make([]byte, 8192)); err != nil {
		t.Fatal(err)
	}
	fl.Wrote(8192)
	if err := fl.Wait(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	fl = NewFlusher(f, 1) // closed: the flush fails, and says so
	fl.Wrote(1)
	if err := fl.Wait(); err == nil {
		t.Fatal("flush of a closed file succeeded")
	}
}
