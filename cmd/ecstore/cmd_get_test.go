package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGetIntoDirectoryAndMode(t *testing.T) {
	c := newTestCluster(t)
	c.put("/a/run1.root", []byte("events"))
	dir := t.TempDir()
	mustRun(t, nil, c.cmd("get", "/a/run1.root", dir)...)
	fi, err := os.Stat(filepath.Join(dir, "run1.root"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o666&^umask() {
		t.Errorf("mode %v, want 0666 minus umask %v", fi.Mode().Perm(), umask())
	}
	// Replacing a file keeps its mode.
	local := filepath.Join(dir, "exec")
	os.WriteFile(local, []byte("old"), 0o700)
	mustRun(t, nil, c.cmd("get", "-f", "/a/run1.root", local)...)
	if fi, _ := os.Stat(local); fi.Mode().Perm() != 0o700 {
		t.Errorf("mode %v after replacing a 0700 file", fi.Mode().Perm())
	}
}

func TestGetMissing(t *testing.T) {
	c := newTestCluster(t)
	c.put("/dir/x", []byte("x"))
	dir := t.TempDir()
	local := filepath.Join(dir, "out")
	for _, p := range []string{"/nope", "/dir/nope", "/nope/deeper", "/dir/x/under"} {
		r := ecstore(t, nil, c.cmd("get", p, local)...)
		if r.code != exitError || r.stderr != "ecstore: "+p+": no such object\n" {
			t.Errorf("get %s: exit %d, stderr %q", p, r.code, r.stderr)
		}
	}
	r := ecstore(t, nil, c.cmd("get", "/dir", local)...)
	if r.code != exitError || !strings.Contains(r.stderr, "/dir: is a directory") {
		t.Errorf("get of a directory: exit %d, stderr %q", r.code, r.stderr)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("failed gets left %v", ents)
	}
}

func TestGetLoseTwoArchives(t *testing.T) {
	c := newTestCluster(t)
	data := randBytes(newRand(t), 20<<20+7)
	c.put("/obj", data)
	files, _ := c.archives("/obj")
	for _, f := range files[3:5] {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	r := ecstore(t, nil, c.cmd("get", "/obj", "-")...)
	if r.code != 0 || r.stdout != string(data) {
		t.Fatalf("degraded get: exit %d, %d bytes, stderr %q", r.code, len(r.stdout), r.stderr)
	}
	if err := os.Remove(files[7]); err != nil {
		t.Fatal(err)
	}
	r = ecstore(t, nil, c.cmd("get", "/obj", "-")...)
	if r.code != exitError || !strings.Contains(r.stderr, "unrecoverable") || r.stdout != "" {
		t.Errorf("get with 3 archives lost: exit %d, %d bytes out, stderr %q", r.code, len(r.stdout), r.stderr)
	}
}

func TestGetCorruptChunks(t *testing.T) {
	c := newTestCluster(t)
	rnd := newRand(t)
	data := randBytes(rnd, 24<<20+5)
	c.put("/obj", data)
	files, _ := c.archives("/obj")
	// Up to M=2 corrupt chunks per block, on different archives.
	for b := int64(0); b < 4; b++ {
		corruptChunk(t, files[int(b)%10], b, rnd)
		corruptChunk(t, files[int(b+5)%10], b, rnd)
	}
	r := ecstore(t, nil, c.cmd("get", "/obj", "-")...)
	if r.code != 0 || r.stdout != string(data) {
		t.Fatalf("get with corrupt chunks: exit %d, %d bytes, stderr %q", r.code, len(r.stdout), r.stderr)
	}
}

// A get that fails midway (a later block is unrecoverable) leaves neither
// a partial file nor a temporary one, and keeps the file it would have
// replaced.
func TestGetFailureLeavesNoFile(t *testing.T) {
	c := newTestCluster(t)
	rnd := newRand(t)
	data := randBytes(rnd, 3*8<<20)
	c.put("/obj", data)
	files, _ := c.archives("/obj")
	// Block 2 loses three chunks. Slot s holds stripe (s-2) mod 10 of
	// block 2, so slots 2..4 hold data stripes, which a read needs.
	for _, f := range files[2:5] {
		if s := corruptChunk(t, f, 2, rnd); s >= 8 {
			t.Fatalf("slot holds parity stripe %d of block 2", s)
		}
	}
	dir := t.TempDir()
	local := filepath.Join(dir, "out")
	os.WriteFile(local, []byte("previous"), 0o644)
	r := ecstore(t, nil, c.cmd("get", "-f", "/obj", local)...)
	if r.code != exitError || !strings.Contains(r.stderr, "unrecoverable: 7 of 8 chunks of block 2 available") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	if got, _ := os.ReadFile(local); !bytes.Equal(got, []byte("previous")) {
		t.Errorf("the local file was replaced by %d bytes", len(got))
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("failed get left %v", ents)
	}
}

func TestGetProgress(t *testing.T) {
	c := newTestCluster(t)
	c.put("/big", make([]byte, 8<<20))
	c.put("/small", make([]byte, 8<<20-1))
	var stdout, stderr bytes.Buffer
	e := &env{stdin: nil, stdout: &stdout, stderr: &stderr, isTerminal: func(w io.Writer) bool { return w == &stderr }}
	dir := t.TempDir()
	if code := run(context.Background(), e, c.cmd("get", "/big", dir)); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if s := stderr.String(); !strings.Contains(s, "8.0 MiB / 8.0 MiB  100% [====================]") || !strings.HasSuffix(s, "\n") {
		t.Errorf("progress of an 8 MiB get: %q", s)
	}
	stderr.Reset()
	if code := run(context.Background(), e, c.cmd("get", "/small", dir)); code != 0 || stderr.Len() != 0 {
		t.Errorf("progress for a get under 8 MiB: %q", stderr.String())
	}
	// Not over the object's bytes when they go to the terminal.
	e.isTerminal = func(io.Writer) bool { return true }
	if code := run(context.Background(), e, c.cmd("get", "/big", "-")); code != 0 || stderr.Len() != 0 {
		t.Errorf("progress while writing to a terminal: %q", stderr.String())
	}
}

// Regression: get replaced an existing local file without -f, where cp
// (and xrdcp) refuse without -f/--force. It refuses before reading the
// object, leaving the file and no temporary one; -f replaces it.
func TestGetRefusesToReplaceAFile(t *testing.T) {
	c := newTestCluster(t)
	c.put("/a/run1.root", []byte("events"))
	dir := t.TempDir()
	local := filepath.Join(dir, "run1.root")
	os.WriteFile(local, []byte("mine"), 0o644)
	for _, dst := range []string{local, dir} {
		r := ecstore(t, nil, c.cmd("get", "/a/run1.root", dst)...)
		if r.code != exitError || r.stderr != "ecstore: get /a/run1.root: "+local+" exists (use -f to replace it)\n" {
			t.Errorf("get into %s: exit %d, stderr %q", dst, r.code, r.stderr)
		}
	}
	if got, _ := os.ReadFile(local); string(got) != "mine" {
		t.Errorf("the local file was replaced by %q", got)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("refused gets left %v", ents)
	}
	mustRun(t, nil, c.cmd("get", "-f", "/a/run1.root", local)...)
	if got, _ := os.ReadFile(local); string(got) != "events" {
		t.Errorf("get -f: %q", got)
	}
}

// A file that appears at the destination while get or cp reads is not
// replaced either: the download is put in place only where nothing is.
func TestPlaceFileDoesNotReplace(t *testing.T) {
	dir := t.TempDir()
	tmp, local := filepath.Join(dir, ".tmp"), filepath.Join(dir, "f")
	os.WriteFile(tmp, []byte("new"), 0o644)
	os.WriteFile(local, []byte("theirs"), 0o644)
	if err := placeFile(tmp, local, false); err == nil || !strings.Contains(err.Error(), local+" exists (use -f to replace it)") {
		t.Errorf("placeFile onto a file: %v", err)
	}
	if got, _ := os.ReadFile(local); string(got) != "theirs" {
		t.Errorf("replaced by %q", got)
	}
	if err := placeFile(tmp, local, true); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(local); string(got) != "new" {
		t.Errorf("forced: %q", got)
	}
	os.WriteFile(tmp, []byte("newer"), 0o644)
	os.Remove(local)
	if err := placeFile(tmp, local, false); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(local); string(got) != "newer" {
		t.Errorf("placed: %q", got)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("the temporary file is left: %v", err)
	}
}
