package workers

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// Tasks that block all run at once: Go starts a goroutine whenever none
// is idle, and never waits for one.
func TestGoNeverWaitsForABusyWorker(t *testing.T) {
	const n = 200
	release := make(chan struct{})
	var started sync.WaitGroup
	var done sync.WaitGroup
	started.Add(n)
	done.Add(n)
	for range n {
		Go(func() {
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
	close(release)
	done.Wait()
}

// Sequential tasks reuse one goroutine rather than starting one each.
func TestGoReusesIdleGoroutines(t *testing.T) {
	Go(func() {}) // at least one kept goroutine
	waitIdle(t)
	before := runtime.NumGoroutine()
	for range 1000 {
		ran := make(chan struct{})
		Go(func() { close(ran) })
		<-ran
		waitIdle(t)
	}
	if after := runtime.NumGoroutine(); after > before+2 {
		t.Errorf("%d goroutines after 1000 sequential tasks, %d before: idle goroutines were not reused", after, before)
	}
}

// Kept goroutines end once idle for idleTimeout.
func TestIdleGoroutinesEnd(t *testing.T) {
	old := idleTimeout.Swap(int64(20 * time.Millisecond))
	defer idleTimeout.Store(old)
	base := runtime.NumGoroutine()
	var wg sync.WaitGroup
	release := make(chan struct{})
	for range 50 {
		wg.Add(1)
		Go(func() { <-release; wg.Done() })
	}
	close(release)
	wg.Wait()
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > base; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines 5 s after the tasks ended, %d before them", runtime.NumGoroutine(), base)
		}
	}
}

// waitIdle waits until some kept goroutine is waiting for a task, which
// a task that just closed its channel may not be yet.
func waitIdle(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Microsecond) {
		ran := make(chan struct{})
		select {
		case tasks <- func() { close(ran) }:
			<-ran
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no goroutine became idle in 5 s")
		}
	}
}
