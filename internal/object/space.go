package object

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/placement"
)

// spaceCache holds the last answer of every node to "how much space is
// free", so that a burst of writes asks the nodes once per
// Options.SpaceTTL rather than once per object. Writers that find the
// answer stale while another writer is already asking wait for that
// answer instead of asking too.
type spaceCache struct {
	mu      sync.Mutex
	nodes   []placement.Node // nil: nothing cached
	at      time.Time        // when the cached answer was asked for
	pending chan struct{}    // closed when the query in flight ends
}

// forget drops the cached answer: the next write asks the nodes again.
func (c *spaceCache) forget() {
	c.mu.Lock()
	c.nodes = nil
	c.mu.Unlock()
}

// spaces reports, for every node that takes new archives (not retired),
// its free space and whether it is down, from an answer at most SpaceTTL
// old.
func (s *Store) spaces(ctx context.Context) []placement.Node {
	if s.opts.SpaceTTL < 0 {
		return s.querySpaces(ctx)
	}
	c := &s.space
	c.mu.Lock()
	for {
		if c.nodes != nil && time.Since(c.at) < s.opts.SpaceTTL {
			out := slices.Clone(c.nodes)
			c.mu.Unlock()
			return out
		}
		if c.pending == nil {
			break
		}
		wait := c.pending
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return s.querySpaces(ctx) // every node down: the write fails
		}
		c.mu.Lock()
	}
	done := make(chan struct{})
	c.pending = done
	c.mu.Unlock()

	start := time.Now()
	nodes := s.querySpaces(ctx)

	c.mu.Lock()
	if ctx.Err() == nil {
		c.nodes, c.at = nodes, start
	}
	c.pending = nil
	close(done)
	c.mu.Unlock()
	return slices.Clone(nodes)
}

// errHung is the error of a call not made to a node known to hang.
var errHung = errors.New("node hangs: not asked")

// querySpaces asks every node that takes new archives for its free space,
// in parallel, with a short deadline; nodes that do not answer are
// reported down.
func (s *Store) querySpaces(ctx context.Context) []placement.Node {
	nodes := slices.DeleteFunc(slices.Clone(s.nodes), func(n node.Node) bool { return s.retired(n.ID()) })
	out := make([]placement.Node, len(nodes))
	byID := make(map[string]*placement.Node, len(nodes)) // read-only below
	for i, n := range nodes {
		out[i].ID = n.ID()
		byID[n.ID()] = &out[i]
	}
	ask := func(ctx context.Context, n node.Node) error {
		sp, err := n.Space(ctx)
		byID[n.ID()].Free = sp.Free
		if sp.Total <= 0 {
			byID[n.ID()].Free = -1 // the node does not say: unknown, not full
		}
		return err
	}
	errs := s.forNodes(ctx, nodes, func(ctx context.Context, n node.Node) error {
		if s.isHung(n.ID()) {
			// Known to hang (a call to it ran out of time recently): down,
			// without a wait for it to time out again. Its suspicion
			// expires after SuspectFor, and then it is asked again.
			return errHung
		}
		return ask(ctx, n)
	})
	var skipped []int
	up := 0
	for i, err := range errs {
		if errors.Is(err, errHung) {
			skipped = append(skipped, i)
		} else if err == nil {
			up++
		}
	}
	if len(skipped) > 0 && up < s.quorum(s.opts.Geometry) {
		// Without them too few nodes are up for a write: ask them after
		// all, in case their stall has ended.
		again := make([]node.Node, len(skipped))
		for j, i := range skipped {
			again[j] = nodes[i]
		}
		for j, err := range s.forNodes(ctx, again, ask) {
			errs[skipped[j]] = err
		}
	}
	for i, err := range errs {
		out[i].Down = err != nil
	}
	return out
}

// NodeState is what a node reported when asked for its space.
type NodeState struct {
	ID string
	// Err is why the node is down: its answer (a refused directory, a
	// connection refused), a timeout, or errHung for a node not asked
	// because a call to it ran out of time recently. Nil: the node is up.
	Err   error
	Space node.Space // when up
	// Retired nodes take no new archives; their archives are still read.
	Retired bool
	// Suspect says that reads avoid the node for now: "slow" (a chunk
	// read outlived its hedge delay), "hung" (a call ran out of time) or
	// "failing" (a call failed); "" when not.
	Suspect string
}

// Up reports whether the node answered.
func (n NodeState) Up() bool { return n.Err == nil }

// NodeStates asks every node, retired ones too, for its space, in
// parallel, each within MetadataTimeout. A node known to hang is not
// asked unless askHung is true (a status command asks; a metrics scrape,
// repeated every few seconds, must not wait for it each time).
func (s *Store) NodeStates(ctx context.Context, askHung bool) []NodeState {
	out := make([]NodeState, len(s.nodes))
	at := make(map[string]int, len(s.nodes)) // read-only below
	for i, n := range s.nodes {
		at[n.ID()] = i
	}
	errs := s.forNodes(ctx, s.nodes, func(ctx context.Context, n node.Node) error {
		if !askHung && s.isHung(n.ID()) {
			return errHung
		}
		sp, err := n.Space(ctx)
		if err == nil {
			s.clearHung(n.ID())
		}
		out[at[n.ID()]].Space = sp
		return err
	})
	for i, n := range s.nodes {
		out[i].ID, out[i].Err, out[i].Retired = n.ID(), errs[i], s.retired(n.ID())
		out[i].Suspect = s.suspectReason(n.ID())
		if errs[i] != nil {
			out[i].Space = node.Space{}
		}
	}
	return out
}

// Capacity is the space of the nodes that answer: their sums, and the
// free space of the emptiest. Each node is given MetadataTimeout, and a
// node known to hang is not asked: a client's space query must not wait
// for a node that does not answer.
func (s *Store) Capacity(ctx context.Context) (total, free, largestFree int64) {
	for _, n := range s.NodeStates(ctx, false) {
		if n.Up() {
			total += n.Space.Total
			free += n.Space.Free
			largestFree = max(largestFree, n.Space.Free)
		}
	}
	return total, free, largestFree
}
