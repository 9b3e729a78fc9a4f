package object

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ecstore/ecstore/internal/node"
)

// Timing of the removal of temporary archives left by failed aborts.
const (
	leftoverFirstRetry = time.Second
	leftoverMaxRetry   = time.Minute
	// leftoverGiveUp is how long a leftover is retried. It is repair's
	// default DebrisAge: from then on, repair removes the file as debris.
	leftoverGiveUp = time.Hour
	// maxLeftovers bounds the leftovers kept; more are left to repair.
	maxLeftovers = 10000
)

// leftover is a temporary archive on a node whose removal failed.
type leftover struct {
	node string // node id
	path string // the temporary file's node path
}

type leftoverState struct {
	since time.Time // when the first removal failed
	next  time.Time // when to try again
	wait  time.Duration
}

// leftovers keeps the temporary archives of aborted uploads that could
// not be removed, because their node did not answer the abort, and
// removes them once the node answers again: in the background, with a
// growing wait between tries, and at once when Rmdir finds their
// directory not empty. Without it, such a file keeps its directory from
// being removed until repair counts it as debris (after an hour by
// default). It is soft state: what a restart of the process forgets,
// repair still removes.
type leftovers struct {
	s       *Store
	mu      sync.Mutex
	pending map[leftover]*leftoverState
	running bool          // the retry loop runs
	stopped bool          // by stop: no more retries
	stopCh  chan struct{} // closed by stop
}

// stop ends the retries (the nodes are about to be closed); what is
// pending is left to repair.
func (l *leftovers) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.stopped = true
		if l.stopCh != nil {
			close(l.stopCh)
		}
	}
}

// discard aborts up, an upload on node nodeID, and keeps its temporary
// file for a later removal if the abort failed.
func (s *Store) discard(ctx context.Context, nodeID string, up node.Upload) {
	if err := up.Abort(ctx); err != nil {
		s.leftovers.add(nodeID, up.TempPath(), err)
	}
}

// add keeps the temporary file path on node nodeID, whose removal failed
// with err, and starts the retry loop if it is not running.
func (l *leftovers) add(nodeID, path string, err error) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending == nil {
		l.pending = map[leftover]*leftoverState{}
	}
	k := leftover{nodeID, path}
	if _, ok := l.pending[k]; ok {
		return
	}
	if l.stopped || len(l.pending) >= maxLeftovers {
		l.s.opts.Logger.Warn("temporary archive left on node; its removal is left to repair",
			"node", nodeID, "tmp", path, "err", err)
		return
	}
	l.pending[k] = &leftoverState{since: now, next: now.Add(leftoverFirstRetry), wait: leftoverFirstRetry}
	l.s.opts.Logger.Info("temporary archive left on node; removal will be retried",
		"node", nodeID, "tmp", path, "err", err)
	l.reportLocked()
	if !l.running {
		l.running = true
		if l.stopCh == nil {
			l.stopCh = make(chan struct{})
		}
		go l.run(l.stopCh)
	}
}

// reportLocked tells Events.PendingTempRemovals the count. l.mu is held.
func (l *leftovers) reportLocked() {
	if f := l.s.opts.Events.PendingTempRemovals; f != nil {
		f(len(l.pending))
	}
}

// run retries the due removals until none is pending, or until stop.
func (l *leftovers) run(stop <-chan struct{}) {
	for {
		l.mu.Lock()
		if len(l.pending) == 0 || l.stopped {
			l.running = false
			l.mu.Unlock()
			return
		}
		now := time.Now()
		wake := now.Add(leftoverMaxRetry)
		due := map[string][]leftover{}
		for k, st := range l.pending {
			if !st.next.After(now) {
				due[k.node] = append(due[k.node], k)
			} else if st.next.Before(wake) {
				wake = st.next
			}
		}
		l.mu.Unlock()
		if len(due) > 0 {
			l.retry(context.Background(), due)
			continue // the waits changed
		}
		t := time.NewTimer(time.Until(wake))
		select {
		case <-t.C:
		case <-stop:
			t.Stop()
		}
	}
}

// retry tries the removal of the given leftovers, node by node in
// parallel. On a node, the first failure puts off the node's other
// leftovers too: it does not answer yet.
func (l *leftovers) retry(ctx context.Context, byNode map[string][]leftover) (removed int) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	for id, keys := range byNode {
		n := l.s.byID[id]
		if n == nil {
			for _, k := range keys {
				l.settle(k, errors.New("no such node"))
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var failed error
			for _, k := range keys {
				if failed == nil {
					failed = l.remove(ctx, n, k.path)
				}
				if l.settle(k, failed) {
					mu.Lock()
					removed++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return removed
}

// remove removes one leftover from its node; one that is gone already
// counts as removed.
func (l *leftovers) remove(ctx context.Context, n node.Node, path string) error {
	ctx, cancel := context.WithTimeout(ctx, l.s.opts.MetadataTimeout)
	defer cancel()
	err := n.Remove(ctx, path)
	if err == nil || errors.Is(err, node.ErrNotExist) {
		return nil
	}
	return err
}

// settle records the outcome of a try at k: removed (err nil), retried
// later, or given up once older than leftoverGiveUp. It reports whether
// k was removed.
func (l *leftovers) settle(k leftover, err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	st, ok := l.pending[k]
	if !ok {
		return false // settled by a concurrent try
	}
	now := time.Now()
	switch {
	case err == nil:
		delete(l.pending, k)
		l.s.opts.Logger.Info("removed a temporary archive left by a failed abort", "node", k.node, "tmp", k.path)
	case now.Sub(st.since) >= leftoverGiveUp:
		delete(l.pending, k)
		l.s.opts.Logger.Warn("gave up removing a temporary archive; repair removes it as debris",
			"node", k.node, "tmp", k.path, "err", err)
	default:
		st.wait = min(2*st.wait, leftoverMaxRetry)
		st.next = now.Add(st.wait)
	}
	l.reportLocked()
	return err == nil
}

// removeIn tries at once to remove the leftovers of node nodeID in
// directory dir, and reports whether it removed any.
func (l *leftovers) removeIn(ctx context.Context, nodeID, dir string) bool {
	l.mu.Lock()
	var keys []leftover
	for k := range l.pending {
		if d, _ := node.Split(k.path); k.node == nodeID && d == dir {
			keys = append(keys, k)
		}
	}
	l.mu.Unlock()
	if len(keys) == 0 {
		return false
	}
	return l.retry(ctx, map[string][]leftover{nodeID: keys}) > 0
}
