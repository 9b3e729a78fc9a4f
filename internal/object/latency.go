package object

import (
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

// late is how long a chunk read may take before it counts as late: the
// mean plus four deviations.
func (e *latencyEstimate) late() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.srtt + 4*e.rttvar
}

// hedgeDelay is how long a read waits for a chunk before it hedges (reads
// more chunks) and suspects the node of being slow: HedgeDelay, or longer
// while chunk reads in general take longer than that (latencyEstimate),
// up to half the chunk timeout.
func (s *Store) hedgeDelay() time.Duration {
	d := s.opts.HedgeDelay
	if l := s.chunkLatency.late(); l > d {
		d = min(l, max(s.opts.ChunkTimeout/2, d))
	}
	return d
}
