package xrootd

import (
	"errors"
	"net"
	"sync/atomic"
	"testing"
)

// TestWaitAfterPartOfTheAnswerIsMalformed checks that a kXR_wait that
// ends an answer of which parts (kXR_oksofar) came already is refused:
// the request was sent again and the parts of both answers taken
// together, so a read returned a mix of the two as its data (here
// "efcd" and two bytes never written, as success) and a listing
// repeated its entries.
func TestWaitAfterPartOfTheAnswerIsMalformed(t *testing.T) {
	var reads, lists atomic.Int32
	fs := &fakeServer{t: t, serve: func(w net.Conn, f *RequestFrame) {
		switch f.ID {
		case ReqOpen:
			w.Write(respond(f.StreamID, StatusOK, []byte{0, 0, 0, 1}))
		case ReqRead:
			if reads.Add(1) == 1 {
				w.Write(respond(f.StreamID, StatusOKSoFar, []byte("abcd")))
				w.Write(respond(f.StreamID, StatusWait, be32(0)))
				return
			}
			w.Write(respond(f.StreamID, StatusOK, []byte("ef")))
		case ReqDirlist:
			if lists.Add(1) == 1 {
				w.Write(respond(f.StreamID, StatusOKSoFar, []byte("a\n")))
				w.Write(respond(f.StreamID, StatusWait, be32(0)))
				return
			}
			w.Write(respond(f.StreamID, StatusOK, []byte("a\nb\x00")))
		}
	}}
	c := dial(t, fs.start(), nil)
	ctx := testCtx(t)
	f, err := c.Open(ctx, "/x", OpenRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if n, err := f.ReadAt(ctx, buf, 0); !errors.Is(err, ErrMalformed) {
		t.Errorf("read: %d bytes %q, %v; want ErrMalformed", n, buf[:n], err)
	}
	if list, err := c.Dirlist(ctx, "/", false); !errors.Is(err, ErrMalformed) {
		t.Errorf("dirlist: %d entries %+v, %v; want ErrMalformed", len(list), list, err)
	}
}
