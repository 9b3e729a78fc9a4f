// Package testgateway runs an in-process ecstore gateway over a test
// cluster, for tests of packages that talk root:// to it. Test support
// only.
package testgateway

import (
	"context"
	"testing"

	"github.com/ecstore/ecstore/internal/gateway"
	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/testcluster"
)

// Start serves a gateway on a free loopback port over a fresh 3+2 test
// cluster (6 nodes, 256 KiB chunks) and returns its host:port. It stops
// when the test ends.
func Start(t testing.TB) string {
	t.Helper()
	c := testcluster.New(t, 6, layout.Geometry{K: 3, M: 2, ChunkSize: 256 << 10})
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- gateway.Serve(ctx, gateway.Config{Store: c.Store, RootAddr: "127.0.0.1:0", Ready: func(a string) { ready <- a }})
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case addr := <-ready:
		return addr
	case err := <-done:
		t.Fatalf("gateway: %v", err)
	}
	return ""
}
