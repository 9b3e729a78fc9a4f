package xrootd

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
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
	// context's error, and not again when its answer comes.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	pd, err := c.start(ctx, &PingRequest{}, nil)
	if err != nil {
		t.Fatal(err)
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
