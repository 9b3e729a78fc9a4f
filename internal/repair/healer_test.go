package repair

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/testcluster"
)

// TestHealerRepairsWhatReadsFind: a read that needs parity queues the
// object, and the healer rebuilds the lost archive without anyone running
// repair.
func TestHealerRepairsWhatReadsFind(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 512}
	c := testcluster.New(t, 6, g)
	healed := make(chan bool, 4)
	h := NewHealer(nil, HealerOptions{Settle: 10 * time.Millisecond, Healed: func(_ string, _ int64, ok bool) { healed <- ok }})
	nodes := make([]node.Node, len(c.Nodes))
	copy(nodes, c.Nodes)
	s, err := object.New(nodes, object.Options{Geometry: g, MinFree: -1, Events: h.Events(object.Events{})})
	if err != nil {
		t.Fatal(err)
	}
	h.SetStore(s)
	go h.Run(ctx)
	data := bytes.Repeat([]byte("heal me "), 2000)
	put(t, s, "/h", data)
	info, _ := s.Stat(ctx, "/h")
	os.Remove(c.Archive(c.NodeIndex(info.Placement[0]), "/h"))
	if got, err := get(s, "/h"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("degraded read: %v", err)
	}
	select {
	case ok := <-healed:
		if !ok {
			t.Fatal("heal failed")
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("not healed; %d pending", h.Pending())
	}
	in, err := s.Inspect(ctx, "/h", true)
	if err != nil || in.Health != object.Healthy {
		t.Fatalf("after healing: %v %v", in.Health, err)
	}
}
