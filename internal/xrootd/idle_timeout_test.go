package xrootd

import (
	"testing"
	"time"
)

// TestIdleTimeoutSparesOpenFiles: IdleTimeout ends a logged-in
// connection that has been silent with nothing to do, but not one that
// holds an open file (an analysis job reads, computes for an hour, reads
// again), nor one whose request is still being answered.
func TestIdleTimeoutSparesOpenFiles(t *testing.T) {
	m := newMemFS()
	m.put("/data/f", []byte("held open"))
	addr, _ := startServer(t, m, Limits{IdleTimeout: 200 * time.Millisecond})

	idle := rawDial(t, addr, true)
	start := time.Now()
	idle.expectClosed()
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("idle connection closed after %v", took)
	}

	cl := dial(t, addr, nil)
	ctx := testCtx(t)
	f, err := cl.Open(ctx, "/data/f", OpenRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond) // 3.5 idle timeouts, the file open
	buf := make([]byte, 9)
	if n, err := f.ReadAt(ctx, buf, 0); err != nil || string(buf[:n]) != "held open" {
		t.Fatalf("read after a pause with the file open: %q, %v", buf[:n], err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
