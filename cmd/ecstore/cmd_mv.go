package main

import (
	"context"
	"fmt"
	"github.com/ecstore/ecstore/internal/xrootd"
)

const mvHelp = `
Renames the object or directory /a to /b on every node, replacing an
object at /b. An existing directory at /b is not replaced.

Arguments may also be root://host[:port]//path URLs, to act on an ecstore
gateway or any XRootD server as xrdfs does.
`

// cmdMv is "ecstore mv /a /b".
func cmdMv(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "mv", "mv [flags] /a /b", mvHelp)
	cf := fs.addClusterFlags()
	pos, err := fs.parse(args, 2, 2)
	if err != nil {
		return err
	}
	if from, ok, err := parseRootURL(pos[0]); err != nil {
		return err
	} else if ok {
		to, ok2, err := parseRootURL(pos[1])
		if err != nil {
			return err
		}
		if !ok2 || to.addr != from.addr {
			return usageErrorf("mv of a root:// URL needs a destination URL on the same server")
		}
		_, err = remoteEach(ctx, e.stderr, pos[:1], func(c *xrootd.Client, u rootURL) error { return c.Mv(ctx, from.path, to.path) })
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
