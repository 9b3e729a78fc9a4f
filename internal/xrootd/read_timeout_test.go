package xrootd

import (
	"testing"
	"time"
)

// Regression (found by review): a client that stopped in the middle of a
// request frame (a header announcing a payload, part of it, then
// silence), or that connected and never logged in, held its connection,
// goroutine and buffers forever, IdleTimeout or not. ReadTimeout bounds
// both.
func TestSilentClientsAreCutOff(t *testing.T) {
	addr, _ := startServer(t, newMemFS(), Limits{ReadTimeout: 200 * time.Millisecond})

	half := rawDial(t, addr, true)
	h := RequestHeader{StreamID: StreamID{0, 9}, ID: ReqPing, Dlen: 1000}
	half.write(h.AppendTo(nil)[:RequestHeaderLen])
	half.write(make([]byte, 10)) // 10 of the 1000 bytes, then silence
	start := time.Now()
	half.expectClosed()
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("closed after %v", took)
	}

	silent := rawDial(t, addr, false) // handshake and kXR_protocol, never a login
	silent.expectClosed()

	// A logged-in client may stay idle: only IdleTimeout (off here) ends
	// that.
	idle := rawDial(t, addr, true)
	time.Sleep(500 * time.Millisecond)
	idle.ping(StreamID{0, 1})
}
