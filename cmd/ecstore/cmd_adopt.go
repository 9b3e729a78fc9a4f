package main

import (
	"context"
	"fmt"
	"strings"
)

const adoptHelp = `
Marks the empty directories of the nodes named by id (03, or 03,04) as
theirs: a node's directory (a remote node's root too) carries a marker
naming the node, and one that is empty and unmarked while the rest of
the cluster is in use is left down — it is what a disk that is not
mounted leaves behind. Adopt a node whose directory is meant to be
empty: one just appended to the node list, or a new disk replacing a
lost one (then run 'ecstore repair' to rebuild its archives, or
'ecstore repair --adopt ID', which does both). A node already marked as
itself is left as it is; one marked as another node's is not adopted.
Running gateways take the nodes up within seconds.
`

// cmdAdopt is "ecstore adopt ID...".
func cmdAdopt(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "adopt", "adopt [flags] ID...", adoptHelp)
	cf := fs.addClusterFlags()
	pos, err := fs.parse(args, 1, -1)
	if err != nil {
		return err
	}
	cf.adopt = splitIDs(pos)
	c, err := cf.open(e, false)
	if err != nil {
		return err
	}
	defer c.Close()
	failed := 0
	for _, id := range cf.adopt {
		for _, n := range c.Nodes() {
			if n.ID != id {
				continue
			}
			if _, err := n.Node.Space(ctx); err != nil {
				fmt.Fprintf(e.stdout, "node %s (%s): not adopted: %v\n", id, n.Path, err)
				failed++
			} else {
				fmt.Fprintf(e.stdout, "node %s (%s): in use\n", id, n.Path)
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("adopt: %d of %d nodes not adopted", failed, len(cf.adopt))
	}
	return nil
}

// splitIDs splits node id arguments at commas.
func splitIDs(args []string) []string {
	var ids []string
	for _, a := range args {
		for _, id := range strings.Split(a, ",") {
			if id = strings.TrimSpace(id); id != "" {
				ids = append(ids, id)
			}
		}
	}
	return ids
}
