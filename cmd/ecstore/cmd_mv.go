package main

import (
	"context"
	"fmt"
)

const mvHelp = `
Renames the object or directory /a to /b on every node, replacing an
object at /b. An existing directory at /b is not replaced.
`

// cmdMv is "ecstore mv /a /b".
func cmdMv(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "mv", "mv [flags] /a /b", mvHelp)
	cf := fs.addClusterFlags()
	pos, err := fs.parse(args, 2, 2)
	if err != nil {
		return err
	}
	from, to := pos[0], pos[1]
	for _, p := range pos {
		if err := checkObjectPath(p); err != nil {
			return err
		}
	}
	c, err := cf.open(e, false)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Store().Rename(ctx, from, to); err != nil {
		if _, serr := c.Store().Stat(ctx, from); serr != nil {
			return describe(ctx, from, err)
		}
		return fmt.Errorf("mv %s %s: %w", from, to, describe(ctx, to, err))
	}
	return nil
}
