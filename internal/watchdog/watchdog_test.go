package watchdog

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestExpiresWhenIdle(t *testing.T) {
	ctx, cancel := WithIdleTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("an idle context did not expire")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err = %v, want context.DeadlineExceeded", ctx.Err())
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("expired after %v, before its idle time", d)
	}
}

// A context that keeps seeing progress outlives its idle time many times
// over, through a derived context too.
func TestProgressKeepsItAlive(t *testing.T) {
	ctx, cancel := WithIdleTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	derived, cancel2 := context.WithCancel(ctx)
	defer cancel2()
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		Progress(derived)
		time.Sleep(5 * time.Millisecond)
		if err := ctx.Err(); err != nil {
			t.Fatalf("ended with progress every 5 ms: %v", err)
		}
	}
	select {
	case <-derived.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("did not expire once progress stopped")
	}
	if !errors.Is(derived.Err(), context.DeadlineExceeded) {
		t.Fatalf("derived Err = %v, want context.DeadlineExceeded", derived.Err())
	}
}

// Progress reaches every watchdog between it and the root.
func TestNestedWatchdogs(t *testing.T) {
	outer, cancel := WithIdleTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	inner, cancel2 := WithIdleTimeout(outer, time.Hour)
	defer cancel2()
	for range 30 {
		Progress(inner)
		time.Sleep(5 * time.Millisecond)
	}
	if err := outer.Err(); err != nil {
		t.Fatalf("the outer watchdog ended although its inner one saw progress: %v", err)
	}
}

func TestParentAndCancel(t *testing.T) {
	parent, cancelParent := context.WithCancel(context.Background())
	ctx, cancel := WithIdleTimeout(parent, time.Hour)
	defer cancel()
	cancelParent()
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("Err after the parent's cancel = %v, want context.Canceled", ctx.Err())
	}

	ctx, cancel = WithIdleTimeout(context.Background(), time.Hour)
	cancel()
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("Err after cancel = %v, want context.Canceled", ctx.Err())
	}
	Progress(ctx) // no effect on an ended context
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("Err after a late Progress = %v", ctx.Err())
	}
	Progress(context.Background()) // no watchdog: nothing happens
}

// A value of the parent stays visible, and the deadline is the parent's.
func TestValueAndDeadline(t *testing.T) {
	type key struct{}
	dl := time.Now().Add(time.Hour)
	parent, cancelParent := context.WithDeadline(context.WithValue(context.Background(), key{}, "v"), dl)
	defer cancelParent()
	ctx, cancel := WithIdleTimeout(parent, time.Minute)
	defer cancel()
	if v, _ := ctx.Value(key{}).(string); v != "v" {
		t.Fatalf("Value = %q, want the parent's", v)
	}
	if got, ok := ctx.Deadline(); !ok || !got.Equal(dl) {
		t.Fatalf("Deadline = %v %v, want the parent's %v", got, ok, dl)
	}
}

// While the caller is busy with what it received, the idle time stands
// still, however long the work takes; it starts again when done.
func TestBusyStopsTheClock(t *testing.T) {
	outer, cancel := WithIdleTimeout(context.Background(), 40*time.Millisecond)
	defer cancel()
	ctx, cancel2 := WithIdleTimeout(outer, 40*time.Millisecond)
	defer cancel2()
	done := Busy(ctx)
	time.Sleep(150 * time.Millisecond)
	if err := ctx.Err(); err != nil {
		t.Fatalf("expired while busy: %v", err)
	}
	if err := outer.Err(); err != nil {
		t.Fatalf("the outer watchdog expired while busy: %v", err)
	}
	Progress(ctx) // no effect while busy
	done()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("did not expire once no longer busy")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err = %v", ctx.Err())
	}
}

// Without a watchdog, Busy costs no allocation: the xrootd client calls
// it for every frame it receives.
func TestBusyWithoutWatchdogAllocatesNothing(t *testing.T) {
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, 1)
	if n := testing.AllocsPerRun(100, func() { Busy(ctx)() }); n != 0 {
		t.Fatalf("Busy without a watchdog: %v allocations", n)
	}
}
