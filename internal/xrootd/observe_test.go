package xrootd

import (
	"bytes"
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// observations collects what a Client tells DialOptions.Observe.
type observations struct {
	mu  sync.Mutex
	got []Observation
}

func (o *observations) add(ob Observation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, ob)
}

// take returns what was observed since the last take.
func (o *observations) take() []Observation {
	o.mu.Lock()
	defer o.mu.Unlock()
	got := o.got
	o.got = nil
	return got
}

// TestClientObservesRequests checks that every request is observed once,
// with its name, its data bytes and how it ended: an answer, the
// server's error, or the caller giving up.
func TestClientObservesRequests(t *testing.T) {
	mfs := newMemFS()
	addr, _ := startServer(t, mfs, Limits{})
	var obs observations
	c := dial(t, addr, &DialOptions{Observe: obs.add})
	ctx := testCtx(t)
	if got := obs.take(); len(got) != 0 {
		t.Errorf("the handshake's requests observed as %+v, want none", got)
	}

	data := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	f, err := c.Open(ctx, "/obj", OpenNew|OpenUpdate, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(data))
	if n, err := f.ReadAt(ctx, buf, 0); err != nil || n != len(data) {
		t.Fatalf("ReadAt: %d, %v", n, err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat(ctx, "/missing"); err == nil {
		t.Fatal("stat of a missing path succeeded")
	}
	if _, err := c.Space(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	var names []string
	var sent int
	var received int64
	for _, o := range obs.take() {
		names = append(names, o.Name)
		if o.Duration <= 0 || o.Duration > time.Minute {
			t.Errorf("%s took %v", o.Name, o.Duration)
		}
		switch o.Name {
		case "write":
			sent += o.Sent
		case "read":
			received += o.Received
		case "stat":
			var xe *Error
			if !errors.As(o.Err, &xe) || xe.Code != ErrNotFound {
				t.Errorf("stat of a missing path observed with error %v, want kXR_NotFound", o.Err)
			}
			continue
		}
		if o.Err != nil {
			t.Errorf("%s observed with error %v", o.Name, o.Err)
		}
	}
	want := []string{"open", "write", "read", "close", "stat", "query_space"}
	if !slices.Equal(names, want) {
		t.Errorf("observed %q, want %q", names, want)
	}
	if sent != len(data) || received != int64(len(data)) {
		t.Errorf("observed %d bytes written and %d read, want %d each", sent, received, len(data))
	}

	// A request whose caller gives up is observed once, with its
	// context's error, and not again when its answer comes. Here the
	// answer has come before the wait: the wait still gives up (it took
	// the answer at random, and crashed on the nil onData, in a CI run).
	gone, cancel := context.WithCancel(ctx)
	cancel()
	pd, err := c.start(ctx, &PingRequest{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); len(pd.cl.frames) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no answer to the ping in 5 s")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := pd.wait(gone, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with a cancelled context: %v", err)
	}
	pd.abandon()
	if err := c.Ping(ctx); err != nil { // the abandoned ping's answer has come by now
		t.Fatal(err)
	}
	got := obs.take()
	if len(got) != 2 || got[0].Name != "ping" || !errors.Is(got[0].Err, context.Canceled) || got[1].Err != nil {
		t.Errorf("abandoned and answered pings observed as %+v", got)
	}
}

// writeFailingConn fails every write once fail is set.
type writeFailingConn struct {
	net.Conn
	fail *atomic.Bool
}

func (c writeFailingConn) Write(p []byte) (int, error) {
	if c.fail.Load() {
		return 0, errors.New("injected write failure")
	}
	return c.Conn.Write(p)
}

// TestClientObservesASendFailure checks that a request whose frame could
// not be written is observed, with its error (found by review).
func TestClientObservesASendFailure(t *testing.T) {
	addr, _ := startServer(t, newMemFS(), Limits{})
	var obs observations
	var fail atomic.Bool
	c := dial(t, addr, &DialOptions{Observe: obs.add, Dial: func(ctx context.Context, network, a string) (net.Conn, error) {
		cn, err := (&net.Dialer{}).DialContext(ctx, network, a)
		if err != nil {
			return nil, err
		}
		return writeFailingConn{cn, &fail}, nil
	}})
	obs.take()
	fail.Store(true)
	err := c.Ping(testCtx(t))
	if got := obs.take(); err == nil || len(got) != 1 || got[0].Name != "ping" || got[0].Err == nil {
		t.Errorf("ping over a connection that cannot be written: %v; observed %+v", err, got)
	}
}
