package object

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
)

// startHeartbeat runs s.Heartbeat until the test ends.
func startHeartbeat(t *testing.T, s *Store, every time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Heartbeat(ctx, every)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// waitFor polls cond every 5 ms for up to limit and returns how long it
// took to hold, or false.
func waitFor(limit time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for time.Since(start) < limit {
		if cond() {
			return time.Since(start), true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return limit, false
}

// TestHeartbeatKeepsASilentNodeLeftOut: with heartbeats, a node that
// stops answering is known to hang before any request meets it, and no
// listing or stat waits for it however long it stays silent; once it
// answers again it is taken back at once. Without them (the gateway
// before), a request paid the node's full timeout once every SuspectFor
// for as long as the node was gone: the first listing after each expiry
// waited MetadataTimeout for it.
func TestHeartbeatKeepsASilentNodeLeftOut(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 256}
	logs := &records{}
	const (
		timeout    = 300 * time.Millisecond
		suspectFor = 600 * time.Millisecond
	)
	var silent atomic.Bool
	c, fs := faultyCluster(t, 7, g, func(o *Options) {
		o.MetadataTimeout, o.ProbeTimeout = timeout, timeout
		o.SuspectFor = suspectFor
		o.Logger = slog.New(logs)
	})
	put(t, c.store, "/hb/a", []byte("aaa"))
	nodes := slices.Clone(c.nodes)
	nodes[1] = node.Wrap(fs[1], node.Inject(node.OpAny, node.Hang()).Path(func(string) bool { return silent.Load() }))
	s, err := New(nodes, c.store.opts)
	if err != nil {
		t.Fatal(err)
	}
	id := nodes[1].ID()
	startHeartbeat(t, s, 50*time.Millisecond)

	silent.Store(true)
	took, ok := waitFor(3*time.Second, func() bool { return s.isHung(id) })
	if !ok {
		t.Fatalf("the heartbeat did not find the silent node within %v", took)
	}
	t.Logf("silent node marked hung %v after it stopped answering, before any request", took)

	// Three times SuspectFor: each expiry of a suspicion that requests
	// alone would set is met by a listing.
	var worst time.Duration
	for start := time.Now(); time.Since(start) < 3*suspectFor; {
		t0 := time.Now()
		if _, err := s.List(ctx, "/hb"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Stat(ctx, "/hb"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Stat(ctx, "/hb/a"); err != nil {
			t.Fatal(err)
		}
		worst = max(worst, time.Since(t0))
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("slowest list+stats with the node silent: %v", worst)
	if worst >= timeout/2 {
		t.Errorf("a list and two stats took %v with the node silent (its timeout is %v): a request waited for it", worst, timeout)
	}

	silent.Store(false)
	// A beat under way when it answers again times out (and marks it)
	// first; the next one ends the suspicion, well before SuspectFor.
	took, ok = waitFor(suspectFor, func() bool { return !s.isHung(id) })
	if !ok || took > timeout+150*time.Millisecond {
		t.Errorf("the node answering again was taken back after %v (done: %v); want within %v, before its suspicion (%v) would expire",
			took, ok, timeout+150*time.Millisecond, suspectFor)
	}
	for _, msg := range []string{"node does not answer: requests leave it out until it does", "node answers again"} {
		if n := logs.n(msg, slog.LevelWarn); n != 1 {
			t.Errorf("warning %q logged %d times, want once", msg, n)
		}
		logs.mu.Lock()
		attrs := logs.attrs[msg]
		logs.mu.Unlock()
		for _, a := range attrs {
			if a["node"] != id {
				t.Errorf("warning %q names node %v, want %s", msg, a["node"], id)
			}
		}
	}
}

// TestHeartbeatLeavesARequestsSuspicionToExpire: a node that a request
// found hung (a timed-out read or probe) stays left out for SuspectFor
// even though it answers heartbeats: its server may answer while its
// disk does not, and taking it back at each beat would stall a request
// each time. A missed beat on top of such a suspicion extends it and
// keeps it the request's.
func TestHeartbeatLeavesARequestsSuspicionToExpire(t *testing.T) {
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 256}
	c, fs := faultyCluster(t, 7, g, func(o *Options) { o.SuspectFor = time.Hour })
	s := c.store
	id := fs[2].ID()
	s.MarkHung(id) // as a request's timeout
	s.markHungByBeat(id)
	startHeartbeat(t, s, 10*time.Millisecond)
	if _, ok := waitFor(300*time.Millisecond, func() bool { return !s.isHung(id) }); ok {
		t.Fatal("heartbeats ended a suspicion that a request had set")
	}

	// One that beats alone set ends with the next answered beat.
	other := fs[3].ID()
	s.markHungByBeat(other)
	if took, ok := waitFor(time.Second, func() bool { return !s.isHung(other) }); !ok {
		t.Fatalf("a suspicion set by a missed beat outlived %v of answered beats", took)
	}
	// A request's timeout turns a beat's suspicion into its own.
	s.markHungByBeat(other)
	s.markSuspect(other, true)
	if _, ok := waitFor(300*time.Millisecond, func() bool { return !s.isHung(other) }); ok {
		t.Fatal("heartbeats ended a suspicion that a request had renewed")
	}
}

// TestHeartbeatTakesAQuickFailureForNoAnswer: a silent node that then
// fails its beats at once (its host back, its server not yet: connections
// refused) has not answered: it stays marked and no "answers again" is
// logged until a beat succeeds. Regression: any beat that did not time
// out was taken for an answer.
func TestHeartbeatTakesAQuickFailureForNoAnswer(t *testing.T) {
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 256}
	logs := &records{}
	var silent atomic.Bool
	c, fs := faultyCluster(t, 7, g, func(o *Options) {
		o.MetadataTimeout = 100 * time.Millisecond
		o.SuspectFor = time.Hour
		o.Logger = slog.New(logs)
	})
	nodes := slices.Clone(c.nodes)
	faulty := node.Wrap(fs[1], node.Inject(node.OpAny, node.Hang()).Path(func(string) bool { return silent.Load() }))
	nodes[1] = faulty
	s, err := New(nodes, c.store.opts)
	if err != nil {
		t.Fatal(err)
	}
	id := nodes[1].ID()
	silent.Store(true)
	startHeartbeat(t, s, 10*time.Millisecond)
	if _, ok := waitFor(3*time.Second, func() bool { return s.isHung(id) }); !ok {
		t.Fatal("the heartbeat did not find the silent node")
	}
	faulty.SetDown(true) // fails every call at once
	silent.Store(false)
	time.Sleep(300 * time.Millisecond) // many beats
	const back = "node answers again"
	if !s.isHung(id) || logs.n(back, slog.LevelWarn) != 0 {
		t.Fatalf("a node failing its beats at once was taken for answering: hung %v, %q logged %d times",
			s.isHung(id), back, logs.n(back, slog.LevelWarn))
	}
	faulty.SetDown(false)
	if _, ok := waitFor(time.Second, func() bool { return !s.isHung(id) }); !ok {
		t.Fatal("the node answering its beats again was not taken back")
	}
	if n := logs.n(back, slog.LevelWarn); n != 1 {
		t.Errorf("%q logged %d times, want once", back, n)
	}
}
