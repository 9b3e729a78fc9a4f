package object

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ecstore/ecstore/internal/archive"
	"github.com/ecstore/ecstore/internal/node"
)

// Tombstones record deletions, so that archives on nodes that were down
// when an object was removed cannot bring it back. Removing path writes a
// small file at TombstoneRoot+path on every reachable node, holding the
// newest version being deleted, before any archive is removed; the remove
// must reach at least M+1 nodes. So at most K-1 archives of a removed
// version can reappear, and while no more than M nodes are down at least
// one tombstone is readable. A reader that finds only an unreadable
// remnant checks the tombstones and answers "no such object". fsck reports
// remnants; repair removes them and then the tombstones.
//
// The area is node-agnostic: tombstones are plain files, so every driver
// and vanilla data server holds them unchanged.

// TombstoneRoot is the reserved top-level directory holding tombstones.
// User paths under it are refused.
const TombstoneRoot = "/.ecstore-rm"

// reservedRoot reports whether a top-level name is reserved for ecstore's
// own bookkeeping (hidden from listings of "/").
func reservedRoot(name string) bool { return strings.HasPrefix(name, ".ecstore-") }

// NodeMarker is the reserved top-level file of a node's root that names
// the node (see cluster.MarkerName).
const NodeMarker = "/.ecstore-node"

// Reserved reports whether node path p is ecstore's own bookkeeping
// rather than an object's archive: a tombstone (under TombstoneRoot) or
// a node directory's marker (NodeMarker). No object can be stored there,
// listings hide it, and walks of a node's tree skip it. (Other top-level
// ".ecstore-" names are hidden from listings of "/" but hold objects,
// such as S3's multipart uploads.)
func Reserved(p string) bool {
	return p == TombstoneRoot || strings.HasPrefix(p, TombstoneRoot+"/") || p == NodeMarker
}

func tombstonePath(p string) string { return TombstoneRoot + p }

// tombstone is what a node's tombstone of a path records: versions up to
// upTo were removed, except moved, a version an mv brought onto the path
// afterwards (it keeps the version it was written with, older than a
// removed one maybe). gen orders the records: each one written is one
// more than the one it replaces, so that the latest removal or move wins
// over what nodes that missed it still hold (a removal of the moved
// version clears moved without raising upTo). The file holds upTo on its
// first line, then, when set, "moved <version>" and "gen <n>" lines.
type tombstone struct {
	upTo, moved archive.Version
	gen         uint64
}

// after reports whether t was recorded after u: a higher generation, or
// (records of the same generation, by concurrent writers or before
// generations were kept) the higher version removed, then moved.
func (t tombstone) after(u tombstone) bool {
	if t.gen != u.gen {
		return t.gen > u.gen
	}
	if t.upTo != u.upTo {
		return t.upTo > u.upTo
	}
	return t.moved > u.moved
}

// hides reports whether the tombstone hides archives of version v: those
// of a removed version, and those of any older one (what an overwrite
// left on a node that was down, say), but not the moved one.
func (t tombstone) hides(v archive.Version) bool {
	return t.upTo != "" && v <= t.upTo && v != t.moved
}

func (t tombstone) encode() []byte {
	out := string(t.upTo) + "\n"
	if t.moved != "" {
		out += "moved " + string(t.moved) + "\n"
	}
	if t.gen != 0 {
		out += "gen " + strconv.FormatUint(t.gen, 10) + "\n"
	}
	return fmt.Appendf([]byte(out), "%s%08x\n", tombstoneCRCPrefix, crc32.Checksum([]byte(out), castagnoli))
}

// tombstoneCRCPrefix starts a tombstone's last line, the CRC32C of the
// lines before it (written since 2026-11-27; older tombstones have none).
const tombstoneCRCPrefix = "crc32c "

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// writeTombstones records on every reachable node that versions up to v of
// path are deleted. It returns how many nodes recorded it.
func (s *Store) writeTombstones(ctx context.Context, path string, v archive.Version) int {
	return s.recordTombstones(ctx, path, func(old tombstone) tombstone {
		// Never lower a tombstone: mv keeps versions, so removing an
		// object moved onto this path may remove an older version than
		// one removed here before, whose remnants must stay hidden. The
		// moved version, if any, is removed now: no exception remains,
		// and the next generation outranks the nodes that keep it. (The
		// last record reached at least N-M nodes; with at most M down,
		// one of them is here and takes a higher generation than any.)
		return tombstone{upTo: max(old.upTo, v), gen: old.gen + 1}
	})
}

// noteMoved records, where path has tombstones hiding version v, that v
// is the version an mv brings onto path, so that its archives are not
// taken for remnants. It returns false when the path has such
// tombstones and fewer than M+1 nodes recorded the exception.
func (s *Store) noteMoved(ctx context.Context, path string, v archive.Version) bool {
	t := s.tombstoneOf(ctx, path)
	if !t.hides(v) {
		return true
	}
	n := s.recordTombstones(ctx, path, func(old tombstone) tombstone {
		return tombstone{upTo: max(old.upTo, t.upTo), moved: v, gen: max(old.gen, t.gen) + 1}
	})
	return n >= s.opts.Geometry.M+1
}

// recordTombstones replaces path's tombstone on every reachable node with
// update of what the node holds (the zero tombstone if nothing), and
// returns how many nodes recorded it.
func (s *Store) recordTombstones(ctx context.Context, path string, update func(old tombstone) tombstone) int {
	var mu sync.Mutex
	ok := 0
	s.forEachAnswering(ctx, func(ctx context.Context, n node.Node) error {
		old, _ := readTombstone(ctx, n, path) // none, or unreadable: replaced
		up, err := n.Create(ctx, tombstonePath(path))
		if err != nil {
			return err
		}
		if err := up.Write(ctx, update(old).encode()); err != nil {
			s.discard(ctx, n.ID(), up)
			return err
		}
		if err := up.Finish(ctx); err != nil {
			s.discard(ctx, n.ID(), up)
			return err
		}
		if err := up.Commit(ctx); err != nil {
			s.discard(ctx, n.ID(), up)
			return err
		}
		mu.Lock()
		ok++
		mu.Unlock()
		return nil
	})
	return ok
}

// readTombstone returns what n's tombstone for path records.
func readTombstone(ctx context.Context, n node.Node, path string) (tombstone, error) {
	f, err := n.Open(ctx, tombstonePath(path))
	if err != nil {
		return tombstone{}, err
	}
	defer f.Close()
	buf := make([]byte, 256)
	k, err := f.ReadAt(ctx, buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return tombstone{}, err
	}
	t, ok := parseTombstone(buf[:k])
	if !ok {
		return tombstone{}, fmt.Errorf("node %s: tombstone of %s: malformed", n.ID(), path)
	}
	return t, nil
}

// parseTombstone decodes a tombstone file (see tombstone). A file whose
// checksum line does not match the lines before it is refused: a
// damaged tombstone could otherwise hide a live object.
func parseTombstone(b []byte) (tombstone, bool) {
	text := strings.TrimSpace(string(b))
	if i := strings.LastIndex(text, "\n"+tombstoneCRCPrefix); i >= 0 {
		sum, err := strconv.ParseUint(text[i+1+len(tombstoneCRCPrefix):], 16, 32)
		if err != nil || crc32.Checksum([]byte(text[:i+1]), castagnoli) != uint32(sum) {
			return tombstone{}, false
		}
		text = text[:i]
	}
	lines := strings.Split(text, "\n")
	t := tombstone{upTo: archive.Version(strings.TrimSpace(lines[0]))}
	if !t.upTo.Valid() {
		return tombstone{}, false
	}
	lines = lines[1:]
	if len(lines) > 0 {
		if v, ok := strings.CutPrefix(strings.TrimSpace(lines[0]), "moved "); ok {
			if t.moved = archive.Version(v); !t.moved.Valid() {
				return tombstone{}, false
			}
			lines = lines[1:]
		}
	}
	if len(lines) > 0 {
		n, ok := strings.CutPrefix(strings.TrimSpace(lines[0]), "gen ")
		gen, err := strconv.ParseUint(n, 10, 64)
		if !ok || err != nil || gen == 0 || n != strconv.FormatUint(gen, 10) {
			return tombstone{}, false
		}
		t.gen = gen
		lines = lines[1:]
	}
	return t, len(lines) == 0
}

// tombstoneOf returns the latest tombstone of path on any node (see
// tombstone.after; the zero tombstone if none).
func (s *Store) tombstoneOf(ctx context.Context, path string) tombstone {
	var mu sync.Mutex
	var latest tombstone
	// A tombstone is plain text without a checksum: one that records a
	// version from the future (a digit flipped upward on a damaged disk)
	// would hide every version of the path, the live object's included.
	// Versions are commit times: one later than now, beyond any clock
	// skew, was never written.
	future := s.opts.Now().Add(tombstoneSkew)
	implausible := func(v archive.Version) bool {
		tm := v.Time() // the zero time when it does not fit in 64 bits
		return tm.IsZero() || tm.After(future)
	}
	s.forEachAnswering(ctx, func(ctx context.Context, n node.Node) error {
		t, err := readTombstone(ctx, n, path)
		if err == nil && (implausible(t.upTo) || t.moved != "" && implausible(t.moved)) {
			s.opts.Logger.Warn("tombstone ignored: it records a version from the future (damaged?)", "obj", path, "node", n.ID(), "version", string(t.upTo))
			return nil
		}
		if err == nil {
			mu.Lock()
			if t.after(latest) {
				latest = t
			}
			mu.Unlock()
		}
		return err
	})
	return latest
}

// tombstoneSkew is how far in the future a tombstone's versions may lie
// (gateways' clocks differ) before it is taken for damaged.
const tombstoneSkew = 24 * time.Hour

// deletedUpTo returns the newest deleted version of path recorded on any
// node ("" if none).
func (s *Store) deletedUpTo(ctx context.Context, path string) archive.Version {
	return s.tombstoneOf(ctx, path).upTo
}

// CollectTombstone removes the tombstones of path once they are no longer
// needed: every node answered, and no node holds an archive of a deleted
// version. It reports whether they were removed.
func (s *Store) CollectTombstone(ctx context.Context, path string) (bool, error) {
	t := s.tombstoneOf(ctx, path)
	if t.upTo == "" {
		return false, nil
	}
	results := s.probe(ctx, path, s.nodes)
	if len(results) != len(s.nodes) {
		for _, r := range results {
			if r.ref != nil {
				r.ref.file.Close()
			}
		}
		return false, nil // a node was too slow to answer
	}
	collect := true
	for _, r := range results {
		switch {
		case r.err != nil:
			collect = false // a node did not answer: it may hold a remnant
		case r.ref != nil:
			if t.hides(r.ref.idx.Meta.Version) {
				collect = false // a remnant remains
			}
			r.ref.file.Close()
		}
	}
	if !collect {
		return false, nil
	}
	return s.removeTombstonesUpTo(ctx, path, t), nil
}

// removeTombstonesUpTo deletes path's tombstones from every node where it
// is not newer than t (what the caller judged): a removal through another
// gateway since may have written a newer one, which must stay. It reports
// whether every node answered and none held a newer one.
func (s *Store) removeTombstonesUpTo(ctx context.Context, path string, t tombstone) bool {
	var newer atomic.Bool
	errs := s.forEach(ctx, func(ctx context.Context, n node.Node) error {
		cur, err := readTombstone(ctx, n, path)
		switch {
		case errors.Is(err, node.ErrNotExist):
			return nil
		case err == nil && cur.after(t):
			newer.Store(true)
			return nil
		}
		// Not newer, or unreadable (malformed: no use to anyone).
		err = n.Remove(ctx, tombstonePath(path))
		if errors.Is(err, node.ErrNotExist) {
			return nil
		}
		return err
	})
	return errors.Join(errs...) == nil && !newer.Load()
}

// Tombstones lists the object paths that have tombstones on any node.
func (s *Store) Tombstones(ctx context.Context) ([]string, error) {
	var mu sync.Mutex
	seen := map[string]bool{}
	errs := s.forNodesListing(ctx, s.nodes, func(ctx context.Context, n node.Node) error {
		var walk func(dir string) error
		walk = func(dir string) error {
			fis, err := n.List(ctx, dir)
			if err != nil {
				if errors.Is(err, node.ErrNotExist) {
					return nil
				}
				return err
			}
			for _, fi := range fis {
				p := node.Join(dir, fi.Name)
				switch {
				case fi.IsDir:
					if err := walk(p); err != nil {
						return err
					}
				case !node.IsTemp(fi.Name):
					mu.Lock()
					seen[strings.TrimPrefix(p, TombstoneRoot)] = true
					mu.Unlock()
				}
			}
			return nil
		}
		return walk(TombstoneRoot)
	})
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	return out, errors.Join(errs...)
}
