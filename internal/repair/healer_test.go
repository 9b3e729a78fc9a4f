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

// TestHealRebuildsWhatAWriteDropped: Heal (what `ecstore put` runs after
// a degraded write) rebuilds the slot of a node that failed during the
// write on the free node, and does nothing to a healthy object.
func TestHealRebuildsWhatAWriteDropped(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 512}
	s, fs, c := faultyStore(t, 7, g)
	first := bytes.Repeat([]byte("first "), 1000)
	put(t, s, "/w", first) // the overwrite has the same placement
	info, err := s.Stat(ctx, "/w")
	if err != nil {
		t.Fatal(err)
	}
	if slots, res, err := Heal(ctx, s, "/w", nil); len(slots) != 0 || res != nil || err != nil {
		t.Fatalf("heal of a healthy object: slots %v, %v, %v", slots, res, err)
	}
	down := c.NodeIndex(info.Placement[2])
	data := bytes.Repeat([]byte("second "), 1000)
	w, err := s.Create(ctx, "/w", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data[:3000]); err != nil {
		t.Fatal(err)
	}
	fs[down].SetDown(true)
	if _, err := w.Write(data[3000:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("write with one node down mid-way: %v", err)
	}
	slots, res, err := Heal(ctx, s, "/w", nil)
	if err != nil || len(slots) != 1 || slots[0] != 2 || res == nil || res.Rebuilt[2] == "" || res.Rebuilt[2] == info.Placement[2] {
		t.Fatalf("heal after the write dropped slot 2 (node %s): slots %v, result %+v, err %v", info.Placement[2], slots, res, err)
	}
	in, err := s.Inspect(ctx, "/w", true)
	if err != nil || in.Health != object.Healthy {
		t.Fatalf("after heal: %v %v", in.Health, err)
	}
	if got, err := get(s, "/w"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after heal: %v", err)
	}
}
