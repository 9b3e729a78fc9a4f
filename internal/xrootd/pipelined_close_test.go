package xrootd

import (
	"testing"
)

// Regression: a read sent before a close of the same handle, in one
// write, was answered kXR_FileNotOpen most of the time: the close, queued
// on the file's idle worker, took the handle out of the table before the
// read's goroutine looked for it. A request that arrived while the file
// was open is served, as by xrootd, whose close waits for the file's I/O
// in progress (asynchronous XrdCl reads, then File::Close).
func TestReadsPipelinedBeforeACloseAreServed(t *testing.T) {
	m := newMemFS()
	m.put("/f", make([]byte, 8192))
	addr, _ := startServer(t, m, Limits{})
	rc := rawDial(t, addr, true)
	reads := map[string]func(fh FileHandle) Request{
		"read": func(fh FileHandle) Request { return &ReadRequest{Handle: fh, Offset: 0, Length: 100} },
		"readv": func(fh FileHandle) Request {
			return &ReadVRequest{Segments: []ReadSegment{{Handle: fh, Offset: 0, Length: 100}, {Handle: fh, Offset: 4096, Length: 10}}}
		},
		"stat": func(fh FileHandle) Request { return &StatRequest{Handle: fh} },
	}
	for name, req := range reads {
		bad := 0
		for range 50 {
			rc.send(StreamID{0, 2}, &OpenRequest{Options: OpenRead, Path: "/f"})
			f := rc.final()
			if f.Status != StatusOK {
				t.Fatalf("open answered %v %q", f.Status, f.Body)
			}
			or, err := ParseOpenResponse(f.Body)
			if err != nil {
				t.Fatal(err)
			}
			b := EncodeRequest(StreamID{0, 3}, req(or.Handle)).AppendTo(nil)
			b = EncodeRequest(StreamID{0, 4}, &CloseRequest{Handle: or.Handle}).AppendTo(b)
			rc.write(b)
			for finals := 0; finals < 2; {
				f := rc.read()
				if !isFinal(f) {
					continue
				}
				finals++
				if f.Status != StatusOK {
					xe, _ := ParseErrorBody(f.Body)
					if bad == 0 {
						t.Errorf("%s (stream %v) sent before the close: %v %v", name, f.StreamID, f.Status, xe)
					}
					bad++
				}
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of 50 failed", name, bad)
		}
	}
}
