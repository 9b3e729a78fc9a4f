package xrootd

import (
	"net"
	"testing"
)

// TestAnswerBeforeCloseIsTaken checks that a request answered just
// before the server closed the connection (a node restarting: it answers
// what it has and goes) gets its answer. Half the time it failed with
// "connection closed", the answer in hand: a kXR_mv, kXR_rm or kXR_close
// the node carried out was reported failed (a commit or a rename undone
// in the gateway's eyes only, on that node), and the pool retried
// idempotent ones on another connection.
func TestAnswerBeforeCloseIsTaken(t *testing.T) {
	ctx := testCtx(t)
	for i := range 20 {
		fs := &fakeServer{t: t, serve: func(w net.Conn, f *RequestFrame) {
			w.Write(respond(f.StreamID, StatusOK, nil))
			w.Close()
		}}
		c := dial(t, fs.start(), nil)
		if err := c.Mv(ctx, "/a", "/b"); err != nil {
			t.Fatalf("attempt %d: mv answered kXR_ok before the close: %v", i, err)
		}
	}
}
