//go:build fault

package fault

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// hangSlack is how much longer than healthy an operation may take with
// one node SIGSTOPped (issue 4: a hung node costs at most a bounded delay,
// default ≤ 2 s, and cannot stall a write for more than a few seconds;
// the check list says reads within 3 s of the healthy time).
const hangSlack = 3 * time.Second

// median returns the median of ds.
func median(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

// TestReadWithStoppedNodes: a read through the gateway with one node
// SIGSTOPped (one that holds data chunks of the object read) completes
// within 3 s of the healthy read time; with a second such node
// SIGSTOPped it still completes, bit-exact. Both times are logged.
func TestReadWithStoppedNodes(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 2))
	c := newCluster(t, clusterOptions{kind: remoteNodes})
	bodies := newContents(t, workDir(t, c, "bodies"), seed)
	tmp := workDir(t, c, "downloads")

	// Several objects of three blocks, so that the stopped nodes can be
	// chosen among the data slots of the object read.
	var paths []string
	objs := map[string]*content{}
	for i := range 6 {
		p := fmt.Sprintf("/hang/o%d", i)
		objs[p] = bodies.make(2*8*mib + rng.Int64N(8*mib))
		put(t, c, p, objs[p])
		paths = append(paths, p)
	}
	places := map[string][]string{}
	for _, p := range paths {
		places[p] = statPlacement(t, c, p)
	}
	// Healthy: the median of three reads of each of two objects.
	var healthyTimes []time.Duration
	for _, p := range paths[:2] {
		for range 3 {
			healthyTimes = append(healthyTimes, mustGet(t, c, tmp, p, objs[p]))
		}
	}
	healthy := median(healthyTimes)
	t.Logf("healthy read of a %v object: median %v of %v", objs[paths[0]], healthy.Round(time.Millisecond), healthyTimes)

	// One node stopped: the node of data slot 0 (stripe 0 of block 0) of
	// an object not read yet.
	one := paths[2]
	first := c.nodeIndex(places[one][rng.IntN(geoK)])
	c.stop(first)
	t.Logf("SIGSTOPped node %s (a data slot of %s)", c.nodes[first].id, one)
	d1 := mustGet(t, c, tmp, one, objs[one])
	d1b := mustGet(t, c, tmp, one, objs[one])
	t.Logf("read with 1 node SIGSTOPped: %v (healthy %v, bound %v); again: %v",
		d1.Round(time.Millisecond), healthy.Round(time.Millisecond), (healthy + hangSlack).Round(time.Millisecond), d1b.Round(time.Millisecond))
	if d1 > healthy+hangSlack {
		t.Errorf("a read with one node SIGSTOPped took %v, more than 3 s over the healthy %v", d1, healthy)
	}

	// Two nodes stopped: the second is another data slot of an object
	// that also has the first in a data slot.
	var two string
	for _, p := range paths[3:] {
		if slices.Contains(places[p][:geoK], c.nodes[first].id) {
			two = p
			break
		}
	}
	if two == "" {
		two = paths[3]
	}
	var second int
	for {
		second = c.nodeIndex(places[two][rng.IntN(geoK)])
		if second != first {
			break
		}
	}
	c.stop(second)
	t.Logf("SIGSTOPped node %s too (a data slot of %s; %s in its data slots: %v)", c.nodes[second].id, two,
		c.nodes[first].id, slices.Contains(places[two][:geoK], c.nodes[first].id))
	got, diff, r := getVia(t, c, tmp, two, 2*time.Minute, objs[two])
	switch {
	case !r.ok():
		t.Errorf("read with 2 nodes SIGSTOPped did not complete: %v", r)
	case got == nil:
		t.Errorf("read with 2 nodes SIGSTOPped returned wrong bytes: %s", diff)
	default:
		t.Logf("read with 2 nodes SIGSTOPped: %v (healthy %v)", r.elapsed.Round(time.Millisecond), healthy.Round(time.Millisecond))
	}
	// A fresh object whose data slots hold both stopped nodes, if any
	// other is left: the hedge must cover two late chunks at once.
	for _, p := range paths[3:] {
		if p != two && slices.Contains(places[p][:geoK], c.nodes[first].id) && slices.Contains(places[p][:geoK], c.nodes[second].id) {
			d := mustGet(t, c, tmp, p, objs[p])
			t.Logf("read of %s (both stopped nodes in its data slots): %v", p, d.Round(time.Millisecond))
		}
	}
	c.revive(first)
	c.revive(second)
	for _, p := range paths {
		mustGet(t, c, tmp, p, objs[p])
	}
	mustBeClean(t, c)
}

// TestHungNode: with one node SIGSTOPped, the namespace operations and
// writes through the gateway (xrdfs ls -l, xrdfs stat, an xrdcp put, xrdfs
// rm, xrdfs mv) each complete within 3 s of their healthy time. Each is
// killed at that bound plus 2 s and reported with the time it had taken.
func TestHungNode(t *testing.T) {
	c := newCluster(t, clusterOptions{kind: remoteNodes})
	victim := opsWithOneNodeDown(t, c, "SIGSTOPped", c.stop)
	c.revive(victim)
}

// TestFencedNode: with every node on a host of its own, one node cut off
// the network (every packet to and from it dropped, its process running
// on: no connection refused, no reset, only silence) holds up none of
// the operations of TestHungNode, nor a get, by more than 3 s over their
// healthy times; a gateway started while the node is cut off serves at
// once; and once the node is back, repair leaves the cluster clean. A
// SIGSTOPped node (TestHungNode) still has its kernel accept connections
// and acknowledge bytes; a fenced one is what a crashed host, a pulled
// cable or a firewall looks like to the gateway.
func TestFencedNode(t *testing.T) {
	c := newCluster(t, clusterOptions{kind: remoteNodes, netns: true})
	victim := opsWithOneNodeDown(t, c, "fenced", c.fence)
	// A gateway (re)started with the node still cut off: its dials to the
	// node get no answer at all.
	start := time.Now()
	c.restartGateway()
	t.Logf("gateway restarted with node %s fenced: serving after %v", c.nodes[victim].id, time.Since(start).Round(time.Millisecond))
	tmp := workDir(t, c, "after-restart")
	bodies := newContents(t, workDir(t, c, "bodies-2"), testSeed(t))
	body := bodies.make(9 * mib)
	r := run(hangSlack+30*time.Second, "xrdcp", "--nopbar", "-f", body.file, c.obj("/ns/after-restart"))
	if !r.ok() {
		t.Fatalf("put after the restart with node %s fenced: %v", c.nodes[victim].id, r)
	}
	t.Logf("put of %v after the restart: %v", body, r.elapsed.Round(time.Millisecond))
	if d := mustGet(t, c, tmp, "/ns/after-restart", body); d > hangSlack+5*time.Second {
		t.Errorf("get after the restart with a node fenced took %v", d.Round(time.Millisecond))
	}
	c.revive(victim)
	mustRepair(t, c)
	mustBeClean(t, c)
	mustGet(t, c, tmp, "/ns/after-restart", body)
}

// TestFencedNodeIsLeftOutWhileSilent: the gateway's heartbeat finds a
// node cut off the network before any request meets it, and keeps it
// left out for as long as it stays cut off: no listing or stat waits for
// it, over twice the 10 s for which one timed-out request has the node
// avoided. Without the heartbeat, the first request after each expiry
// waited 2 s for the node again (once every 10 s for as long as a host
// was down). Once the node is back the gateway logs it within seconds
// and writes place archives on it again.
func TestFencedNodeIsLeftOutWhileSilent(t *testing.T) {
	c := newCluster(t, clusterOptions{kind: remoteNodes, netns: true})
	bodies := newContents(t, workDir(t, c, "bodies"), testSeed(t))
	tmp := workDir(t, c, "downloads")
	body := bodies.make(3 * mib)
	put(t, c, "/hb/a", body)
	victim := c.nodeIndex(statPlacement(t, c, "/hb/a")[0])
	from := c.gw.logSize()
	fenced := time.Now()
	c.fence(victim)
	m, err := c.gw.waitLog(from, silentRE, 10*time.Second)
	if err != nil {
		t.Fatalf("the gateway did not log node %s cut off: %v", c.nodes[victim].id, err)
	}
	if i := c.nodeIndex(m[1]); i != victim {
		t.Fatalf("the gateway logged node %s silent, not the fenced node %s", m[1], c.nodes[victim].id)
	}
	t.Logf("node %s fenced; the gateway logged it silent after %v", m[1], time.Since(fenced).Round(time.Millisecond))

	var worst time.Duration
	ops := 0
	for start := time.Now(); time.Since(start) < 22*time.Second; ops++ {
		for _, args := range [][]string{{c.addr, "ls", "-l", "/hb"}, {c.addr, "stat", "/hb/a"}} {
			r := run(hangSlack+5*time.Second, "xrdfs", args...)
			if !r.ok() {
				t.Fatalf("xrdfs %s with node %s fenced: %v", strings.Join(args[1:], " "), c.nodes[victim].id, r)
			}
			if r.elapsed > time.Second {
				t.Errorf("xrdfs %s took %v, %v after node %s was fenced: a request waited for it",
					strings.Join(args[1:], " "), r.elapsed.Round(time.Millisecond), time.Since(fenced).Round(time.Second), c.nodes[victim].id)
			}
			worst = max(worst, r.elapsed)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("%d rounds of ls -l and stat over 22 s with the node fenced: slowest %v", ops, worst.Round(time.Millisecond))
	mustGet(t, c, tmp, "/hb/a", body)

	from = c.gw.logSize()
	c.revive(victim)
	revived := time.Now()
	if _, err := c.gw.waitLog(from, answersRE, 10*time.Second); err != nil {
		t.Fatalf("the gateway did not log node %s back: %v", c.nodes[victim].id, err)
	}
	t.Logf("node back; the gateway logged it after %v", time.Since(revived).Round(time.Millisecond))
	mustRepair(t, c)
	mustBeClean(t, c)
}

var (
	silentRE  = regexp.MustCompile(`node does not answer.* node=(\S+)`)
	answersRE = regexp.MustCompile(`node answers again.* node=(\S+)`)
)

// opsWithOneNodeDown times ls -l, stat, put, get, rm and mv through the
// gateway healthy, then with one node of an object's placement taken
// down by down (described as what, "SIGSTOPped"), and fails the test for
// any that then takes more than hangSlack over its healthy time, or
// fails. It returns the node taken down.
func opsWithOneNodeDown(t *testing.T, c *cluster, what string, down func(i int)) int {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 3))
	bodies := newContents(t, workDir(t, c, "bodies"), seed)
	tmp := workDir(t, c, "downloads")
	objs := map[string]*content{}
	for i := range 4 {
		p := fmt.Sprintf("/ns/o%d", i)
		objs[p] = bodies.make(3*mib + rng.Int64N(mib))
		put(t, c, p, objs[p])
	}
	newBody := bodies.make(3 * mib)
	ops := []struct {
		name string
		args func(phase string) (string, []string)
	}{
		{"ls", func(string) (string, []string) { return "xrdfs", []string{c.addr, "ls", "-l", "/ns"} }},
		{"stat", func(string) (string, []string) { return "xrdfs", []string{c.addr, "stat", "/ns/o0"} }},
		{"put", func(ph string) (string, []string) {
			return "xrdcp", []string{"--nopbar", "-f", newBody.file, c.obj("/ns/new-" + ph)}
		}},
		{"get", func(string) (string, []string) {
			return "xrdcp", []string{"--nopbar", "-f", c.obj("/ns/o1"), tmp + "/o1"}
		}},
		{"rm", func(ph string) (string, []string) {
			return "xrdfs", []string{c.addr, "rm", map[string]string{"healthy": "/ns/o2", "hung": "/ns/o3"}[ph]}
		}},
		{"mv", func(ph string) (string, []string) {
			return "xrdfs", []string{c.addr, "mv", map[string]string{"healthy": "/ns/new-healthy", "hung": "/ns/o1"}[ph], "/ns/moved-" + ph}
		}},
	}
	healthy := map[string]time.Duration{}
	for _, op := range ops {
		name, args := op.args("healthy")
		r := run(time.Minute, name, args...)
		if !r.ok() {
			t.Fatalf("healthy %s: %v", op.name, r)
		}
		healthy[op.name] = r.elapsed
	}
	victim := c.nodeIndex(statPlacement(t, c, "/ns/o0")[rng.IntN(geoK+geoM)])
	down(victim)
	t.Logf("%s node %s", what, c.nodes[victim].id)
	for _, op := range ops {
		name, args := op.args("hung")
		bound := healthy[op.name] + hangSlack
		r := run(bound+2*time.Second, name, args...)
		verdict := "ok"
		switch {
		case r.timedOut:
			verdict = fmt.Sprintf("did NOT complete within %v (killed)", r.elapsed.Round(time.Millisecond))
			t.Errorf("%s with one node %s did not complete within %v (healthy %v + %v): engine bug, a hung node stalls it",
				op.name, what, r.elapsed.Round(time.Millisecond), healthy[op.name].Round(time.Millisecond), hangSlack)
		case !r.ok():
			verdict = "failed: " + oneLine(r)
			t.Errorf("%s with one node %s failed: %v", op.name, what, r)
		case r.elapsed > bound:
			verdict = "too slow"
			t.Errorf("%s with one node %s took %v, more than 3 s over the healthy %v",
				op.name, what, r.elapsed.Round(time.Millisecond), healthy[op.name].Round(time.Millisecond))
		}
		t.Logf("%-4s healthy %8v, one node %s %8v: %s", op.name, healthy[op.name].Round(time.Millisecond), what, r.elapsed.Round(time.Millisecond), verdict)
	}
	return victim
}

// TestFenceMidTransfer: a node cut off the network a third of the way
// into a 48 MiB get (one holding a data slot) or put (one the write
// placed a slot on) holds it up by at most 3 s over its healthy time, on
// connections already open and carrying data, and both bring the right
// bytes; repair then leaves the cluster clean. Regression: the put's
// close waited 2 s more, for a lookup on the node it had just dropped
// (TestCloseDoesNotWaitForTheDroppedNodeToClearReplaced).
func TestFenceMidTransfer(t *testing.T) {
	c := newCluster(t, clusterOptions{kind: remoteNodes, netns: true})
	bodies := newContents(t, workDir(t, c, "bodies"), testSeed(t))
	tmp := workDir(t, c, "downloads")
	a, b := bodies.make(48*mib), bodies.make(48*mib)
	r := run(time.Minute, "xrdcp", "--nopbar", "-f", a.file, c.obj("/mid/a"))
	if !r.ok() {
		t.Fatalf("healthy put: %v", r)
	}
	healthyPut := r.elapsed
	mustGet(t, c, tmp, "/mid/a", a) // the gateway's first get warms it up
	healthyGet := mustGet(t, c, tmp, "/mid/a", a)
	t.Logf("healthy: put %v, get %v of %v", healthyPut.Round(time.Millisecond), healthyGet.Round(time.Millisecond), a)

	// fenceDuring runs name args, cuts node i off after a third of the
	// healthy time, and returns its result.
	fenceDuring := func(i int, healthy time.Duration, name string, args ...string) result {
		done := make(chan result, 1)
		go func() { done <- run(healthy+hangSlack+5*time.Second, name, args...) }()
		time.Sleep(healthy / 3)
		c.fence(i)
		return <-done
	}
	check := func(op string, r result, healthy time.Duration) {
		t.Helper()
		switch {
		case !r.ok():
			t.Fatalf("%s with a node fenced a third of the way in: %v", op, r)
		case r.elapsed > healthy+hangSlack:
			t.Errorf("%s with a node fenced a third of the way in took %v, more than %v over the healthy %v", op, r.elapsed.Round(time.Millisecond), hangSlack, healthy.Round(time.Millisecond))
		default:
			t.Logf("%s with a node fenced a third of the way in: %v (healthy %v)", op, r.elapsed.Round(time.Millisecond), healthy.Round(time.Millisecond))
		}
	}

	victim := c.nodeIndex(statPlacement(t, c, "/mid/a")[0]) // data slot 0
	out := filepath.Join(tmp, "a")
	check("get", fenceDuring(victim, healthyGet, "xrdcp", "--nopbar", "-f", c.obj("/mid/a"), out), healthyGet)
	if got, diff, err := matchFile(out, []*content{a}); err != nil || got == nil {
		t.Fatalf("get with a node fenced returned wrong bytes: %s %v", diff, err)
	}
	c.revive(victim)

	victim = c.nodeIndex(likelyPlacement("/mid/b")[0])
	check("put", fenceDuring(victim, healthyPut, "xrdcp", "--nopbar", "-f", b.file, c.obj("/mid/b")), healthyPut)
	mustGet(t, c, tmp, "/mid/b", b)
	c.revive(victim)
	mustRepair(t, c)
	mustBeClean(t, c)
	mustGet(t, c, tmp, "/mid/b", b)
}
