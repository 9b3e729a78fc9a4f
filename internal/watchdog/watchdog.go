// Package watchdog bounds an operation by how long it goes without
// progress rather than by its whole duration. A directory listing of
// hundreds of thousands of entries arrives in many parts over seconds: a
// fixed deadline cuts it off however steadily the parts come, while a
// peer that has stopped answering should be given up on quickly. A
// context from WithIdleTimeout expires once it has seen no Progress for
// its idle time; the code that receives the parts (a protocol client, a
// directory reader) calls Progress with the context it was given.
package watchdog

import (
	"context"
	"sync"
	"time"
)

type ctxKey struct{}

// idleContext is a context that ends with context.DeadlineExceeded when
// idle passes without a call to touch, or when its parent ends.
type idleContext struct {
	context.Context
	idle time.Duration
	done chan struct{}

	mu         sync.Mutex
	err        error
	timer      *time.Timer
	stopParent func() bool
	busy       int // Busy calls not yet done: the timer is stopped
}

// WithIdleTimeout returns a context that expires (Err is
// context.DeadlineExceeded) when idle passes without a Progress call on
// it or on a context derived from it, or when parent ends. Its Deadline
// is the parent's: it has no fixed one. The cancel function releases its
// timer and must be called when the operation ends.
func WithIdleTimeout(parent context.Context, idle time.Duration) (context.Context, context.CancelFunc) {
	c := &idleContext{Context: parent, idle: idle, done: make(chan struct{})}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timer = time.AfterFunc(idle, func() { c.end(context.DeadlineExceeded) })
	c.stopParent = context.AfterFunc(parent, func() { c.end(parent.Err()) })
	return c, func() { c.end(context.Canceled) }
}

// end ends c with err unless it has ended already.
func (c *idleContext) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	close(c.done)
	c.timer.Stop()
	c.stopParent()
}

// touch restarts c's idle time, unless c has ended or is busy.
func (c *idleContext) touch() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil && c.busy == 0 {
		c.timer.Reset(c.idle)
	}
}

// pause stops c's idle time until resume.
func (c *idleContext) pause() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.busy++
	c.timer.Stop()
}

// resume undoes a pause; the last one restarts c's idle time.
func (c *idleContext) resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.busy--
	if c.err == nil && c.busy == 0 {
		c.timer.Reset(c.idle)
	}
}

func (c *idleContext) Done() <-chan struct{} { return c.done }

func (c *idleContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *idleContext) Value(key any) any {
	if key == (ctxKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// Busy is Progress for a caller that goes on to work on what it received
// (parse a part of an answer, say): the watchdogs of ctx stop until done
// is called, then start their idle time again. The time a slow or
// starved caller takes over its own work is not the peer's silence.
func Busy(ctx context.Context) (done func()) {
	if _, ok := ctx.Value(ctxKey{}).(*idleContext); !ok {
		return nothing // the common case: every frame of every answer asks
	}
	var paused []*idleContext
	for c, _ := ctx.Value(ctxKey{}).(*idleContext); c != nil; c, _ = c.Context.Value(ctxKey{}).(*idleContext) {
		c.pause()
		paused = append(paused, c)
	}
	return func() {
		for _, c := range paused {
			c.resume()
		}
	}
}

// Progress tells every watchdog of ctx (WithIdleTimeout, nested ones
// included) that the operation has moved on: their idle time starts
// again. Without a watchdog it does nothing.
func Progress(ctx context.Context) {
	for c, _ := ctx.Value(ctxKey{}).(*idleContext); c != nil; c, _ = c.Context.Value(ctxKey{}).(*idleContext) {
		c.touch()
	}
}

func nothing() {}
