package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/ecstore/ecstore/internal/cluster"
	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/object"
)

const statHelp = `
Describes the object /path: size, modification time, geometry, version,
whole-object checksums (adler32 as xrdadler32 prints it, and crc32c),
and its placement: for every slot, the node that holds its archive and
whether that archive is there (ok), missing, of another version, or on
a node that is down, and any archives of other versions. stat reads only
each archive's metadata; fsck verifies the chunks themselves.

For a directory it prints its path and modification time.

Arguments may also be root://host[:port]//path URLs, to act on an ecstore
gateway or any XRootD server as xrdfs does.
`

// cmdStat is "ecstore stat /path".
func cmdStat(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "stat", "stat [flags] /path", statHelp)
	cf := fs.addClusterFlags()
	pos, err := fs.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if u, ok, err := parseRootURL(pos[0]); err != nil {
		return err
	} else if ok {
		return remoteStat(ctx, e, u)
	}
	path := pos[0]
	if err := checkObjectPath(path); err != nil {
		return err
	}
	c, err := cf.open(e, false)
	if err != nil {
		return err
	}
	defer c.Close()
	s := c.Store()
	info, err := s.Stat(ctx, path)
	var ue *object.UnrecoverableError
	switch {
	case errors.As(err, &ue):
		// Show what is left of it, then fail.
		if in, ierr := s.Inspect(ctx, path, false); ierr == nil && in.Info != nil {
			writeObject(e.stdout, in.Info)
			writePlacement(e.stdout, c, in)
		}
		return describe(ctx, path, err)
	case err != nil:
		return describe(ctx, path, err)
	case info.IsDir:
		tw := tabwriter.NewWriter(e.stdout, 0, 0, 1, ' ', 0)
		fmt.Fprintf(tw, "path:\t%s\n", info.Path)
		fmt.Fprintf(tw, "type:\tdirectory\n")
		if !info.MTime.IsZero() {
			fmt.Fprintf(tw, "mtime:\t%s\n", info.MTime.Local().Format(time.RFC3339Nano))
		}
		return tw.Flush()
	}
	in, err := s.Inspect(ctx, path, false)
	if err != nil {
		return describe(ctx, path, err)
	}
	writeObject(e.stdout, info)
	writePlacement(e.stdout, c, in)
	return nil
}

// writeObject prints an object's description.
func writeObject(w io.Writer, info *object.Info) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	defer tw.Flush()
	g := info.Geometry
	fmt.Fprintf(tw, "path:\t%s\n", info.Path)
	fmt.Fprintf(tw, "type:\tobject\n")
	fmt.Fprintf(tw, "size:\t%d (%s)\n", info.Size, layout.HumanSize(info.Size))
	fmt.Fprintf(tw, "mtime:\t%s\n", info.MTime.Local().Format(time.RFC3339Nano))
	fmt.Fprintf(tw, "geometry:\t%d+%d, %s chunks (%s blocks, %d blocks)\n", g.K, g.M,
		layout.FormatSize(g.ChunkSize), layout.FormatSize(g.BlockSize()), layout.Layout{Geometry: g, Size: info.Size}.Blocks())
	fmt.Fprintf(tw, "version:\t%s\n", info.Version)
	fmt.Fprintf(tw, "adler32:\t%s\n", info.Adler32)
	fmt.Fprintf(tw, "crc32c:\t%s\n", info.CRC32C)
	state := "healthy"
	switch {
	case info.Archives < g.K:
		state = fmt.Sprintf("unrecoverable: fewer than %d", g.K)
	case info.Archives < g.Width():
		state = fmt.Sprintf("degraded: %d missing, %d more can be lost", g.Width()-info.Archives, info.Archives-g.K)
	}
	fmt.Fprintf(tw, "archives:\t%d of %d (%s)\n", info.Archives, g.Width(), state)
	keys := make([]string, 0, len(info.User))
	for k := range info.User {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(tw, "user.%s:\t%s\n", k, info.User[k])
	}
}

// writePlacement prints one line per slot (slot, node, archive state,
// node directory), then any archives of other versions.
func writePlacement(w io.Writer, c *cluster.Cluster, in *object.Inspection) {
	dirs := map[string]string{}
	for _, n := range c.Nodes() {
		dirs[n.ID] = n.Path
	}
	fmt.Fprintln(w, "placement:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, s := range in.Slots {
		state, on := "ok", s.Node
		switch {
		case s.FoundOn == "" && errors.Is(s.Err, cluster.ErrNodeDown):
			state = "node down"
		case s.FoundOn == "" && s.Err != nil:
			state = "missing: " + s.Err.Error()
		case s.FoundOn == "":
			state = "missing"
		case s.FoundOn != s.Node:
			state, on = "ok, found on node "+s.FoundOn, s.FoundOn
		}
		dir := dirs[on]
		if dir == "" {
			dir = "(not a node of this cluster)"
		}
		fmt.Fprintf(tw, "  slot %d\tnode %s\t%s\t%s\n", s.Slot, s.Node, state, dir)
	}
	tw.Flush()
	for _, st := range in.Stale {
		switch {
		case errors.Is(st.Err, cluster.ErrNodeDown):
		case st.Err != nil:
			fmt.Fprintf(w, "  node %s: unreadable archive: %v\n", st.Node, st.Err)
		default:
			fmt.Fprintf(w, "  node %s: archive of another version %s (debris; fsck removes it)\n", st.Node, st.Version)
		}
	}
}
