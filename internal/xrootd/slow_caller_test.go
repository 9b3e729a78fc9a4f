package xrootd

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// TestSlowCallerDoesNotHoldTheConnection checks that a caller that does
// not take the parts of its answer (a ListAttrEach callback that blocks)
// holds the connection's other requests for at most partWait: the
// connection's reader waited for it for as long as it took, so a ping on
// the same connection went unanswered all that while. The listing fails
// with ErrSlowCaller instead.
func TestSlowCallerDoesNotHoldTheConnection(t *testing.T) {
	var part []byte
	for len(part) < 4<<10 {
		part = AppendAttrListEntry(part, &AttrEntry{FileInfo: FileInfo{Name: "f", ModTime: time.Unix(1764160000, 0)}})
	}
	fs := &fakeServer{t: t, serve: func(w net.Conn, f *RequestFrame) {
		switch f.ID {
		case ReqQuery:
			for range 16 {
				w.Write(respond(f.StreamID, StatusOKSoFar, part))
			}
			w.Write(respond(f.StreamID, StatusOK, nil))
		case ReqPing:
			w.Write(respond(f.StreamID, StatusOK, nil))
		}
	}}
	c := dial(t, fs.start(), &DialOptions{partWait: 100 * time.Millisecond})
	ctx := testCtx(t)
	release := make(chan struct{})
	taken := make(chan struct{}, 1)
	listed := make(chan error, 1)
	go func() {
		listed <- c.ListAttrEach(ctx, "/d", "a", func([]AttrEntry) error {
			select {
			case taken <- struct{}{}:
			default:
			}
			<-release
			return nil
		})
	}()
	<-taken
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	err := c.Ping(pctx)
	close(release)
	if err != nil {
		t.Fatalf("ping while a listing's caller takes no parts: %v after %v", err, time.Since(start))
	}
	if err := <-listed; !errors.Is(err, ErrSlowCaller) {
		t.Errorf("listing whose caller took no parts: %v, want ErrSlowCaller", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Errorf("ping after the listing: %v", err)
	}
}
