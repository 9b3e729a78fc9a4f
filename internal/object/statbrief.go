package object

import (
	"context"
	"fmt"

	"github.com/ecstore/ecstore/internal/node"
)

// StatBrief describes path as Stat does, but only as far as the archives'
// summaries tell: size, modification time, version, geometry (ChunkSize
// 0 from summaries written before it was kept) and the archives found.
// The rest of the Info (checksums, user metadata, placement) is left
// empty: only an archive holds it, and callers that need it use Stat.
//
// It reads no archive where it can: it reads the summaries of the nodes
// ranked first for path, window by window (probeWindows), and answers
// when a window holds every slot of one version and nothing else (no
// other version, no node failing, slower than the window's patience or
// without summaries), as a root:// stat needs. A small object costs the
// first window's attribute reads (M+1+Spares nodes) instead of one fewer
// and an archive read whole; a large one the second window's (K+M+Spares)
// instead of one fewer and an archive's open, read and close. Anything
// else (a directory, an object being replaced, debris, tombstones to
// consult, a node that cannot say) is left to Stat. A path that no node
// holds (every node answered) does not exist, as Stat would find after
// asking them all again. Like a listing, it trusts the summaries: an
// archive whose bytes are damaged but whose attributes are intact counts
// as found (a read then finds the damage, and the healer repairs it).
func (s *Store) StatBrief(ctx context.Context, path string) (*Info, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	if info, answered, err := s.statBySummaryOnly(ctx, path); answered {
		return info, err
	}
	return s.Stat(ctx, path)
}

// statBySummaryOnly is StatBrief's lookup by summaries; answered false
// leaves the answer to Stat.
func (s *Store) statBySummaryOnly(ctx context.Context, path string) (info *Info, answered bool, err error) {
	if path == "/" {
		return nil, false, nil
	}
	ranked := s.rank(path)
	var found []*summary
	read := 0
	for _, upTo := range s.probeWindows(len(ranked)) {
		// Each window gets a lookup window's patience, as locate gives
		// it: a node slower than lookups have been leaves the answer to
		// Stat, which knows how to wait for it (and it is not marked
		// suspect for this).
		wctx, cancel := context.WithTimeout(ctx, s.windowPatience())
		sums, errs, ok := s.readSummaries(wctx, path, ranked[read:upTo])
		late := wctx.Err() != nil
		cancel()
		if !ok || late {
			return nil, false, nil
		}
		for _, err := range errs {
			if err != nil {
				return nil, false, nil // no summary (a directory?), or failing
			}
		}
		found = append(found, sums...)
		read = upTo
		var first *summary
		slots := map[int]bool{}
		for _, sum := range found {
			switch {
			case sum == nil:
			case first == nil:
				first = sum
				slots[sum.slot] = true
			case sum.version != first.version || sum.geo != first.geo || slots[sum.slot] ||
				sum.size != first.size || !sum.mtime.Equal(first.mtime):
				return nil, false, nil // two versions, a slot twice, or a summary that disagrees (damaged)
			default:
				slots[sum.slot] = true
			}
		}
		if first == nil {
			continue
		}
		if len(slots) == first.geo.Width() {
			_, name := node.Split(path)
			return &Info{Path: path, Name: name, Size: first.size, MTime: first.mtime, Geometry: first.geo,
				Version: first.version, Archives: len(slots)}, true, nil
		}
	}
	if len(found) < len(ranked) {
		return nil, false, nil
	}
	for _, sum := range found {
		if sum != nil {
			return nil, false, nil
		}
	}
	return nil, true, fmt.Errorf("object %s: %w", path, ErrNotExist)
}
