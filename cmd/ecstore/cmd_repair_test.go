package main

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ecstore/ecstore/internal/testcluster"
)

func TestFsckRepairCycle(t *testing.T) {
	c := newTestCluster(t)
	data := testcluster.Rand(rand.New(rand.NewPCG(8, 8)), 3<<20+5)
	c.put("/f/x", data)
	// Healthy: fsck exits 0.
	if r := ecstore(t, nil, c.cmd("fsck")...); r.code != 0 {
		t.Fatalf("fsck of a healthy cluster: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	files, _ := c.archives("/f/x")
	os.Remove(files[0])
	r := ecstore(t, nil, c.cmd("fsck")...)
	if r.code != 1 || !strings.Contains(r.stdout, "degraded") || !strings.Contains(r.stdout, "archive missing") {
		t.Fatalf("fsck after losing an archive: exit %d\n%s", r.code, r.stdout)
	}
	r = ecstore(t, nil, c.cmd("fsck", "--json")...)
	if r.code != 1 || !strings.Contains(r.stdout, `"degraded": 1`) {
		t.Fatalf("fsck --json: exit %d\n%s", r.code, r.stdout)
	}
	out := mustRun(t, nil, c.cmd("repair")...)
	if !strings.Contains(out, "rebuilt") {
		t.Fatalf("repair output:\n%s", out)
	}
	if r := ecstore(t, nil, c.cmd("fsck", "--deep")...); r.code != 0 {
		t.Fatalf("fsck --deep after repair: exit %d\n%s", r.code, r.stdout)
	}
	got := mustRun(t, nil, c.cmd("get", "/f/x", "-")...)
	if !bytes.Equal([]byte(got), data) {
		t.Fatal("object changed by repair")
	}
}

// On a terminal, repair draws a progress bar of the bytes to rebuild,
// ending at 100%, and its per-object lines stay whole.
func TestRepairProgress(t *testing.T) {
	c := newTestCluster(t)
	c.put("/p/big", make([]byte, 72<<20)) // 9 MiB per archive at 8+2/1MiB
	files, _ := c.archives("/p/big")
	os.Remove(files[0])
	var stdout, stderr bytes.Buffer
	e := &env{stdout: &stdout, stderr: &stderr, isTerminal: func(w io.Writer) bool { return w == &stderr }}
	if code := run(context.Background(), e, c.cmd("repair")); code != 0 {
		t.Fatalf("repair: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	if s := stderr.String(); !strings.Contains(s, "rebuild 1 objects") || !strings.Contains(s, "9.0 MiB / 9.0 MiB  100%") {
		t.Errorf("progress bar: %q", s)
	}
	if !strings.Contains(stdout.String(), "[1/1] rebuilt        /p/big") {
		t.Errorf("repair lines: %q", stdout.String())
	}
}

// A node directory emptied under a cluster in use (the mount point of a
// disk that is not mounted) is refused, and fsck says how to adopt a new
// disk; repair --adopt marks it and rebuilds the node's archives there.
func TestRepairAdoptsANewDisk(t *testing.T) {
	c := newTestCluster(t)
	data := testcluster.Rand(rand.New(rand.NewPCG(9, 9)), 2<<20+7)
	c.put("/a/x", data)
	files, info := c.archives("/a/x")
	id := info.Placement[0]
	dir := filepath.Join(c.dir, "nodes", id)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := ecstore(t, nil, c.cmd("fsck")...)
	if r.code != 1 || !strings.Contains(r.stdout, "ecstore repair --adopt "+id) {
		t.Fatalf("fsck with node %s's directory empty and unmarked: exit %d\n%s%s", id, r.code, r.stdout, r.stderr)
	}
	if r := ecstore(t, nil, c.cmd("repair", "--adopt", id, "--dry-run")...); r.code != 2 {
		t.Errorf("repair --adopt --dry-run: exit %d, want 2 (usage)\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(files[0]); err == nil {
		t.Fatal("an archive was written to the refused directory")
	}
	mustRun(t, nil, c.cmd("repair", "--adopt", id)...)
	if _, err := os.Stat(files[0]); err != nil {
		t.Errorf("the adopted node's archive was not rebuilt: %v", err)
	}
	if r := ecstore(t, nil, c.cmd("fsck", "--deep")...); r.code != 0 {
		t.Fatalf("fsck --deep after the adoption: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := mustRun(t, nil, c.cmd("get", "/a/x", "-")...); got != string(data) {
		t.Fatal("object changed by the adoption")
	}
}

// A node appended to the node list starts empty and unmarked: it is left
// down, as an unmounted disk would be, until 'ecstore adopt' marks it.
func TestAdoptAnAppendedNode(t *testing.T) {
	c := newTestCluster(t)
	c.put("/a/x", []byte("before the new node"))
	conf := filepath.Join(c.dir, "ecstore.conf")
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "nodes/11") {
		t.Fatalf("config without nodes/11:\n%s", b)
	}
	if err := os.WriteFile(conf, []byte(strings.Replace(string(b), "nodes/11", "nodes/11, nodes/12", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(c.dir, "nodes", "12"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := ecstore(t, nil, c.cmd("fsck")...)
	if r.code != 1 || !strings.Contains(r.stdout, "ecstore adopt 12") {
		t.Fatalf("fsck with node 12 new and unmarked: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := ecstore(t, nil, c.cmd("adopt", "99")...); r.code != 2 {
		t.Errorf("adopt of a node that does not exist: exit %d, want 2\n%s", r.code, r.stderr)
	}
	out := mustRun(t, nil, c.cmd("adopt", "12")...)
	if !strings.Contains(out, "node 12") || !strings.Contains(out, "in use") {
		t.Errorf("adopt output: %q", out)
	}
	if b, err := os.ReadFile(filepath.Join(c.dir, "nodes", "12", ".ecstore-node")); err != nil || !strings.Contains(string(b), "node = 12") {
		t.Errorf("marker of the adopted node: %q, %v", b, err)
	}
	if r := ecstore(t, nil, c.cmd("fsck")...); r.code != 0 {
		t.Fatalf("fsck after the adoption: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
