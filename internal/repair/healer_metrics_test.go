package repair

import (
	"bytes"
	"context"
	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/testcluster"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/object"
)

// TestFullHealerQueueSaysWhatItDrops: with the queue full, a degraded
// write's report is dropped; the full scan that would find it is off by
// default (--heal-interval 0), so the admin is told: a warning a minute
// naming an object, and a counter. Regression (found by review): reports
// were dropped without a trace.
func TestFullHealerQueueSaysWhatItDrops(t *testing.T) {
	var buf bytes.Buffer
	h := NewHealer(nil, HealerOptions{Queue: 2, Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	ev := h.Events(object.Events{})
	for _, p := range []string{"/a", "/b", "/c", "/d"} {
		ev.DegradedWrite(p, []int{3})
	}
	if got := h.Pending(); got != 2 {
		t.Fatalf("pending %d, want 2", got)
	}
	// One warning a minute (an outage fills the queue with many), and
	// every drop counted (ec_repair_dropped_reports_total).
	if !strings.Contains(buf.String(), "heal queue full") || !strings.Contains(buf.String(), "/c") || strings.Contains(buf.String(), "/d") {
		t.Errorf("want one warning naming the first object dropped (/c); log:\n%s", buf.String())
	}
	if got := h.Dropped(); got != 2 {
		t.Errorf("%d reports counted as dropped, want 2", got)
	}
}

// TestPeriodicRepairIsCountedAsHeals: what --heal-interval's full repair
// rebuilds is counted by the healer's metrics (HealerOptions.Healed:
// ec_repair_healed_objects_total, ec_repair_rebuilt_bytes_total).
// Regression (found by review): only the heals of reported objects were.
func TestPeriodicRepairIsCountedAsHeals(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 512}
	c := testcluster.New(t, 6, g)
	var healedBytes atomic.Int64
	var healedObjects atomic.Int64
	h := NewHealer(nil, HealerOptions{Settle: 10 * time.Millisecond, Interval: 100 * time.Millisecond,
		Healed: func(_ string, n int64, ok bool) { healedObjects.Add(1); healedBytes.Add(n) }})
	nodes := make([]node.Node, len(c.Nodes))
	copy(nodes, c.Nodes)
	s, err := object.New(nodes, object.Options{Geometry: g, MinFree: -1, Events: h.Events(object.Events{})})
	if err != nil {
		t.Fatal(err)
	}
	h.SetStore(s)
	data := bytes.Repeat([]byte("scan me "), 2000)
	put(t, s, "/p", data)
	info, _ := s.Stat(ctx, "/p")
	os.Remove(c.Archive(c.NodeIndex(info.Placement[0]), "/p"))
	go h.Run(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		in, err := s.Inspect(ctx, "/p", false)
		if err == nil && in.Health == object.Healthy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("periodic repair did not heal /p: %v %v", in.Health, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if healedObjects.Load() == 0 || healedBytes.Load() == 0 {
		t.Errorf("periodic repair rebuilt /p, but the Healed hook saw %d objects, %d bytes", healedObjects.Load(), healedBytes.Load())
	}
}
