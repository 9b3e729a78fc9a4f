package placement

import (
	"fmt"
	"testing"
)

func nodes(n int, free int64) []Node {
	out := make([]Node, n)
	for i := range out {
		out[i] = Node{ID: fmt.Sprintf("n%02d", i), Free: free}
	}
	return out
}

func TestChooseDeterministicAndDistinct(t *testing.T) {
	ns := nodes(12, 1<<40)
	for i := 0; i < 200; i++ {
		path := fmt.Sprintf("/d/f%d", i)
		p1, s1, err := Choose(path, ns, 10, 2, 0)
		if err != nil {
			t.Fatal(err)
		}
		p2, s2, _ := Choose(path, ns, 10, 2, 0)
		if fmt.Sprint(p1, s1) != fmt.Sprint(p2, s2) {
			t.Fatalf("%s: not deterministic", path)
		}
		seen := map[string]bool{}
		for _, id := range append(append([]string{}, p1...), s1...) {
			if seen[id] {
				t.Fatalf("%s: node %s chosen twice", path, id)
			}
			seen[id] = true
		}
		if len(p1) != 10 || len(s1) != 2 {
			t.Fatalf("got %d primaries %d spares", len(p1), len(s1))
		}
	}
}

func TestChooseSkipsDownAndFull(t *testing.T) {
	ns := nodes(12, 1<<40)
	ns[3].Down = true
	ns[5].Free = 10
	p, s, err := Choose("/x", ns, 10, 2, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range p {
		if id == "n03" || id == "n05" {
			t.Fatalf("primary %s should be skipped: %v", id, p)
		}
	}
	if len(s) != 1 || s[0] != "n05" {
		t.Fatalf("full node should be the last resort spare, got %v", s)
	}
	ns[4].Down = true
	ns[6].Down = true
	if _, _, err := Choose("/x", ns, 10, 2, 0); err == nil {
		t.Fatal("9 up nodes cannot hold 10 archives")
	}
}

func TestSpreadIsEvenAndFollowsFreeSpace(t *testing.T) {
	ns := nodes(12, 1<<40)
	ns[0].Free = 1 << 39 // half as much free space
	count := map[string]int{}
	const objects = 6000
	for i := 0; i < objects; i++ {
		p, _, _ := Choose(fmt.Sprintf("/o/%d", i), ns, 1, 0, 0)
		count[p[0]]++
	}
	even := objects / 12
	for id, c := range count {
		if id == "n00" {
			if c > even*3/4 {
				t.Errorf("half-full node got %d primaries, even share is %d", c, even)
			}
			continue
		}
		if c < even*3/4 || c > even*3/2 {
			t.Errorf("node %s got %d of %d objects, even share %d", id, c, objects, even)
		}
	}
}

func TestRemovingANodeMovesLittle(t *testing.T) {
	ns := nodes(12, 1<<40)
	moved := 0
	for i := 0; i < 1000; i++ {
		path := fmt.Sprintf("/o/%d", i)
		a, _, _ := Choose(path, ns, 1, 0, 0)
		b, _, _ := Choose(path, ns[:11], 1, 0, 0)
		if a[0] != b[0] {
			moved++
			if a[0] != "n11" {
				t.Fatalf("%s moved from %s to %s though only n11 left", path, a[0], b[0])
			}
		}
	}
	if moved > 150 {
		t.Fatalf("%d of 1000 objects moved", moved)
	}
}

// Regression (found by review): a node with no free space (Free 0) was
// taken for one whose space is unknown and ranked with the roomy ones,
// ahead of nodes with room below minFree: full nodes were placed first,
// and their writes then failed with ENOSPC after the open. Only a
// negative Free means unknown.
func TestFullNodeIsLastResort(t *testing.T) {
	ns := nodes(11, 1<<40)
	ns[3].Free = 0        // full
	ns[5].Free = 10 << 20 // tight: below minFree
	ns[7].Free = -1       // unknown: as roomy
	full, unknown := 0, 0
	for i := range 1000 {
		p, _, err := Choose(fmt.Sprintf("/o/%d", i), ns, 10, 1, 64<<20)
		if err != nil {
			t.Fatal(err)
		}
		full += count(p, ns[3].ID)
		unknown += count(p, ns[7].ID)
	}
	if full > 0 {
		t.Errorf("the full node was a primary for %d of 1000 objects while a node with room was left out", full)
	}
	if unknown != 1000 {
		t.Errorf("the node of unknown space was a primary for %d of 1000 objects, want all (10 of 9 roomy + it)", unknown)
	}
}

func count(ids []string, id string) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}
