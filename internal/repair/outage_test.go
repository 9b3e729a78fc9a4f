package repair

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/testcluster"
)

// Regression (found by review): a small object (1+2) is overwritten by a
// large one (4+2) while one node of the small one is down; that node
// comes back with the old copy. Hours later, three nodes of the large
// object are unreachable (a switch, a rack) while a repair runs: the old
// copy is a readable version, the current one has fewer than K archives
// in sight, and repair deleted the current version's archives as "stale"
// and rebuilt the old one, losing the acknowledged overwrite. Archives of
// a newer version are not debris while a node did not answer.
func TestRepairKeepsTheCurrentVersionDuringAnOutage(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 256}
	clock := time.Now().Add(-3 * time.Hour)
	c := testcluster.New(t, 8, g)
	s, fs := c.Faulty(t, g, func(o *object.Options) { o.Now = func() time.Time { return clock } })
	byID := map[string]*node.Faulty{}
	for _, f := range fs {
		byID[f.ID()] = f
	}
	old := []byte("old small object")
	w, err := s.Create(ctx, "/o", &object.CreateOptions{SizeHint: int64(len(old))})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(old)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	info, _ := s.Stat(ctx, "/o")
	if info.Geometry.K != 1 {
		t.Fatalf("setup: small object stored %v", info.Geometry)
	}
	missed := byID[info.Placement[2]]
	missed.SetDown(true)
	clock = clock.Add(time.Minute)
	newer := bytes.Repeat([]byte("new large object "), 300)
	put(t, s, "/o", newer)
	missed.SetDown(false)
	if got, err := get(s, "/o"); err != nil || !bytes.Equal(got, newer) {
		t.Fatalf("setup: read after overwrite: %v", err)
	}
	info2, _ := s.Stat(ctx, "/o")
	// Three of the large object's nodes become unreachable.
	var out []*node.Faulty
	for _, id := range info2.Placement {
		if len(out) < 3 && id != missed.ID() {
			out = append(out, byID[id])
			byID[id].SetDown(true)
		}
	}
	rep, err := Repair(ctx, s, RepairOptions{RemoveDebris: true}) // default debris age 1h
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("repair: %d outcomes, %d debris removed", len(rep.Outcomes), rep.DebrisRemoved)
	for _, f := range out {
		f.SetDown(false)
	}
	got, err := get(s, "/o")
	if err != nil || !bytes.Equal(got, newer) {
		t.Fatalf("after the outage: read %q (%v), want the acknowledged overwrite (%d bytes)", got[:min(len(got), 40)], err, len(newer))
	}
}
