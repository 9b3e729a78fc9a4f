package obs

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/testcluster"
)

// TestOpenTransfersGaugeReturnsToZero: two readers close at once; the
// gauge reads 0 once nothing is open, whatever order their events come
// in. The delay in the hook stands for the goroutine of the first close
// descheduled between its count and its event. Regression (found by
// review): the engine called Events.Transfers outside any lock with the
// count it had added, and the first close's 1 landed after the second's
// 0.
func TestOpenTransfersGaugeReturnsToZero(t *testing.T) {
	m := New()
	var closing atomic.Bool
	ev := m.Events()
	set := ev.Transfers
	ev.Transfers = func(n int) {
		if closing.Load() && n == 1 {
			time.Sleep(100 * time.Millisecond)
		}
		set(n)
	}
	c := testcluster.New(t, 5, layout.Geometry{K: 3, M: 2, ChunkSize: 1024}, func(o *object.Options) { o.Events = ev })
	c.Put(t, "/a", []byte(strings.Repeat("x", 5000)))
	ctx := context.Background()
	r1, err := c.Store.Open(ctx, "/a")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.Store.Open(ctx, "/a")
	if err != nil {
		t.Fatal(err)
	}
	closing.Store(true)
	var wg sync.WaitGroup
	wg.Go(func() { r1.Close() })
	time.Sleep(20 * time.Millisecond)
	r2.Close()
	wg.Wait()
	if n := c.Store.OpenTransfers(); n != 0 {
		t.Fatalf("store has %d transfers open", n)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "ec_object_open_transfers 0\n") {
		for _, l := range strings.Split(rec.Body.String(), "\n") {
			if strings.HasPrefix(l, "ec_object_open_transfers ") {
				t.Errorf("nothing open, but %s", l)
			}
		}
	}
}
