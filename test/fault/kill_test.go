//go:build fault

package fault

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestPutWithNodeKills: with 8+2 over twelve nodes, two nodes are killed
// with SIGKILL at random moments of a ~64 MiB xrdcp put (before it, during
// it, or as it commits; one of the two may be a spare). The put either
// succeeds, and the object then reads back bit-exact and is listed with
// its size, or fails cleanly: no such object, not listed (a put that
// reports failure must not have made anything visible). That stays true
// after the nodes come back, and after repair fsck --deep is clean. Each
// round draws its victims and moments from the seed (-rounds rounds);
// every third round instead kills two nodes the moment the first archive
// is renamed into place, while the others are still temporary files.
func TestPutWithNodeKills(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	c := newCluster(t, clusterOptions{kind: remoteNodes})
	bodies := newContents(t, workDir(t, c, "bodies"), seed)
	tmp := workDir(t, c, "downloads")

	// The healthy put time bounds the kill moments.
	base := bodies.make(64*mib + rng.Int64N(mib))
	r := run(2*time.Minute, "xrdcp", "--nopbar", "-f", base.file, c.obj("/kill/base"))
	if !r.ok() {
		t.Fatalf("healthy put: %v", r)
	}
	healthy := r.elapsed
	t.Logf("healthy put of %v: %v", base, healthy.Round(time.Millisecond))
	mustGet(t, c, tmp, "/kill/base", base)

	succeeded, failed := 0, 0
	for round := range *roundsFlag {
		path := fmt.Sprintf("/kill/r%d", round)
		body := bodies.make(64*mib + rng.Int64N(mib))
		// Victims: mostly nodes of the object's placement (the K+M first
		// of the rank), sometimes a spare.
		ranked := likelyPlacement(path)
		var victims []int
		for len(victims) < 2 {
			id := ranked[rng.IntN(geoK+geoM)]
			if rng.IntN(5) == 0 {
				id = ranked[geoK+geoM+rng.IntN(numNodes-geoK-geoM)]
			}
			if i := c.nodeIndex(id); !slices.Contains(victims, i) {
				victims = append(victims, i)
			}
		}
		// Kill moments: anywhere in the put (and a little after), or, one
		// time in three, around its end, when the archives are finished
		// and renamed into place.
		moment := func() time.Duration {
			if rng.IntN(3) == 0 {
				return healthy*85/100 + time.Duration(rng.Int64N(int64(healthy/5)))
			}
			return time.Duration(rng.Int64N(int64(healthy + healthy/3)))
		}
		moments := []time.Duration{moment(), moment()}
		if rng.IntN(4) == 0 {
			moments[1] = moments[0] // both at once
		}
		slices.Sort(moments)
		// Every third round kills at the commit instead: as soon as the
		// first archive is renamed into place, the two victims are nodes
		// that still hold only their temporary file.
		atCommit := round%3 == 2
		var wg sync.WaitGroup
		start := time.Now()
		var killedAt [2]time.Duration
		wg.Add(1)
		go func() {
			defer wg.Done()
			if atCommit {
				victims = killAtCommit(c, path, start.Add(3*healthy+time.Second))
				for k := range killedAt {
					killedAt[k] = time.Since(start)
				}
				return
			}
			for k, at := range moments {
				time.Sleep(time.Until(start.Add(at)))
				c.nodes[victims[k]].proc.kill()
				killedAt[k] = time.Since(start)
			}
		}()
		r := run(2*time.Minute, "xrdcp", "--nopbar", "-f", body.file, c.obj(path))
		wg.Wait()
		if len(victims) < 2 {
			t.Fatalf("round %d: no commit of %s seen to kill nodes at (put: %v)", round, path, r)
		}
		for _, v := range victims {
			c.nodes[v].state = nodeKilled
		}
		when := ""
		if atCommit {
			when = " (at the commit)"
		}
		desc := fmt.Sprintf("round %d: put %s %v, nodes %s (rank %d) and %s (rank %d) killed at %v and %v%s",
			round, path, body, c.nodes[victims[0]].id, slices.Index(ranked, c.nodes[victims[0]].id),
			c.nodes[victims[1]].id, slices.Index(ranked, c.nodes[victims[1]].id),
			killedAt[0].Round(time.Millisecond), killedAt[1].Round(time.Millisecond), when)
		check := func(when string) {
			t.Helper()
			if r.ok() {
				mustGet(t, c, tmp, path, body)
				mustList(t, c, path, body.size)
			} else {
				mustBeAbsent(t, c, tmp, path, body)
			}
			if t.Failed() {
				t.Fatalf("%s: the check %s failed (seed %d)", desc, when, baseSeed())
			}
		}
		switch {
		case r.timedOut:
			t.Fatalf("%s: the put hung: %v", desc, r)
		case r.ok():
			succeeded++
			t.Logf("%s: put succeeded in %v", desc, r.elapsed.Round(time.Millisecond))
		default:
			failed++
			t.Logf("%s: put failed cleanly in %v: %s", desc, r.elapsed.Round(time.Millisecond), oneLine(r))
		}
		check("with the two nodes down")
		for _, v := range victims {
			c.revive(v)
		}
		check("after the nodes came back")
		mustRepair(t, c, "--debris-age", debrisAgeNow)
		mustBeClean(t, c, "--debris-age", debrisAgeNow)
		check("after repair")
		mustGet(t, c, tmp, "/kill/base", base)
	}
	t.Logf("%d rounds: %d puts succeeded, %d failed cleanly", *roundsFlag, succeeded, failed)
}

// killAtCommit watches the nodes' disks for path's archives and, as soon
// as one is renamed into place, SIGKILLs two nodes that still hold only a
// temporary file of it (or, failing that, any two others), and returns
// them; nil if no archive appeared before deadline.
func killAtCommit(c *cluster, path string, deadline time.Time) []int {
	dir, base := filepath.Split(strings.TrimPrefix(path, "/"))
	tempPrefix := "." + base + ".ecstore-tmp."
	for time.Now().Before(deadline) {
		committed := false
		var pending []int
		for i, n := range c.nodes {
			ents, _ := os.ReadDir(filepath.Join(n.root, dir))
			for _, e := range ents {
				switch {
				case e.Name() == base:
					committed = true
				case strings.HasPrefix(e.Name(), tempPrefix):
					pending = append(pending, i)
				}
			}
		}
		if !committed {
			continue
		}
		for i := range c.nodes {
			if len(pending) >= 2 {
				break
			}
			if !slices.Contains(pending, i) {
				pending = append(pending, i)
			}
		}
		victims := pending[:2]
		for _, v := range victims {
			_ = syscall.Kill(-c.nodes[v].proc.cmd.Process.Pid, syscall.SIGKILL)
		}
		for _, v := range victims {
			c.nodes[v].proc.kill() // waits for it
		}
		return victims
	}
	return nil
}
