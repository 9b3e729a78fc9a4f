package obs

import (
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/node"
)

// BenchmarkNodeOperation is what the metrics cost a node request (a random
// read counts one, and a gateway request besides).
func BenchmarkNodeOperation(b *testing.B) {
	m := New()
	ev := m.Events()
	hooks := m.GatewayHooks()
	op := node.Operation{Name: "read", Duration: 300 * time.Microsecond, Read: 32 << 10}
	b.ReportAllocs()
	for b.Loop() {
		ev.NodeOperation("node07", op)
		hooks.Request("read", time.Millisecond, nil)
		hooks.Bytes("read", 30000)
	}
}
