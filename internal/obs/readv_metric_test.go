package obs

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ecstore/ecstore/internal/gateway"
	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/testcluster"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// TestReadVCountsOneRequest: one kXR_readv of 100 segments is one client
// request, counted once as op="readv". Regression (found by review):
// ec_gateway_requests_total{op="read"} counted each segment (and each
// 1 MiB frame of a long read), each with its own time as the request's
// latency.
func TestReadVCountsOneRequest(t *testing.T) {
	m := New()
	c := testcluster.New(t, 5, layout.Geometry{K: 3, M: 2, ChunkSize: 1024}, func(o *object.Options) { o.Events = m.Events() })
	c.Put(t, "/v", []byte(strings.Repeat("readv me", 10000)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	go gateway.Serve(ctx, gateway.Config{Store: c.Store, RootAddr: "127.0.0.1:0", Hooks: m.GatewayHooks(), Ready: func(a string) { ready <- a }})
	cl, err := xrootd.Dial(ctx, <-ready, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	f, err := cl.Open(ctx, "/v", xrootd.OpenRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	segs := make([]xrootd.ReadSegment, 100)
	for i := range segs {
		segs[i] = xrootd.ReadSegment{Offset: int64(i * 700), Length: 100}
	}
	if _, err := f.ReadV(ctx, segs); err != nil {
		t.Fatal(err)
	}
	f.Close(ctx)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), `ec_gateway_requests_total{op="readv",status="ok"} 1`+"\n") {
		t.Errorf("one readv request not counted once as readv:\n%s", rec.Body.String())
	}
	for _, l := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(l, `ec_gateway_requests_total{op="read"`) {
			t.Errorf("a readv request counted as %s", l)
		}
	}
}
