package main

import (
	"context"
	"fmt"
	"github.com/ecstore/ecstore/internal/xrootd"

	"github.com/ecstore/ecstore/internal/object"
)

const rmHelp = `
Removes the objects named, from every node. Directories are not removed
(see rmdir). Every path is tried; the command fails if any could not be
removed.

Arguments may also be root://host[:port]//path URLs, to act on an ecstore
gateway or any XRootD server as xrdfs does.
`

// cmdRm is "ecstore rm /path...".
func cmdRm(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "rm", "rm [flags] /path...", rmHelp)
	cf := fs.addClusterFlags()
	paths, err := fs.parse(args, 1, -1)
	if err != nil {
		return err
	}
	if handled, err := remoteEach(ctx, e.stderr, paths, func(c *xrootd.Client, u rootURL) error {
		return c.Rm(ctx, u.path)
	}); handled {
		return err
	}
	return eachPath(ctx, e, cf, false, paths, func(s *object.Store) pathOp { return s.Remove })
}

// pathOp is a namespace operation on one path.
type pathOp = func(ctx context.Context, path string) error

// eachPath opens the cluster (creating it if create) and applies the
// store operation op selects to every path. All but the last error are
// printed as they happen; the last one is returned with a count.
func eachPath(ctx context.Context, e *env, cf *clusterFlags, create bool, paths []string, op func(*object.Store) pathOp) error {
	for _, p := range paths {
		if err := checkObjectPath(p); err != nil {
			return err
		}
	}
	c, err := cf.open(e, create)
	if err != nil {
		return err
	}
	defer c.Close()
	fn := op(c.Store())
	var errs []error
	for _, p := range paths {
		if err := fn(ctx, p); err != nil {
			errs = append(errs, describe(ctx, p, err))
		}
		if ctx.Err() != nil {
			return errInterrupted
		}
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	for _, err := range errs[:len(errs)-1] {
		fmt.Fprintf(e.stderr, "ecstore: %v\n", err)
	}
	return fmt.Errorf("%w (%d of %d paths failed)", errs[len(errs)-1], len(errs), len(paths))
}
