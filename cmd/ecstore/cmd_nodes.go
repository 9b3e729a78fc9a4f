package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/ecstore/ecstore/internal/cluster"
	"github.com/ecstore/ecstore/internal/object"
)

const nodesHelp = `
Asks every node of the cluster for its space, at once, and prints one
line per node: its id, its state, the space of the file system holding
its data, and where it is (a directory or a root:// URL). The state is
"up", "retired" (still read, takes no new archives), or "down" with the
reason (the directory is refused, the server does not answer). A node
that answers but is avoided by this process's reads says so too.
Exits 1 when a node is down, so that scripts and monitoring can act on it;
a running gateway reports the same as ec_node_up on /metrics.
`

// cmdNodes is "ecstore nodes".
func cmdNodes(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "nodes", "nodes [flags]", nodesHelp)
	cf := fs.addClusterFlags()
	asJSON := fs.Bool("json", false, `print {"nodes": [...]} as JSON instead of the table`)
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	c, err := cf.open(e, false)
	if err != nil {
		return err
	}
	defer c.Close()
	states := c.Store().NodeStates(ctx, true)
	rows := nodeRows(c.Nodes(), states)
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Nodes []nodeRow `json:"nodes"`
		}{rows}); err != nil {
			return err
		}
	} else if err := writeNodes(e.stdout, rows); err != nil {
		return err
	}
	down := 0
	for _, r := range rows {
		if !r.Up {
			down++
		}
	}
	if down > 0 {
		return fmt.Errorf("nodes: %d of %d nodes down", down, len(rows))
	}
	return nil
}

// nodeRow is one node as "ecstore nodes" prints it.
type nodeRow struct {
	ID      string `json:"id"`
	Where   string `json:"where"`
	Up      bool   `json:"up"`
	Retired bool   `json:"retired,omitempty"`
	Error   string `json:"error,omitempty"`
	Avoided string `json:"avoided,omitempty"`
	Total   int64  `json:"total_bytes"`
	Free    int64  `json:"free_bytes"`
}

// nodeRows joins the nodes' states to where they are.
func nodeRows(infos []cluster.NodeInfo, states []object.NodeState) []nodeRow {
	where := make(map[string]string, len(infos))
	for _, n := range infos {
		where[n.ID] = n.Path
	}
	rows := make([]nodeRow, len(states))
	for i, st := range states {
		rows[i] = nodeRow{ID: st.ID, Where: where[st.ID], Up: st.Up(), Retired: st.Retired, Avoided: st.Suspect,
			Total: st.Space.Total, Free: st.Space.Free}
		if st.Err != nil {
			rows[i].Error = st.Err.Error()
		}
	}
	return rows
}

// writeNodes prints rows as a table and a summary line.
func writeNodes(w io.Writer, rows []nodeRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tUSED\tFREE\tSIZE\tWHERE")
	var up int
	var total, free int64
	for _, r := range rows {
		state := "up"
		switch {
		case !r.Up:
			state = "down"
		case r.Retired:
			state = "retired"
		}
		if r.Up && r.Avoided != "" {
			state += " (avoided: " + r.Avoided + ")"
		}
		used, freeS, size := "-", "-", "-"
		if r.Up {
			up++
			total += r.Total
			free += r.Free
			freeS, size = binarySize(r.Free), binarySize(r.Total)
			if r.Total > 0 {
				used = fmt.Sprintf("%.0f%%", 100*float64(r.Total-r.Free)/float64(r.Total))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, state, used, freeS, size, r.Where)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(w, "node %s down: %s\n", r.ID, r.Error)
		}
	}
	_, err := fmt.Fprintf(w, "%d of %d nodes up; %s free of %s (sums over the nodes that answered)\n",
		up, len(rows), binarySize(free), binarySize(total))
	return err
}

// binarySize formats n bytes with a binary unit: 512B, 1.5KiB, 20GiB.
func binarySize(n int64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%dB", n)
	}
	v, u := float64(n)/1024, 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	if v < 10 {
		return fmt.Sprintf("%.1f%ciB", v, units[u])
	}
	return fmt.Sprintf("%.0f%ciB", v, units[u])
}
