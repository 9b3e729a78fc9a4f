package xrdnode

import (
	"context"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/xrootd"
)

// TestUnsentCallIsRetried checks that a call that is not idempotent (a
// rename) whose connection failed between the pool handing it out and
// the request being sent is sent again on a new connection: the request
// provably never reached the node. It failed with "connection closed".
func TestUnsentCallIsRetried(t *testing.T) {
	s := startOurs(t, "", "127.0.0.1:0")
	n := newNode(t, "root://"+s.addr+"//p", Options{Conns: 1})
	putFile(t, n, "/a", []byte("data"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	calls := 0
	err := n.pool.call(ctx, false, func(c *xrootd.Client) error {
		if calls++; calls == 1 {
			c.Close() // the connection fails before the send
		}
		return c.Mv(ctx, n.remote("/a"), n.remote("/b"))
	})
	if err != nil {
		t.Fatalf("rename whose first connection failed before the send: %v", err)
	}
	if calls != 2 {
		t.Errorf("fn ran %d times, want 2", calls)
	}
	if _, err := n.Stat(ctx, "/b"); err != nil {
		t.Errorf("stat of the renamed file: %v", err)
	}
}
