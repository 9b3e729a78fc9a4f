package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

func TestLs(t *testing.T) {
	c := newTestCluster(t)
	c.put("/b/two", []byte("22"))
	c.put("/a", []byte("1"))
	c.put("/b/one", make([]byte, 9<<20))
	mustRun(t, nil, c.cmd("mkdir", "/empty")...)

	if got := mustRun(t, nil, c.cmd("ls")...); got != "a\nb/\nempty/\n" {
		t.Errorf("ls: %q", got)
	}
	if got := mustRun(t, nil, c.cmd("ls", "/b")...); got != "one\ntwo\n" {
		t.Errorf("ls /b: %q", got)
	}
	if got := mustRun(t, nil, c.cmd("ls", "/b/two")...); got != "two\n" {
		t.Errorf("ls of an object: %q", got)
	}
	if got := mustRun(t, nil, c.cmd("ls", "/empty")...); got != "" {
		t.Errorf("ls of an empty directory: %q", got)
	}

	long := mustRun(t, nil, c.cmd("ls", "/b", "-l")...) // flags after arguments work
	lines := strings.Split(strings.TrimSuffix(long, "\n"), "\n")
	re := regexp.MustCompile(`^ *- +(\d+) +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +8\+2 +10/10 (\S+)$`)
	want := [][2]string{{"9437184", "one"}, {"2", "two"}}
	if len(lines) != 2 {
		t.Fatalf("ls -l /b:\n%s", long)
	}
	for i, l := range lines {
		m := re.FindStringSubmatch(l)
		if m == nil || m[1] != want[i][0] || m[2] != want[i][1] {
			t.Errorf("ls -l line %q, want size %s name %s", l, want[i][0], want[i][1])
		}
	}
	root := mustRun(t, nil, c.cmd("ls", "-l", "/")...)
	if !regexp.MustCompile(`(?m)^ *d +- +\d{4}-.* b/$`).MatchString(root) {
		t.Errorf("ls -l / shows no directory line for b:\n%s", root)
	}
}

func TestLsDegradedAndMissing(t *testing.T) {
	c := newTestCluster(t)
	c.put("/x", []byte("hello"))
	files, _ := c.archives("/x")
	os.Remove(files[0])
	long := mustRun(t, nil, c.cmd("ls", "-l")...)
	if !strings.Contains(long, " 9/10 x") {
		t.Errorf("ls -l does not show the missing archive:\n%s", long)
	}
	for _, f := range files[1:3] {
		os.Remove(f)
	}
	long = mustRun(t, nil, c.cmd("ls", "-l")...)
	// The engine's listing gives no geometry for an unreadable object.
	if !regexp.MustCompile(`- +\? +- +\? +\? x`).MatchString(long) {
		t.Errorf("ls -l does not show an unreadable object:\n%s", long)
	}
	r := ecstore(t, nil, c.cmd("ls", "/nope")...)
	if r.code != exitError || r.stderr != "ecstore: /nope: no such object or directory\n" {
		t.Errorf("ls /nope: exit %d, stderr %q", r.code, r.stderr)
	}
}

// Regression (found by review): ls, mkdir and rmdir of a directory
// named with a trailing slash (`ecstore ls /atlas/`, as typed after
// shell habits and as xrdfs and the commands' root:// URLs take it) were
// usage errors (exit 2).
func TestDirCommandsTakeATrailingSlash(t *testing.T) {
	c := newTestCluster(t)
	c.put("/atlas/run1", []byte("x"))
	if got := mustRun(t, nil, c.cmd("ls", "/atlas/")...); got != "run1\n" {
		t.Errorf("ls /atlas/: %q", got)
	}
	mustRun(t, nil, c.cmd("mkdir", "/atlas/new/", "/cms/")...)
	if got := mustRun(t, nil, c.cmd("ls", "/")...); got != "atlas/\ncms/\n" {
		t.Errorf("ls / after mkdir /cms/: %q", got)
	}
	mustRun(t, nil, c.cmd("rmdir", "/atlas/new/", "/cms/")...)
	if got := mustRun(t, nil, c.cmd("ls", "/atlas/")...); got != "run1\n" {
		t.Errorf("ls /atlas/ after rmdir: %q", got)
	}
	if r := ecstore(t, nil, c.cmd("ls", "/atlas//")...); r.code != exitUsage {
		t.Errorf("ls /atlas//: exit %d", r.code)
	}
}
