package object

import (
	"testing"
	"time"
)

// Reads hedge after HedgeDelay while chunks come back sooner than that,
// later while every chunk read takes longer (a saturated machine), and
// never later than half the chunk timeout.
func TestHedgeDelayFollowsChunkLatency(t *testing.T) {
	s := &Store{opts: Options{HedgeDelay: 250 * time.Millisecond, ChunkTimeout: 2 * time.Second}}
	if d := s.hedgeDelay(); d != 250*time.Millisecond {
		t.Fatalf("hedge delay with no reads yet: %v, want HedgeDelay", d)
	}
	for range 50 {
		s.chunkLatency.add(10 * time.Millisecond)
	}
	if d := s.hedgeDelay(); d != 250*time.Millisecond {
		t.Errorf("hedge delay after fast reads: %v, want HedgeDelay", d)
	}
	for i := range 50 {
		s.chunkLatency.add(time.Duration(200+100*(i%2)) * time.Millisecond)
	}
	if d := s.hedgeDelay(); d <= 300*time.Millisecond || d > time.Second {
		t.Errorf("hedge delay after reads of 200-300 ms: %v, want more than the slowest and at most 1s", d)
	}
	for range 50 {
		s.chunkLatency.add(5 * time.Second)
	}
	if d := s.hedgeDelay(); d != time.Second {
		t.Errorf("hedge delay after reads of 5 s: %v, want half the chunk timeout", d)
	}
	for range 100 {
		s.chunkLatency.add(10 * time.Millisecond)
	}
	if d := s.hedgeDelay(); d != 250*time.Millisecond {
		t.Errorf("hedge delay once reads are fast again: %v, want HedgeDelay", d)
	}
}

// A lookup window waits HedgeDelay for its last nodes until probe times
// are known, then a little longer than probes take, never less than a
// quarter of HedgeDelay nor more than HedgeDelay.
func TestWindowPatienceFollowsProbeLatency(t *testing.T) {
	hedge := 250 * time.Millisecond
	s := &Store{opts: Options{HedgeDelay: hedge}}
	if d := s.windowPatience(); d != hedge {
		t.Fatalf("patience with no probes yet: %v, want HedgeDelay", d)
	}
	for range 50 {
		s.probeLatency.addMedian([]time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Second})
	}
	if d := s.windowPatience(); d != hedge/4 {
		t.Errorf("patience after probes of 2 ms (one node hung): %v, want HedgeDelay/4", d)
	}
	for i := range 50 {
		s.probeLatency.add(time.Duration(80+20*(i%2)) * time.Millisecond)
	}
	if d := s.windowPatience(); d <= 100*time.Millisecond || d >= hedge {
		t.Errorf("patience after probes of 80-100 ms: %v, want more than the slowest, less than HedgeDelay", d)
	}
	for range 50 {
		s.probeLatency.add(time.Second)
	}
	if d := s.windowPatience(); d != hedge {
		t.Errorf("patience after probes of 1 s: %v, want HedgeDelay", d)
	}
}
