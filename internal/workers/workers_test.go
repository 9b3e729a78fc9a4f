package workers

import (
	"sync"
	"testing"
	"time"
)

// Tasks that block all run at once: Go starts a goroutine whenever none
// is idle, and never waits for one.
func TestGoNeverWaitsForABusyWorker(t *testing.T) {
	p := newPool(time.Minute)
	const n = 200
	release := make(chan struct{})
	var started, done sync.WaitGroup
	started.Add(n)
	done.Add(n)
	for range n {
		p.goFn(func() {
			started.Done()
			<-release
			done.Done()
		})
	}
	ok := make(chan struct{})
	go func() { started.Wait(); close(ok) }()
	select {
	case <-ok:
	case <-time.After(10 * time.Second):
		t.Fatal("not every blocked task started: Go queued tasks behind busy workers")
	}
	if got := p.live.Load(); got != n {
		t.Errorf("%d goroutines for %d blocked tasks", got, n)
	}
	close(release)
	done.Wait()
}

// Sequential tasks reuse one goroutine rather than starting one each.
func TestGoReusesIdleGoroutines(t *testing.T) {
	p := newPool(time.Minute)
	for range 1000 {
		ran := make(chan struct{})
		p.goFn(func() { close(ran) })
		<-ran
		waitFor(t, func() bool { return idleOne(p) })
	}
	// A task handed over just as the last one ends may find its goroutine
	// not yet back at the hand-off and start another: a few, not 1000.
	if got := p.began.Load(); got > 10 {
		t.Errorf("%d goroutines started for 1000 sequential tasks", got)
	}
}

// Kept goroutines end once idle for the pool's idle time.
func TestIdleGoroutinesEnd(t *testing.T) {
	p := newPool(20 * time.Millisecond)
	var wg sync.WaitGroup
	release := make(chan struct{})
	for range 50 {
		wg.Add(1)
		p.goFn(func() { <-release; wg.Done() })
	}
	close(release)
	wg.Wait()
	if p.live.Load() == 0 {
		t.Fatal("no goroutine kept after the tasks")
	}
	waitFor(t, func() bool { return p.live.Load() == 0 })
}

// idleOne reports whether a goroutine of p is waiting for a task, by
// handing it one; a task that just closed its channel may not be yet.
func idleOne(p *pool) bool {
	ran := make(chan struct{})
	select {
	case p.tasks <- func() { close(ran) }:
		<-ran
		return true
	default:
		return false
	}
}

// waitFor polls cond until it holds, failing the test after 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(50 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5 s")
		}
	}
}
