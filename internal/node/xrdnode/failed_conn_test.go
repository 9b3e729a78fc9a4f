package xrdnode

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/xrootd"
)

// injector forwards TCP connections to a backend and can write bytes of
// its own into what the backend sends, like a server that misbehaves.
type injector struct {
	ln      net.Listener
	backend string
	mu      sync.Mutex // held for each write to a client
	clients []net.Conn
	wg      sync.WaitGroup
	// hold, when set, makes new connections hang: accepted, never
	// forwarded (a node whose logins hang).
	hold atomic.Bool
}

func newInjector(t *testing.T, backend string) *injector {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	in := &injector{ln: ln, backend: backend}
	in.wg.Go(in.accept)
	t.Cleanup(func() {
		ln.Close()
		in.mu.Lock()
		for _, c := range in.clients {
			c.Close()
		}
		in.mu.Unlock()
		in.wg.Wait()
	})
	return in
}

func (in *injector) addr() string { return in.ln.Addr().String() }

func (in *injector) accept() {
	for {
		c, err := in.ln.Accept()
		if err != nil {
			return
		}
		if in.hold.Load() {
			in.mu.Lock()
			in.clients = append(in.clients, c)
			in.mu.Unlock()
			continue
		}
		b, err := net.Dial("tcp", in.backend)
		if err != nil {
			c.Close()
			continue
		}
		in.mu.Lock()
		in.clients = append(in.clients, c)
		in.mu.Unlock()
		in.wg.Go(func() {
			defer b.Close()
			buf := make([]byte, 64<<10)
			for {
				k, err := c.Read(buf)
				if k > 0 {
					if _, err := b.Write(buf[:k]); err != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		})
		in.wg.Go(func() {
			defer c.Close()
			buf := make([]byte, 64<<10)
			for {
				k, err := b.Read(buf)
				if k > 0 {
					in.mu.Lock()
					_, werr := c.Write(buf[:k])
					in.mu.Unlock()
					if werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		})
	}
}

// inject sends p to every client, between two of the backend's writes.
func (in *injector) inject(p []byte) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, c := range in.clients {
		c.Write(p)
	}
}

// TestFailedClientIsNotHandedOut checks that a connection whose client
// failed by itself (here on an oversized frame for no request; also a
// read abandoned while its node stopped mid-frame) is replaced before the
// next call uses it. The pool saw it as dead only once a read or write
// on its socket failed, or a call on it failed: the next call that was
// no retry (a commit's kXR_mv, a removal) failed with "connection
// closed", though nothing was sent.
func TestFailedClientIsNotHandedOut(t *testing.T) {
	s := startOurs(t, "", "127.0.0.1:0")
	in := newInjector(t, s.addr)
	n := newNode(t, "root://"+in.addr()+"//p", Options{Conns: 1})
	putFile(t, n, "/f", []byte("data"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	cn := n.pool.slots[0].cur
	in.inject(xrootd.AppendResponseHeader(nil, xrootd.StreamID{0xee, 0xee}, xrootd.StatusOK, 1<<30))
	for cn.c.Ping(ctx) == nil {
		if ctx.Err() != nil {
			t.Fatal("the client took the oversized frame")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := n.Remove(ctx, "/f"); err != nil {
		t.Fatalf("remove after the connection's client failed: %v", err)
	}
	if _, err := n.Stat(ctx, "/f"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat after remove: %v", err)
	}
}
