package obs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/gateway"
	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/testcluster"
	"github.com/ecstore/ecstore/internal/xrootd"

	"github.com/ecstore/ecstore/internal/testport"
)

// TestMetricsThroughGateway runs a gateway with metrics and checks that a
// write, a read, a failed stat and a degraded read show up in /metrics.
func TestMetricsThroughGateway(t *testing.T) {
	m := New()
	c := testcluster.New(t, 6, layout.Geometry{K: 3, M: 2, ChunkSize: 1024}, func(o *object.Options) { o.Events = m.Events() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	metricsAddr := testport.Addr(t)
	done := make(chan error, 1)
	go func() {
		done <- gateway.Serve(ctx, gateway.Config{Store: c.Store, RootAddr: "127.0.0.1:0", MetricsAddr: metricsAddr,
			Metrics: m.Handler(), Hooks: m.GatewayHooks(), Ready: func(a string) { ready <- a }})
	}()
	addr := <-ready
	cl, err := xrootd.Dial(ctx, addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	f, err := cl.Open(ctx, "/m/x", xrootd.OpenNew|xrootd.OpenUpdate, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte(strings.Repeat("metrics!", 1000))
	if _, err := f.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Stat(ctx, "/nope"); err == nil {
		t.Fatal("stat of a missing object succeeded")
	}
	// Lose one archive so that the read is degraded.
	info, _ := c.Store.Stat(ctx, "/m/x")
	if err := removeArchive(c, info.Placement[0], "/m/x"); err != nil {
		t.Fatal(err)
	}
	rf, err := cl.Open(ctx, "/m/x", xrootd.OpenRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(data))
	if n, err := rf.ReadAt(ctx, buf, 0); n != len(data) && !errors.Is(err, io.EOF) {
		t.Fatalf("read %d: %v", n, err)
	}
	rf.Close(ctx)

	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`ec_gateway_bytes_total{direction="write"} 8000`,
		`ec_gateway_bytes_total{direction="read"} 8000`,
		`ec_gateway_requests_total{op="stat",status="error"} 1`,
		`ec_gateway_requests_total{op="close",status="ok"} 1`,
		fmt.Sprintf("ec_object_degraded_reads_total %d", degradedBlocks(c.Store.Geometry(), int64(len(data)))),
		`ec_gateway_request_duration_seconds_count{op="write"}`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("gateway did not shut down")
	}
}

func removeArchive(c *testcluster.Cluster, nodeID, path string) error {
	return osRemove(c.Archive(c.NodeIndex(nodeID), path))
}

// degradedBlocks counts the blocks whose slot-0 chunk holds data, i.e.
// those a read must reconstruct when slot 0's archive is gone.
func degradedBlocks(g layout.Geometry, size int64) int {
	l := layout.Layout{Geometry: g, Size: size}
	n := 0
	for b := int64(0); b < l.Blocks(); b++ {
		if g.Stripe(b, 0) < g.K {
			n++
		}
	}
	return n
}

// TestSlowNodeMetrics checks that the engine's hedge and slow-node hooks
// reach their metrics.
func TestSlowNodeMetrics(t *testing.T) {
	m := New()
	ev := m.Events()
	ev.HedgedRead("/a", 0)
	ev.HedgedRead("/a", 1)
	ev.NodeSlow("n3")
	ev.PendingTempRemovals(3)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"ec_object_hedged_reads_total 2", `ec_node_slow_total{node="n3"} 1`, "ec_object_pending_temp_removals 3"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestNodeGauges: every scrape asks the nodes, so a node that goes down
// shows as ec_node_up 0 (without its space) at the next scrape, and as 1
// again once it answers; the retired node is marked.
func TestNodeGauges(t *testing.T) {
	geo := layout.Geometry{K: 3, M: 2, ChunkSize: 1024}
	c := testcluster.New(t, 6, geo)
	var retired string
	store, nodes := c.Faulty(t, geo, func(o *object.Options) {
		retired = c.Store.Nodes()[5].ID()
		o.Retired = []string{retired}
	})
	m := New()
	m.WatchNodes(func(ctx context.Context) []object.NodeState { return store.NodeStates(ctx, false) })
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	scrape := func() string {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	down := nodes[2].ID()
	nodes[2].SetDown(true)
	body := scrape()
	for _, n := range nodes {
		up := "1"
		if n.ID() == down {
			up = "0"
		}
		if want := fmt.Sprintf("ec_node_up{node=%q} %s\n", n.ID(), up); !strings.Contains(body, want) {
			t.Errorf("scrape with node %s down: no %q", down, want)
		}
		if has := strings.Contains(body, fmt.Sprintf("ec_node_free_bytes{node=%q}", n.ID())); has != (n.ID() != down) {
			t.Errorf("scrape with node %s down: free bytes of node %s shown: %v", down, n.ID(), has)
		}
	}
	if want := fmt.Sprintf("ec_node_retired{node=%q} 1\n", retired); !strings.Contains(body, want) {
		t.Errorf("scrape: no %q", want)
	}
	nodes[2].SetDown(false)
	if want := fmt.Sprintf("ec_node_up{node=%q} 1\n", down); !strings.Contains(scrape(), want) {
		t.Errorf("scrape with node %s back: no %q", down, want)
	}
}

// TestHealerGauges checks that the healer's queue is exported as read at
// each scrape.
func TestHealerGauges(t *testing.T) {
	m := New()
	queued, retrying, dropped := 3, 1, int64(7)
	m.WatchHealer(func() int { return queued }, func() int { return retrying }, func() int64 { return dropped })
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	for range 2 {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{fmt.Sprintf("ec_repair_queued_objects %d\n", queued), fmt.Sprintf("ec_repair_retrying_objects %d\n", retrying),
			fmt.Sprintf("ec_repair_dropped_reports_total %d\n", dropped)} {
			if !strings.Contains(string(b), want) {
				t.Errorf("scrape: no %q", want)
			}
		}
		queued, retrying, dropped = 0, 0, 9
	}
}

// TestNodeOperationMetrics checks the counts, outcomes and bytes of node
// operations: a missing path is not an error.
func TestNodeOperationMetrics(t *testing.T) {
	m := New()
	ev := m.Events()
	ev.NodeOperation("03", node.Operation{Name: "read", Duration: time.Millisecond, Read: 1 << 20})
	ev.NodeOperation("03", node.Operation{Name: "read", Duration: 3 * time.Millisecond, Read: 1 << 20})
	ev.NodeOperation("03", node.Operation{Name: "open_whole", Duration: time.Millisecond,
		Err: fmt.Errorf("open /a: %w", node.ErrNotExist)})
	ev.NodeOperation("04", node.Operation{Name: "write", Duration: time.Millisecond, Err: errors.New("connection reset")})
	ev.NodeOperation("04", node.Operation{Name: "write", Duration: time.Millisecond, Written: 4096})
	ev.PageChecksums(false)
	ev.PageChecksums(true)
	ev.PageChecksums(true)
	ev.DamagedArchive("/a", "v", 3, 7)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`ec_node_requests_total{node="03",op="read",status="ok"} 2`,
		`ec_node_requests_total{node="03",op="open_whole",status="not_found"} 1`,
		`ec_node_requests_total{node="04",op="write",status="error"} 1`,
		`ec_node_requests_total{node="04",op="write",status="ok"} 1`,
		`ec_node_request_duration_seconds_count{node="03",op="read"} 2`,
		`ec_node_request_duration_seconds_bucket{node="03",op="read",le="0.0016"} 1`,
		`ec_node_bytes_total{direction="read",node="03"} 2.097152e+06`,
		`ec_node_bytes_total{direction="write",node="04"} 4096`,
		`ec_object_page_checksum_lookups_total{result="hit"} 2`,
		`ec_object_page_checksum_lookups_total{result="miss"} 1`,
		`ec_object_damaged_archives_total 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(body, `ec_node_requests_total{node="03",op="open_whole",status="error"}`) {
		t.Error("a missing path counted as an error")
	}
}
