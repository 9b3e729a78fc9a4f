package object

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

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

func tombstonePath(p string) string { return TombstoneRoot + p }

// writeTombstones records on every reachable node that versions up to v of
// path are deleted. It returns how many nodes recorded it.
func (s *Store) writeTombstones(ctx context.Context, path string, v archive.Version) int {
	var mu sync.Mutex
	ok := 0
	s.forEach(ctx, func(ctx context.Context, n node.Node) error {
		// Never lower a tombstone: mv keeps versions, so removing an
		// object moved onto this path may remove an older version than
		// one removed here before, whose remnants must stay hidden.
		v := v
		if old, err := readTombstone(ctx, n, path); err == nil && old > v {
			v = old
		}
		up, err := n.Create(ctx, tombstonePath(path))
		if err != nil {
			return err
		}
		if err := up.Write(ctx, []byte(string(v)+"\n")); err != nil {
			_ = up.Abort(ctx)
			return err
		}
		if err := up.Finish(ctx); err != nil {
			_ = up.Abort(ctx)
			return err
		}
		if err := up.Commit(ctx); err != nil {
			_ = up.Abort(ctx)
			return err
		}
		mu.Lock()
		ok++
		mu.Unlock()
		return nil
	})
	return ok
}

// readTombstone returns the version recorded in n's tombstone for path.
func readTombstone(ctx context.Context, n node.Node, path string) (archive.Version, error) {
	f, err := n.Open(ctx, tombstonePath(path))
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, 64)
	k, err := f.ReadAt(ctx, buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	v := archive.Version(strings.TrimSpace(string(buf[:k])))
	if !v.Valid() {
		return "", fmt.Errorf("node %s: tombstone of %s: malformed", n.ID(), path)
	}
	return v, nil
}

// deletedUpTo returns the newest deleted version of path recorded on any
// node ("" if none).
func (s *Store) deletedUpTo(ctx context.Context, path string) archive.Version {
	var mu sync.Mutex
	var newest archive.Version
	s.forEach(ctx, func(ctx context.Context, n node.Node) error {
		v, err := readTombstone(ctx, n, path)
		if err == nil {
			mu.Lock()
			newest = max(newest, v)
			mu.Unlock()
		}
		return err
	})
	return newest
}

// removeTombstones deletes path's tombstones from every node; it reports
// whether every node answered.
func (s *Store) removeTombstones(ctx context.Context, path string) bool {
	errs := s.forEach(ctx, func(ctx context.Context, n node.Node) error {
		err := n.Remove(ctx, tombstonePath(path))
		if errors.Is(err, node.ErrNotExist) {
			return nil
		}
		return err
	})
	return errors.Join(errs...) == nil
}

// CollectTombstone removes the tombstones of path once they are no longer
// needed: every node answered, and no node holds an archive of a deleted
// version. It reports whether they were removed.
func (s *Store) CollectTombstone(ctx context.Context, path string) (bool, error) {
	deleted := s.deletedUpTo(ctx, path)
	if deleted == "" {
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
			if r.ref.idx.Meta.Version <= deleted {
				collect = false // a remnant remains
			}
			r.ref.file.Close()
		}
	}
	if !collect {
		return false, nil
	}
	return s.removeTombstones(ctx, path), nil
}

// Tombstones lists the object paths that have tombstones on any node.
func (s *Store) Tombstones(ctx context.Context) ([]string, error) {
	var mu sync.Mutex
	seen := map[string]bool{}
	errs := s.forEach(ctx, func(ctx context.Context, n node.Node) error {
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
