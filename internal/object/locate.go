package object

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ecstore/ecstore/internal/archive"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/workers"
)

// archiveRef is one archive of an object found on a node.
type archiveRef struct {
	node node.Node
	file node.File
	idx  *archive.Index
}

// probeResult is what probing one node for an object's path found.
type probeResult struct {
	node  node.Node
	ref   *archiveRef // nil when absent or unreadable
	isDir bool
	// belowFile: absent because the node holds a file where a parent
	// directory of the path would be.
	belowFile bool
	err       error // other than "not there""
	// malformed is set (with err) when the node answered and the file at
	// the path is not a well-formed archive: damaged bytes, not a node
	// failure.
	malformed bool
}

// located is the chosen version of an object and its archives by slot.
type located struct {
	meta  *archive.Metadata
	slots []*archiveRef // len K+M; nil where the archive is missing
	// alts holds, by slot, further archives of the same slot (a copy a
	// rebuild left on another node): read when the slot's archive fails.
	// They are in stale too, which closes them.
	alts  map[int][]*archiveRef
	found int
	stale []*archiveRef // archives of other versions (debris)
	errs  []error       // node errors met while probing
	// unanswered holds the ids of the nodes the probe gave up on, or did
	// not ask for being known to hang: a missing slot of theirs may be
	// there all the same, and a reader may look again (Reader.reopen).
	unanswered map[string]bool
	// lazy holds, by slot, the nodes whose archive of the version only
	// its summary is known of (locateBySummary): it is opened when a
	// read needs it (Reader.openLazy). Such slots are nil in slots but
	// count in found.
	lazy map[int]node.Node
}

// close closes every archive found, concurrently: closing a remote file
// is a round trip to its node.
func (l *located) close() {
	var wg sync.WaitGroup
	closeRef := func(r *archiveRef) {
		wg.Add(1)
		workers.Go(func() {
			defer wg.Done()
			r.file.Close()
		})
	}
	for _, r := range l.slots {
		if r != nil {
			closeRef(r)
		}
	}
	for _, r := range l.stale {
		closeRef(r)
	}
	wg.Wait()
}

// closeDebris closes the archives of other versions at once, for a reader
// that will not read them: the stale archives that are not another copy
// of a slot (alts), which the reader may read until it closes.
func (l *located) closeDebris() {
	copies := map[*archiveRef]bool{}
	for _, refs := range l.alts {
		for _, r := range refs {
			copies[r] = true
		}
	}
	kept := l.stale[:0]
	for _, r := range l.stale {
		if copies[r] {
			kept = append(kept, r)
		} else {
			r.file.Close()
		}
	}
	clear(l.stale[len(kept):])
	l.stale = kept
}

// probe opens path on each node in parallel and parses the archives
// found, for the callers that need every node's answer (remove, inspect,
// roll-forward, tombstone collection): it returns when every node has
// answered or run out of its probe timeout, without the grace locate
// gives stragglers. A node known to hang is not asked unless the object
// needs it (askHungIfNeeded). Nodes that had not answered are left out of
// the results (and files they open later are closed).
//
// Waiting matters under load: an rm that misses one node's answer must
// write tombstones and ask every node again, which is far more work than
// the wait. With a 250 ms grace, 64 concurrent rms on 10 nodes fell into
// that path and stayed there (62-168 rms/s against 430-631).
func (s *Store) probe(ctx context.Context, path string, nodes []node.Node) []probeResult {
	return s.askHungIfNeeded(ctx, path, s.probeNodes(ctx, path, nodes, nil, probeOpts{waitAll: true}))
}

// probeOpts modify a probe.
type probeOpts struct {
	// patience, when it fires, gives up on the nodes that have not
	// answered (nil: never).
	patience <-chan time.Time
	// askedAt holds the nodes asked before, at that time: they get only
	// what is left of their timeout.
	askedAt map[string]time.Time
	// askHung asks nodes known to hang too.
	askHung bool
	// waitAll waits for every node (up to its timeout) even once a
	// version is readable, instead of giving the others HedgeDelay.
	waitAll bool
}

// askHungIfNeeded probes, after all, the nodes that probeFor did not ask
// for being known to hang, when the others hold no readable version of
// path and the skipped nodes could make one readable: a node marked hung
// may answer again (its stall ended), and the object may need its
// archives. Their answers replace the errHung results; one that answers
// is no longer taken for hung. A node still hung costs its shortened
// probe deadline (HedgeDelay).
//
// The skipped nodes could matter when, with the newest version found,
// they would bring its archives to K; or, with no archive found, when
// they and the nodes that failed are M+1 or more, as many as hold a
// small object. A path that is absent with one node hung and one down
// thus answers at once (xrdcp stats its destination before every put).
func (s *Store) askHungIfNeeded(ctx context.Context, path string, results []probeResult) []probeResult {
	var skipped []node.Node
	failed := 0
	for _, r := range results {
		switch {
		case errors.Is(r.err, errHung):
			skipped = append(skipped, r.node)
		case r.isDir:
			return results // a directory: no object to complete
		case r.err != nil && !r.malformed:
			failed++
		}
	}
	if len(skipped) == 0 || ctx.Err() != nil {
		return results
	}
	if _, ok := choose(results); ok {
		return results
	}
	if newest := newestVersion(results); newest != "" {
		k, found := 0, 0
		for _, r := range results {
			if r.ref != nil && r.ref.idx.Meta.Version == newest {
				k = r.ref.idx.Meta.K
				found++
			}
		}
		if found+len(skipped) < k {
			return results
		}
	} else if failed+len(skipped) < s.opts.Geometry.M+1 {
		return results
	}
	kept := slices.DeleteFunc(slices.Clone(results), func(r probeResult) bool { return errors.Is(r.err, errHung) })
	return append(kept, s.probeNodes(ctx, path, skipped, kept, probeOpts{askHung: true})...)
}

// probeFor is probe continuing the results prior of other nodes (which
// count towards K), that also gives up on the nodes that have not
// answered when patience fires (nil: never). A node in askedAt was asked
// before, at that time, and gets only what is left of its timeout.
func (s *Store) probeFor(ctx context.Context, path string, nodes []node.Node, prior []probeResult, patience <-chan time.Time, askedAt map[string]time.Time) []probeResult {
	return s.probeNodes(ctx, path, nodes, prior, probeOpts{patience: patience, askedAt: askedAt})
}

// probeNodes is probeFor with options.
func (s *Store) probeNodes(ctx context.Context, path string, nodes []node.Node, prior []probeResult, o probeOpts) []probeResult {
	patience, askedAt, askHung := o.patience, o.askedAt, o.askHung
	type indexed struct {
		i    int
		r    probeResult
		took time.Duration // from asking to the answer; 0 if not asked
	}
	ch := make(chan indexed, len(nodes))
	var mu sync.Mutex
	gaveUp := false
	for i, n := range nodes {
		if !askHung && s.isHung(n.ID()) {
			// Known to hang: its answer would be a timeout after
			// HedgeDelay, which it gets at once. (The node is asked again
			// once its suspicion expires.)
			ch <- indexed{i, probeResult{node: n, err: fmt.Errorf("node %s: %w", n.ID(), errHung)}, 0}
			continue
		}
		since := time.Now()
		if t, ok := askedAt[n.ID()]; ok {
			since = t
		}
		deadline := since.Add(s.nodeTimeout(n.ID(), s.opts.ProbeTimeout))
		workers.Go(func() {
			pctx, cancel := context.WithDeadline(ctx, deadline)
			defer cancel()
			asked := time.Now()
			r := probeOne(pctx, path, n)
			took := time.Since(asked)
			if askHung && r.err == nil {
				s.clearHung(n.ID()) // it answered: its stall is over
			}
			if r.err != nil && ctx.Err() == nil {
				s.opts.Events.nodeError(n.ID(), "probe", r.err)
				if pctx.Err() != nil {
					s.markSuspect(n.ID(), true)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if r.err == nil {
				// It answered, if late. (Under mu: after the collector's
				// marking of the nodes it gave up on.)
				s.clearSlow(n.ID())
			}
			if gaveUp {
				if r.ref != nil {
					r.ref.file.Close()
				}
				return
			}
			ch <- indexed{i, r, took} // never blocks: capacity len(nodes)
		})
	}
	out := make([]probeResult, 0, len(nodes))
	answered := make([]bool, len(nodes))
	var took []time.Duration // of the probes answered, for probeLatency
	add := func(got indexed) {
		out = append(out, got.r)
		answered[got.i] = true
		if got.r.err == nil && got.took > 0 {
			took = append(took, got.took)
		}
	}
	var grace <-chan time.Time
	lateOnes := false  // gave up on unanswered nodes after a grace
	shortened := false // the grace is the one for slow nodes
	impatient := false // the patience is the one for slow nodes
collect:
	for len(out) < len(nodes) {
		select {
		case got := <-ch:
			add(got)
			if grace == nil && !o.waitAll {
				// More results never make a readable version unreadable:
				// once one is, choose need not run again.
				if _, ok := choose(append(slices.Clip(prior), out...)); ok {
					grace = time.After(s.opts.HedgeDelay)
				}
			}
			// The nodes left get HedgeDelay to report a newer version,
			// unless they are all known to hang: they are then treated
			// as down, as reads treat them. Nodes known to be slow get a
			// tenth of it: enough for one that is no longer slow to
			// answer, as the others just did (its answer ends the
			// suspicion), not for one that still crawls or hangs.
			if grace != nil && !askHung {
				switch {
				case s.onlyHung(nodes, answered):
					break collect
				case !shortened && s.onlySlowOrHung(nodes, answered):
					grace = time.After(s.opts.HedgeDelay / 10)
					shortened = true
				}
			}
			// Likewise a window (patience) whose stragglers are all
			// known to be slow or hang moves on after a tenth of its
			// patience: the next window asks them again.
			if patience != nil && !impatient && !askHung && s.onlySlowOrHung(nodes, answered) {
				patience = time.After(s.opts.HedgeDelay / 10)
				impatient = true
			}
			continue
		case <-grace:
			lateOnes = true
		case <-patience:
			lateOnes = true
		case <-ctx.Done():
		}
		break
	}
	answeredHere := len(out) > 0
	mu.Lock()
	defer mu.Unlock()
	gaveUp = true
	// Results sent before gaveUp was set; none can follow.
	for {
		select {
		case got := <-ch:
			add(got)
			continue
		default:
		}
		break
	}
	s.probeLatency.addMedian(took)
	if lateOnes && answeredHere {
		// A node that let the others' HedgeDelay pass unanswered is
		// suspect of being slow until it answers (its probe may still
		// do so, which ends the suspicion): the next probes need not
		// wait for it again, nor reads hedge on it block after block.
		// A node that hangs thus costs one HedgeDelay, not one per
		// request until its probe times out (ProbeTimeout). When no
		// node answered, the gateway itself is the slow one (as
		// readBlock also assumes), and none is marked.
		for i, n := range nodes {
			if !answered[i] && !s.isSuspect(n.ID()) {
				s.markSlow(n.ID())
			}
		}
	}
	return out
}

func probeOne(ctx context.Context, path string, n node.Node) probeResult {
	r := probeResult{node: n}
	f, err := n.Open(ctx, path)
	switch {
	case errors.Is(err, node.ErrNotDir):
		r.belowFile = true
		return r
	case errors.Is(err, node.ErrNotExist):
		return r
	case errors.Is(err, node.ErrIsDir):
		r.isDir = true
		return r
	case err != nil:
		r.err = err
		return r
	}
	var idx *archive.Index
	if c, ok := f.(node.ContentsFile); ok {
		// In memory already: parsed where it lies, and kept as the
		// index's Whole.
		idx, err = archive.ParseTail(ctx, nil, c.Size(), c.Contents())
	} else {
		idx, err = archive.Parse(ctx, f, f.Size())
	}
	if err != nil {
		f.Close()
		r.err = fmt.Errorf("node %s: archive %s: %w", n.ID(), path, err)
		r.malformed = malformedArchive(err)
		return r
	}
	r.ref = &archiveRef{node: n, file: f, idx: idx}
	return r
}

// locate finds the newest version of path that has at least K consistent
// archives. It probes the nodes that rank highest for the path first and
// asks the remaining nodes only when that does not find enough archives.
//
// An overwrite commits by renaming its archives over the old ones, node by
// node. A probe that lands between the first and the last rename can see
// fewer than K archives of either version; locate then probes again a few
// times, briefly. If the commit still looks stuck, its writer may have
// died between renames: locate completes it (rollForward) when the
// missing archives sit finished under temporary names, and otherwise
// calls the object unrecoverable.
//
// With forEveryNode, every node is asked at once, as Inspect does,
// rather than in windows: an exclusive create expects the path to be
// absent, which needs every node's answer (windows would gather it in as
// many round trips as there are windows); a rebuild must see the version
// the check saw. With forStat, the object is only described (Stat): its
// archives need not be open (see locateBySummary).
func (s *Store) locate(ctx context.Context, path string, mode lookupMode) (*located, error) {
	delay := commitRetryDelay
	for attempt := 0; ; attempt++ {
		loc, results, err := s.locateOnce(ctx, path, mode)
		var unrecoverable *UnrecoverableError
		if !errors.As(err, &unrecoverable) || !maybeCommitting(results) {
			return loc, err
		}
		if attempt == commitRetries {
			if done, _ := s.rollForward(ctx, path, results); len(done) > 0 {
				loc, _, err = s.locateOnce(ctx, path, mode)
			}
			return loc, err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		delay *= 2
	}
}

// commitRetries and commitRetryDelay bound how long locate waits for a
// commit in flight: 10+20+40+80+160 ms.
const (
	commitRetries    = 5
	commitRetryDelay = 10 * time.Millisecond
)

// lookupMode says what a lookup is for (locate).
type lookupMode int

const (
	forRead      lookupMode = iota // a read: the archives it needs, window by window
	forEveryNode                   // every node asked at once (exclusive creates, repairs)
	forStat                        // a description of the object only (Stat)
)

// maybeCommitting reports whether probe results that yield no readable
// version look like a write being committed: archives of some version
// exist (so the object is not simply absent), and either two versions are
// interleaved or a version is short of K without any node having failed.
func maybeCommitting(results []probeResult) bool {
	versions := map[archive.Version]bool{}
	failed := false
	for _, r := range results {
		if r.ref != nil {
			versions[r.ref.idx.Meta.Version] = true
		}
		failed = failed || r.err != nil && !r.malformed
	}
	return len(versions) > 1 || len(versions) == 1 && !failed
}

func (s *Store) locateOnce(ctx context.Context, path string, mode lookupMode) (*located, []probeResult, error) {
	everyNode := mode == forEveryNode
	ranked := s.rank(path)
	var (
		results []probeResult
		waiting []node.Node // nodes of earlier windows that had not answered
		askedAt = map[string]time.Time{}
		asked   int // windows' nodes asked, in rank order
	)
	windows := s.probeWindows(len(ranked))
	if everyNode {
		windows = windows[len(windows)-1:]
	}
	if !everyNode {
		second := windows[min(1, len(windows)-1)]
		loc, answered, late, ok := s.locateBySummary(ctx, path, ranked[:windows[0]], ranked[windows[0]:second], mode == forStat)
		if ok {
			return loc, nil, nil
		}
		results = answered
		if !late.IsZero() {
			waiting = append(waiting, ranked[0])
			askedAt[ranked[0].ID()] = late
		}
	}
	for i, upTo := range windows {
		nodes := slices.Clip(ranked[asked:upTo]) // the last window appends to it
		if i == 0 && (len(results) > 0 || len(waiting) > 0) {
			// Nodes the lookup by summaries answered for, or left for
			// the last window, are not asked again.
			nodes = slices.DeleteFunc(slices.Clone(nodes), func(n node.Node) bool {
				return askedAt[n.ID()] != (time.Time{}) ||
					slices.ContainsFunc(results, func(r probeResult) bool { return r.node.ID() == n.ID() })
			})
		}
		var patience <-chan time.Time
		if i < len(windows)-1 {
			// A hung node must not hold up the next window: after
			// windowPatience (at most HedgeDelay) the window's stragglers
			// are left for the last one, which asks them again and waits
			// for them until their first probe's timeout, so that what
			// locate decides is unchanged. (Nodes known to hang are not
			// asked again: they count as down, as in probeNodes' grace.)
			t := time.NewTimer(s.windowPatience())
			patience = t.C
			defer t.Stop()
		} else {
			for _, n := range waiting {
				if !s.isHung(n.ID()) {
					nodes = append(nodes, n)
				}
			}
		}
		start := time.Now()
		got := s.probeFor(ctx, path, nodes, results, patience, askedAt)
		results = append(results, got...)
		for _, n := range unanswered(nodes, got) {
			waiting = append(waiting, n)
			askedAt[n.ID()] = start
		}
		asked = upTo
		// choose only groups the refs; the results still own the open
		// files, so a later choice over more results can reuse them.
		if loc, ok := choose(results); ok && (loc.found == len(loc.slots) || missingOnlyOnHung(loc, results)) {
			break
		}
	}
	results = s.askHungIfNeeded(ctx, path, results)
	loc, err := s.resolve(ctx, path, results)
	if loc != nil {
		for _, n := range unanswered(ranked, results) {
			loc.markUnanswered(n.ID())
		}
		for _, r := range results {
			if errors.Is(r.err, errHung) {
				loc.markUnanswered(r.node.ID())
			}
		}
	}
	return loc, results, err
}

// locateBySummary is locateOnce's first window when its nodes read
// archive summaries cheaply (node.AttrReader: on a remote node one
// request instead of an open, a read and a close): the first node in rank
// order is probed as usual while the others are asked for the summaries
// of their archives only, at once. When the first node's archive is of
// the newest version in the window and the summaries account for all its
// other slots, that is what probing the whole window would find, and
// locate's answer (ok): the version with every archive in the first
// window (see probeWindows). The other archives are then opened only if
// a read needs them (located.lazy).
//
// Only an object that this archive serves alone takes this path: one
// block stored as copies (K = 1, as small objects are), the archive
// being slot 0, the copy reads ask for. A read of another archive is
// then a failure's fallback: an archive opened after the lookup may have
// been replaced by an overwrite meanwhile (it is then missing), where one
// the lookup opened would still read the version found.
//
// Otherwise (an archive or summary missing, a newer version, a node
// failing, slow or suspect, a directory, a larger object) locate probes
// as usual. answered then holds the results it need not ask for again:
// the first node's probe, and the nodes whose summary read found nothing
// at path (a stat of a path not there, as xrdcp makes before every put,
// asks no node twice). When the first node had not answered within
// windowPatience, late is when it was asked, and locate leaves it for its
// last window as it does a window's stragglers (marked slow if other
// nodes' summaries came meanwhile). The summaries are read within
// windowPatience too. Only the first node's probe counts in
// probeLatency: a summary is cheaper to read than an archive.
//
// For a stat (forStat), an archive of a larger object is the answer too
// when the summaries of the window and of the second window's other nodes
// (others, read then) hold every other slot of its version and no newer
// one, which is where locate would stop probing (statBySummaries): the
// located then holds that archive alone, which Stat needs for the
// object's metadata, and counts the others in found.
func (s *Store) locateBySummary(ctx context.Context, path string, window, others []node.Node, stat bool) (loc *located, answered []probeResult, late time.Time, ok bool) {
	if len(window) < 2 {
		return nil, nil, late, false
	}
	readers := make([]node.AttrReader, len(window))
	for i, n := range window {
		a, ok := s.summaryReader(n)
		if !ok {
			return nil, nil, late, false
		}
		readers[i] = a
	}
	wait := s.windowPatience()
	patience := time.NewTimer(wait)
	defer patience.Stop()
	// The summaries are read within the patience too: a read that has
	// not answered by then fails (and so does the lookup by summaries).
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	type answer struct {
		n     node.Node
		sum   summary
		found bool // an archive with a summary is there
		err   error
	}
	answers := make(chan answer, len(window)-1)
	var replied atomic.Int32 // summary reads the nodes answered (not cut short)
	for i, a := range readers[1:] {
		n := window[i+1]
		workers.Go(func() {
			sum, err := readSummary(wctx, a, path)
			if wctx.Err() == nil {
				replied.Add(1)
			}
			ans := answer{n: n, err: err}
			if sum != nil {
				ans.sum, ans.found = *sum, true
			}
			answers <- ans
		})
	}
	// The first node's probe is an ordinary one, with the node's probe
	// timeout: if it outlasts the patience, a later answer is dropped.
	firstCh := make(chan probeResult, 1)
	var mu sync.Mutex
	gaveUp := false
	asked := time.Now()
	workers.Go(func() {
		pctx, cancel := context.WithTimeout(ctx, s.nodeTimeout(window[0].ID(), s.opts.ProbeTimeout))
		defer cancel()
		r := probeOne(pctx, path, window[0])
		if r.err != nil && ctx.Err() == nil {
			s.opts.Events.nodeError(window[0].ID(), "probe", r.err)
		}
		mu.Lock()
		defer mu.Unlock()
		if gaveUp {
			if r.ref != nil {
				r.ref.file.Close()
			}
			return
		}
		firstCh <- r
	})
	// giveUp stops waiting for the first node: its answer, if sent just
	// before, is taken all the same; a later one is dropped (and its
	// archive closed) by the probe.
	giveUp := func() (probeResult, bool) {
		mu.Lock()
		gaveUp = true
		mu.Unlock()
		select {
		case r := <-firstCh:
			return r, true
		default:
			return probeResult{}, false
		}
	}
	// rest collects the summaries not read yet (all answer within wctx):
	// the nodes that hold nothing at path are answered for locate. It
	// returns the summaries found, and whether every read succeeded.
	read := 0
	rest := func() (found []summary, allRead bool) {
		allRead = true
		for ; read < len(window)-1; read++ {
			a := <-answers
			switch {
			case a.err != nil:
				allRead = false
			case !a.found:
				answered = append(answered, probeResult{node: a.n})
			default:
				found = append(found, a.sum)
			}
		}
		return found, allRead
	}
	var got probeResult
	select {
	case got = <-firstCh:
		s.probeLatency.addMedian([]time.Duration{time.Since(asked)})
	case <-patience.C:
		var ok bool
		if got, ok = giveUp(); !ok {
			// Others answered meanwhile: it is late, as probeNodes
			// takes a window's stragglers to be.
			if replied.Load() > 0 && !s.isSuspect(window[0].ID()) {
				s.markSlow(window[0].ID())
			}
			rest()
			return nil, answered, asked, false
		}
	case <-ctx.Done():
		if r, ok := giveUp(); ok {
			answered = append(answered, r)
		}
		rest()
		return nil, answered, late, false
	}
	answered = append(answered, got)
	if got.ref == nil {
		rest() // absent, a directory, or failed
		return nil, answered, late, false
	}
	meta := got.ref.idx.Meta
	if meta.K != 1 || meta.Slot != 0 || meta.Layout().Blocks() > 1 || len(meta.Placement) > len(window) {
		// Reads would need more than this archive.
		found, allRead := rest()
		if stat && allRead {
			if loc, ok := s.statBySummaries(ctx, path, got.ref, found, others); ok {
				return loc, nil, late, true
			}
		}
		return nil, answered, late, false
	}
	loc = &located{meta: meta, slots: make([]*archiveRef, len(meta.Placement)), found: 1,
		lazy: map[int]node.Node{}}
	loc.slots[meta.Slot] = got.ref
	ok = true
	for ; read < len(window)-1; read++ {
		a := <-answers // within wctx's deadline
		sum := a.sum
		switch {
		case a.err != nil:
			ok = false
		case !a.found:
			answered = append(answered, probeResult{node: a.n})
		case sum.version < meta.Version:
			// Debris of an older version.
		case sum.version > meta.Version || sum.geo.K != meta.K || sum.geo.M != meta.M ||
			sum.slot >= len(loc.slots) || sum.slot == meta.Slot || loc.lazy[sum.slot] != nil:
			ok = false // newer, or not one of the version's other slots
		default:
			loc.lazy[sum.slot] = a.n
			loc.found++
		}
	}
	if !ok || loc.found < len(loc.slots) {
		return nil, answered, late, false
	}
	return loc, nil, late, true
}

// statBySummaries completes a stat's lookup by summaries when the first
// node's archive (ref) is of an object larger than one copy: it reads the
// summaries of the second probe window's nodes beyond the first (others)
// and, when these and the first window's (found) hold every slot of ref's
// version and none holds a newer one, returns a located with ref alone
// that counts the slots in found: what probing the two windows would
// find, and where locate would stop (see probeWindows). Anything else (a
// slot missing, a newer version, a node that cannot say: not reading
// attributes, suspect, failing, without summary) leaves the lookup to the
// probes.
func (s *Store) statBySummaries(ctx context.Context, path string, ref *archiveRef, found []summary, others []node.Node) (*located, bool) {
	sums, errs, ok := s.readSummaries(ctx, path, others)
	if !ok {
		return nil, false
	}
	for _, err := range errs {
		if err != nil {
			return nil, false
		}
	}
	for _, sum := range sums {
		if sum != nil {
			found = append(found, *sum)
		}
	}
	meta := ref.idx.Meta
	slots := map[int]bool{meta.Slot: true}
	for _, sum := range found {
		switch {
		case sum.version < meta.Version:
			// Debris of an older version.
		case sum.version > meta.Version || sum.geo.K != meta.K || sum.geo.M != meta.M || sum.slot >= len(meta.Placement):
			return nil, false
		default:
			slots[sum.slot] = true
		}
	}
	if len(slots) < len(meta.Placement) {
		return nil, false
	}
	loc := &located{meta: meta, slots: make([]*archiveRef, len(meta.Placement)), found: len(slots)}
	loc.slots[meta.Slot] = ref
	return loc, true
}

// summaryReader returns n as an AttrReader when its summaries can be read
// now: it reads attributes by path, keeps them, and is not suspect.
func (s *Store) summaryReader(n node.Node) (node.AttrReader, bool) {
	a, ok := n.(node.AttrReader)
	return a, ok && a.KeepsAttrs() && !s.isSuspect(n.ID())
}

// readSummaries reads the summary at path on every one of nodes, in
// parallel through forNodes (each read within MetadataTimeout), and
// returns them and the errors by node index. ok is false, and nothing is
// read, unless every node is a summaryReader.
func (s *Store) readSummaries(ctx context.Context, path string, nodes []node.Node) (sums []*summary, errs []error, ok bool) {
	idx := make(map[string]int, len(nodes))
	for i, n := range nodes {
		if _, ok := s.summaryReader(n); !ok {
			return nil, nil, false
		}
		idx[n.ID()] = i
	}
	sums = make([]*summary, len(nodes))
	errs = s.forNodes(ctx, nodes, func(ctx context.Context, n node.Node) error {
		sum, err := readSummary(ctx, n.(node.AttrReader), path)
		sums[idx[n.ID()]] = sum
		return err
	})
	return sums, errs, true
}

// errNoSummary means that an archive's attributes hold no summary.
var errNoSummary = errors.New("archive has no summary")

// readSummary reads the summary of the archive at path on a node that
// reads attributes: nil when there is no file (or a file in the way of a
// directory), errNoSummary when the file's attributes hold none (a
// directory, or an archive written without), or the node's error.
func readSummary(ctx context.Context, a node.AttrReader, path string) (*summary, error) {
	attrs, err := a.ReadAttrs(ctx, path)
	switch {
	case errors.Is(err, node.ErrNotExist) || errors.Is(err, node.ErrNotDir):
		return nil, nil
	case err != nil:
		return nil, err
	}
	sum, ok := parseSummary(attrs)
	if !ok || sum.slot < 0 {
		return nil, errNoSummary
	}
	return &sum, nil
}

func (l *located) markUnanswered(id string) {
	if l.unanswered == nil {
		l.unanswered = map[string]bool{}
	}
	l.unanswered[id] = true
}

// onlyHung reports whether every node not answered has hung recently.
func (s *Store) onlyHung(nodes []node.Node, answered []bool) bool {
	for i, n := range nodes {
		if !answered[i] && !s.isHung(n.ID()) {
			return false
		}
	}
	return true
}

// onlySlowOrHung reports whether every node not answered has recently
// hung or been slow.
func (s *Store) onlySlowOrHung(nodes []node.Node, answered []bool) bool {
	for i, n := range nodes {
		if !answered[i] && !s.isHung(n.ID()) && !(s.isSuspect(n.ID()) && s.isSlowOnly(n.ID())) {
			return false
		}
	}
	return true
}

// unanswered lists the nodes without a result in got.
func unanswered(nodes []node.Node, got []probeResult) []node.Node {
	var out []node.Node
	for _, n := range nodes {
		if !slices.ContainsFunc(got, func(r probeResult) bool { return r.node.ID() == n.ID() }) {
			out = append(out, n)
		}
	}
	return out
}

// probeWindows returns the growing numbers of nodes, in rank order, that
// locate asks in turn for a path of n ranked nodes: first as many as a
// small object (1+M) is placed on with its spares, then as many as a
// K+M object with its spares, then all. Locate stops at the first window
// holding every archive of a readable version. A writer that commits a
// version with fewer than K archives in a window clears older versions
// from it (clearReplaced), so that no window can hold an older version
// whole while a newer one is elsewhere.
func (s *Store) probeWindows(n int) []int {
	g := s.opts.Geometry
	return slices.Compact([]int{min(n, g.M+1+s.opts.Spares), min(n, g.Width()+s.opts.Spares), n})
}

// resolve decides from probe results which version of path is the
// object: the newest with K archives, unless it may be the remnants of a
// removal and the tombstones say it was removed. It returns ErrIsDir,
// ErrNotExist (no archives, or only removed versions) or an
// *UnrecoverableError otherwise. On success the caller closes the
// located archives (which include every other archive found); on failure
// they are closed.
func (s *Store) resolve(ctx context.Context, path string, results []probeResult) (*located, error) {
	loc, ok := choose(results)
	results, loc, ok = s.dropHidden(ctx, path, results, loc, ok)
	if ok {
		return loc, nil
	}
	if loc != nil {
		loc.close()
	}
	var errs []error
	isDir, belowFile := false, false
	for _, r := range results {
		isDir = isDir || r.isDir
		belowFile = belowFile || r.belowFile
		if r.err != nil {
			errs = append(errs, r.err)
		}
	}
	switch {
	case isDir:
		return nil, fmt.Errorf("object %s: %w", path, ErrIsDir)
	case loc != nil && loc.meta != nil:
		if s.tombstoneOf(ctx, path).hides(newestVersion(results)) {
			return nil, fmt.Errorf("object %s: %w (removed; stale archives remain for repair)", path, ErrNotExist)
		}
		return nil, &UnrecoverableError{Path: path, Block: -1, Available: loc.found, Need: loc.meta.K, Causes: errs}
	case len(errs) > 0:
		return nil, fmt.Errorf("object %s: %w (and %d nodes failed: %w)", path, ErrNotExist, len(errs), errors.Join(errs...))
	case belowFile:
		return nil, fmt.Errorf("object %s: %w", path, errBelowFile)
	}
	return nil, fmt.Errorf("object %s: %w", path, ErrNotExist)
}

// errBelowFile is ErrNotExist for a path where a node holds a file in
// place of one of its parent directories: maybe an object.
var errBelowFile = fmt.Errorf("%w (a node holds a file where a parent directory would be)", ErrNotExist)

// dropHidden leaves out of results, newest first, every readable version
// choose picks that may be remnants (mayBeRemnants) and that path's
// tombstones hide: debris of a removed or replaced version. An older
// version moved onto the path may still be the object. It returns the
// results left and choose's answer for them (loc nil when no archive is
// left); the archives left out are closed.
func (s *Store) dropHidden(ctx context.Context, path string, results []probeResult, loc *located, ok bool) ([]probeResult, *located, bool) {
	var tomb *tombstone // read once, if needed
	for ok && loc.mayBeRemnants() {
		if tomb == nil {
			t := s.tombstoneOf(ctx, path)
			tomb = &t
		}
		if !tomb.hides(loc.meta.Version) {
			break
		}
		results = dropVersion(results, loc.meta.Version)
		loc, ok = choose(results)
	}
	// A version of no more than M archives written for another path (a
	// moved object that lost archives, or a well-formed archive that a
	// node should not hold: another object's, copied or renamed there)
	// yields to a version written for this path that more nodes hold and
	// no tombstone hides: one node's stray archive must not stand for the
	// object that the others keep.
	for ok && loc.mayBeRemnants() && loc.meta.Path != path {
		alt, altOK := choose(withoutVersion(results, loc.meta.Version))
		if !altOK || alt.meta.Path != path || alt.found <= loc.found {
			break
		}
		if tomb == nil {
			t := s.tombstoneOf(ctx, path)
			tomb = &t
		}
		if tomb.hides(alt.meta.Version) {
			break
		}
		results = dropVersion(results, loc.meta.Version)
		loc, ok = choose(results)
	}
	return results, loc, ok
}

// withoutVersion is results without the archives of version v, which
// stay open (see dropVersion).
func withoutVersion(results []probeResult, v archive.Version) []probeResult {
	out := make([]probeResult, 0, len(results))
	for _, r := range results {
		if r.ref != nil && r.ref.idx.Meta.Version == v {
			r.ref = nil
		}
		out = append(out, r)
	}
	return out
}

// choose groups the archives found by version and picks the newest version
// with at least K archives of distinct slots. When none qualifies it
// returns the newest version found (ok false), or nil if no archive exists.
func choose(results []probeResult) (*located, bool) {
	groups := map[archive.Version][]*archiveRef{}
	var versions []archive.Version
	var errs []error
	for _, r := range results {
		if r.err != nil {
			errs = append(errs, r.err)
		}
		if r.ref == nil {
			continue
		}
		v := r.ref.idx.Meta.Version
		if _, seen := groups[v]; !seen {
			versions = append(versions, v)
		}
		groups[v] = append(groups[v], r.ref)
	}
	if len(versions) == 0 {
		return nil, false
	}
	sort.Slice(versions, func(i, j int) bool { return versions[i] > versions[j] })
	var best *located
	for _, v := range versions {
		loc := buildLocated(groups[v])
		if loc.found >= loc.meta.K {
			best = loc
			break
		}
		if best == nil {
			best = loc
		}
	}
	best.errs = errs
	for _, v := range versions {
		for _, r := range groups[v] {
			if !best.has(r) {
				best.stale = append(best.stale, r)
			}
		}
	}
	return best, best.found >= best.meta.K
}

// missingOnlyOnHung reports whether every slot of loc that was not found
// belongs, by its placement, to a node that was not asked for being known
// to hang: asking the next windows could not find those slots, only cost
// a request to each of their nodes (with a node hung, a stat of a small
// object that had a copy on it asked every node). A slot a rebuild moved
// to another node is then read as missing, from parity.
func missingOnlyOnHung(loc *located, results []probeResult) bool {
	for i, r := range loc.slots {
		if r != nil || loc.lazy[i] != nil {
			continue
		}
		if i >= len(loc.meta.Placement) || !slices.ContainsFunc(results, func(p probeResult) bool {
			return p.node.ID() == loc.meta.Placement[i] && errors.Is(p.err, errHung)
		}) {
			return false
		}
	}
	return true
}

// buildLocated assigns archives of one version to slots. Archives whose
// metadata disagrees with the first one, or that duplicate a slot, are
// left out (the one on the node the placement names wins).
func buildLocated(refs []*archiveRef) *located {
	// Prefer archives sitting where the placement says they belong.
	sort.SliceStable(refs, func(i, j int) bool { return refs[i].home() && !refs[j].home() })
	meta := refs[0].idx.Meta
	loc := &located{meta: meta, slots: make([]*archiveRef, len(meta.Placement))}
	for _, r := range refs {
		m := r.idx.Meta
		if !m.SameObject(meta) {
			continue
		}
		if loc.slots[m.Slot] != nil {
			if loc.alts == nil {
				loc.alts = map[int][]*archiveRef{}
			}
			loc.alts[m.Slot] = append(loc.alts[m.Slot], r)
			continue
		}
		loc.slots[m.Slot] = r
		loc.found++
	}
	return loc
}

// mayBeRemnants reports whether the archives found could be what a
// removal (or an overwrite) left on nodes it could not reach: at most M of
// them (a removal needs M+1 nodes to record it), and not all. With K ≤ M, as for small
// objects stored 1+M, such remnants are readable, so the tombstones must
// be asked before they are served.
func (l *located) mayBeRemnants() bool {
	return l.found <= l.meta.M && l.found < len(l.slots)
}

// dropVersion closes the archives of version v among results and leaves
// them out.
func dropVersion(results []probeResult, v archive.Version) []probeResult {
	out := results[:0:0]
	for _, r := range results {
		if r.ref != nil && r.ref.idx.Meta.Version == v {
			r.ref.file.Close()
			r.ref = nil
		}
		out = append(out, r)
	}
	return out
}

// malformedArchive reports whether a parse error means the bytes are
// damaged (as opposed to a read failure or a newer format).
func malformedArchive(err error) bool {
	return errors.Is(err, archive.ErrFormat) || errors.Is(err, archive.ErrChecksum)
}

func (r *archiveRef) home() bool {
	m := r.idx.Meta
	return m.Placement[m.Slot] == r.node.ID()
}

func (l *located) has(r *archiveRef) bool {
	for _, s := range l.slots {
		if s == r {
			return true
		}
	}
	return false
}

// newestVersion is the newest archive version among probe results.
func newestVersion(results []probeResult) archive.Version {
	var v archive.Version
	for _, r := range results {
		if r.ref != nil {
			v = max(v, r.ref.idx.Meta.Version)
		}
	}
	return v
}
