// Package workers runs short tasks on goroutines that are kept for the
// next task instead of ending with each one.
//
// A new goroutine starts with a small stack and grows it, by copying, as
// deep call chains need; the server's request handlers and per-node
// probes go through protocol parsing, the object layer and JSON decoding,
// so a fresh goroutine per task paid for that growth on every request
// (about a tenth of the gateway's CPU on small-object gets). A kept
// goroutine keeps its grown stack.
package workers

import (
	"sync/atomic"
	"time"
)

// idleTimeout is how long (in nanoseconds) a goroutine without work
// waits for one before it ends, so that a burst's goroutines do not
// outlive it for long. Tests shorten it.
var idleTimeout atomic.Int64

func init() { idleTimeout.Store(int64(10 * time.Second)) }

// tasks hands a task to a goroutine waiting for one. It is unbuffered: a
// send succeeds only when some goroutine is idle.
var tasks = make(chan func())

// Go runs fn on an idle kept goroutine, or on a new one (which is kept
// after fn returns) when none is idle. Like the go statement, it never
// blocks and does not wait for fn; a panic in fn ends the program as it
// would on a goroutine of its own.
func Go(fn func()) {
	select {
	case tasks <- fn:
	default:
		go work(fn)
	}
}

// work runs fn, then the tasks handed to it until it has been idle for
// idleTimeout.
func work(fn func()) {
	fn()
	idle := time.NewTimer(time.Duration(idleTimeout.Load()))
	defer idle.Stop()
	for {
		select {
		case fn := <-tasks:
			fn()
			idle.Reset(time.Duration(idleTimeout.Load()))
		case <-idle.C:
			return
		}
	}
}
