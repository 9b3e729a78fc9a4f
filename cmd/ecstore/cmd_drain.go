package main

import (
	"context"
	"fmt"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/repair"
)

const drainHelp = `
Moves every archive off the node NODE (its id, as ecstore stat shows it:
00, 01, ...) so that it can be retired: each archive is rebuilt on
another node from the object's other archives, the object is inspected,
and only then is the archive removed from NODE. Stale archives and
debris on NODE are removed.

Retire NODE first, so that no new archive lands on it while it drains:
add "retired = NODE" to the cluster config (or pass --retired NODE to
every gateway) and restart the gateways; retired nodes are still read.
Drain itself never rebuilds onto NODE. The exit status is 0 only when
NODE holds no archive afterwards; then the node's entry may be replaced
by an empty directory or left retired (never deleted: node ids are
positions in the list).
`

// cmdDrain is "ecstore drain NODE".
func cmdDrain(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "drain", "drain [flags] NODE", drainHelp)
	cf := fs.addClusterFlags()
	rate := fs.String("rate", "0", "limit rebuilt data to `SIZE` per second (0: unlimited)")
	pos, err := fs.parse(args, 1, 1)
	if err != nil {
		return err
	}
	bps, err := layout.ParseSize(*rate)
	if err != nil {
		return usageErrorf("--rate: %v", err)
	}
	c, err := cf.open(e, false)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, ok := c.Store().Node(pos[0]); !ok {
		return usageErrorf("no node %q in this cluster", pos[0])
	}
	start := time.Now()
	rep, err := repair.Drain(ctx, c.Store(), pos[0], repair.DrainOptions{Rate: bps, Event: func(ev repair.RepairEvent) {
		fmt.Fprintf(e.stdout, "[%d/%d] %-14s %s  %s\n", ev.Done, ev.Total, ev.Action, ev.Path, ev.Detail)
	}})
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	fmt.Fprintf(e.stdout, "node %s: moved %d archives (%s rebuilt, %.1f MB/s), removed %d stale files\n",
		pos[0], rep.Moved, layout.HumanSize(rep.Bytes), float64(rep.Bytes)/1e6/max(secs, 1e-9), rep.Removed)
	for _, err := range rep.Failed {
		fmt.Fprintf(e.stdout, "FAILED  %v\n", err)
	}
	if len(rep.Left) > 0 {
		return fmt.Errorf("drain: node %s still holds %d files (first: %s)", pos[0], len(rep.Left), rep.Left[0])
	}
	return nil
}
