package xrootd

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// TestRequestOnAFailedConnectionIsUnsent checks that a request that never
// left the client, its connection having failed first (before its call,
// or while it waited for a stream id), fails with ErrNotSent as well as
// ErrClosed, which lets the pool send even a kXR_mv or kXR_rm again on
// another connection; one that was sent does not. All failed alike with
// ErrClosed: a rename or a commit that never reached the node failed,
// though a retry was safe.
func TestRequestOnAFailedConnectionIsUnsent(t *testing.T) {
	fs := &fakeServer{t: t, serve: func(net.Conn, *RequestFrame) {}} // answers nothing
	c := dial(t, fs.start(), &DialOptions{MaxInflight: 1})
	ctx := testCtx(t)
	sent := make(chan error, 1)
	go func() { sent <- c.Ping(ctx) }() // takes the only stream id
	time.Sleep(50 * time.Millisecond)
	waiting := make(chan error, 1)
	go func() { waiting <- c.Mv(ctx, "/a", "/b") }() // waits for it
	time.Sleep(50 * time.Millisecond)
	c.Close()
	for _, tc := range []struct {
		name   string
		err    error
		unsent bool
	}{
		{"sent", <-sent, false},
		{"waiting for a stream id", <-waiting, true},
		{"after the failure", c.Rm(ctx, "/a"), true},
	} {
		if !errors.Is(tc.err, ErrClosed) || errors.Is(tc.err, ErrNotSent) != tc.unsent {
			t.Errorf("%s: %v; want ErrClosed, and ErrNotSent %v", tc.name, tc.err, tc.unsent)
		}
	}
	if _, err := c.startAll(context.Background(), []Request{&SyncRequest{}, &CloseRequest{}}); !errors.Is(err, ErrNotSent) {
		t.Errorf("batch after the failure: %v, want ErrNotSent", err)
	}
}
