package main

import (
	"context"

	"github.com/ecstore/ecstore/internal/object"
)

const mkdirHelp = `
Creates the directories named, with any missing parents, on every node.
An existing directory is not an error. The first mkdir creates the
embedded cluster.
`

// cmdMkdir is "ecstore mkdir /dir...".
func cmdMkdir(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "mkdir", "mkdir [flags] /dir...", mkdirHelp)
	cf := fs.addClusterFlags()
	paths, err := fs.parse(args, 1, -1)
	if err != nil {
		return err
	}
	return eachPath(ctx, e, cf, true, paths, func(s *object.Store) pathOp { return s.Mkdir })
}
