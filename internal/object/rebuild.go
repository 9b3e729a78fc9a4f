package object

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ecstore/ecstore/internal/archive"
	"github.com/ecstore/ecstore/internal/bufpool"
	"github.com/ecstore/ecstore/internal/erasure"
	"github.com/ecstore/ecstore/internal/node"
)

// RebuildOptions adjust Rebuild.
type RebuildOptions struct {
	// Throttle, if set, is called with the bytes about to be written (for
	// rate limiting) and may block.
	Throttle func(ctx context.Context, n int) error
	// Avoid lists node ids that must not receive rebuilt archives (a node
	// being drained).
	Avoid []string
	// Version, if set, is the version the caller found degraded (by
	// Inspect): Rebuild fails with ErrChanged rather than rebuild another.
	Version archive.Version
}

// ErrChanged reports that an object's current version is no longer the
// one an operation was asked about.
var ErrChanged = errors.New("object: changed since it was inspected")

// RebuildResult reports what Rebuild did.
type RebuildResult struct {
	Path    string
	Version archive.Version
	// Rebuilt maps each rebuilt slot to the node its archive now sits on.
	Rebuilt map[int]string
	// Bytes is the number of chunk bytes written.
	Bytes int64
}

// Rebuild re-creates the archives of the given slots of the object's
// current version from the other archives: every block is read (and
// verified) from K good chunks, re-encoded, and the slots' chunks written
// to fresh archives with the same version and metadata. A slot's archive
// goes back to the node the placement names when that node is up and holds
// no other archive of the object, else to another node. Each rebuilt
// archive replaces what was at its path only if that is not a newer
// version.
//
// Rebuild asks every node for the object, as Inspect does: a read's
// lookup stops at the first group of nodes holding a whole readable
// version, which can be an older one while the newer one sits elsewhere
// (after an mv, say), and rebuilding that older one's slots healed
// nothing (fault schedule: repairs of an mv target failed "still
// degraded" again and again).
func (s *Store) Rebuild(ctx context.Context, path string, slots []int, opts RebuildOptions) (*RebuildResult, error) {
	throttle := opts.Throttle
	r, err := s.openReader(ctx, path, true)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	meta := r.loc.meta
	if opts.Version != "" && meta.Version != opts.Version {
		return nil, fmt.Errorf("object %s: rebuild: %w: version %s, inspected %s", path, ErrChanged, meta.Version, opts.Version)
	}
	res := &RebuildResult{Path: path, Version: meta.Version, Rebuilt: map[int]string{}}
	slots = slices.Compact(slices.Sorted(slices.Values(slots)))
	if len(slots) == 0 {
		return res, nil
	}
	for _, sl := range slots {
		if sl < 0 || sl >= len(meta.Placement) {
			return nil, fmt.Errorf("object %s: rebuild: no slot %d", path, sl)
		}
	}
	dests, err := s.rebuildTargets(ctx, path, r.loc, slots, opts.Avoid)
	if err != nil {
		return nil, fmt.Errorf("object %s: rebuild: %w", path, err)
	}
	// Open an upload per rebuilt slot.
	type target struct {
		slot int
		node node.Node
		up   node.Upload
		aw   *archive.Writer
		uw   *uploadWriter
	}
	targets := make([]*target, 0, len(slots))
	abort := func() {
		for _, t := range targets {
			s.discard(context.WithoutCancel(ctx), t.node.ID(), t.up)
		}
	}
	now := s.opts.Now()
	for i, sl := range slots {
		up, err := dests[i].Create(ctx, path)
		if err != nil {
			abort()
			return nil, fmt.Errorf("object %s: rebuild slot %d on node %s: %w", path, sl, dests[i].ID(), err)
		}
		t := &target{slot: sl, node: dests[i], up: up}
		t.uw = &uploadWriter{ctx: ctx, up: up, timeout: s.opts.WriteTimeout, node: dests[i].ID(), progress: &s.progress}
		t.aw = archive.NewWriter(t.uw, now)
		targets = append(targets, t)
	}
	l := r.l
	codec, err := erasure.New(l.K, l.M)
	if err != nil {
		abort()
		return nil, err
	}
	allData := make([]bool, l.K)
	for i := range allData {
		allData[i] = true
	}
	for b := int64(0); b < l.Blocks(); b++ {
		data, backing, err := r.readBlock(ctx, b, allData)
		if err != nil {
			abort()
			return nil, fmt.Errorf("object %s: rebuild block %d: %w", path, b, err)
		}
		cl := int(l.ChunkLen(b))
		chunks := make([][]byte, l.Width())
		copy(chunks, data)
		for i := l.K; i < l.Width(); i++ {
			chunks[i] = bufpool.Get(cl)
			backing = append(backing, chunks[i])
		}
		release := func() {
			for _, buf := range backing {
				bufpool.Put(buf)
			}
		}
		if err := codec.Encode(chunks); err != nil {
			release()
			abort()
			return nil, fmt.Errorf("object %s: rebuild block %d: %w", path, b, err)
		}
		for _, t := range targets {
			st := l.Stripe(b, t.slot)
			if throttle != nil {
				if err := throttle(ctx, cl); err != nil {
					release()
					abort()
					return nil, err
				}
			}
			// its CRC-32 and page CRC-32Cs in one pass, as the writer's
			sum := erasure.NewChunkSummer(0, nil)
			for off := 0; off < cl; off += erasure.SumPiece {
				sum.Write(chunks[st][off:min(off+erasure.SumPiece, cl)])
			}
			if err := t.aw.WriteChunkPages(b, st, chunks[st], sum.Sums().CRC32, sum.Sums().Pages); err != nil {
				release()
				abort()
				return nil, fmt.Errorf("object %s: rebuild slot %d on node %s: %w", path, t.slot, t.node.ID(), err)
			}
			res.Bytes += int64(cl)
		}
		release()
	}
	for _, t := range targets {
		m := *meta
		m.Slot = t.slot
		err := t.aw.Close(&m)
		if err == nil {
			if a, ok := t.up.(node.Attributes); ok {
				err = a.SetAttrs(ctx, summaryAttrs(&m))
			}
		}
		if err == nil {
			err = t.up.Finish(ctx)
		}
		if err != nil {
			abort()
			return nil, fmt.Errorf("object %s: rebuild slot %d on node %s: %w", path, t.slot, t.node.ID(), err)
		}
	}
	// In this gateway's turn for the path (after its commits, removals
	// and renames of it in flight, before the next), the path must still
	// hold the version rebuilt: an rm or mv during the rebuild, which
	// at --heal-rate may take minutes, would otherwise be undone by the
	// archives committed here (a small object's one archive is a whole
	// readable copy), and an overwrite's archive replaced.
	unlock, err := s.paths.lock(ctx, path)
	if err != nil {
		abort()
		return nil, fmt.Errorf("object %s: rebuild: %w", path, err)
	}
	defer unlock()
	cur, err := s.resolve(ctx, path, s.probe(ctx, path, s.nodes))
	if err == nil {
		cur.close()
	}
	if err != nil || cur.meta.Version != meta.Version {
		abort()
		now := "gone"
		if err == nil {
			now = "version " + string(cur.meta.Version)
		} else if !errors.Is(err, ErrNotExist) {
			now = err.Error()
		}
		return nil, fmt.Errorf("object %s: rebuild of version %s: %w (now %s)", path, meta.Version, ErrChanged, now)
	}
	// Fence: never replace a newer version that a concurrent write put
	// there meanwhile through another gateway.
	var errs []error
	for _, t := range targets {
		if s.holdsNewer(ctx, t.node, path, meta.Version) {
			s.discard(context.WithoutCancel(ctx), t.node.ID(), t.up)
			errs = append(errs, fmt.Errorf("slot %d: node %s holds a newer version", t.slot, t.node.ID()))
			continue
		}
		if err := t.up.Commit(ctx); err != nil {
			s.discard(context.WithoutCancel(ctx), t.node.ID(), t.up)
			errs = append(errs, fmt.Errorf("slot %d on node %s: %w", t.slot, t.node.ID(), err))
			continue
		}
		res.Rebuilt[t.slot] = t.node.ID()
	}
	if len(res.Rebuilt) > 0 && s.rebuiltAlone(ctx, path, meta.Version, res.Rebuilt) {
		// Removed or moved meanwhile through another gateway (this
		// gateway's turn does not order it): what was rebuilt would
		// bring the object back. Taken away again, if still ours.
		for slot, id := range res.Rebuilt {
			if _, err := s.RemoveArchiveOf(context.WithoutCancel(ctx), id, path, meta.Version); err != nil {
				s.opts.Logger.Warn("rebuilt archive of an object removed meanwhile not removed", "obj", path, "slot", slot, "node", id, "err", err)
			}
		}
		clear(res.Rebuilt)
		return res, fmt.Errorf("object %s: rebuild of version %s: %w (removed or moved meanwhile)", path, meta.Version, ErrChanged)
	}
	if len(errs) > 0 {
		return res, fmt.Errorf("object %s: rebuild: %w", path, errors.Join(errs...))
	}
	return res, nil
}

// rebuiltAlone reports whether, every node answering, no node but those
// of rebuilt holds an archive of version v at path: the object was
// removed or moved after the check made in turn (by another gateway),
// and the rebuilt archives are all that is left of it.
func (s *Store) rebuiltAlone(ctx context.Context, path string, v archive.Version, rebuilt map[int]string) bool {
	ours := map[string]bool{}
	for _, id := range rebuilt {
		ours[id] = true
	}
	results := s.probe(ctx, path, s.nodes)
	alone := len(results) == len(s.nodes)
	for _, r := range results {
		switch {
		case r.ref != nil:
			if r.ref.idx.Meta.Version == v && !ours[r.node.ID()] {
				alone = false
			}
			r.ref.file.Close()
		case r.err != nil && !r.malformed:
			alone = false // a node did not answer: it may hold the others
		}
	}
	return alone
}

// rebuildTargets picks the node for each rebuilt slot: the placement's
// node when it answers and holds no other slot's archive of this version,
// else a node that holds the slot's archive now, else the best-ranked node
// that holds no archive of it.
//
// path is the object's path, which is not the metadata's after an mv.
func (s *Store) rebuildTargets(ctx context.Context, path string, loc *located, slots []int, avoid []string) ([]node.Node, error) {
	busy := map[string]bool{}
	for _, id := range avoid {
		busy[id] = true
	}
	for sl, ref := range loc.slots {
		if ref != nil && !slices.Contains(slots, sl) {
			busy[ref.node.ID()] = true
		}
	}
	for _, id := range s.opts.Retired {
		busy[id] = true // retired nodes take no rebuilt archives
	}
	// A node that is out of space, or holds an archive of a newer version
	// (a write in progress, or what an overwrite cut short after at most
	// M renames left), which the fence in Rebuild would refuse to replace,
	// does not fit: the slot goes elsewhere. (The reader's own stale
	// archives are closed and dropped when it opens, so each node is
	// asked here.)
	fit := map[string]bool{} // asked once per node
	fits := func(n node.Node) bool {
		if ok, asked := fit[n.ID()]; asked {
			return ok
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := n.Space(cctx)
		ok := err == nil && !s.holdsNewer(cctx, n, path, loc.meta.Version)
		fit[n.ID()] = ok
		return ok
	}
	out := make([]node.Node, len(slots))
	for i, sl := range slots {
		var first []node.Node
		if n, ok := s.byID[loc.meta.Placement[sl]]; ok {
			first = append(first, n)
		}
		// Then the nodes that hold the slot's archive now, away from its
		// placement node (an earlier rebuild put it there): rebuilt in
		// place, it leaves no second copy of the slot beside it, which a
		// lookup (taking whichever copy answers first) could prefer.
		if ref := loc.slots[sl]; ref != nil {
			first = append(first, ref.node)
		}
		for _, ref := range loc.alts[sl] {
			first = append(first, ref.node)
		}
		for _, n := range append(first, s.rank(path)...) {
			if !busy[n.ID()] && fits(n) {
				out[i] = n
				busy[n.ID()] = true
				break
			}
		}
		if out[i] == nil {
			return nil, fmt.Errorf("no node left to hold slot %d", sl)
		}
	}
	return out, nil
}

// holdsNewer reports whether n holds an archive of path of a version newer
// than v.
func (s *Store) holdsNewer(ctx context.Context, n node.Node, path string, v archive.Version) bool {
	cur := probeOne(ctx, path, n)
	if cur.ref == nil {
		return false
	}
	defer cur.ref.file.Close()
	return cur.ref.idx.Meta.Version > v
}
