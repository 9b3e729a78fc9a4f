package xrootd

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"
)

// readLoops counts the goroutines running a client's read loop.
func readLoops() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return bytes.Count(buf, []byte("(*Client).readLoop("))
}

// TestReadLoopEndsWhenClosedWhileDelivering checks that a client's read
// loop ends when the connection is closed while it waits to hand a
// frame to a caller that is busy with the answer's earlier parts (a
// listing reduced part by part). The caller, finding the connection
// closed, stopped listening without saying so, and the read loop waited
// for it forever, with the client, its buffers and the frames.
func TestReadLoopEndsWhenClosedWhileDelivering(t *testing.T) {
	before := readLoops()
	fs := &fakeServer{t: t, serve: func(w net.Conn, f *RequestFrame) {
		if f.ID != ReqQuery {
			return
		}
		// An answer in many parts, sent at once, never finished.
		for i := range 40 {
			e := &AttrEntry{FileInfo: FileInfo{Name: fmt.Sprint("e", i), Size: 1}}
			w.Write(respond(f.StreamID, StatusOKSoFar, AppendAttrListEntry(nil, e)))
		}
	}}
	c := dial(t, fs.start(), nil)
	ctx := testCtx(t)
	busy, closed := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		first := true
		done <- c.ListAttrEach(ctx, "/d", "a", func([]AttrEntry) error {
			if first {
				first = false
				close(busy)
				<-closed
			}
			return nil
		})
	}()
	<-busy
	time.Sleep(50 * time.Millisecond) // the other parts arrive
	c.Close()
	close(closed)
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("listing: %v, want ErrClosed", err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for readLoops() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d read loops left running after Close (%d before the test)", readLoops(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
