//go:build fault

package fault

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRemoveWhileNodesDown: an object is removed while two nodes of its
// placement are down (SIGKILL). It is gone at once, and stays gone when
// the nodes come back with their archives: a read says "no such object",
// xrdfs ls does not list it, fsck --json reports the remnants as
// "removed"; repair deletes them (and the tombstones), after which fsck
// --deep is clean and no archive or tombstone of it is left on any disk.
// A second object is removed and written again while the nodes are down:
// the new content wins when they return.
func TestRemoveWhileNodesDown(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 6))
	c := newCluster(t, clusterOptions{kind: remoteNodes})
	bodies := newContents(t, workDir(t, c, "bodies"), seed)
	tmp := workDir(t, c, "downloads")

	x, y, keep := bodies.make(5*mib+rng.Int64N(mib)), bodies.make(3*mib+rng.Int64N(mib)), bodies.make(2*mib)
	put(t, c, "/rm/x", x)
	put(t, c, "/rm/y", y)
	put(t, c, "/rm/keep", keep)
	place := statPlacement(t, c, "/rm/x")
	var victims []int
	for _, id := range pick(rng, place, 2) {
		victims = append(victims, c.nodeIndex(id))
	}
	for _, v := range victims {
		c.kill(v)
	}
	t.Logf("killed nodes %s and %s (placement of /rm/x: %v)", c.nodes[victims[0]].id, c.nodes[victims[1]].id, place)
	for _, p := range []string{"/rm/x", "/rm/y"} {
		if r := run(time.Minute, "xrdfs", c.addr, "rm", p); !r.ok() {
			t.Fatalf("rm %s with two nodes down: %v", p, r)
		}
	}
	y2 := bodies.make(4*mib + rng.Int64N(mib))
	put(t, c, "/rm/y", y2)
	mustBeAbsent(t, c, tmp, "/rm/x")
	mustGet(t, c, tmp, "/rm/y", y2)

	for _, v := range victims {
		c.revive(v)
	}
	remnants := 0
	for _, v := range victims {
		if _, err := os.Stat(c.archive(v, "/rm/x")); err == nil {
			remnants++
		}
	}
	t.Logf("nodes back; %d of them hold an archive of the removed /rm/x", remnants)
	if remnants == 0 {
		t.Fatalf("the killed nodes hold no archive of /rm/x: the test did not test anything")
	}
	check := func(when string) {
		t.Helper()
		mustBeAbsent(t, c, tmp, "/rm/x")
		mustGet(t, c, tmp, "/rm/y", y2)
		mustGet(t, c, tmp, "/rm/keep", keep)
		mustList(t, c, "/rm/y", y2.size)
		// The CLI on the cluster itself agrees.
		r := c.cli(time.Minute, "get", "/rm/x", filepath.Join(tmp, "cli-x"))
		if r.ok() || !notFound(r.out) {
			t.Errorf("%s: ecstore get /rm/x: want no such object, got %v", when, r)
		}
		if t.Failed() {
			t.Fatalf("%s: the removed object is back (seed %d)", when, baseSeed())
		}
	}
	check("with the nodes back")
	rep, _ := fsck(t, c)
	health := map[string]string{}
	for _, o := range rep.Objects {
		health[o.Path] = o.Health
	}
	if health["/rm/x"] != "removed" {
		t.Errorf("fsck --json: /rm/x is %q, want \"removed\" (remnants of a removed object); report:\n  %s",
			health["/rm/x"], strings.Join(rep.unhealthy(), "\n  "))
	}
	out := mustRepair(t, c)
	t.Logf("repair: %s", lastLines(out, 3))
	mustBeClean(t, c)
	check("after repair")
	for i := range c.nodes {
		for _, f := range []string{c.archive(i, "/rm/x"), filepath.Join(c.nodes[i].root, ".ecstore-rm", "rm", "x")} {
			if _, err := os.Stat(f); err == nil {
				t.Errorf("after repair, %s is still on node %s", f, c.nodes[i].id)
			}
		}
	}
}

// TestOverwriteWhileNodesDown: readers poll an object through the gateway
// (xrdcp and ecstore cp) while it is overwritten with two nodes of its
// placement down, and while those nodes come back and repair runs. Every
// read returns the old or the new bytes, never anything else and never an
// error; once the overwrite has returned, every read that starts after it
// returns the new bytes.
func TestOverwriteWhileNodesDown(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 7))
	c := newCluster(t, clusterOptions{kind: remoteNodes})
	bodies := newContents(t, workDir(t, c, "bodies"), seed)
	tmp := workDir(t, c, "downloads")
	old, nw := bodies.make(6*mib+rng.Int64N(mib)), bodies.make(7*mib+rng.Int64N(mib))
	put(t, c, "/ow/x", old)
	place := statPlacement(t, c, "/ow/x")

	var (
		mu        sync.Mutex
		putDone   time.Time // zero until the overwrite returned
		counts    = map[string]int{}
		problems  []string
		readersWG sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); readersWG.Wait() }()
	for reader := range 3 {
		readersWG.Add(1)
		go func() {
			defer readersWG.Done()
			for i := 0; ctx.Err() == nil; i++ {
				local := filepath.Join(tmp, fmt.Sprintf("r%d-%d", reader, i))
				started := time.Now()
				var r result
				via := "xrdcp"
				if reader == 2 {
					via = "ecstore cp"
					r = run(time.Minute, ecstoreBin, "cp", "-f", c.obj("/ow/x"), local)
				} else {
					r = run(time.Minute, "xrdcp", "--nopbar", "-f", c.obj("/ow/x"), local)
				}
				var got *content
				var diff string
				if r.ok() {
					got, diff, _ = matchFile(local, []*content{old, nw})
				}
				os.Remove(local)
				mu.Lock()
				after := !putDone.IsZero() && started.After(putDone)
				switch {
				case !r.ok():
					counts["error"]++
					problems = append(problems, fmt.Sprintf("read via %s at %s failed: %s", via, started.Format("15:04:05.000"), oneLine(r)))
				case got == nil:
					counts["wrong"]++
					problems = append(problems, fmt.Sprintf("read via %s at %s returned neither old nor new: %s", via, started.Format("15:04:05.000"), diff))
				case got == old && after:
					counts["old after"]++
					problems = append(problems, fmt.Sprintf("read via %s started at %s, after the overwrite returned, got the OLD bytes", via, started.Format("15:04:05.000")))
				case got == old:
					counts["old"]++
				default:
					counts["new"]++
				}
				mu.Unlock()
			}
		}()
	}
	sleepCtx(ctx, 500*time.Millisecond)
	var victims []int
	for _, id := range pick(rng, place, 2) {
		victims = append(victims, c.nodeIndex(id))
	}
	for _, v := range victims {
		c.kill(v)
	}
	t.Logf("killed nodes %s and %s of the placement %v", c.nodes[victims[0]].id, c.nodes[victims[1]].id, place)
	sleepCtx(ctx, 500*time.Millisecond)
	r := run(time.Minute, "xrdcp", "--nopbar", "-f", nw.file, c.obj("/ow/x"))
	mu.Lock()
	putDone = time.Now()
	mu.Unlock()
	if !r.ok() {
		cancel()
		readersWG.Wait()
		t.Fatalf("overwrite with two nodes down (two spares left): %v", r)
	}
	t.Logf("overwrite returned after %v", r.elapsed.Round(time.Millisecond))
	sleepCtx(ctx, time.Second)
	for _, v := range victims {
		c.revive(v)
	}
	t.Logf("nodes back")
	sleepCtx(ctx, 2*time.Second)
	out := mustRepair(t, c)
	t.Logf("repair: %s", lastLines(out, 2))
	sleepCtx(ctx, time.Second)
	cancel()
	readersWG.Wait()
	t.Logf("reads: %v", counts)
	if len(problems) > 0 {
		t.Errorf("%d bad reads (seed %d):\n  %s", len(problems), baseSeed(), strings.Join(problems, "\n  "))
	}
	if counts["new"] == 0 {
		t.Errorf("no read saw the new content")
	}
	mustGet(t, c, tmp, "/ow/x", nw)
	mustList(t, c, "/ow/x", nw.size)
	mustBeClean(t, c)
}
