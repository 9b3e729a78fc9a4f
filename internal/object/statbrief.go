package object

import (
	"context"
	"fmt"

	"github.com/ecstore/ecstore/internal/node"
)

// StatBrief describes path as Stat does, but only as far as the archives'
// summaries tell: size, modification time, version, geometry and the
// archives found; not the checksums, the user metadata or the placement,
// which only an archive holds. It reads no archive where it can: it reads
// the summaries of the nodes ranked first for path in the lookup's
// windows (probeWindows), and answers when a window holds every slot of
// one version and nothing else (no other version, no node failing,
// slow or without summaries), as a root:// stat needs. A small object
// costs M+1 attribute reads instead of M and an archive read whole; a
// large one K+M attribute reads instead of K+M-1 and an archive's open,
// read and close. Anything else (a directory, an object being replaced,
// debris, tombstones to consult, a node that cannot say) is left to
// Stat. A path that no node holds (every node answered) does not exist,
// as Stat would find after asking them all again.
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
	// A node slower than lookups have been leaves the answer to Stat,
	// which knows how to wait for it (and does not mark it suspect for
	// this).
	wctx, cancel := context.WithTimeout(ctx, s.windowPatience())
	defer cancel()
	ranked := s.rank(path)
	var found []*summary
	read := 0
	for _, upTo := range s.probeWindows(len(ranked)) {
		sums, errs, ok := s.readSummaries(wctx, path, ranked[read:upTo])
		if !ok || wctx.Err() != nil {
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
			case sum.version != first.version || sum.geo != first.geo || slots[sum.slot]:
				return nil, false, nil // two versions, or a slot twice
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
