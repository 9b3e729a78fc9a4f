package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/ecstore/ecstore/internal/object"
)

const lsHelp = `
Lists the directory /dir (default /): one line per object or directory,
directories with a trailing slash. Naming an object lists just it.

With -l each line shows the type (d directory, - object), the size in
bytes, the modification time, the geometry (K+M), how many of the
object's K+M archives were found, and the name. An object with fewer
than K archives cannot be read (its size shows as ?); fewer than K+M
means it is degraded and fsck should repair it.

Examples:
  ecstore ls
  ecstore ls -l /atlas

Arguments may also be root://host[:port]//path URLs, to act on an ecstore
gateway or any XRootD server as xrdfs does.
`

// cmdLs is "ecstore ls [-l] [/dir]".
func cmdLs(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "ls", "ls [flags] [/dir]", lsHelp)
	long := fs.Bool("l", false, "long listing: type, size, mtime, geometry, archives found, name")
	cf := fs.addClusterFlags()
	pos, err := fs.parse(args, 0, 1)
	if err != nil {
		return err
	}
	if len(pos) == 1 {
		if u, ok, err := parseRootURL(pos[0]); err != nil {
			return err
		} else if ok {
			return remoteLs(ctx, e, u, *long)
		}
	}
	dir := "/"
	if len(pos) == 1 {
		dir = dirPaths(pos)[0]
	}
	if err := checkObjectPath(dir); err != nil {
		return err
	}
	c, err := cf.open(e, false)
	if err != nil {
		return err
	}
	defer c.Close()
	entries, err := c.Store().List(ctx, dir)
	if errors.Is(err, object.ErrNotDir) {
		var info *object.Info
		if info, err = c.Store().Stat(ctx, dir); err == nil {
			entries = []object.Info{*info}
		}
	}
	if errors.Is(err, object.ErrNotExist) {
		return fmt.Errorf("%s: no such object or directory", dir)
	}
	if err != nil {
		return describe(ctx, dir, err)
	}
	if !*long {
		for _, info := range entries {
			fmt.Fprintln(e.stdout, displayName(info))
		}
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, info := range entries {
		writeLong(tw, info)
	}
	return tw.Flush()
}

func displayName(info object.Info) string {
	if info.IsDir {
		return info.Name + "/"
	}
	return info.Name
}

// writeLong writes one "ls -l" line. Columns end with a tab (tabwriter
// right-aligns them); the name is last.
func writeLong(w io.Writer, info object.Info) {
	mtime := "-"
	if !info.MTime.IsZero() {
		mtime = info.MTime.Local().Format(time.DateTime)
	}
	if info.IsDir {
		fmt.Fprintf(w, "d\t-\t%s\t-\t-\t %s\n", mtime, displayName(info))
		return
	}
	g := info.Geometry
	size, geo, archives := "?", "?", "?"
	if g.K > 0 {
		geo = fmt.Sprintf("%d+%d", g.K, g.M)
		archives = fmt.Sprintf("%d/%d", info.Archives, g.Width())
		if info.Archives >= g.K {
			size = fmt.Sprint(info.Size)
		}
	}
	fmt.Fprintf(w, "-\t%s\t%s\t%s\t%s\t %s\n", size, mtime, geo, archives, displayName(info))
}
