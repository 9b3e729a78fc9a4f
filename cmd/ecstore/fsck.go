package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/repair"
)

const fsckHelp = `
Checks every object of the cluster (or of the subtree /dir) and reports
each one that is not healthy:

  degraded       readable, but some chunks are missing or corrupt; the
                 report names each slot, node and block concerned
  unrecoverable  some block has fewer than K good chunks
  removed        archives left on nodes that were down when the object
                 was removed (tombstoned; repair deletes them)
  debris         temporary files of writes that died (older than
                 --debris-age) and archives of stale versions

Without --deep, fsck checks that every archive exists and that its
metadata and directory parse; with --deep it also reads every chunk and
verifies its CRC-32, and the whole-object adler32 and crc32c.

The exit status is 0 only when everything is healthy, 1 otherwise.
`

// cmdFsck is "ecstore fsck [/dir]".
func cmdFsck(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "fsck", "fsck [flags] [/dir]", fsckHelp)
	cf := fs.addClusterFlags()
	deep := fs.Bool("deep", false, "read and verify every chunk and whole-object checksum")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	verbose := fs.Bool("v", false, "list healthy objects too")
	debrisAge := fs.Duration("debris-age", time.Hour, "temporary files younger than `DURATION` are writes in progress, not debris")
	pos, err := fs.parse(args, 0, 1)
	if err != nil {
		return err
	}
	root, err := optionalRoot(pos)
	if err != nil {
		return err
	}
	c, err := cf.open(e, false)
	if err != nil {
		return err
	}
	defer c.Close()
	opts := repair.CheckOptions{Deep: *deep, Root: root, DebrisAge: debrisAgeOption(*debrisAge)}
	rep, err := repair.Check(ctx, c.Store(), opts)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(jsonReport(rep)); err != nil {
			return err
		}
	} else {
		printReport(e.stdout, rep, *verbose)
	}
	if !rep.Clean() {
		return fmt.Errorf("fsck: the cluster is not healthy (see the report above)")
	}
	return nil
}

func printReport(w io.Writer, rep *repair.Report, verbose bool) {
	for _, in := range rep.Objects {
		if in.Health == object.Healthy && len(in.Stale) == 0 && !verbose {
			continue
		}
		detail := ""
		if in.Info != nil {
			detail = fmt.Sprintf("  (%s, %s, %d of %d archives)", layout.HumanSize(in.Info.Size),
				geometryName(in.Info.Geometry), in.Info.Archives, len(in.Info.Placement))
		}
		fmt.Fprintf(w, "%-14s %s%s\n", in.Health, in.Path, detail)
		for _, p := range in.Problems() {
			fmt.Fprintf(w, "    %s\n", p)
		}
	}
	debris := 0
	for _, d := range rep.Debris {
		state := "debris"
		if d.InProgress {
			state = "in progress"
			if !verbose {
				continue
			}
		} else {
			debris++
		}
		fmt.Fprintf(w, "%-14s node %s: %s (write of %s, %s, %s old)\n", state, d.Node, d.Path, d.Object,
			layout.HumanSize(d.Size), time.Since(d.ModTime).Truncate(time.Second))
	}
	for _, err := range rep.NodeErrors {
		fmt.Fprintf(w, "%-14s %v\n", "node error", err)
	}
	fmt.Fprintf(w, "%d objects: %d healthy, %d degraded, %d unrecoverable; %d removed with remnants left; %d debris files",
		len(rep.Objects), rep.Count(object.Healthy), rep.Count(object.Degraded), rep.Count(object.Unrecoverable),
		rep.Count(object.Removed), debris)
	if len(rep.NodeErrors) > 0 {
		fmt.Fprintf(w, "; %d node errors", len(rep.NodeErrors))
	}
	fmt.Fprintln(w)
}

func geometryName(g layout.Geometry) string {
	if g.ChunkSize == 0 {
		return fmt.Sprintf("%d+%d", g.K, g.M)
	}
	return g.String()
}

// JSON form of the report: errors become strings.
type (
	jsonSlot struct {
		Slot    int     `json:"slot"`
		Node    string  `json:"node"`
		FoundOn string  `json:"found_on,omitempty"`
		Error   string  `json:"error,omitempty"`
		Corrupt []int64 `json:"corrupt_blocks,omitempty"`
	}
	jsonObject struct {
		Path     string     `json:"path"`
		Health   string     `json:"health"`
		Size     int64      `json:"size"`
		Geometry string     `json:"geometry,omitempty"`
		Version  string     `json:"version,omitempty"`
		Archives int        `json:"archives"`
		Slots    []jsonSlot `json:"slots,omitempty"`
		Problems []string   `json:"problems,omitempty"`
	}
	jsonDebris struct {
		Node       string    `json:"node"`
		Path       string    `json:"path"`
		Object     string    `json:"object"`
		Size       int64     `json:"size"`
		ModTime    time.Time `json:"mtime"`
		InProgress bool      `json:"in_progress"`
	}
	jsonOutput struct {
		Clean      bool           `json:"clean"`
		Counts     map[string]int `json:"counts"`
		Objects    []jsonObject   `json:"objects"`
		Debris     []jsonDebris   `json:"debris"`
		NodeErrors []string       `json:"node_errors,omitempty"`
	}
)

func jsonReport(rep *repair.Report) jsonOutput {
	out := jsonOutput{Clean: rep.Clean(), Counts: map[string]int{}, Objects: []jsonObject{}, Debris: []jsonDebris{}}
	for _, h := range []object.Health{object.Healthy, object.Degraded, object.Unrecoverable, object.Removed} {
		out.Counts[h.String()] = rep.Count(h)
	}
	for _, in := range rep.Objects {
		o := jsonObject{Path: in.Path, Health: in.Health.String(), Problems: in.Problems()}
		if in.Info != nil {
			o.Size, o.Geometry, o.Version, o.Archives = in.Info.Size, geometryName(in.Info.Geometry), string(in.Info.Version), in.Info.Archives
		}
		for _, s := range in.Slots {
			js := jsonSlot{Slot: s.Slot, Node: s.Node, FoundOn: s.FoundOn, Corrupt: s.Bad}
			if s.Err != nil {
				js.Error = s.Err.Error()
			}
			o.Slots = append(o.Slots, js)
		}
		out.Objects = append(out.Objects, o)
	}
	for _, d := range rep.Debris {
		out.Debris = append(out.Debris, jsonDebris{d.Node, d.Path, d.Object, d.Size, d.ModTime, d.InProgress})
	}
	for _, err := range rep.NodeErrors {
		out.NodeErrors = append(out.NodeErrors, err.Error())
	}
	return out
}
