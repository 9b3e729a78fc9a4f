package main

import (
	"context"
	"github.com/ecstore/ecstore/internal/xrootd"

	"github.com/ecstore/ecstore/internal/object"
)

const rmdirHelp = `
Removes the empty directories named, from every node. A directory that
holds objects, or temporary files of writes in progress, is not removed.

Arguments may also be root://host[:port]//path URLs, to act on an ecstore
gateway or any XRootD server as xrdfs does.
`

// cmdRmdir is "ecstore rmdir /dir...".
func cmdRmdir(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "rmdir", "rmdir [flags] /dir...", rmdirHelp)
	cf := fs.addClusterFlags()
	paths, err := fs.parse(args, 1, -1)
	if err != nil {
		return err
	}
	if handled, err := remoteEach(ctx, e.stderr, paths, func(c *xrootd.Client, u rootURL) error {
		return c.Rmdir(ctx, u.path)
	}); handled {
		return err
	}
	return eachPath(ctx, e, cf, false, dirPaths(paths), func(s *object.Store) pathOp { return s.Rmdir })
}
