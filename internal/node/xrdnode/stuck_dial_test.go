package xrdnode

import (
	"context"
	"testing"
	"time"
)

// TestCallsSkipASlotThatIsDialling checks that while one slot of the pool
// re-dials a node whose logins hang (its connections still work), the
// calls that pick that slot are served by the live connection of another.
// They waited for the dial: up to DialTimeout, or their own deadline.
func TestCallsSkipASlotThatIsDialling(t *testing.T) {
	s := startOurs(t, "", "127.0.0.1:0")
	in := newInjector(t, s.addr)
	n := newNode(t, "root://"+in.addr()+"//p", Options{Conns: 2})
	putFile(t, n, "/f", []byte("data"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for connected := 0; connected < 2; {
		if _, err := n.Stat(ctx, "/f"); err != nil {
			t.Fatal(err)
		}
		connected = 0
		for i := range n.pool.slots {
			sl := &n.pool.slots[i]
			sl.mu.Lock()
			// ready first: the dial sets c before it closes ready, and
			// a slot still dialling is not connected yet
			if cn := sl.cur; cn != nil && isReady(cn) && !cn.failed() && cn.c != nil {
				connected++
			}
			sl.mu.Unlock()
		}
		if ctx.Err() != nil {
			t.Fatal("the pool did not connect both slots")
		}
	}

	in.hold.Store(true)
	sl := &n.pool.slots[1]
	sl.mu.Lock()
	sl.cur.kill()
	sl.mu.Unlock()
	for i := range 6 {
		sctx, scancel := context.WithTimeout(ctx, time.Second)
		start := time.Now()
		_, err := n.Stat(sctx, "/f")
		scancel()
		if err != nil {
			t.Fatalf("stat %d while a slot re-dials a node whose logins hang: %v", i, err)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("stat %d took %v", i, d)
		}
	}
}

// isReady reports whether cn's dial has ended.
func isReady(cn *conn) bool {
	select {
	case <-cn.ready:
		return true
	default:
		return false
	}
}

// TestCallWaitingForADialTakesALaterSlot checks that a call waiting for
// its slot's dial, which hangs (a node whose logins hung for a while), is
// served by another slot's connection once that one comes up: it looked
// for a live connection only before it began to wait, and then waited
// for its own dial until DialTimeout or its own deadline.
func TestCallWaitingForADialTakesALaterSlot(t *testing.T) {
	s := startOurs(t, "", "127.0.0.1:0")
	in := newInjector(t, s.addr)
	// Open, not New: no slot is connected before the first call.
	n, err := Open("root://"+in.addr()+"//p", Options{Conns: 2, DialTimeout: time.Minute, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	in.hold.Store(true)
	first := make(chan error, 1)
	go func() { first <- n.Check(ctx) }()
	for held := 0; held == 0; {
		if ctx.Err() != nil {
			t.Fatal("the first call did not dial")
		}
		time.Sleep(time.Millisecond)
		in.mu.Lock()
		held = len(in.clients)
		in.mu.Unlock()
	}
	in.hold.Store(false)
	if err := n.Check(ctx); err != nil {
		t.Fatalf("a call on the other slot: %v", err)
	}
	select {
	case err := <-first:
		if err != nil {
			t.Fatalf("the call waiting for the held dial: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the call waiting for the held dial still waits with the other slot connected")
	}
}
