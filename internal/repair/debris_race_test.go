package repair

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/object"
)

// Regression (found by review): a repair removed the remnants its check
// found at the end of its run, by path, without looking at what the
// nodes held by then: an object written at the path meanwhile (rm, then
// put again, while a repair runs) lost its archives on those nodes. The
// debris of an object is removed only if a fresh inspection still finds
// it as the check did.
func TestRepairLeavesAnObjectWrittenAfterItsCheck(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 256}
	s, fs, c := faultyStore(t, 6, g)
	put(t, s, "/d/x", bytes.Repeat([]byte("gone "), 1000))
	for _, i := range []int{1, 3, 4} {
		fs[i].SetDown(true)
	}
	if err := s.Remove(ctx, "/d/x"); err != nil {
		t.Fatalf("remove with 3 nodes down: %v", err)
	}
	for _, i := range []int{1, 3, 4} {
		fs[i].SetDown(false)
		if _, err := os.Stat(c.Archive(i, "/d/x")); err != nil {
			t.Fatalf("setup: remnant expected on node %d: %v", i, err)
		}
	}
	fresh := bytes.Repeat([]byte("fresh data "), 500)
	_, err := Repair(ctx, s, RepairOptions{CheckOptions: CheckOptions{DebrisAge: -1}, RemoveDebris: true,
		// Called right after the check: the user writes the path again
		// while the repair goes on (rebuilding other objects, say).
		Planned: func(int, int64) { put(t, s, "/d/x", fresh) },
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := get(s, "/d/x")
	if err != nil || !bytes.Equal(got, fresh) {
		in, _ := s.Inspect(ctx, "/d/x", false)
		var problems []string
		if in != nil {
			problems = in.Problems()
		}
		t.Fatalf("acknowledged object written during the repair: read %d bytes, err %v; inspection %v", len(got), err, problems)
	}
	in, err := s.Inspect(ctx, "/d/x", true)
	if err != nil || in.Health != object.Healthy {
		t.Fatalf("object written during the repair: %v %v", in.Health, in.Problems())
	}
}
