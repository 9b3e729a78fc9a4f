package object

import (
	"slices"
	"sync"
	"time"
)

// latencyEstimate follows how long chunk reads take, as TCP follows round
// trips to set its retransmission timeout (RFC 6298): a smoothed mean and
// a smoothed mean deviation of the samples, one a block (the median time
// of its chunk reads, so that one slow node does not move it). Reads hedge only when a chunk
// is late compared with that, so that when every node is slow at once —
// the machine or the network is saturated — reads do not add parity
// fetches to the load that made them slow.
type latencyEstimate struct {
	mu     sync.Mutex
	srtt   time.Duration // smoothed mean
	rttvar time.Duration // smoothed mean deviation
	seen   bool
}

// add records a chunk read that took d.
func (e *latencyEstimate) add(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.seen {
		e.srtt, e.rttvar, e.seen = d, d/2, true
		return
	}
	dev := e.srtt - d
	if dev < 0 {
		dev = -dev
	}
	e.rttvar += (dev - e.rttvar) / 4
	e.srtt += (d - e.srtt) / 8
}

// late is how long a chunk read (or probe) may take before it counts as
// late: the mean plus four deviations; false before the first sample.
func (e *latencyEstimate) late() (time.Duration, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.srtt + 4*e.rttvar, e.seen
}

// addMedian records the median of samples, if any. samples is reordered.
func (e *latencyEstimate) addMedian(samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	e.add(samples[len(samples)/2])
}

// hedgeDelay is how long a read waits for a chunk before it hedges (reads
// more chunks) and suspects the node of being slow: HedgeDelay, or longer
// while chunk reads in general take longer than that (latencyEstimate),
// up to half the chunk timeout.
func (s *Store) hedgeDelay() time.Duration {
	d := s.opts.HedgeDelay
	if l, _ := s.chunkLatency.late(); l > d {
		d = min(l, max(s.opts.ChunkTimeout/2, d))
	}
	return d
}

// windowPatience is how long a lookup window waits for its last nodes
// before it moves on to the next window (which asks them again, so that
// what the lookup decides does not depend on it): as long as a probe may
// take before it counts as late (probeLatency, the median answer time of
// each window's probes), between a quarter of HedgeDelay and HedgeDelay.
// Probes of a healthy node answer in a few milliseconds; a node that has
// just stopped then holds an open up for a quarter of HedgeDelay, not all
// of it (N4 of the bench suite, one of 10 nodes SIGSTOPped: 307 ms from
// the client's login to the first block before, 129 ms after). A node
// left behind is marked slow (probeNodes): with a tenth of HedgeDelay as
// the floor, small-object loads at concurrency 64 marked nodes slow some
// 290 times in 10 s, with a quarter once.
func (s *Store) windowPatience() time.Duration {
	d := s.opts.HedgeDelay
	if l, ok := s.probeLatency.late(); ok {
		d = min(d, max(d/4, l))
	}
	return d
}
