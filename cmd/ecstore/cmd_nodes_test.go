package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNodesShowsADownNode: "ecstore nodes" lists every node up with its
// space and exits 0; with a node's directory emptied (an unmounted disk)
// it shows that node down with the reason, the others up, and exits 1;
// --json says the same.
func TestNodesShowsADownNode(t *testing.T) {
	c := newTestCluster(t)
	c.put("/a/x", []byte("some data"))
	out := mustRun(t, nil, c.cmd("nodes")...)
	if n := strings.Count(out, " up "); n != 12 {
		t.Errorf("nodes of a healthy cluster: %d up, want 12\n%s", n, out)
	}
	if !strings.Contains(out, "12 of 12 nodes up") || !strings.Contains(out, filepath.Join(c.dir, "nodes", "05")) {
		t.Errorf("nodes of a healthy cluster:\n%s", out)
	}

	dir := filepath.Join(c.dir, "nodes", "03")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := ecstore(t, nil, c.cmd("nodes")...)
	if r.code != 1 || !strings.Contains(r.stdout, "11 of 12 nodes up") || !strings.Contains(r.stdout, "ecstore adopt 03") {
		t.Fatalf("nodes with node 03's directory emptied: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(line, "03 ") && !strings.Contains(line, " down ") {
			t.Errorf("node 03's line: %q", line)
		}
	}

	r = ecstore(t, nil, c.cmd("nodes", "--json")...)
	var got struct {
		Nodes []nodeRow `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("nodes --json: %v\n%s", err, r.stdout)
	}
	if r.code != 1 || len(got.Nodes) != 12 {
		t.Fatalf("nodes --json: exit %d, %d nodes", r.code, len(got.Nodes))
	}
	for _, n := range got.Nodes {
		if up := n.ID != "03"; n.Up != up || (n.Total > 0) != up || (n.Error == "") != up {
			t.Errorf("node %s in --json: %+v", n.ID, n)
		}
	}
}

func TestBinarySize(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1023: "1023B", 1536: "1.5KiB", 20 << 30: "20GiB", 3 << 40: "3.0TiB"} {
		if got := binarySize(n); got != want {
			t.Errorf("binarySize(%d) = %q, want %q", n, got, want)
		}
	}
}
