package memlimit

import (
	"math"
	"testing"
)

func TestGovernorFollowsOpenTransfers(t *testing.T) {
	var calls []int64
	g := &Governor{base: 64 << 20, per: 32 << 20, set: func(l int64) int64 { calls = append(calls, l); return 0 }}
	g.Update(0)
	g.Update(8)
	g.Update(8) // unchanged: the runtime is not asked again
	g.Update(1)
	want := []int64{64 << 20, 320 << 20, 96 << 20}
	if len(calls) != len(want) {
		t.Fatalf("limits set %v, want %v", calls, want)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Fatalf("limits set %v, want %v", calls, want)
		}
	}
	if g.Limit() != 96<<20 {
		t.Errorf("Limit() = %d", g.Limit())
	}
	g.Update(math.MaxInt64 / 2)
	if g.Limit() <= 0 {
		t.Errorf("a huge count overflowed the limit: %d", g.Limit())
	}
}

func TestRaiseGCPercentLeavesGOGCBe(t *testing.T) {
	var set []int
	record := func(p int) int { set = append(set, p); return 100 }
	env := map[string]string{}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if !raiseGCPercent(lookup, record) || len(set) != 1 || set[0] != GCPercentUnderLimit {
		t.Fatalf("without GOGC: set %v, want [%d]", set, GCPercentUnderLimit)
	}
	env["GOGC"] = "100"
	if raiseGCPercent(lookup, record) || len(set) != 1 {
		t.Fatalf("with GOGC in the environment the percentage was set: %v", set)
	}
}

func TestGovernorFloor(t *testing.T) {
	var last int64
	g := &Governor{base: 40 << 20, per: 32 << 20, floor: 64 << 20, set: func(l int64) int64 { last = l; return 0 }}
	for _, c := range []struct {
		open int64
		want int64
	}{{0, 64 << 20}, {1, 72 << 20}, {8, 296 << 20}, {0, 64 << 20}} {
		g.Update(c.open)
		if last != c.want || g.Limit() != c.want {
			t.Errorf("%d transfers: limit %d (set %d), want %d", c.open, g.Limit(), last, c.want)
		}
	}
}
