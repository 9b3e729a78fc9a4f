package object

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Holders of a path's lock never overlap, other paths are not held up,
// a waiter gives up with its context, and no lock outlives its users.
func TestPathLocks(t *testing.T) {
	var l pathLocks
	ctx := context.Background()
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock, err := l.lock(ctx, "/a")
			if err != nil {
				t.Error(err)
				return
			}
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(time.Millisecond)
			inside.Add(-1)
			unlock()
		}()
	}
	unlockB, err := l.lock(ctx, "/b")
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if m := most.Load(); m != 1 {
		t.Errorf("%d holders of /a at once", m)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := l.lock(cctx, "/b"); err == nil {
		t.Error("a second lock of a held path succeeded")
	}
	unlockB()
	if n := len(l.held); n != 0 {
		t.Errorf("%d locks kept after their users left", n)
	}
}
