package repair

import (
	"bytes"
	"context"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/testcluster"
)

// Two gateways whose clocks differ by 2 s (gateway A ahead). A writes a
// small object; within those 2 s (real time) B overwrites it while one
// node of A's placement is down (B's write goes whole to a spare). B's
// version is older than A's, so once the node is back its single stale
// archive (a whole copy: 1+M) is what readers serve, and repair then
// deletes B's archives as "stale".
//
// Regression (found by review): the overwrite took its version from its gateway's clock alone, older
// than the version it replaced: the old version's copy won once its node
// was back, and repair removed the overwrite as stale. The new version is
// now made newer than the one it replaces.
func TestOverwriteThroughASlowerClockWins(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 512}
	ahead := func(o *object.Options) { o.Now = func() time.Time { return time.Now().Add(2 * time.Second) } }
	c := testcluster.New(t, 6, g, ahead) // gateway A
	sA := c.Store
	sB, fs := c.Faulty(t, g) // gateway B, true clock
	old := bytes.Repeat([]byte("old "), 100)
	putSmall(t, sA, "/skew/x", old)
	info, err := sA.Stat(ctx, "/skew/x")
	if err != nil {
		t.Fatal(err)
	}
	down := c.NodeIndex(info.Placement[0])
	fs[down].SetDown(true)
	neu := bytes.Repeat([]byte("new "), 100)
	putSmall(t, sB, "/skew/x", neu)
	if got, err := get(sB, "/skew/x"); err != nil || !bytes.Equal(got, neu) {
		t.Fatalf("right after the overwrite: %q %v", got[:min(8, len(got))], err)
	}
	fs[down].SetDown(false)
	got, err := get(sB, "/skew/x")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, neu) {
		t.Errorf("after the node is back, the overwritten bytes are served: %q...", got[:8])
	}
	if _, err := Repair(ctx, sB, RepairOptions{RemoveDebris: true, CheckOptions: CheckOptions{DebrisAge: -1}}); err != nil {
		t.Fatal(err)
	}
	got, err = get(sB, "/skew/x")
	if err != nil || !bytes.Equal(got, neu) {
		t.Fatalf("after repair: %q... %v (the overwrite is gone for good)", got[:min(8, len(got))], err)
	}
}

// Gateway A's healer rebuilds a lost archive of a small (1+M) object; the
// user's rm of the object goes through gateway B (every node up: no
// tombstone) and lands after A's in-turn version check, before A's rename.
// A's path lock does not order B's removal: the rebuilt archive, a whole
// copy, brings the removed object back.
//
// Regression (found by review): the rebuilt archive, committed after B's removal, brought the object
// back (A's turn does not order B). A rebuild now takes its archives away
// again when no other archive of the version is left.
func TestHealOnOneGatewayRacingRemoveOnAnother(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 512}
	c := testcluster.New(t, 5, g) // c.Store is gateway B
	data := bytes.Repeat([]byte("removed "), 100)
	putSmall(t, c.Store, "/rm/x", data)
	info, err := c.Store.Stat(ctx, "/rm/x")
	if err != nil {
		t.Fatal(err)
	}
	bad := c.NodeIndex(info.Placement[0])
	os.Remove(c.Archive(bad, "/rm/x"))
	hn := &hookNode{Node: c.Nodes[bad]}
	nodes := slices.Clone(c.Nodes)
	nodes[bad] = hn
	sA, err := object.New(nodes, object.Options{Geometry: g, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	hn.beforeCommit = func(path string) {
		if path == "/rm/x" {
			once.Do(func() {
				if err := c.Store.Remove(ctx, "/rm/x"); err != nil {
					t.Errorf("rm on B: %v", err)
				}
			})
		}
	}
	slots, res, err := Heal(ctx, sA, "/rm/x", nil)
	t.Logf("heal on A: slots %v res %+v err %v", slots, res, err)
	if got, err := get(c.Store, "/rm/x"); err == nil {
		t.Fatalf("object removed through B reads back after A's heal: %d bytes (the old: %v)", len(got), bytes.Equal(got, data))
	}
}

// `ecstore repair` runs as its own process while a gateway serves
// (OPERATIONS.md: "Safe while gateways serve"). An object was removed
// with K-1 nodes down, leaving K-1 remnants (hidden by tombstones). The
// user writes the path again through the gateway right after repair's
// fresh inspection of the path, before its removals: repair's InTurn only
// orders its own process, and it removes the remnants by path, taking
// K-1 archives of the new, acknowledged object: unrecoverable.
//
// Regression (found by review): repair removed the remnants by path, and with them K-1 archives of the
// new object: unrecoverable. It now removes an archive only if it is
// still of the version judged debris.
func TestRepairProcessKeepsANewObjectsArchives(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 256}
	c := testcluster.New(t, 6, g)
	gw, fs := c.Faulty(t, g) // the gateway
	put(t, gw, "/d/x", bytes.Repeat([]byte("gone "), 1000))
	for _, i := range []int{1, 3, 4} {
		fs[i].SetDown(true)
	}
	if err := gw.Remove(ctx, "/d/x"); err != nil {
		t.Fatalf("remove with 3 nodes down: %v", err)
	}
	for _, i := range []int{1, 3, 4} {
		fs[i].SetDown(false)
	}
	// The repair process's store: node 1 runs a hook before removals.
	hn := &removeHookNode{Node: c.Nodes[1]}
	nodes := slices.Clone(c.Nodes)
	nodes[1] = hn
	rs, err := object.New(nodes, object.Options{Geometry: g, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	fresh := bytes.Repeat([]byte("fresh data "), 500)
	var once sync.Once
	hn.beforeRemove = func(path string) {
		if path == "/d/x" {
			once.Do(func() { put(t, gw, "/d/x", fresh) })
		}
	}
	if _, err := Repair(ctx, rs, RepairOptions{CheckOptions: CheckOptions{DebrisAge: -1}, RemoveDebris: true}); err != nil {
		t.Fatal(err)
	}
	got, err := get(gw, "/d/x")
	if err != nil || !bytes.Equal(got, fresh) {
		t.Fatalf("object acknowledged by the gateway during the repair: read %d bytes, err %v", len(got), err)
	}
}
