package httpmeter

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// Regression (found by review): a response written to a client that
// stopped reading blocked its handler forever (no listener sets a write
// timeout, which would also cut long downloads): the handler held its
// object reader and the archives it had open on the nodes. A write now
// fails once the client has taken nothing for Stall (WriteStall).
func TestWriteToAClientThatStopsReadingFails(t *testing.T) {
	returned := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(hw http.ResponseWriter, r *http.Request) {
		w := &Writer{ResponseWriter: hw, Stall: 300 * time.Millisecond}
		buf := make([]byte, 1<<20)
		var err error
		for i := 0; i < 4096 && err == nil; i++ {
			_, err = w.Write(buf)
		}
		returned <- err
	}))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4096)
	conn.Write([]byte("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")) // and never read
	select {
	case err := <-returned:
		if err == nil {
			t.Error("the handler wrote 4 GiB to a client that reads nothing")
		}
	case <-time.After(10 * time.Second):
		t.Error("the handler is still blocked in Write after 10 s")
	}
}
