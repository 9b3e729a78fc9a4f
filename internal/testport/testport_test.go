package testport

import (
	"net"
	"testing"
)

// No port is handed out twice, and each was free when handed out.
func TestFreeNeverRepeats(t *testing.T) {
	seen := map[int]bool{}
	for range 500 {
		p := Free(t)
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
	ln, err := net.Listen("tcp", Addr(t))
	if err != nil {
		t.Fatalf("listen on a port from Addr: %v", err)
	}
	ln.Close()
}
