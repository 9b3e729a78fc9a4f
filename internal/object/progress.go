package object

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// busyWait bounds, in WriteTimeouts, how long one append may wait on a
// node that is busy rather than hung (see nodeProgress).
const busyWait = 10

// nodeProgress records, per node, when an append to one of its archives
// last completed, through any write or rebuild of the store. A node whose
// appends for other writes complete is busy, not hung: its disk is
// saturated (many streams at once, on one disk or a slow one), and a slow
// append of one archive there is waited for, where a node that completes
// nothing at all is dropped from the write. The zero value is ready.
type nodeProgress struct {
	last sync.Map // node id -> *atomic.Int64, unix nanoseconds
}

// done records an append to node id completing at now.
func (p *nodeProgress) done(id string, now time.Time) {
	v, ok := p.last.Load(id)
	if !ok {
		v, _ = p.last.LoadOrStore(id, new(atomic.Int64))
	}
	v.(*atomic.Int64).Store(now.UnixNano())
}

// since is how long before now an append to node id last completed; a
// very long time if none has.
func (p *nodeProgress) since(id string, now time.Time) time.Duration {
	v, ok := p.last.Load(id)
	if !ok {
		return time.Duration(1<<63 - 1)
	}
	return now.Sub(time.Unix(0, v.(*atomic.Int64).Load()))
}

// appendContext is the context of one append to a node's archive: it
// ends when its parent does, or with context.DeadlineExceeded when the
// append has taken too long (expire). It is a context of its own rather
// than a context.WithTimeout because its deadline moves: see
// uploadWriter.Write.
type appendContext struct {
	context.Context
	done chan struct{}
	mu   sync.Mutex
	err  error
	stop func() bool // stops following the parent
}

func newAppendContext(parent context.Context) *appendContext {
	c := &appendContext{Context: parent, done: make(chan struct{})}
	c.stop = context.AfterFunc(parent, func() { c.end(parent.Err()) })
	return c
}

func (c *appendContext) Done() <-chan struct{} { return c.done }

func (c *appendContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// end ends the context with err, once.
func (c *appendContext) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
		close(c.done)
	}
}

// release stops following the parent.
func (c *appendContext) release() { c.stop() }
