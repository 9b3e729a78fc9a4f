//go:build fault

package fault

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"
)

// Deterministic reproductions of what the random schedule found, so that
// a fix can be checked without replaying a schedule.

// TestMoveWhileNodesDown: an object is renamed (xrdfs mv) while two nodes
// of its placement are down. When they come back, their archives under
// the old name must not make the old name reappear: a read of it says "no
// such object", xrdfs ls does not list it, and repair brings the cluster
// to a clean fsck. (Found by TestSchedule, e.g. config=local -seed=1.)
func TestMoveWhileNodesDown(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 8))
	c := newCluster(t, clusterOptions{kind: remoteNodes})
	bodies := newContents(t, workDir(t, c, "bodies"), seed)
	tmp := workDir(t, c, "downloads")
	a := bodies.make(3*mib + rng.Int64N(mib))
	put(t, c, "/mv/a", a)
	var victims []int
	for _, id := range pick(rng, statPlacement(t, c, "/mv/a"), 2) {
		victims = append(victims, c.nodeIndex(id))
	}
	for _, v := range victims {
		c.kill(v)
	}
	if r := run(time.Minute, "xrdfs", c.addr, "mv", "/mv/a", "/mv/b"); !r.ok() {
		t.Fatalf("mv with two nodes down: %v", r)
	}
	mustBeAbsent(t, c, tmp, "/mv/a", a)
	mustGet(t, c, tmp, "/mv/b", a)
	for _, v := range victims {
		c.revive(v)
	}
	t.Logf("nodes %s and %s back, holding archives of /mv/a", c.nodes[victims[0]].id, c.nodes[victims[1]].id)
	mustGet(t, c, tmp, "/mv/b", a)
	mustList(t, c, "/mv/b", a.size)
	mustBeAbsent(t, c, tmp, "/mv/a", a)
	if rep, _ := fsck(t, c); len(rep.unhealthy()) > 0 {
		t.Logf("fsck before repair:\n  %s", strings.Join(rep.unhealthy(), "\n  "))
	}
	if r := c.cli(time.Minute, "repair"); !r.ok() {
		t.Errorf("repair after the move: %v", r)
	}
	mustBeClean(t, c)
	mustBeAbsent(t, c, tmp, "/mv/a", a)
}

// TestRemoveUnreadableRemnant: an object has a damaged (truncated)
// archive on a node, that node goes down, and the object is removed.
// When the node comes back with its unreadable archive, the object stays
// removed, and repair must clear the remnant so that fsck is clean, not
// report "unrecoverable" forever. (Found by TestSchedule config=nodes
// -seed=22 -exclude=sigstop,mv.)
func TestRemoveUnreadableRemnant(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 9))
	c := newCluster(t, clusterOptions{kind: remoteNodes})
	bodies := newContents(t, workDir(t, c, "bodies"), seed)
	tmp := workDir(t, c, "downloads")
	x := bodies.make(2*mib + rng.Int64N(mib))
	put(t, c, "/rr/x", x)
	v := c.nodeIndex(statPlacement(t, c, "/rr/x")[rng.IntN(geoK+geoM)])
	file := c.archive(v, "/rr/x")
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	c.kill(v)
	if r := run(time.Minute, "xrdfs", c.addr, "rm", "/rr/x"); !r.ok() {
		t.Fatalf("rm with one node down: %v", r)
	}
	c.revive(v)
	t.Logf("node %s back with a truncated archive of the removed /rr/x", c.nodes[v].id)
	mustBeAbsent(t, c, tmp, "/rr/x", x)
	if rep, _ := fsck(t, c); len(rep.unhealthy()) > 0 {
		t.Logf("fsck before repair:\n  %s", strings.Join(rep.unhealthy(), "\n  "))
	}
	if r := c.cli(time.Minute, "repair"); !r.ok() {
		t.Errorf("repair after the removal: %v", r)
	}
	mustBeClean(t, c)
	if _, err := os.Stat(file); err == nil {
		t.Errorf("the truncated remnant %s is still on node %s after repair", file, c.nodes[v].id)
	}
}

// TestUnreadableArchiveAfterRebuild: an archive is damaged (truncated) on
// a node that is down; repair rebuilds its slot on another node; the node
// comes back with the unreadable archive. Repair must then remove that
// archive (or report what it could not do), so that a repair that exits 0
// is followed by a clean fsck. (Found by TestSchedule config=nodes
// -seed=3001 and config=local -seed=3003, both -exclude=sigstop,mv.)
func TestUnreadableArchiveAfterRebuild(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 10))
	c := newCluster(t, clusterOptions{kind: remoteNodes})
	bodies := newContents(t, workDir(t, c, "bodies"), seed)
	tmp := workDir(t, c, "downloads")
	x := bodies.make(2*mib + rng.Int64N(mib))
	put(t, c, "/ur/x", x)
	v := c.nodeIndex(statPlacement(t, c, "/ur/x")[rng.IntN(geoK+geoM)])
	c.kill(v)
	file := c.archive(v, "/ur/x")
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	out := c.cli(time.Minute, "repair")
	t.Logf("repair with node %s down: exit %d: %s", c.nodes[v].id, out.code, lastLines(out.out, 2))
	c.revive(v)
	t.Logf("node %s back with a truncated archive of /ur/x, whose slot was rebuilt elsewhere", c.nodes[v].id)
	mustGet(t, c, tmp, "/ur/x", x)
	r := c.cli(time.Minute, "repair")
	rep, fr := fsck(t, c, "--deep")
	if r.ok() && (!rep.Clean || fr.code != 0) {
		t.Errorf("repair exits 0, yet fsck --deep is not clean right after it:\n  %s\nrepair said: %s",
			strings.Join(rep.unhealthy(), "\n  "), lastLines(r.out, 3))
	} else if !r.ok() {
		t.Errorf("repair with every node up: %v", r)
	}
}
