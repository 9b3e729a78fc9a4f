package xrootd

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

// TestReadAbandonedWhileArrivingKeepsTheConnection checks that a read
// given up on while its answer is arriving, bytes still flowing (a reader
// closed with read-ahead in flight, a chunk read timed out on a slow
// node), leaves the connection up: the rest of the answer is skipped, and
// the other requests on the connection, and the files open on it (an
// upload's), go on. The connection was failed, which failed every upload
// and read open on it. The caller's buffer is never written after the
// read returned.
func TestReadAbandonedWhileArrivingKeepsTheConnection(t *testing.T) {
	const size = 1 << 20
	var wmu sync.Mutex // one frame at a time on the wire
	fs := &fakeServer{t: t, serve: func(w net.Conn, f *RequestFrame) {
		switch f.ID {
		case ReqOpen:
			w.Write(respond(f.StreamID, StatusOK, []byte{0, 0, 0, 1}))
		case ReqPing:
			wmu.Lock()
			w.Write(respond(f.StreamID, StatusOK, nil))
			wmu.Unlock()
		case ReqRead:
			// A slow node: the answer arrives over about 150 ms.
			wmu.Lock()
			w.Write(AppendResponseHeader(nil, f.StreamID, StatusOK, size))
			go func() {
				defer wmu.Unlock()
				piece := bytes.Repeat([]byte("Z"), 16<<10)
				for sent := 0; sent < size; sent += len(piece) {
					if _, err := w.Write(piece); err != nil {
						return
					}
					time.Sleep(2 * time.Millisecond)
				}
			}()
		}
	}}
	c := dial(t, fs.start(), nil)
	ctx := testCtx(t)
	f, err := c.Open(ctx, "/x", OpenRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := bytes.Repeat([]byte("."), size)
	tctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := f.ReadAt(tctx, buf, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read: %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("the abandoned read returned after %v", d)
	}
	snap := bytes.Clone(buf)
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("ping after a read abandoned while its answer was arriving: %v", err)
	}
	if !bytes.Equal(buf, snap) {
		t.Errorf("the abandoned read wrote into the caller's buffer after it returned")
	}
}
