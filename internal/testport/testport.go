// Package testport hands tests loopback TCP ports for the servers they
// start: ports that were free a moment ago and that no other call in the
// process returned. Asking the kernel for a free port (a listen on port
// 0, closed at once) can give the same port to two calls in a row, and
// two servers started on it would then share one address.
package testport

import (
	"net"
	"strconv"
	"sync"
	"testing"
)

var (
	mu    sync.Mutex
	given = map[int]bool{}
)

// Free returns a loopback TCP port that was free a moment ago and that
// Free did not return before in this process.
func Free(t testing.TB) int {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("testport: %v", err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if !given[port] {
			given[port] = true
			return port
		}
	}
	t.Fatal("testport: every free loopback port offered was handed out before")
	return 0
}

// Addr returns "127.0.0.1:PORT" with a port from Free.
func Addr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(Free(t)))
}
