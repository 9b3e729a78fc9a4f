package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ecstore/ecstore/internal/erasure"
)

func TestStat(t *testing.T) {
	c := newTestCluster(t)
	data := randBytes(newRand(t), 17<<20+1)
	c.put("/d/obj", data)
	out := mustRun(t, nil, c.cmd("stat", "/d/obj")...)
	sums := erasure.NewObjectSums()
	sums.Write(data)
	for _, want := range []string{
		"path:     /d/obj\n",
		"type:     object\n",
		"size:     17825793 (17.0 MiB)\n",
		"geometry: 8+2, 1MiB chunks (8MiB blocks, 3 blocks)\n",
		"adler32:  " + erasure.FormatSum(sums.Adler32()) + "\n",
		"crc32c:   " + erasure.FormatSum(sums.CRC32C()) + "\n",
		"archives: 10 of 10 (healthy)\n",
		"placement:\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stat lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^version: +\d{22}-[0-9a-f]{16}$`).MatchString(out) {
		t.Errorf("stat has no version:\n%s", out)
	}
	if n := len(regexp.MustCompile(`(?m)^  slot \d +node \d\d +ok +/`).FindAllString(out, -1)); n != 10 {
		t.Errorf("%d slots ok, want 10:\n%s", n, out)
	}

	// One archive lost, one node directory gone.
	files, info := c.archives("/d/obj")
	os.Remove(files[1])
	if err := os.RemoveAll(filepath.Join(c.dir, "nodes", info.Placement[6])); err != nil {
		t.Fatal(err)
	}
	r := ecstore(t, nil, c.cmd("stat", "/d/obj")...)
	if r.code != 0 {
		t.Fatalf("stat: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{
		"archives: 8 of 10 (degraded: 2 missing, 0 more can be lost)",
		"  slot 1  node " + info.Placement[1] + "  missing",
		"  slot 6  node " + info.Placement[6] + "  node down",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stat lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "node is down") {
		t.Errorf("no warning for the missing node directory: %q", r.stderr)
	}

	// A third archive lost: stat shows what is left and fails.
	os.Remove(files[2])
	r = ecstore(t, nil, c.cmd("stat", "/d/obj")...)
	if r.code != exitError || !strings.Contains(r.stderr, "unrecoverable") {
		t.Errorf("stat of an unrecoverable object: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{"archives: 7 of 10 (unrecoverable: fewer than 8)", "  slot 2  node " + info.Placement[2] + "  missing"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stat of an unrecoverable object lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestStatDirAndMissing(t *testing.T) {
	c := newTestCluster(t)
	mustRun(t, nil, c.cmd("mkdir", "/a/b")...)
	out := mustRun(t, nil, c.cmd("stat", "/a")...)
	if !strings.Contains(out, "type:  directory") {
		t.Errorf("stat of a directory:\n%s", out)
	}
	r := ecstore(t, nil, c.cmd("stat", "/a/c")...)
	if r.code != exitError || r.stderr != "ecstore: /a/c: no such object\n" {
		t.Errorf("stat /a/c: exit %d, stderr %q", r.code, r.stderr)
	}
}
