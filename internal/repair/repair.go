package repair

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ecstore/ecstore/internal/archive"
	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/object"
)

// RepairOptions configure Repair.
type RepairOptions struct {
	CheckOptions
	// Rate limits rebuilt bytes per second (0: unlimited).
	Rate int64
	// DryRun reports what would be done without writing or removing.
	DryRun bool
	// RemoveDebris removes temporary files of dead writes and archives of
	// stale versions. Default true through the CLI.
	RemoveDebris bool
	// Event, if set, is told about each object as it is handled.
	Event func(ev RepairEvent)
	// Planned, if set, is told once the check is done how many objects
	// need rebuilding and how many chunk bytes that writes.
	Planned func(objects int, bytes int64)
	// Progress, if set, is told about every chunk write as it starts
	// (n bytes), for progress bars.
	Progress func(n int)
	// limiter, when set, paces the rebuilds instead of one for Rate: the
	// healer's, shared by its full scans and its heals.
	limiter *rateLimiter
}

// RepairEvent describes one step of a repair, for progress output.
type RepairEvent struct {
	Path   string
	Action string // "rebuilt", "failed", "removed debris", "would rebuild", ...
	Detail string
	Done   int // objects handled so far
	Total  int // objects that need work
}

// Outcome is what happened to one object.
type Outcome struct {
	Path    string
	Slots   []int          // slots that were (or would be) rebuilt
	Rebuilt map[int]string // slot -> node, when done
	Bytes   int64          // chunk bytes written
	Err     error          // why it could not be repaired
	After   object.Health  // health after the repair, re-inspected
	Before  object.Health
	// Changed: the object was written, moved or removed after the check
	// found it degraded, and was left as it now is (After is Before).
	Changed bool
}

// RepairReport is the outcome of a repair.
type RepairReport struct {
	Check         *Report // the check that found the work
	Outcomes      []Outcome
	DebrisRemoved int
	DebrisFailed  []error
	// RolledForward counts the temporary archives of interrupted commits
	// that were renamed into place (object.Store.RollForward).
	RolledForward int
	// TombstonesCollected counts removed objects whose tombstones no node
	// needs any more, and which were deleted.
	TombstonesCollected int
	Bytes               int64
	Elapsed             time.Duration
}

// Failed lists the objects still not healthy after the repair (those
// changed since the check are not).
func (r *RepairReport) Failed() []Outcome {
	var out []Outcome
	for _, o := range r.Outcomes {
		if o.Err != nil || o.After != object.Healthy && !o.Changed {
			out = append(out, o)
		}
	}
	return out
}

// Repair checks the cluster and restores full redundancy of every degraded
// object by rebuilding its missing or corrupt archives, then inspects each
// repaired object again: an object counts as repaired only when that
// second inspection finds it healthy. It is resumable by construction
// (run it again: it redoes only what is still needed) and never reports
// success while a chunk is short.
func Repair(ctx context.Context, s *object.Store, opts RepairOptions) (*RepairReport, error) {
	start := time.Now()
	rep := &RepairReport{}
	check, err := Check(ctx, s, opts.CheckOptions)
	if err != nil {
		return nil, err
	}
	rep.Check = check
	if !opts.DryRun {
		rollForward(ctx, s, check, rep, opts)
	}
	var todo []*object.Inspection
	for _, in := range check.Objects {
		if in.Health == object.Degraded {
			todo = append(todo, in)
		}
	}
	if opts.Planned != nil {
		var bytes int64
		for _, in := range todo {
			bytes += int64(len(brokenSlots(in))) * rebuildBytes(in)
		}
		opts.Planned(len(todo), bytes)
	}
	limiter := opts.limiter
	if limiter == nil {
		limiter = newRateLimiter(opts.Rate)
	}
	throttle := func(ctx context.Context, n int) error {
		if err := limiter.wait(ctx, n); err != nil {
			return err
		}
		if opts.Progress != nil {
			opts.Progress(n)
		}
		return nil
	}
	var debris *debrisRemover
	if opts.RemoveDebris && !opts.DryRun {
		debris = &debrisRemover{ctx: ctx, s: s, rep: rep, event: opts.Event, age: check.debrisAge, deep: opts.Deep, done: map[string]bool{}}
	}
	for i, in := range todo {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		o := Outcome{Path: in.Path, Before: in.Health, After: in.Health, Slots: brokenSlots(in)}
		ev := RepairEvent{Path: in.Path, Done: i + 1, Total: len(todo)}
		switch {
		case len(o.Slots) == 0:
			// Degraded only by its whole-object checksum: nothing to rebuild.
			o.Err = fmt.Errorf("whole-object checksum mismatch with every chunk verified: %v", in.SumErr)
		case opts.DryRun:
			ev.Action, ev.Detail = "would rebuild", fmt.Sprintf("slots %v", o.Slots)
		default:
			if debris != nil {
				debris.object(in)
			}
			res, err := s.Rebuild(ctx, in.Path, o.Slots, object.RebuildOptions{Throttle: throttle, Version: in.Info.Version})
			if res != nil {
				o.Rebuilt, o.Bytes = res.Rebuilt, res.Bytes
				rep.Bytes += res.Bytes
			}
			o.Err = err
			if errors.Is(err, object.ErrChanged) {
				// Written, moved or removed since the check: the next
				// check sees what is there now.
				o.Err = nil
				o.Changed = true
				break
			}
			after, ierr := s.Inspect(ctx, in.Path, opts.Deep)
			switch {
			case ierr != nil:
				o.Err = errors.Join(o.Err, fmt.Errorf("re-inspection: %w", ierr))
			default:
				o.After = after.Health
				if after.Health != object.Healthy && o.Err == nil {
					o.Err = fmt.Errorf("still %s after rebuilding slots %v: %v", after.Health, o.Slots, after.Problems())
				}
				if after.Health == object.Healthy && debris != nil {
					// A slot rebuilt on its placement's node leaves the
					// damaged copy it replaces, served from another node
					// before, as a duplicate: the healthy object's
					// inspection now says which copies are not served.
					debris.again(after)
				}
			}
		}
		if !opts.DryRun {
			if o.Err != nil {
				ev.Action, ev.Detail = "failed", o.Err.Error()
			} else if o.Changed {
				ev.Action, ev.Detail = "skipped", "written, moved or removed since it was checked"
			} else {
				ev.Action, ev.Detail = "rebuilt", fmt.Sprintf("slots %v (%d bytes)", o.Slots, o.Bytes)
			}
		}
		if opts.Event != nil {
			opts.Event(ev)
		}
		rep.Outcomes = append(rep.Outcomes, o)
	}
	for _, in := range check.Objects {
		if in.Health == object.Unrecoverable {
			rep.Outcomes = append(rep.Outcomes, Outcome{Path: in.Path, Before: in.Health, After: in.Health,
				Err: fmt.Errorf("unrecoverable: fewer than K good chunks of some block remain")})
		}
	}
	if debris != nil {
		removeDebris(debris, check)
		collectTombstones(ctx, s, rep, opts.Event)
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// rollForward completes the interrupted commits among the unrecoverable
// objects of check (a writer died between its renames) and inspects those
// objects again, so that the rebuild below sees them as they now are.
// The temporary archives it renamed are no longer debris.
func rollForward(ctx context.Context, s *object.Store, check *Report, rep *RepairReport, opts RepairOptions) {
	renamed := map[string]bool{}
	for i, in := range check.Objects {
		if in.Health != object.Unrecoverable {
			continue
		}
		done, err := s.RollForward(ctx, in.Path)
		if err != nil {
			rep.DebrisFailed = append(rep.DebrisFailed, err)
		}
		if len(done) == 0 {
			continue
		}
		rep.RolledForward += len(done)
		for _, d := range done {
			renamed[d.Node+":"+d.Temp] = true
		}
		if opts.Event != nil {
			opts.Event(RepairEvent{Path: in.Path, Action: "completed interrupted commit",
				Detail: fmt.Sprintf("%d archives renamed into place", len(done))})
		}
		if after, err := s.Inspect(ctx, in.Path, opts.Deep); err == nil {
			check.Objects[i] = after
		}
	}
	if len(renamed) == 0 {
		return
	}
	debris := check.Debris[:0]
	for _, d := range check.Debris {
		if !renamed[d.Node+":"+d.Path] {
			debris = append(debris, d)
		}
	}
	check.Debris = debris
}

// rebuildBytes is the number of chunk bytes one archive of the object
// holds: what rebuilding one slot writes.
func rebuildBytes(in *object.Inspection) int64 {
	if in.Info == nil {
		return 0
	}
	return layout.Layout{Geometry: in.Info.Geometry, Size: in.Info.Size}.ArchiveSize()
}

// brokenSlots lists the slots of an object whose archive is missing or
// holds corrupt chunks.
func brokenSlots(in *object.Inspection) []int {
	var out []int
	for _, sl := range in.Slots {
		if sl.FoundOn == "" || len(sl.Bad) > 0 {
			out = append(out, sl.Slot)
		}
	}
	return out
}

// removeDebris deletes dead temporary files and archives of versions other
// than the one readers use (older ones, and newer ones that never reached
// K archives and are older than DebrisAge), except those of objects whose
// stale archives d already removed.
func removeDebris(d *debrisRemover, check *Report) {
	for _, t := range check.Debris {
		if !t.InProgress {
			d.remove(t.Node, t.Path, "temporary file")
		}
	}
	for _, in := range check.Objects {
		d.object(in)
	}
}

// debrisRemover removes debris for Repair, counting it in rep.
type debrisRemover struct {
	ctx   context.Context
	s     *object.Store
	rep   *RepairReport
	event func(RepairEvent)
	age   time.Duration
	deep  bool            // inspections read every chunk
	done  map[string]bool // objects whose stale archives were handled
}

func (d *debrisRemover) remove(nodeID, path, what string) {
	n, ok := d.s.Node(nodeID)
	if !ok {
		return
	}
	if err := n.Remove(d.ctx, path); err != nil && !errors.Is(err, node.ErrNotExist) {
		d.rep.DebrisFailed = append(d.rep.DebrisFailed, fmt.Errorf("node %s: remove %s: %w", nodeID, path, err))
		return
	}
	d.removed(nodeID, path, what)
}

// removeArchive removes the archive of path on node nodeID, judged
// debris, if it is still of version v (a gateway may have written the
// path since: Store.RemoveArchiveOf).
func (d *debrisRemover) removeArchive(nodeID, path string, v archive.Version, what string) {
	done, err := d.s.RemoveArchiveOf(d.ctx, nodeID, path, v)
	switch {
	case err != nil:
		d.rep.DebrisFailed = append(d.rep.DebrisFailed, err)
	case done:
		d.removed(nodeID, path, what)
	}
}

func (d *debrisRemover) removed(nodeID, path, what string) {
	d.rep.DebrisRemoved++
	if d.event != nil {
		d.event(RepairEvent{Path: path, Action: "removed " + what, Detail: "node " + nodeID})
	}
}

func (d *debrisRemover) removeMalformed(nodeID, path string) {
	done, err := d.s.RemoveMalformed(d.ctx, nodeID, path)
	switch {
	case err != nil:
		d.rep.DebrisFailed = append(d.rep.DebrisFailed, err)
	case done:
		d.rep.DebrisRemoved++
		if d.event != nil {
			d.event(RepairEvent{Path: path, Action: "removed damaged archive", Detail: "node " + nodeID})
		}
	}
}

// object removes the stale archives of one inspected object, once. Repair
// calls it before rebuilding the object too: with no spare node, the only
// node a missing slot can be rebuilt on may hold an archive of a newer
// version that never reached K (an overwrite cut between its renames),
// which the rebuild must not replace while it may be a commit in progress
// and which, once older than DebrisAge, is debris.
func (d *debrisRemover) object(in *object.Inspection) {
	if d.done[in.Path] {
		return
	}
	d.done[in.Path] = true
	if len(in.Stale) == 0 {
		return
	}
	// In the path's turn at this gateway, so that no commit of the path
	// through it lands between the inspection below and the removals.
	// (A gateway or repair in another process is not ordered with them.)
	_ = d.s.InTurn(d.ctx, in.Path, func(context.Context) error {
		d.objectInTurn(in)
		return nil
	})
}

// objectInTurn is object, in the path's turn.
func (d *debrisRemover) objectInTurn(in *object.Inspection) {
	// Act on what the path holds now: the check may be hours old (a
	// repair at --rate), and the path written or removed since; what was
	// debris then may be a new object's archives now (removed by path,
	// they would take it below K).
	fresh, err := d.s.Inspect(d.ctx, in.Path, d.deep)
	if err != nil || fresh.Health != in.Health || (in.Info == nil) != (fresh.Info == nil) ||
		in.Info != nil && in.Info.Version != fresh.Info.Version {
		return // changed since the check: the next repair decides
	}
	in = fresh
	// A node that did not answer may hold more archives of a newer
	// version than the check saw: that version may be the object, out of
	// sight for a while, and is not judged as debris meanwhile.
	unanswered := false
	for _, st := range in.Stale {
		unanswered = unanswered || st.Err != nil && !st.Malformed
	}
	if in.Health == object.Removed {
		for _, st := range in.Stale {
			if st.Malformed {
				d.removeMalformed(st.Node, in.Path)
			} else if st.Err == nil {
				d.removeArchive(st.Node, in.Path, st.Version, "remnant of a removed object")
			}
		}
		return
	}
	if in.Info == nil || in.Health == object.Unrecoverable {
		return // keep everything of objects we cannot read: evidence
	}
	copiesRemovable := d.copiesRemovable(in)
	for _, st := range in.Stale {
		if st.Malformed {
			// Readable without it: a damaged file helps no reader.
			d.removeMalformed(st.Node, in.Path)
			continue
		}
		if st.Err != nil || st.Version == "" {
			continue // unreadable node or archive: not ours to judge
		}
		if st.Version > in.Info.Version && (unanswered || time.Since(st.Version.Time()) < d.age) {
			continue // maybe a write committing right now, or the object with its other archives out of sight
		}
		if st.Version == in.Info.Version && (!duplicateSlot(in, st.Node) || !copiesRemovable) {
			continue
		}
		d.removeArchive(st.Node, in.Path, st.Version, "stale archive")
	}
}

// copiesRemovable reports whether the other copies of the object's slots
// (archives of its version that readers do not use, as a rebuild leaves
// on a node other than the placement's) may go. They are what readers
// fall back on when a slot's own archive fails: they stay until every
// chunk of the object verifies, which a shallow inspection does not
// tell, so the object is then inspected deep first.
func (d *debrisRemover) copiesRemovable(in *object.Inspection) bool {
	if in.Health != object.Healthy {
		return false
	}
	copies := false
	for _, st := range in.Stale {
		copies = copies || st.Err == nil && st.Version == in.Info.Version && duplicateSlot(in, st.Node)
	}
	if !copies || d.deep {
		return copies
	}
	deep, err := d.s.Inspect(d.ctx, in.Path, true)
	return err == nil && deep.Health == object.Healthy && deep.Info != nil && deep.Info.Version == in.Info.Version
}

// again removes the stale archives of an object inspected anew (after a
// rebuild), though object has seen it before.
func (d *debrisRemover) again(in *object.Inspection) {
	delete(d.done, in.Path)
	d.object(in)
}

// duplicateSlot reports whether node holds an archive of the current
// version that is not the one readers use (the slot is served elsewhere).
func duplicateSlot(in *object.Inspection, nodeID string) bool {
	for _, sl := range in.Slots {
		if sl.FoundOn == nodeID {
			return false
		}
	}
	return true
}

// rateLimiter spaces out writes to an average of rate bytes per second.
type rateLimiter struct {
	mu   sync.Mutex
	rate int64
	next time.Time
}

func newRateLimiter(rate int64) *rateLimiter { return &rateLimiter{rate: rate} }

func (l *rateLimiter) wait(ctx context.Context, n int) error {
	if l == nil || l.rate <= 0 {
		return nil
	}
	l.mu.Lock()
	now := time.Now()
	if l.next.Before(now) {
		l.next = now
	}
	at := l.next
	l.next = l.next.Add(time.Duration(float64(n) / float64(l.rate) * float64(time.Second)))
	l.mu.Unlock()
	if d := time.Until(at); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// collectTombstones removes tombstones that no node needs any more.
func collectTombstones(ctx context.Context, s *object.Store, rep *RepairReport, event func(RepairEvent)) {
	paths, err := s.Tombstones(ctx)
	if err != nil {
		rep.DebrisFailed = append(rep.DebrisFailed, fmt.Errorf("list tombstones: %w", err))
	}
	for _, p := range paths {
		done, err := s.CollectTombstone(ctx, p)
		if err != nil {
			rep.DebrisFailed = append(rep.DebrisFailed, err)
			continue
		}
		if done {
			rep.TombstonesCollected++
			if event != nil {
				event(RepairEvent{Path: p, Action: "collected tombstone"})
			}
		}
	}
}
