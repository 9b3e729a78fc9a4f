package object

import (
	"context"
	"sync"
)

// budget is a weighted semaphore that serves its waiters in order: a
// Reader's bound on the chunks it fetches at once, where a block takes
// K units and a random read's chunk one, so that many chunk reads (the
// segments of a vector read) run together within the memory that a few
// blocks would hold. An acquisition larger than the whole budget takes
// all of it.
type budget struct {
	mu      sync.Mutex
	size    int
	free    int
	waiters []*budgetWaiter // in arrival order
}

type budgetWaiter struct {
	n     int
	ready chan struct{} // closed once the units are granted
}

func newBudget(size int) *budget { return &budget{size: size, free: size} }

// acquire takes n units (at most the budget's size), waiting for them
// behind earlier waiters until ctx ends. It returns the units taken,
// which release must be given back.
func (b *budget) acquire(ctx context.Context, n int) (int, error) {
	n = min(max(n, 1), b.size)
	b.mu.Lock()
	if len(b.waiters) == 0 && b.free >= n {
		b.free -= n
		b.mu.Unlock()
		return n, nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return n, nil
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		select {
		case <-w.ready: // granted meanwhile: give the units back
			b.free += n
		default:
			for i, x := range b.waiters {
				if x == w {
					b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
					break
				}
			}
		}
		b.grantLocked()
		return 0, ctx.Err()
	}
}

// release gives back n units taken by acquire.
func (b *budget) release(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.free += n
	b.grantLocked()
}

// grantLocked hands units to the waiters at the front, in order, while
// they fit. b.mu must be held.
func (b *budget) grantLocked() {
	for len(b.waiters) > 0 && b.free >= b.waiters[0].n {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.free -= w.n
		close(w.ready)
	}
}
