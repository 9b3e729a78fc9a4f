package repair

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ecstore/ecstore/internal/archive"
	"github.com/ecstore/ecstore/internal/object"
)

// HealerOptions configure a Healer.
type HealerOptions struct {
	// Rate limits rebuilt bytes per second (0: unlimited). Default in the
	// gateway: 20 MB/s, so that healing never crowds out users.
	Rate int64
	// Interval between full scans of the cluster (0: only heal objects
	// that reads and writes report as degraded).
	Interval time.Duration
	// Queue bounds the objects waiting to be healed; reports beyond it are
	// dropped (the next full scan finds them). Default 10000.
	Queue int
	// Settle is how long a reported object waits before it is inspected,
	// so that a write still committing is not mistaken for damage.
	// Default 5s.
	Settle time.Duration
	// RetryFor is how long a heal that failed (the node a slot belongs
	// on still down, and no other to take it, say) is tried again, with
	// waits that double from 2×Settle up to MaxRetryWait; the object is
	// then left to a repair. Default 24h.
	RetryFor time.Duration
	// MaxRetryWait bounds the wait between two tries. Default 10 minutes.
	MaxRetryWait time.Duration
	Logger       *slog.Logger
	// Healed, if set, is called after each object is handled (for
	// metrics): ok reports whether it is healthy now.
	Healed func(path string, bytes int64, ok bool)
}

// Healer restores redundancy in the background: the engine reports
// degraded reads and writes (Enqueue, wired to object.Events), and
// archives whose bytes failed a checksum; the healer inspects those
// objects and rebuilds what is missing or damaged, at a bounded rate;
// optionally it also runs a full Repair every Interval.
type Healer struct {
	store   *object.Store
	opts    HealerOptions
	limiter *rateLimiter
	mu      sync.Mutex
	pending map[string]time.Time // path -> when reported
	// damaged holds, per reported path, the version and the slots whose
	// archives reads found damaged.
	damaged map[string]damagedSlots
	// failing holds the objects whose last heal failed, to be tried
	// again (retry).
	failing map[string]healFailure
	// downSeen holds the nodes found down at the last check while some
	// objects were failing (retryIfNodesBack; used by Run only).
	downSeen map[string]bool
	wake     chan struct{}
	// dropped counts the reports not queued because the queue was full;
	// dropWarned is when that was last logged, droppedSince how many
	// since (h.mu).
	dropped      atomic.Int64
	dropWarned   time.Time
	droppedSince int
}

// dropWarnEvery spaces the warnings about reports dropped from a full
// queue (one per report would flood the log in the outage that fills it).
const dropWarnEvery = time.Minute

// healFailure is when an object's heals started failing, and how many
// have failed since.
type healFailure struct {
	since    time.Time
	attempts int
}

// damagedSlots are the slots of one version of an object whose archives
// reads found damaged.
type damagedSlots struct {
	version archive.Version
	slots   []int
}

// SetStore sets the store to heal, for a healer created (to obtain its
// Events) before the store. It must be called before Run.
func (h *Healer) SetStore(s *object.Store) { h.store = s }

// NewHealer returns a healer for store; call Run to start it.
func NewHealer(store *object.Store, opts HealerOptions) *Healer {
	if opts.Queue <= 0 {
		opts.Queue = 10000
	}
	if opts.Settle == 0 {
		opts.Settle = 5 * time.Second
	}
	if opts.RetryFor == 0 {
		opts.RetryFor = 24 * time.Hour
	}
	if opts.MaxRetryWait == 0 {
		opts.MaxRetryWait = 10 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Healer{store: store, opts: opts, limiter: newRateLimiter(opts.Rate),
		pending: map[string]time.Time{}, damaged: map[string]damagedSlots{}, failing: map[string]healFailure{},
		wake: make(chan struct{}, 1)}
}

// Enqueue asks for path to be healed. It never blocks, so it may be called
// from engine event callbacks; duplicates are merged.
func (h *Healer) Enqueue(path string) {
	h.mu.Lock()
	h.enqueueLocked(path)
	h.mu.Unlock()
	h.kick()
}

// enqueueLocked adds path to the pending objects unless the queue is
// full, and reports whether it is pending. h.mu must be held.
func (h *Healer) enqueueLocked(path string) bool {
	if _, ok := h.pending[path]; ok {
		return true
	}
	if len(h.pending) >= h.opts.Queue {
		// Without a full scan (--heal-interval) nothing finds it again
		// unless it is read: say so, and count it.
		h.dropped.Add(1)
		h.droppedSince++
		if now := time.Now(); now.Sub(h.dropWarned) >= dropWarnEvery {
			h.opts.Logger.Warn("heal queue full: degraded objects are not queued; run `ecstore repair` (or serve with --heal-interval)",
				"obj", path, "dropped", h.droppedSince, "queue", h.opts.Queue)
			h.dropWarned, h.droppedSince = now, 0
		}
		return false
	}
	h.pending[path] = time.Now()
	return true
}

// Dropped is the number of reports of degraded objects not queued
// because the queue was full.
func (h *Healer) Dropped() int64 { return h.dropped.Load() }

// kick wakes Run.
func (h *Healer) kick() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Events returns engine hooks that enqueue degraded objects, chained with
// next (which may be zero).
func (h *Healer) Events(next object.Events) object.Events {
	out := next
	out.DegradedRead = func(path string, block int64, slots []int) {
		h.Enqueue(path)
		if next.DegradedRead != nil {
			next.DegradedRead(path, block, slots)
		}
	}
	out.DegradedWrite = func(path string, slots []int) {
		h.Enqueue(path)
		if next.DegradedWrite != nil {
			next.DegradedWrite(path, slots)
		}
	}
	out.DamagedArchive = func(path string, version archive.Version, slot int, block int64) {
		h.enqueueDamaged(path, version, slot)
		if next.DamagedArchive != nil {
			next.DamagedArchive(path, version, slot, block)
		}
	}
	return out
}

// enqueueDamaged asks for path to be healed, with slot's archive of
// version among those to rebuild. A report of an older version than one
// already pending is dropped (versions order as their commit times);
// reports of a path the full queue leaves out are dropped with it.
func (h *Healer) enqueueDamaged(path string, version archive.Version, slot int) {
	h.mu.Lock()
	defer h.kick()
	defer h.mu.Unlock()
	if !h.enqueueLocked(path) {
		return
	}
	d, ok := h.damaged[path]
	switch {
	case ok && version < d.version:
		return
	case !ok || version != d.version:
		d = damagedSlots{version: version}
	}
	if !slices.Contains(d.slots, slot) {
		d.slots = append(d.slots, slot)
	}
	h.damaged[path] = d
}

// Pending is the number of objects waiting to be healed.
func (h *Healer) Pending() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.pending)
}

// Retrying is the number of objects whose last heal failed and that are
// to be tried again.
func (h *Healer) Retrying() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.failing)
}

// Run heals until ctx is done.
func (h *Healer) Run(ctx context.Context) error {
	var scan <-chan time.Time
	if h.opts.Interval > 0 {
		t := time.NewTicker(h.opts.Interval)
		defer t.Stop()
		scan = t.C
	}
	tick := time.NewTicker(h.opts.Settle/2 + time.Millisecond)
	defer tick.Stop()
	// A full scan runs beside the heals of reported objects, one at a
	// time (it may take hours at --heal-rate; meanwhile reports must not
	// wait, nor the queue fill), under the same rate limit.
	var scans sync.WaitGroup
	defer scans.Wait()
	scanning := make(chan struct{}, 1)
	for {
		for _, p := range h.due() {
			h.heal(ctx, p)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-h.wake:
		case <-tick.C:
			h.retryIfNodesBack(ctx)
		case <-scan:
			select {
			case scanning <- struct{}{}:
				scans.Go(func() {
					defer func() { <-scanning }()
					h.fullScan(ctx)
				})
			default:
				h.opts.Logger.Info("periodic repair still running; this interval's is skipped")
			}
		}
	}
}

// retryIfNodesBack makes every failing object due at once when a node
// that was down at the last check answers again: a heal that failed for
// want of that node then runs within a tick of its return, not at the
// end of a wait that may have grown to MaxRetryWait. Nodes are asked
// only while some object is failing.
func (h *Healer) retryIfNodesBack(ctx context.Context) {
	if h.Retrying() == 0 {
		h.downSeen = nil
		return
	}
	states := h.store.NodeStates(ctx, false)
	if ctx.Err() != nil {
		return
	}
	down := make(map[string]bool)
	var back []string
	for _, st := range states {
		if !st.Up() {
			down[st.ID] = true
		} else if h.downSeen[st.ID] {
			back = append(back, st.ID)
		}
	}
	h.downSeen = down
	if len(back) == 0 {
		return
	}
	h.mu.Lock()
	due := time.Now().Add(-h.opts.Settle)
	n := 0
	for path := range h.failing {
		if at, ok := h.pending[path]; ok && at.After(due) {
			h.pending[path] = due
			n++
		}
	}
	h.mu.Unlock()
	h.opts.Logger.Info("nodes answer again; trying failed heals again", "nodes", back, "objects", n)
}

// due takes the reported objects that have settled.
func (h *Healer) due() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for p, at := range h.pending {
		if time.Since(at) >= h.opts.Settle {
			out = append(out, p)
			delete(h.pending, p)
		}
	}
	return out
}

func (h *Healer) heal(ctx context.Context, path string) {
	h.mu.Lock()
	d := h.damaged[path]
	delete(h.damaged, path)
	h.mu.Unlock()
	slots, res, err := heal(ctx, h.store, path, d, h.limiter.wait)
	if err == nil && len(slots) == 0 {
		h.mu.Lock()
		delete(h.failing, path)
		h.mu.Unlock()
		return // gone, healthy again, or beyond repair (fsck reports it)
	}
	if err == nil && res != nil {
		// The rebuild read the damaged archives too, and reported them
		// again: those reports are what was just rebuilt.
		h.mu.Lock()
		if again, ok := h.damaged[path]; ok && again.version == res.Version {
			again.slots = slices.DeleteFunc(again.slots, func(sl int) bool { _, done := res.Rebuilt[sl]; return done })
			if len(again.slots) == 0 {
				delete(h.damaged, path)
			} else {
				h.damaged[path] = again
			}
		}
		h.mu.Unlock()
	}
	var n int64
	if res != nil {
		n = res.Bytes
	}
	switch {
	case err != nil && ctx.Err() != nil:
		return // stopping
	case err != nil:
		h.retry(path, d, slots, err)
	default:
		h.mu.Lock()
		failed := h.failing[path].attempts
		delete(h.failing, path)
		h.mu.Unlock()
		h.opts.Logger.Info("healed", "obj", path, "slots", slots, "bytes", n, "failed_before", failed)
	}
	if h.opts.Healed != nil {
		h.opts.Healed(path, n, err == nil)
	}
}

// retry puts path back in the queue after its heal failed, due after a
// wait that doubles with every failure, with the damaged slots d that
// were reported for it, until RetryFor has passed since the first
// failure. Without it, an object written while a node was down stayed
// degraded when its heal came before the node was back: nothing reports
// it again unless it is read, and the full scan is off by default.
func (h *Healer) retry(path string, d damagedSlots, slots []int, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, ok := h.failing[path]
	if !ok {
		f.since = time.Now()
	}
	f.attempts++
	if time.Since(f.since) >= h.opts.RetryFor {
		delete(h.failing, path)
		h.opts.Logger.Warn("heal failed; giving up on the object, which `ecstore repair` rebuilds", "obj", path, "slots", slots,
			"attempts", f.attempts, "since", f.since, "err", err)
		return
	}
	wait := h.opts.Settle // doubled up to the cap, never past it (no overflow)
	for i := 0; i < f.attempts && wait < h.opts.MaxRetryWait; i++ {
		wait *= 2
	}
	wait = min(wait, h.opts.MaxRetryWait)
	if _, queued := h.pending[path]; !queued && len(h.pending) >= h.opts.Queue {
		delete(h.failing, path)
		h.opts.Logger.Warn("heal failed and the queue is full; giving up on the object, which `ecstore repair` rebuilds",
			"obj", path, "slots", slots, "err", err)
		return
	}
	// due takes an object Settle after its time. A report of path that
	// came during the heal does not make it due sooner: it is mostly the
	// rebuild's own reads, which need parity for the slots rebuilt (the
	// wait did not apply, and a heal that kept failing re-read the
	// object every Settle for RetryFor).
	h.pending[path] = time.Now().Add(wait - h.opts.Settle)
	h.failing[path] = f
	if d.version != "" {
		cur, ok := h.damaged[path]
		switch {
		case !ok || cur.version < d.version:
			h.damaged[path] = d
		case cur.version == d.version:
			for _, sl := range d.slots {
				if !slices.Contains(cur.slots, sl) {
					cur.slots = append(cur.slots, sl)
				}
			}
			h.damaged[path] = cur
		} // else a newer version was reported meanwhile
	}
	log := h.opts.Logger.Debug
	if f.attempts == 1 {
		log = h.opts.Logger.Warn
	}
	log("heal failed; will try again", "obj", path, "slots", slots, "attempt", f.attempts, "retry_in", wait, "err", err)
}

// Heal inspects the object at path and, if it is degraded, rebuilds its
// missing and damaged archives. It returns the slots it rebuilt or tried
// to, none when the object is healthy, gone or beyond repair, and what
// the rebuild did (nil if none ran); an error when it could not be
// inspected, or too few of its archives answered to tell (to be tried
// again). throttle, if not nil, paces the rebuild
// (object.RebuildOptions.Throttle).
func Heal(ctx context.Context, s *object.Store, path string, throttle func(context.Context, int) error) ([]int, *object.RebuildResult, error) {
	return heal(ctx, s, path, damagedSlots{}, throttle)
}

// heal is Heal, also rebuilding the slots of d when the object's version
// is still d's: archives a shallow inspection finds present, whose bytes
// reads found damaged.
func heal(ctx context.Context, s *object.Store, path string, d damagedSlots, throttle func(context.Context, int) error) ([]int, *object.RebuildResult, error) {
	in, err := s.Inspect(ctx, path, false)
	switch {
	case errors.Is(err, object.ErrNotExist):
		return nil, nil, nil // removed
	case err != nil:
		return nil, nil, err // tried again
	case in.Health == object.Unrecoverable && unanswered(in):
		// Out of reach for now (more than M nodes out, a switch
		// rebooting): tried again when nodes answer.
		return nil, nil, fmt.Errorf("object %s: too few archives answer: %v", path, in.Problems())
	case in.Health != object.Degraded && in.Health != object.Healthy:
		return nil, nil, nil // beyond repair, or removed: fsck reports it
	}
	var slots []int
	if in.Health == object.Degraded {
		slots = brokenSlots(in)
	}
	if d.version != "" && d.version == in.Info.Version {
		for _, sl := range d.slots {
			if sl >= 0 && sl < len(in.Slots) && !slices.Contains(slots, sl) {
				slots = append(slots, sl)
			}
		}
	}
	if len(slots) == 0 {
		return nil, nil, nil
	}
	res, err := s.Rebuild(ctx, path, slots, object.RebuildOptions{Throttle: throttle, Version: in.Info.Version})
	return slots, res, err
}

// unanswered reports whether a node did not answer the inspection.
func unanswered(in *object.Inspection) bool {
	for _, st := range in.Stale {
		if st.Err != nil && !st.Malformed {
			return true
		}
	}
	return false
}

func (h *Healer) fullScan(ctx context.Context) {
	rep, err := Repair(ctx, h.store, RepairOptions{Rate: h.opts.Rate, RemoveDebris: true, limiter: h.limiter})
	if err != nil {
		h.opts.Logger.Warn("periodic repair failed", "err", err)
		return
	}
	h.opts.Logger.Info("periodic repair", "objects", len(rep.Check.Objects), "repaired", len(rep.Outcomes)-len(rep.Failed()),
		"failed", len(rep.Failed()), "bytes", rep.Bytes, "debris", rep.DebrisRemoved, "rolled_forward", rep.RolledForward)
	if h.opts.Healed != nil {
		// Counted as the heals of reports are (the healer's metrics).
		for _, o := range rep.Outcomes {
			if len(o.Slots) > 0 && !o.Changed {
				h.opts.Healed(o.Path, o.Bytes, o.Err == nil && o.After == object.Healthy)
			}
		}
	}
}
