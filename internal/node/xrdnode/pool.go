package xrdnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/ecstore/ecstore/internal/xrootd"
)

// pool is a fixed number of slots, each holding at most one connection.
// Connections are dialled lazily by the first call that needs one, in a
// goroutine bounded by Options.DialTimeout; callers wait with their own
// context, unless another slot has a live connection, or gets one while
// they wait, which serves them meanwhile (a node whose logins hang may
// still serve the connections it has, or those whose logins got through). A connection is replaced by the next call that picks its slot
// once it is dead: its socket failed, its client failed (on a frame it
// could not take, say), a request on it failed with xrootd.ErrClosed,
// or it did not answer a ping after a request timed out. The
// xrootd.Client does not reconnect by itself; this is where that
// happens.
type pool struct {
	n     *Node
	slots []slot
	next  atomic.Uint32

	// up is closed, and replaced, when a dial has connected: calls
	// waiting for the dial of their own slot look for a live
	// connection again then (await).
	upMu sync.Mutex
	up   chan struct{}
}

type slot struct {
	mu  sync.Mutex
	cur *conn
}

// conn is one pooled connection. c and err are set before ready is
// closed and never change afterwards.
type conn struct {
	ready   chan struct{}
	c       *xrootd.Client
	err     error
	dead    atomic.Bool
	probing atomic.Bool
	// ordered is set when the server is ecstore's own (it answers
	// kXR_query config "version" with xrootd.ServerVersion), which runs a
	// file's write-side requests in the order they arrive: an upload then
	// sends its last write, kXR_sync and kXR_close at once.
	ordered bool
	// closeSyncs is set when that server also makes a file durable at its
	// close (xrootd.CloseSyncsKey): an upload then sends no kXR_sync.
	closeSyncs bool
}

// failed reports whether the connection should be replaced: its dial
// failed or it died. A dial in progress is not failed.
func (cn *conn) failed() bool {
	select {
	case <-cn.ready:
		return cn.err != nil || cn.dead.Load() || cn.c.Err() != nil
	default:
		return false
	}
}

// connected reports whether the connection's dial has finished and it is
// not failed: a dial still under way is neither.
func (cn *conn) connected() bool {
	select {
	case <-cn.ready:
		return !cn.failed()
	default:
		return false
	}
}

// kill marks the connection dead and closes it.
func (cn *conn) kill() {
	cn.dead.Store(true)
	if cn.c != nil {
		cn.c.Close()
	}
}

// get returns a live connection, dialling one if its slot has none. It
// waits for a dial in progress until ctx is done, unless another slot has
// a live connection, which it returns instead.
func (p *pool) get(ctx context.Context) (*conn, error) {
	if p.n.closed.Load() {
		return nil, ErrClosed
	}
	s := &p.slots[int(p.next.Add(1))%len(p.slots)]
	s.mu.Lock()
	cn := s.cur
	fresh := false // this call started cn's dial
	if cn == nil || cn.failed() {
		if err := p.n.refusedErr(); err != nil {
			s.mu.Unlock()
			return nil, err
		}
		if cn != nil && cn.c != nil {
			cn.c.Close()
		}
		cn = p.dial()
		s.cur = cn
		fresh = true
	}
	s.mu.Unlock()
	if got, err := p.await(ctx, cn); err != nil || got != cn {
		return got, err
	}
	if cn.err != nil && !fresh && ctx.Err() == nil && p.n.refusedErr() == nil {
		// The dial that failed began before this call, perhaps while
		// the server was going down for a restart (its connection
		// reset during the login): the call dials once itself.
		s.mu.Lock()
		if s.cur == cn {
			s.cur = p.dial()
		}
		cn = s.cur
		s.mu.Unlock()
		if got, err := p.await(ctx, cn); err != nil || got != cn {
			return got, err
		}
	}
	if cn.err != nil {
		return nil, cn.err
	}
	return cn, nil
}

// await waits for the dial of cn to end and returns cn, unless a live
// connection of another slot is there first (before the wait, or when a
// dial connects during it), which it returns instead: a slot whose dial
// hangs holds its callers no longer than the pool has no connection.
func (p *pool) await(ctx context.Context, cn *conn) (*conn, error) {
	for {
		up := p.dialled() // before live: a dial that connects after it wakes us
		select {
		case <-cn.ready:
			return cn, nil
		default:
		}
		if live := p.live(); live != nil {
			return live, nil
		}
		select {
		case <-cn.ready:
			return cn, nil
		case <-up:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// dialled returns a channel closed when a dial next connects.
func (p *pool) dialled() <-chan struct{} {
	p.upMu.Lock()
	defer p.upMu.Unlock()
	if p.up == nil {
		p.up = make(chan struct{})
	}
	return p.up
}

// connected wakes the calls waiting in await: a dial has connected.
func (p *pool) connected() {
	p.upMu.Lock()
	defer p.upMu.Unlock()
	if p.up != nil {
		close(p.up)
		p.up = nil
	}
}

// live returns a connected connection of any slot that is not failed,
// or nil.
func (p *pool) live() *conn {
	start := int(p.next.Load())
	for i := range p.slots {
		s := &p.slots[(start+i)%len(p.slots)]
		s.mu.Lock()
		cn := s.cur
		s.mu.Unlock()
		if cn != nil && cn.connected() {
			return cn
		}
	}
	return nil
}

// dial starts connecting in the background and returns at once.
func (p *pool) dial() *conn {
	n := p.n
	cn := &conn{ready: make(chan struct{})}
	do := n.dialOpts
	inner := do.Dial
	do.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := inner(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &watchedConn{Conn: c, dead: &cn.dead}, nil
	}
	go func() {
		defer func() {
			if cn.err == nil {
				p.connected() // after ready is closed (deferred after it)
			}
		}()
		defer close(cn.ready)
		ctx, cancel := context.WithTimeout(n.base, n.opts.DialTimeout)
		defer cancel()
		c, err := xrootd.Dial(ctx, n.addr, &do)
		if err != nil {
			if n.base.Err() != nil {
				err = ErrClosed
			}
			cn.err = err
			n.log.Debug("xrdnode dial failed", "node", n.id, "err", err)
			return
		}
		if f := c.Protocol().Flags; f&xrootd.FlagIsManager != 0 && f&xrootd.FlagIsServer == 0 {
			c.Close()
			cn.err = fmt.Errorf("%s is a redirector (kXR_protocol flags %#x): %w", n.addr, f, ErrRedirector)
			n.log.Debug("xrdnode dial failed", "node", n.id, "err", cn.err)
			return
		}
		cn.c = c
		if !n.prefixMade.Load() {
			if err := c.Mkdir(ctx, n.prefix, 0o755, true); err != nil {
				n.log.Debug("xrdnode cannot make its prefix directory", "node", n.id, "prefix", n.prefix, "err", err)
			} else {
				n.prefixMade.Store(true)
			}
		}
		cn.ordered, cn.closeSyncs = askServer(ctx, c)
		if n.opts.CheckRoot != nil {
			if err := n.checkRoot(ctx, c); err != nil {
				c.Close()
				cn.c, cn.err = nil, err
				return
			}
		}
		n.log.Debug("xrdnode connected", "node", n.id, "ordered_writes", cn.ordered)
	}()
	return cn
}

// askServer asks the server, in one request, whether it is ecstore's own
// (ordered: it runs a file's writes in order) and whether its closes make
// files durable. Any failure means no to both: an upload then waits for
// each answer and sends kXR_sync.
func askServer(ctx context.Context, c *xrootd.Client) (ordered, closeSyncs bool) {
	vals, err := c.QueryConfig(ctx, "version", xrootd.CloseSyncsKey)
	if err != nil || len(vals) != 2 || vals[0] != xrootd.ServerVersion {
		return false, false
	}
	return true, vals[1] == "1"
}

// observe looks at the error of a request sent on cn. A closed
// connection is dead. A request that ran out of time may mean a hung
// server, so the connection is pinged in the background and dropped if
// the ping fails within DialTimeout.
func (p *pool) observe(cn *conn, err error) {
	switch {
	case err == nil || cn.dead.Load():
	case errors.Is(err, xrootd.ErrClosed):
		cn.kill()
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		if !cn.probing.CompareAndSwap(false, true) {
			return
		}
		n := p.n
		go func() {
			defer cn.probing.Store(false)
			ctx, cancel := context.WithTimeout(n.base, n.opts.DialTimeout)
			defer cancel()
			if perr := cn.c.Ping(ctx); perr != nil && n.base.Err() == nil {
				n.log.Warn("xrdnode drops an unresponsive connection", "node", n.id, "err", perr)
				cn.kill()
			}
		}()
	}
}

// close closes every connection; dials in progress were cancelled by
// the node's base context.
func (p *pool) close() {
	for i := range p.slots {
		s := &p.slots[i]
		s.mu.Lock()
		cn := s.cur
		s.cur = nil
		s.mu.Unlock()
		if cn != nil {
			<-cn.ready
			cn.kill()
		}
	}
}

// call runs fn on a pooled connection. When fn fails because the
// connection was closed and the request is idempotent, or was not sent
// at all (xrootd.ErrNotSent: the connection failed between get and the
// send), it is retried on the next connection, up to once per slot:
// after a server restart every pooled connection may be dead before the
// client has noticed, and the restart then costs no failed call. A fn
// that is not idempotent must fail with ErrNotSent only while nothing it
// sent before has changed anything a retry would change again (its
// failed request is its first that changes something, as for a remove,
// or what came before is idempotent, as a rename's mkdir -p).
func (p *pool) call(ctx context.Context, idempotent bool, fn func(c *xrootd.Client) error) error {
	return p.callConn(ctx, idempotent, func(cn *conn) error { return fn(cn.c) })
}

// callConn is call for functions that keep the connection, such as
// those that open a file on it.
func (p *pool) callConn(ctx context.Context, idempotent bool, fn func(cn *conn) error) error {
	for attempt := 0; ; attempt++ {
		cn, err := p.get(ctx)
		if err != nil {
			return err
		}
		err = fn(cn)
		p.observe(cn, err)
		if err != nil && (idempotent || errors.Is(err, xrootd.ErrNotSent)) && attempt < len(p.slots) && errors.Is(err, xrootd.ErrClosed) && ctx.Err() == nil {
			continue
		}
		return err
	}
}

// watchedConn marks its pool connection dead on the first failed read or
// write, which the client's read loop notices as soon as the server goes
// away.
type watchedConn struct {
	net.Conn
	dead *atomic.Bool
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.dead.Store(true)
	}
	return n, err
}

func (c *watchedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil {
		c.dead.Store(true)
	}
	return n, err
}

// WriteBuffers implements xrootd.BuffersWriter: a request's header and
// payload, or several requests, go out in one writev, as they would
// without the wrapper (which hid it: each frame cost the gateway two
// system calls and the node, often, two wake-ups).
func (c *watchedConn) WriteBuffers(bufs *net.Buffers) (int64, error) {
	n, err := bufs.WriteTo(c.Conn)
	if err != nil {
		c.dead.Store(true)
	}
	return n, err
}
