package object

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
	ctx := context.Background()
	b := newBudget(8)
	if n, err := b.acquire(ctx, 100); err != nil || n != 8 {
		t.Fatalf("acquire more than the budget: %d, %v; want all 8", n, err)
	}
	b.release(8)
	one, _ := b.acquire(ctx, 1)
	seven, _ := b.acquire(ctx, 7)

	// A block's 8 units wait for everything; a chunk's unit that comes
	// after them waits its turn behind them, though one is free first.
	got := make(chan string, 2)
	go func() { b.acquire(ctx, 8); got <- "block" }()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		b.mu.Lock()
		n := len(b.waiters)
		b.mu.Unlock()
		if n == 1 || time.Now().After(deadline) {
			break
		}
	}
	go func() { b.acquire(ctx, 1); got <- "chunk" }()
	b.release(one)
	select {
	case w := <-got:
		t.Fatalf("%s granted while the block waited for 8 units", w)
	case <-time.After(20 * time.Millisecond):
	}
	b.release(seven)
	if first := <-got; first != "block" {
		t.Fatalf("%s granted first; want the block, which came first", first)
	}
	b.release(8)
	if second := <-got; second != "chunk" {
		t.Fatalf("then %s", second)
	}
	b.release(1)

	// A waiter whose context ends leaves the queue; the units stay.
	all, _ := b.acquire(ctx, 8)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := b.acquire(cctx, 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire past its context: %v", err)
	}
	b.release(all)
	if b.free != 8 || len(b.waiters) != 0 {
		t.Fatalf("after all released: %d free, %d waiting", b.free, len(b.waiters))
	}
}
