package main

import (
	"context"
	"github.com/ecstore/ecstore/internal/xrootd"

	"github.com/ecstore/ecstore/internal/object"
)

const mkdirHelp = `
Creates the directories named, with any missing parents, on every node.
An existing directory is not an error. The first mkdir creates the
embedded cluster.

Arguments may also be root://host[:port]//path URLs, to act on an ecstore
gateway or any XRootD server as xrdfs does.
`

// cmdMkdir is "ecstore mkdir /dir...".
func cmdMkdir(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "mkdir", "mkdir [flags] /dir...", mkdirHelp)
	cf := fs.addClusterFlags()
	paths, err := fs.parse(args, 1, -1)
	if err != nil {
		return err
	}
	if handled, err := remoteEach(ctx, e.stderr, paths, func(c *xrootd.Client, u rootURL) error {
		return c.Mkdir(ctx, u.path, 0o755, true)
	}); handled {
		return err
	}
	return eachPath(ctx, e, cf, true, dirPaths(paths), func(s *object.Store) pathOp { return s.Mkdir })
}
