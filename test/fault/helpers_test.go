//go:build fault

package fault

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/placement"
)

// statPlacement returns the node ids of an object's placement, by slot,
// from "ecstore stat" on the cluster.
func statPlacement(t testing.TB, c *cluster, path string) []string {
	t.Helper()
	r := c.cli(time.Minute, "stat", path)
	if !r.ok() {
		t.Fatalf("%v", r)
	}
	_, list, ok := strings.Cut(r.out, "placement:\n")
	if !ok {
		t.Fatalf("ecstore stat %s: no placement:\n%s", path, r.out)
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		f := strings.Fields(line) // slot N node ID STATE... URL
		if len(f) < 5 || f[0] != "slot" || f[2] != "node" {
			break
		}
		ids = append(ids, f[3])
	}
	if len(ids) != geoK+geoM {
		t.Fatalf("ecstore stat %s: %d slots, want %d:\n%s", path, len(ids), geoK+geoM, r.out)
	}
	return ids
}

// likelyPlacement is the placement a new object at path gets while every
// node is up with (about) the same free space: the first K+M nodes of
// placement.Rank, then the spares.
func likelyPlacement(path string) []string {
	nodes := make([]placement.Node, numNodes)
	for i := range nodes {
		nodes[i] = placement.Node{ID: fmt.Sprintf("%02d", i), Free: diskSize}
	}
	var ids []string
	for _, n := range placement.Rank(path, nodes) {
		ids = append(ids, n.ID)
	}
	return ids
}

// getResult reads an object through the gateway with xrdcp into a fresh
// local file and compares it with the candidates; it returns the body
// read (nil if none matched or the read failed), a description, and the
// command's result.
func getVia(t testing.TB, c *cluster, dir, path string, timeout time.Duration, candidates ...*content) (*content, string, result) {
	t.Helper()
	f, err := os.CreateTemp(dir, "get-")
	if err != nil {
		t.Fatal(err)
	}
	local := f.Name()
	f.Close()
	defer os.Remove(local)
	r := run(timeout, "xrdcp", "--nopbar", "-f", c.obj(path), local)
	if !r.ok() {
		return nil, "", r
	}
	got, diff, err := matchFile(local, candidates)
	if err != nil {
		t.Fatal(err)
	}
	return got, diff, r
}

// mustGet fails the test unless path reads back exactly as want.
func mustGet(t testing.TB, c *cluster, dir, path string, want *content) time.Duration {
	t.Helper()
	got, diff, r := getVia(t, c, dir, path, 2*time.Minute, want)
	switch {
	case !r.ok():
		t.Fatalf("get %s: %v", path, r)
	case got == nil:
		t.Fatalf("get %s returned wrong bytes: %s", path, diff)
	}
	return r.elapsed
}

// mustBeAbsent fails the test unless a read of path says there is no
// such object and xrdfs ls of its directory does not list it. known are
// bodies the path might wrongly hold, to say which one a read returned.
func mustBeAbsent(t testing.TB, c *cluster, dir, path string, known ...*content) {
	t.Helper()
	got, _, r := getVia(t, c, dir, path, 2*time.Minute, known...)
	switch {
	case r.ok() && got != nil:
		t.Errorf("get %s succeeded and returned all of %v, want no such object", path, got)
	case r.ok():
		t.Errorf("get %s succeeded (bytes unknown), want no such object", path)
	case !notFound(r.out):
		t.Errorf("get %s: want \"no such object\", got: %v", path, r)
	}
	d := path[:strings.LastIndex(path, "/")]
	if d == "" {
		d = "/"
	}
	ls := run(time.Minute, "xrdfs", c.addr, "ls", "-l", d)
	if !ls.ok() {
		if !notFound(ls.out) {
			t.Errorf("xrdfs ls -l %s: %v", d, ls)
		}
		return
	}
	ents, err := parseLs(ls.out)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := ents[path]; ok {
		t.Errorf("xrdfs ls -l %s lists %s (size %d), which must be absent", d, path, e.size)
	}
}

// mustList fails the test unless xrdfs ls -l of path's directory lists
// it with size.
func mustList(t testing.TB, c *cluster, path string, size int64) {
	t.Helper()
	d := path[:strings.LastIndex(path, "/")]
	ls := run(time.Minute, "xrdfs", c.addr, "ls", "-l", d)
	if !ls.ok() {
		t.Fatalf("%v", ls)
	}
	ents, err := parseLs(ls.out)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := ents[path]; !ok || e.dir || e.size != size {
		t.Errorf("xrdfs ls -l %s: %s is %+v (listed %v), want an object of %d bytes", d, path, e, ok, size)
	}
}

// put stores body at path with xrdcp, failing the test on error.
func put(t testing.TB, c *cluster, path string, body *content) {
	t.Helper()
	r := run(2*time.Minute, "xrdcp", "--nopbar", "-f", body.file, c.obj(path))
	if !r.ok() {
		t.Fatalf("put %s: %v", path, r)
	}
}

// mustRepair runs ecstore repair with args, failing the test unless it
// succeeds; it returns its output.
func mustRepair(t testing.TB, c *cluster, args ...string) string {
	t.Helper()
	r := c.cli(3*time.Minute, "repair", args...)
	if !r.ok() {
		t.Fatalf("repair %s did not succeed: %v", strings.Join(args, " "), r)
	}
	return r.out
}

// mustBeClean fails the test unless fsck --deep --json reports a clean
// cluster.
func mustBeClean(t testing.TB, c *cluster, args ...string) *fsckReport {
	t.Helper()
	rep, r := fsck(t, c, append([]string{"--deep"}, args...)...)
	if !rep.Clean || r.code != 0 {
		t.Errorf("fsck --deep --json %s is not clean (exit %d):\n  %s", strings.Join(args, " "), r.code, strings.Join(rep.unhealthy(), "\n  "))
	}
	return rep
}

// pick returns n distinct random elements of s.
func pick[T any](rng *rand.Rand, s []T, n int) []T {
	s = slices.Clone(s)
	rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s[:n]
}

// workDir makes a scratch directory for downloads.
func workDir(t testing.TB, c *cluster, name string) string {
	t.Helper()
	d := filepath.Join(c.work, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}
