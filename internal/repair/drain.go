package repair

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/object"
)

// DrainOptions configure Drain.
type DrainOptions struct {
	// Rate limits rebuilt bytes per second (0: unlimited).
	Rate int64
	// Event, if set, is told about each archive handled.
	Event func(ev RepairEvent)
}

// DrainReport is the outcome of a drain.
type DrainReport struct {
	Moved   int   // archives rebuilt elsewhere and removed from the node
	Removed int   // stale archives and debris removed from the node
	Bytes   int64 // chunk bytes rebuilt
	Failed  []error
	// Left lists the files still on the node afterwards (tombstones
	// excluded); empty when the node can be retired.
	Left []string
}

// Drain moves every archive off node id: each one is rebuilt on another
// node (never on id) from the object's other archives, the object is
// inspected, and only then is the archive on id removed. Archives of
// stale versions and temporary files on id are removed. New writes may
// still choose the node while it drains: take it out of the cluster's
// configuration (or stop writers) first.
func Drain(ctx context.Context, s *object.Store, id string, opts DrainOptions) (*DrainReport, error) {
	n, ok := s.Node(id)
	if !ok {
		return nil, fmt.Errorf("repair: drain: no node %q", id)
	}
	files, err := nodeFiles(ctx, n)
	if err != nil {
		return nil, fmt.Errorf("repair: drain %s: %w", id, err)
	}
	rep := &DrainReport{}
	limiter := newRateLimiter(opts.Rate)
	event := func(ev RepairEvent) {
		if opts.Event != nil {
			opts.Event(ev)
		}
	}
	for i, p := range files {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		ev := RepairEvent{Path: p, Done: i + 1, Total: len(files)}
		if _, base := node.Split(p); node.IsTemp(base) {
			if err := n.Remove(ctx, p); err != nil && !errors.Is(err, node.ErrNotExist) {
				rep.Failed = append(rep.Failed, err)
			} else {
				rep.Removed++
			}
			continue
		}
		in, err := s.Inspect(ctx, p, false)
		if err != nil {
			rep.Failed = append(rep.Failed, fmt.Errorf("%s: %w", p, err))
			continue
		}
		var slots []int
		for _, sl := range in.Slots {
			if sl.FoundOn == id {
				slots = append(slots, sl.Slot)
			}
		}
		// An archive the inspection could not read there (the node failed
		// the probe) is not known to be stale: it may be the only one of
		// its slot. It is kept, and the drain reports it.
		known := false
		for _, st := range in.Stale {
			known = known || st.Node == id && (st.Err == nil || st.Malformed)
		}
		if len(slots) == 0 && !known {
			rep.Failed = append(rep.Failed, fmt.Errorf("%s: the archive on node %s could not be read; kept", p, id))
			continue
		}
		if len(slots) == 0 {
			// Not an archive readers use: stale, a duplicate or a remnant.
			if in.Health != object.Unrecoverable {
				if err := n.Remove(ctx, p); err != nil && !errors.Is(err, node.ErrNotExist) {
					rep.Failed = append(rep.Failed, err)
				} else {
					rep.Removed++
					ev.Action = "removed stale"
					event(ev)
				}
			} else {
				rep.Failed = append(rep.Failed, fmt.Errorf("%s: unrecoverable; its archive is kept", p))
			}
			continue
		}
		res, err := s.Rebuild(ctx, p, slots, object.RebuildOptions{Throttle: limiter.wait, Avoid: []string{id}, Version: in.Info.Version})
		if res != nil {
			rep.Bytes += res.Bytes
		}
		if err != nil {
			rep.Failed = append(rep.Failed, fmt.Errorf("%s: %w", p, err))
			ev.Action, ev.Detail = "failed", err.Error()
			event(ev)
			continue
		}
		if err := n.Remove(ctx, p); err != nil {
			rep.Failed = append(rep.Failed, fmt.Errorf("%s: rebuilt elsewhere but not removed: %w", p, err))
			continue
		}
		after, err := s.Inspect(ctx, p, false)
		if err != nil || after.Health != object.Healthy {
			rep.Failed = append(rep.Failed, fmt.Errorf("%s: not healthy after moving slots %v: %v", p, slots, err))
			continue
		}
		rep.Moved += len(slots)
		ev.Action, ev.Detail = "moved", fmt.Sprintf("slots %v to %v", slots, res.Rebuilt)
		event(ev)
	}
	left, err := nodeFiles(ctx, n)
	if err != nil {
		return rep, err
	}
	rep.Left = left
	return rep, nil
}

// nodeFiles lists every file on n (archives and temporary files), sorted,
// skipping the tombstone area.
func nodeFiles(ctx context.Context, n node.Node) ([]string, error) {
	var out []string
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
			case object.Reserved(p): // tombstones, a node's marker
			case fi.IsDir:
				if err := walk(p); err != nil {
					return err
				}
			default:
				out = append(out, p)
			}
		}
		return nil
	}
	if err := walk("/"); err != nil {
		return nil, err
	}
	sort.Strings(out)
	return slices.Compact(out), nil
}
