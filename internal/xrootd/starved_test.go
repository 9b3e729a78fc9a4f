package xrootd

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// TestLostRequestsDoNotStarveTheConnection checks that requests a node
// never answers (it answers pings, not these), given up on by their
// callers long ago, do not keep the connection's stream ids from the
// requests that follow: once none is free and half are held by such
// requests, the connection fails, and a request waiting for an id fails
// at once with ErrClosed (the pool dials a fresh connection). It waited
// until its own deadline, as did every request after it, until the
// pool's ping failed, which it never did.
func TestLostRequestsDoNotStarveTheConnection(t *testing.T) {
	fs := &fakeServer{t: t, serve: func(w net.Conn, f *RequestFrame) {
		if f.ID == ReqPing {
			w.Write(respond(f.StreamID, StatusOK, nil))
		} // a stat is never answered
	}}
	c := dial(t, fs.start(), &DialOptions{MaxInflight: 4, staleAbandoned: 100 * time.Millisecond})
	ctx := testCtx(t)
	for range 4 {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		if _, err := c.Stat(sctx, "/lost"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("stat of a node that does not answer: %v", err)
		}
		cancel()
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	start := time.Now()
	err := c.Ping(pctx)
	if !errors.Is(err, ErrClosed) {
		t.Errorf("ping with every stream id held by lost requests: %v, want ErrClosed", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("ping waited %v for a stream id held by lost requests", d)
	}
}

// TestFewLostRequestsKeepTheConnection checks that a request lost now
// and then does not fail a busy connection: with fewer than half of the
// stream ids held by lost requests, a request waits for one of the
// others.
func TestFewLostRequestsKeepTheConnection(t *testing.T) {
	release := make(chan struct{})
	fs := &fakeServer{t: t, serve: func(w net.Conn, f *RequestFrame) {
		switch f.ID {
		case ReqPing:
			w.Write(respond(f.StreamID, StatusOK, nil))
		case ReqMkdir: // slow, answered
			go func() {
				<-release
				w.Write(respond(f.StreamID, StatusOK, nil))
			}()
		} // a stat is never answered
	}}
	c := dial(t, fs.start(), &DialOptions{MaxInflight: 4, staleAbandoned: 50 * time.Millisecond})
	ctx := testCtx(t)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	c.Stat(sctx, "/lost")
	cancel()
	for range 3 {
		go c.Mkdir(ctx, "/slow", 0o755, false)
	}
	time.Sleep(150 * time.Millisecond)
	time.AfterFunc(100*time.Millisecond, func() { close(release) })
	if err := c.Ping(ctx); err != nil {
		t.Errorf("ping waiting behind one lost request and three slow ones: %v", err)
	}
}
