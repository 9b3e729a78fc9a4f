// Package memlimit keeps the Go runtime's soft memory limit in step with
// the load of a gateway: a base for the process plus an allowance for each
// open transfer.
//
// Transfers hold their block buffers in pools (package bufpool), so the
// gateway allocates little and the garbage collector runs rarely; between
// its runs, buffers a finished transfer left in a pool, of a size nobody
// asks for any more, still count towards the process's memory. A soft
// limit that follows the open transfers makes the collector run (and the
// runtime give memory back) once the heap holds more than the transfers
// in flight need, at almost no cost: pooled byte slices have no pointers
// to scan.
package memlimit

import (
	"math"
	"os"
	"runtime/debug"
	"sync"
)

// Governor sets the soft memory limit to Base + PerUnit × the units the
// open transfers hold (bytes of block buffers, say), and never below
// Floor. It is safe for concurrent use.
type Governor struct {
	base, per int64
	// floor keeps the limit above what requests other than transfers
	// (stats, removes, opens: probes, goroutine stacks) hold at high
	// concurrency: a limit under the live heap makes the collector run
	// back to back.
	floor int64
	set   func(int64) int64 // debug.SetMemoryLimit; replaced in tests

	mu    sync.Mutex
	limit int64
}

// New returns a Governor with the given base, allowance per unit and
// floor (bytes) and applies the limit for no open transfers.
func New(base, perUnit, floor int64) *Governor {
	g := &Governor{base: base, per: perUnit, floor: floor, set: debug.SetMemoryLimit}
	g.Update(0)
	return g
}

// Update sets the limit for open transfers holding units in all.
func (g *Governor) Update(units int64) {
	limit := g.base
	if units > 0 && g.per > 0 {
		if units > (math.MaxInt64-g.base)/g.per {
			limit = math.MaxInt64
		} else {
			limit += units * g.per
		}
	}
	limit = max(limit, g.floor)
	g.mu.Lock()
	defer g.mu.Unlock()
	if limit != g.limit {
		g.limit = limit
		g.set(limit)
	}
}

// Limit returns the limit last set.
func (g *Governor) Limit() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.limit
}

// GCPercentUnderLimit is the garbage collector's target percentage that
// RaiseGCPercent sets: the heap may grow to five times what is live
// before a collection, and the memory limit, not the percentage, bounds
// the process.
const GCPercentUnderLimit = 400

// RaiseGCPercent sets the collector's target percentage to
// GCPercentUnderLimit unless the environment sets GOGC, and reports
// whether it did. Call it only where a memory limit is in effect.
//
// With the default of 100, a gateway serving small objects (a live heap
// of a few MiB, allocating per request) collects every few MiB allocated:
// on 27 KB gets at concurrency 8 the collector's marking and the assists
// it charges to allocating goroutines were about 15% of the gateway's CPU.
// Under a limit that allows 40 MiB or more, collecting that often buys
// nothing.
func RaiseGCPercent() bool {
	return raiseGCPercent(os.LookupEnv, debug.SetGCPercent)
}

func raiseGCPercent(lookup func(string) (string, bool), set func(int) int) bool {
	if _, ok := lookup("GOGC"); ok {
		return false
	}
	set(GCPercentUnderLimit)
	return true
}
