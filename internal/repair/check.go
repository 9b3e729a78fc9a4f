// Package repair finds objects that lost redundancy and (in later work)
// restores it. Check is the consistency checker behind `ecstore fsck`; the
// CLI, the gateway and the tests share it, as bbolt's Tx.Check is shared.
//
// Check walks every node's tree, gathers every object path and every
// temporary file, and inspects each object through the engine
// (object.Store.Inspect), so it sees exactly what readers see.
package repair

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/object"
)

// CheckOptions configure Check.
type CheckOptions struct {
	// Deep verifies every chunk's CRC and every object's whole checksums.
	Deep bool
	// Root limits the check to a subtree. Default "/".
	Root string
	// DebrisAge is the age from which a temporary file counts as debris
	// of a dead write rather than a write in progress. Default 1h.
	DebrisAge time.Duration
	// Parallel bounds the objects inspected at once. Default 4.
	Parallel int
	// Progress, if set, is called after each object is inspected.
	Progress func(done, total int)
}

// Debris is a temporary file left on a node.
type Debris struct {
	Node       string
	Path       string // the temporary file's path on the node
	Object     string // the object path it was written for
	Size       int64
	ModTime    time.Time
	InProgress bool // younger than DebrisAge: probably a live write
}

// Report is the outcome of a check.
type Report struct {
	Objects []*object.Inspection // sorted by path
	Debris  []Debris
	// NodeErrors are nodes (or directories on them) that could not be
	// walked; objects there may be missing from the report.
	NodeErrors []error

	debrisAge time.Duration // from the options, for Repair
}

// Count returns how many objects have health h.
func (r *Report) Count(h object.Health) int {
	n := 0
	for _, o := range r.Objects {
		if o.Health == h {
			n++
		}
	}
	return n
}

// Clean reports whether everything is healthy: every object healthy, no
// stale archives, no dead-write debris, every node walked.
func (r *Report) Clean() bool {
	for _, o := range r.Objects {
		if o.Health != object.Healthy || len(o.Stale) > 0 {
			return false
		}
	}
	for _, d := range r.Debris {
		if !d.InProgress {
			return false
		}
	}
	return len(r.NodeErrors) == 0
}

// Check scans the cluster behind s.
func Check(ctx context.Context, s *object.Store, opts CheckOptions) (*Report, error) {
	if opts.Root == "" {
		opts.Root = "/"
	}
	if opts.DebrisAge == 0 {
		opts.DebrisAge = time.Hour
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 4
	}
	if err := node.CheckPath(opts.Root); err != nil {
		return nil, fmt.Errorf("repair: check: %w", err)
	}
	rep := &Report{debrisAge: opts.DebrisAge}
	paths, err := walk(ctx, s.Nodes(), opts, rep)
	if err != nil {
		return nil, err
	}
	rep.Objects = make([]*object.Inspection, len(paths))
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, opts.Parallel)
		mu   sync.Mutex
		done int
		errs []error
	)
	for i, p := range paths {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			in, err := s.Inspect(ctx, p, opts.Deep)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && !errors.Is(err, object.ErrNotExist) {
				errs = append(errs, err)
			}
			rep.Objects[i] = in
			done++
			if opts.Progress != nil {
				opts.Progress(done, len(paths))
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("repair: check: %w", errors.Join(errs...))
	}
	// Objects removed while we looked are dropped.
	out := rep.Objects[:0]
	for _, in := range rep.Objects {
		if in != nil {
			out = append(out, in)
		}
	}
	rep.Objects = out
	return rep, nil
}

// walk lists the tree under opts.Root on every node and returns the union
// of object paths, sorted; temporary files go to rep.Debris.
func walk(ctx context.Context, nodes []node.Node, opts CheckOptions, rep *Report) ([]string, error) {
	var (
		mu    sync.Mutex
		paths = map[string]bool{}
		wg    sync.WaitGroup
	)
	now := time.Now()
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var visit func(dir string)
			visit = func(dir string) {
				if ctx.Err() != nil {
					return
				}
				fis, err := n.List(ctx, dir)
				if err != nil {
					if !errors.Is(err, node.ErrNotExist) {
						mu.Lock()
						rep.NodeErrors = append(rep.NodeErrors, err)
						mu.Unlock()
					}
					return
				}
				for _, fi := range fis {
					p := node.Join(dir, fi.Name)
					switch {
					case object.Reserved(p):
						// Tombstones are bookkeeping, collected by Repair;
						// a local node's marker stays.
					case fi.IsDir:
						visit(p)
					case node.IsTemp(fi.Name):
						target, _ := node.TempTarget(fi.Name)
						mu.Lock()
						rep.Debris = append(rep.Debris, Debris{Node: n.ID(), Path: p, Object: node.Join(dir, target),
							Size: fi.Size, ModTime: fi.ModTime, InProgress: now.Sub(fi.ModTime) < opts.DebrisAge})
						mu.Unlock()
					default:
						mu.Lock()
						paths[p] = true
						mu.Unlock()
					}
				}
			}
			if opts.Root != "/" {
				if fi, err := n.Stat(ctx, opts.Root); err == nil && !fi.IsDir {
					mu.Lock()
					paths[opts.Root] = true
					mu.Unlock()
					return
				}
			}
			visit(opts.Root)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(paths))
	for p := range paths {
		out = append(out, p)
	}
	sort.Strings(out)
	sort.Slice(rep.Debris, func(i, j int) bool {
		a, b := rep.Debris[i], rep.Debris[j]
		return a.Path < b.Path || a.Path == b.Path && a.Node < b.Node
	})
	return out, nil
}
