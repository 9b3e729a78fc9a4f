package xrdnode

import (
	"context"
	"testing"
	"time"
)

// Regression (found by review): a request on a connection whose server
// stopped reading waited for the connection's write lock without looking
// at its own context: a Stat with a 200 ms deadline returned only when
// the write that held the lock gave up, at that write's deadline (4 s).
func TestRequestsBehindABlockedWriteKeepTheirDeadlines(t *testing.T) {
	s := startOurs(t, "", "127.0.0.1:0")
	fz := newFreezer(t, s.addr)
	n := newNode(t, "root://"+fz.addr(), Options{Conns: 1, DialTimeout: 300 * time.Millisecond})
	bg := context.Background()
	putFile(t, n, "/f", []byte("hello"))
	u, err := n.Create(bg, "/g")
	if err != nil {
		t.Fatal(err)
	}
	fz.freeze()
	const writeDeadline = 4 * time.Second
	go func() {
		ctx, cancel := context.WithTimeout(bg, writeDeadline)
		defer cancel()
		// 64 MiB: more than the socket buffers hold; the frame being
		// written then blocks in the kernel with the lock held.
		u.Write(ctx, make([]byte, 64<<20))
	}()
	time.Sleep(500 * time.Millisecond) // the write fills the buffers
	ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = n.Stat(ctx, "/f")
	took := time.Since(start)
	t.Logf("Stat with a 200ms deadline: %v after %v", err, took)
	if took > time.Second {
		t.Errorf("Stat returned after %v; its deadline was 200ms", took)
	}
	fz.thaw()
	u.Abort(bg)
}
