// Package workers runs short tasks on goroutines that are kept for the
// next task instead of ending with each one.
//
// A new goroutine starts with a small stack and grows it, by copying, as
// deep call chains need; the server's request handlers and per-node
// probes go through protocol parsing, the object layer and JSON decoding,
// so a fresh goroutine per task paid for that growth on every request
// (about a tenth of the gateway's CPU on small-object gets). A kept
// goroutine keeps its grown stack (until the garbage collector shrinks
// an idle one).
package workers

import (
	"sync/atomic"
	"time"
)

// idleTimeout is how long a goroutine without work waits for one before
// it ends, so that a burst's goroutines do not outlive it for long.
const idleTimeout = 10 * time.Second

// pool is a set of kept goroutines.
type pool struct {
	// tasks hands a task to a goroutine waiting for one. It is
	// unbuffered: a send succeeds only when some goroutine is idle.
	tasks chan func()
	idle  time.Duration // before a goroutine without work ends
	live  atomic.Int64  // goroutines of the pool, busy or idle
	began atomic.Int64  // goroutines started, ever
}

func newPool(idle time.Duration) *pool {
	return &pool{tasks: make(chan func()), idle: idle}
}

var shared = newPool(idleTimeout)

// Go runs fn on an idle kept goroutine, or on a new one (which is kept
// after fn returns) when none is idle. Like the go statement, it never
// blocks and does not wait for fn; a panic in fn ends the program as it
// would on a goroutine of its own.
func Go(fn func()) { shared.goFn(fn) }

func (p *pool) goFn(fn func()) {
	select {
	case p.tasks <- fn:
	default:
		p.live.Add(1)
		p.began.Add(1)
		go p.work(fn)
	}
}

// work runs fn, then the tasks handed to it until it has been idle for
// p.idle.
func (p *pool) work(fn func()) {
	defer p.live.Add(-1)
	fn()
	idle := time.NewTimer(p.idle)
	defer idle.Stop()
	for {
		select {
		case fn := <-p.tasks:
			fn()
			idle.Reset(p.idle)
		case <-idle.C:
			return
		}
	}
}
