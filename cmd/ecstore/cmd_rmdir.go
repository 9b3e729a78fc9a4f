package main

import (
	"context"

	"github.com/ecstore/ecstore/internal/object"
)

const rmdirHelp = `
Removes the empty directories named, from every node. A directory that
holds objects, or temporary files of writes in progress, is not removed.
`

// cmdRmdir is "ecstore rmdir /dir...".
func cmdRmdir(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "rmdir", "rmdir [flags] /dir...", rmdirHelp)
	cf := fs.addClusterFlags()
	paths, err := fs.parse(args, 1, -1)
	if err != nil {
		return err
	}
	return eachPath(ctx, e, cf, false, paths, func(s *object.Store) pathOp { return s.Rmdir })
}
