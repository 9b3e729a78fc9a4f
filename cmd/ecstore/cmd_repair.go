package main

import (
	"context"
	"fmt"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/repair"
)

const repairHelp = `
Restores full redundancy: checks the cluster (or the subtree /dir) as
fsck does, then rebuilds every missing or corrupt archive of every
degraded object from the object's other archives — onto the node the
placement names, or onto another node when that one is down — and
inspects each object again. Temporary files of dead writes and archives
of stale versions are removed (unless --keep-debris).

A node directory that is empty and lacks its marker while the cluster
is in use is left down (the mount point of a disk that is not mounted,
most likely): with --adopt ID it is taken as a new disk for node ID,
marked, and refilled by the repair (see 'ecstore help adopt').

An object counts as repaired only when the second inspection finds it
healthy; the final report lists everything that could not be repaired
and why, and the exit status is 0 only when nothing is left. Repair can
be interrupted and run again: it redoes only what is still needed. It is
safe to run while a gateway is serving.
`

// cmdRepair is "ecstore repair [/dir]".
func cmdRepair(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "repair", "repair [flags] [/dir]", repairHelp)
	cf := fs.addClusterFlags()
	deep := fs.Bool("deep", false, "verify every chunk (finds corruption, not only missing archives)")
	rate := fs.String("rate", "0", "limit rebuilt data to `SIZE` per second, e.g. 50MB (0: unlimited)")
	dry := fs.Bool("dry-run", false, "report what would be rebuilt and change nothing")
	keep := fs.Bool("keep-debris", false, "do not remove temporary files and stale archives")
	debrisAge := fs.Duration("debris-age", time.Hour, "temporary files younger than `DURATION` are writes in progress")
	adopt := fs.String("adopt", "", "comma-separated node `IDS` whose empty, unmarked directory is a new disk: mark it and rebuild its archives there")
	pos, err := fs.parse(args, 0, 1)
	if err != nil {
		return err
	}
	if *adopt != "" {
		if *dry {
			return usageErrorf("--adopt marks node directories: it cannot go with --dry-run")
		}
		cf.adopt = splitIDs([]string{*adopt})
	}
	root, err := optionalRoot(pos)
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
	start := time.Now()
	var bar *progress // on a terminal, once the check knows the work
	rep, err := repair.Repair(ctx, c.Store(), repair.RepairOptions{
		CheckOptions: repair.CheckOptions{Deep: *deep, Root: root, DebrisAge: debrisAgeOption(*debrisAge)},
		Rate:         bps, DryRun: *dry, RemoveDebris: !*keep,
		Planned: func(objects int, bytes int64) {
			if objects > 0 && !*dry {
				bar = startProgress(e, fmt.Sprintf("rebuild %d objects", objects), bytes)
			}
		},
		Progress: func(n int) { bar.add(n) },
		Event: func(ev repair.RepairEvent) {
			if ev.Total > 0 {
				bar.println(e.stdout, fmt.Sprintf("[%d/%d] %-14s %s  %s", ev.Done, ev.Total, ev.Action, ev.Path, ev.Detail))
			} else {
				bar.println(e.stdout, fmt.Sprintf("%-20s %s  %s", ev.Action, ev.Path, ev.Detail))
			}
		},
	})
	bar.finish(err == nil)
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	fmt.Fprintf(e.stdout, "checked %d objects; rebuilt %s in %.1fs (%.1f MB/s); removed %d debris files\n",
		len(rep.Check.Objects), layout.HumanSize(rep.Bytes), secs, float64(rep.Bytes)/1e6/max(secs, 1e-9), rep.DebrisRemoved)
	if rep.RolledForward > 0 {
		fmt.Fprintf(e.stdout, "completed interrupted commits: %d archives renamed into place\n", rep.RolledForward)
	}
	failed := rep.Failed()
	for _, o := range failed {
		fmt.Fprintf(e.stdout, "NOT REPAIRED   %s: %v\n", o.Path, o.Err)
	}
	for _, err := range rep.DebrisFailed {
		fmt.Fprintf(e.stdout, "DEBRIS LEFT    %v\n", err)
	}
	switch {
	case *dry:
		return nil
	case len(failed) > 0:
		return fmt.Errorf("repair: %d objects could not be repaired (listed above)", len(failed))
	case len(rep.Check.NodeErrors) > 0:
		return fmt.Errorf("repair: %d nodes could not be scanned: %v", len(rep.Check.NodeErrors), rep.Check.NodeErrors[0])
	case len(rep.DebrisFailed) > 0:
		return fmt.Errorf("repair: %d debris files or remnants could not be removed (listed above)", len(rep.DebrisFailed))
	}
	return nil
}
