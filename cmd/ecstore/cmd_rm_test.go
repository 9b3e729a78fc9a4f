package main

import (
	"strings"
	"testing"
)

func TestRmMvMkdirRmdir(t *testing.T) {
	c := newTestCluster(t)
	c.put("/a/x", []byte("x"))
	c.put("/a/y", []byte("y"))

	mustRun(t, nil, c.cmd("mv", "/a/x", "/b/c/x2")...)
	if got := mustRun(t, nil, c.cmd("get", "/b/c/x2", "-")...); got != "x" {
		t.Errorf("after mv: %q", got)
	}
	if got := mustRun(t, nil, c.cmd("ls", "/a")...); got != "y\n" {
		t.Errorf("ls /a after mv: %q", got)
	}
	r := ecstore(t, nil, c.cmd("mv", "/a/nope", "/z")...)
	if r.code != exitError || r.stderr != "ecstore: /a/nope: no such object\n" {
		t.Errorf("mv of a missing object: exit %d, stderr %q", r.code, r.stderr)
	}
	mustRun(t, nil, c.cmd("mv", "/b", "/moved")...) // a directory
	if got := mustRun(t, nil, c.cmd("ls", "/moved/c")...); got != "x2\n" {
		t.Errorf("ls after moving a directory: %q", got)
	}

	r = ecstore(t, nil, c.cmd("rm", "/a/y", "/a/nope", "/moved")...)
	if r.code != exitError || !strings.Contains(r.stderr, "ecstore: /a/nope: no such object\n") ||
		!strings.Contains(r.stderr, "ecstore: /moved: is a directory (2 of 3 paths failed)\n") {
		t.Errorf("rm: exit %d, stderr %q", r.code, r.stderr)
	}
	if got := mustRun(t, nil, c.cmd("ls", "/a")...); got != "" {
		t.Errorf("rm left %q", got)
	}

	mustRun(t, nil, c.cmd("mkdir", "/p/q/r", "/p/s")...)
	if got := mustRun(t, nil, c.cmd("ls", "/p")...); got != "q/\ns/\n" {
		t.Errorf("ls /p after mkdir: %q", got)
	}
	mustRun(t, nil, c.cmd("mkdir", "/p/q")...) // exists: not an error
	r = ecstore(t, nil, c.cmd("rmdir", "/p/q")...)
	if r.code != exitError || r.stderr != "ecstore: /p/q: directory not empty\n" {
		t.Errorf("rmdir of a non-empty directory: exit %d, stderr %q", r.code, r.stderr)
	}
	mustRun(t, nil, c.cmd("rmdir", "/p/q/r", "/p/q", "/p/s", "/p")...)
	if got := mustRun(t, nil, c.cmd("ls")...); got != "a/\nmoved/\n" {
		t.Errorf("ls after rmdir: %q", got)
	}
	r = ecstore(t, nil, c.cmd("mkdir", "/moved/c/x2")...)
	if r.code != exitError || !strings.Contains(r.stderr, "/moved/c/x2: already exists") {
		t.Errorf("mkdir over an object: exit %d, stderr %q", r.code, r.stderr)
	}
}

// Regression (found by review): rm, mkdir and rmdir of root:// URLs
// stopped at the first path that failed, so `ecstore rm URL/a URL/nope
// URL/c` left /c in place (xrdfs rm goes on; rm's help says every path
// is tried). Every URL is tried now, and the command fails with a count,
// as for object paths.
func TestRemoteRmTriesEveryPath(t *testing.T) {
	url := gatewayURL(t)
	mustRun(t, strings.NewReader("a"), "cp", "-", url+"/r/a")
	mustRun(t, strings.NewReader("c"), "cp", "-", url+"/r/c")
	r := ecstore(t, nil, "rm", url+"/r/a", url+"/r/nope", url+"/r/c", url+"/r/nope2")
	if r.code != exitError || !strings.Contains(r.stderr, "/r/nope:") || !strings.Contains(r.stderr, "(2 of 4 paths failed)") {
		t.Errorf("rm with missing paths: exit %d, stderr %q", r.code, r.stderr)
	}
	if got := mustRun(t, nil, "ls", url+"/r"); got != "" {
		t.Errorf("rm left %q", got)
	}
	r = ecstore(t, nil, "mkdir", url+"/m/x", url+"/r", url+"/m/y")
	if r.code != 0 {
		t.Errorf("mkdir: exit %d, stderr %q", r.code, r.stderr)
	}
	r = ecstore(t, nil, "rmdir", url+"/m/x", url+"/m/nope", url+"/m/y")
	if r.code != exitError || !strings.Contains(r.stderr, "/m/nope:") {
		t.Errorf("rmdir with a missing path: exit %d, stderr %q", r.code, r.stderr)
	}
	if got := mustRun(t, nil, "ls", url+"/m"); got != "" {
		t.Errorf("rmdir left %q", got)
	}
}
