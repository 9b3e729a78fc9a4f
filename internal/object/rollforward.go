package object

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ecstore/ecstore/internal/archive"
	"github.com/ecstore/ecstore/internal/node"
)

// A writer commits by renaming its K+M finished, durable temporary
// archives into place, in parallel. A writer that dies between the first
// and the K-th rename (a gateway killed, say) leaves a version with fewer
// than K archives visible and the rest under temporary names. Nothing
// else would ever finish that commit, and the version may hide the older
// one it partly replaced (or, for a new path, show an unreadable object).
//
// Since every archive was durable before the first rename, the commit can
// be completed by anyone: rollForward renames the temporary archives of
// that version into place. A second gateway racing it, or the writer
// itself if it is only slow, does no harm: a rename of a temporary file
// that is already gone fails, and the writer counts a slot as committed
// when the node holds its version (holdsVersion).

// RolledForward is one temporary archive that rollForward renamed into
// place.
type RolledForward struct {
	Node string
	Temp string // the temporary file's path on the node
	Slot int
}

// tempArchive is a finished temporary archive of path found on a node.
type tempArchive struct {
	node node.Node
	temp string
	meta *archive.Metadata
}

// RollForward completes an interrupted commit of path (see above) when no
// version of path is readable, its newest version lacks archives that sit,
// finished, under temporary names, and enough of them exist for the
// version to be readable. (An overwrite interrupted after at most M
// renames leaves the older version readable: that one stays the object,
// and repair removes the newer version's archives as debris.) It
// returns the archives it renamed into place; none when there was nothing
// to do. Repair uses it; readers do it themselves (locate).
func (s *Store) RollForward(ctx context.Context, path string) ([]RolledForward, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	results := s.probe(ctx, path, s.nodes)
	defer closeResults(results)
	return s.rollForward(ctx, path, results)
}

// rollForward is RollForward over probe results (every node's, or the
// probe windows'): the newest version among them is completed from the
// temporary archives on every node that holds none of its archives.
func (s *Store) rollForward(ctx context.Context, path string, results []probeResult) ([]RolledForward, error) {
	if loc, ok := choose(results); loc == nil || ok {
		return nil, nil // nothing there, or a readable version: not stuck
	}
	v := newestVersion(results)
	var refs []*archiveRef
	holders := map[string]bool{}
	for _, r := range results {
		if r.ref != nil && r.ref.idx.Meta.Version == v {
			refs = append(refs, r.ref)
			holders[r.node.ID()] = true
		}
	}
	loc := buildLocated(refs)
	var others []node.Node
	for _, n := range s.nodes {
		if !holders[n.ID()] {
			others = append(others, n)
		}
	}
	temps := s.findTemps(ctx, path, loc.meta, others)
	// One temporary archive per missing slot, and per node (a node holds
	// one archive of a path).
	missing := map[int]tempArchive{}
	used := map[string]bool{} // node ids
	for _, t := range temps {
		if _, dup := missing[t.meta.Slot]; !dup && loc.slots[t.meta.Slot] == nil && !used[t.node.ID()] {
			missing[t.meta.Slot] = t
			used[t.node.ID()] = true
		}
	}
	if loc.found+len(missing) < loc.meta.K {
		return nil, nil // not enough to complete: leave it to repair's judgement
	}
	// A removal may have taken the version's renamed archives while the
	// temporary ones were looked for (a removal need not wait for a
	// reader): completing the commit then would bring back what was
	// removed. It goes on only while a node still holds the version.
	var kept atomic.Bool
	var holding []node.Node
	for _, n := range s.nodes {
		if holders[n.ID()] {
			holding = append(holding, n)
		}
	}
	s.forNodes(ctx, holding, func(ctx context.Context, n node.Node) error {
		if s.holdsVersion(ctx, n, path, v) {
			kept.Store(true)
		}
		return nil
	})
	if !kept.Load() {
		return nil, nil
	}
	var (
		mu   sync.Mutex
		done []RolledForward
	)
	todo := make([]tempArchive, 0, len(missing))
	for _, t := range missing {
		todo = append(todo, t)
	}
	errs := s.forNodes(ctx, nodesOf(todo), func(ctx context.Context, n node.Node) error {
		for _, t := range todo {
			if t.node.ID() != n.ID() {
				continue
			}
			// Fence: never replace a newer version written meanwhile.
			if cur := probeOne(ctx, path, n); cur.ref != nil {
				newer := cur.ref.idx.Meta.Version > v
				cur.ref.file.Close()
				if newer {
					return nil
				}
			}
			if err := n.Rename(ctx, t.temp, path); err != nil {
				if errors.Is(err, node.ErrNotExist) {
					return nil // renamed by someone else meanwhile
				}
				return fmt.Errorf("node %s: complete the commit of %s: %w", n.ID(), path, err)
			}
			mu.Lock()
			done = append(done, RolledForward{Node: n.ID(), Temp: t.temp, Slot: t.meta.Slot})
			mu.Unlock()
		}
		return nil
	})
	slices.SortFunc(done, func(a, b RolledForward) int { return a.Slot - b.Slot })
	if len(done) > 0 {
		s.opts.Logger.Warn("completed an interrupted commit", "obj", path, "version", v, "archives", len(done))
	}
	return done, errors.Join(errs...)
}

// findTemps lists path's directory on nodes and returns the finished
// temporary archives of path's version meta.
func (s *Store) findTemps(ctx context.Context, path string, meta *archive.Metadata, nodes []node.Node) []tempArchive {
	dir, base := node.Split(path)
	var (
		mu  sync.Mutex
		out []tempArchive
	)
	s.forNodesListing(ctx, nodes, func(ctx context.Context, n node.Node) error {
		fis, err := n.List(ctx, dir)
		if err != nil {
			return err
		}
		for _, fi := range fis {
			if target, ok := node.TempTarget(fi.Name); !ok || target != base || fi.IsDir {
				continue
			}
			temp := node.Join(dir, fi.Name)
			r := probeOne(ctx, temp, n)
			if r.ref == nil {
				continue // unfinished or damaged: not a commit's archive
			}
			m := r.ref.idx.Meta
			r.ref.file.Close()
			if m.SameObject(meta) {
				mu.Lock()
				out = append(out, tempArchive{node: n, temp: temp, meta: m})
				mu.Unlock()
			}
		}
		return nil
	})
	return out
}

// holdsVersion reports whether node n holds an archive of version v at
// path.
func (s *Store) holdsVersion(ctx context.Context, n node.Node, path string, v archive.Version) bool {
	ctx, cancel := context.WithTimeout(ctx, s.nodeTimeout(n.ID(), s.opts.ProbeTimeout))
	defer cancel()
	r := probeOne(ctx, path, n)
	if r.ref == nil {
		return false
	}
	defer r.ref.file.Close()
	return r.ref.idx.Meta.Version == v
}

func nodesOf(ts []tempArchive) []node.Node {
	var out []node.Node
	for _, t := range ts {
		if !slices.ContainsFunc(out, func(n node.Node) bool { return n.ID() == t.node.ID() }) {
			out = append(out, t.node)
		}
	}
	return out
}

// closeResults closes the archives probe results hold.
func closeResults(results []probeResult) {
	for _, r := range results {
		if r.ref != nil {
			r.ref.file.Close()
		}
	}
}
