package xrootd

import (
	"bytes"
	"runtime"
	"testing"
)

// Regression (found by review): a 16 MiB kXR_prepare or kXR_statx of
// one-character paths was split into 8 million strings, about 1 GB
// allocated per request, and before the login was checked: a few
// unauthenticated connections ran a gateway out of memory. Requests are
// refused by their id before they are parsed when the client has not
// logged in, and a list holds at most maxListItems paths.
func TestListRequestsAreBounded(t *testing.T) {
	payload := bytes.Repeat([]byte("a\n"), (DefaultMaxPayload-1)/2)
	for _, id := range []RequestID{ReqPrepare, ReqStatx} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := ParseRequest(&RequestFrame{ID: id, Payload: payload})
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Errorf("%v of %d paths parsed", id, len(payload)/2)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4*uint64(len(payload)) {
			t.Errorf("parsing a %d-byte %v allocated %d bytes", len(payload), id, alloc)
		}
	}
	if r, err := ParseRequest(&RequestFrame{ID: ReqStatx, Payload: []byte("/a\n/b\n\x00")}); err != nil || len(r.(*StatxRequest).Paths) != 2 {
		t.Errorf("a statx of 2 paths: %+v, %v", r, err)
	}

	addr, _ := startServer(t, newMemFS(), Limits{})
	rc := rawDial(t, addr, false) // handshake and kXR_protocol, no login
	frame := EncodeRequest(StreamID{0, 7}, &RawRequest{ID: ReqPrepare, Payload: payload}).AppendTo(nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 4 {
		rc.write(frame)
		rc.expectError(StreamID{0, 7}, ErrNotAuthorized)
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4*4*uint64(len(frame)) {
		t.Errorf("4 prepares before login cost %d bytes", alloc)
	}
}
