package object

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/workers"
)

// Heartbeat asks every node for its space every `every`, until ctx ends,
// so that a node that stops answering (its host crashed or cut off the
// network, its server stopped, its file system frozen) is known to hang
// before requests meet it, and stays known while it is silent:
//
//   - A node that does not answer within MetadataTimeout is marked hung,
//     as a request's timeout marks it: lookups, listings, reads and new
//     archives leave it out for SuspectFor. The next beats keep marking
//     it while it stays silent, so that no request waits for it when its
//     suspicion would otherwise expire (without beats, one request every
//     SuspectFor paid the full timeout for as long as the node was
//     gone).
//   - A node that answers again ends a suspicion that beats alone set,
//     at once rather than after SuspectFor. A suspicion that a request
//     set (a chunk read or a probe that timed out) is left to expire: a
//     node whose server answers but whose disk does not would otherwise
//     be taken back at every beat and stall a request each time.
//
// A node whose last beat is still unanswered is not asked again until
// it answers or times out. Refusals and other quick errors mark nothing
// and end nothing: they cost requests no wait, and are no answer. Each change is logged (the node stopped
// answering, answers again) and each timeout counted as a node error of
// operation "heartbeat". Heartbeat returns once ctx has ended and its
// calls have returned, or at once when every is not positive.
func (s *Store) Heartbeat(ctx context.Context, every time.Duration) {
	if every <= 0 {
		return
	}
	beats := make([]*beat, len(s.nodes))
	for i, n := range s.nodes {
		beats[i] = &beat{n: n}
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait() // beats end with ctx: nodes may close after Heartbeat
	for {
		for _, b := range beats {
			if b.running.CompareAndSwap(false, true) {
				wg.Add(1)
				workers.Go(func() {
					defer wg.Done()
					defer b.running.Store(false)
					s.beat(ctx, b)
				})
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// beat is the heartbeat's state of one node.
type beat struct {
	n       node.Node
	running atomic.Bool // a beat is waiting for the node's answer
	// silentSince is when the node first missed a beat, zero while it
	// answers; only the running beat reads and writes it.
	silentSince time.Time
}

// beat asks b's node for its space once and records the outcome.
func (s *Store) beat(ctx context.Context, b *beat) {
	id := b.n.ID()
	bctx, cancel := context.WithTimeout(ctx, s.opts.MetadataTimeout)
	defer cancel()
	_, err := b.n.Space(bctx)
	switch {
	case ctx.Err() != nil:
		return // stopping: no answer expected
	case err != nil && bctx.Err() != nil:
		s.markHungByBeat(id)
		s.opts.Events.nodeError(id, "heartbeat", err)
		if b.silentSince.IsZero() {
			b.silentSince = time.Now()
			s.opts.Logger.Warn("node does not answer: requests leave it out until it does",
				"node", id, "timeout", s.opts.MetadataTimeout, "err", err)
		}
	case err != nil:
		// A quick failure (a refused connection, a server that lacks the
		// request, a local node with too many calls stuck): nothing a
		// request would wait for, and no answer either. A silence stays
		// logged until the node answers.
	default:
		s.clearBeatSuspicion(id)
		if !b.silentSince.IsZero() {
			// A warning too: at the default level the one saying the
			// node was silent shows, and this one must end it.
			s.opts.Logger.Warn("node answers again", "node", id,
				"silent_for", time.Since(b.silentSince).Round(time.Millisecond))
			b.silentSince = time.Time{}
		}
	}
}

// markHungByBeat marks node id hung, as markSuspect does, for a missed
// heartbeat. The suspicion records that a beat alone set it unless a
// request's suspicion was in force, which it extends and keeps as the
// request's (see Heartbeat).
func (s *Store) markHungByBeat(id string) {
	now := s.opts.Now()
	mark := suspicion{until: now.Add(s.opts.SuspectFor), hung: true, byBeat: true}
	for {
		v, loaded := s.suspect.LoadOrStore(id, mark)
		if !loaded {
			return
		}
		old := v.(suspicion)
		m := mark
		m.byBeat = old.byBeat || !now.Before(old.until)
		if s.suspect.CompareAndSwap(id, v, m) {
			return
		}
	}
}

// clearBeatSuspicion ends the suspicion of node id if missed heartbeats
// alone set it: the node has answered one since.
func (s *Store) clearBeatSuspicion(id string) {
	if v, ok := s.suspect.Load(id); ok && v.(suspicion).byBeat {
		s.suspect.CompareAndDelete(id, v)
	}
}
