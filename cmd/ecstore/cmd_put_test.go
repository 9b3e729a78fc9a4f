package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPutGetRoundTrip(t *testing.T) {
	c := newTestCluster(t)
	r := newRand(t)
	const mib = 1 << 20
	for _, size := range []int{0, 1, mib - 1, mib, 8*mib - 1, 8 * mib, 8*mib + 1, 17*mib + 3} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			data := randBytes(r, size)
			path := fmt.Sprintf("/sizes/%d", size)
			// From a file, back to a file.
			local := filepath.Join(t.TempDir(), "in")
			if err := os.WriteFile(local, data, 0o644); err != nil {
				t.Fatal(err)
			}
			mustRun(t, nil, c.cmd("put", local, path)...)
			out := filepath.Join(t.TempDir(), "out")
			mustRun(t, nil, c.cmd("get", path, out)...)
			got, err := os.ReadFile(out)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("get to file: %v, %d bytes differ from the %d put", err, len(got), len(data))
			}
			// From stdin, back to stdout.
			c.put(path+".stdin", data)
			if got := mustRun(t, nil, c.cmd("get", path+".stdin", "-")...); got != string(data) {
				t.Fatalf("get to stdout: %d bytes differ from the %d put", len(got), len(data))
			}
		})
	}
}

func TestPutDefaultFsync(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	mustRun(t, strings.NewReader("durable"), "put", "--data", dir, "-", "/d")
	conf, err := os.ReadFile(filepath.Join(dir, "ecstore.conf"))
	if err != nil || !strings.Contains(string(conf), "fsync = true") {
		t.Errorf("new cluster's config: %v\n%s", err, conf)
	}
	if got := mustRun(t, nil, "get", "--data", dir, "/d", "-"); got != "durable" {
		t.Errorf("got %q", got)
	}
}

func TestPutIntoDirectory(t *testing.T) {
	c := newTestCluster(t)
	local := filepath.Join(t.TempDir(), "run1.root")
	if err := os.WriteFile(local, []byte("events"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, nil, c.cmd("put", local, "/atlas/")...)
	if got := mustRun(t, nil, c.cmd("get", "/atlas/run1.root", "-")...); got != "events" {
		t.Errorf("got %q", got)
	}
}

// Regression: put replaced an existing object without a word, where cp
// to root:// (and xrdcp) refuse without -f/--force. put now refuses
// before it sends any data, leaving the object as it was; -f and
// --force replace it.
func TestPutRefusesToReplace(t *testing.T) {
	c := newTestCluster(t)
	c.put("/x", []byte("first"))
	local := filepath.Join(t.TempDir(), "second")
	os.WriteFile(local, []byte("second"), 0o644)
	for _, src := range []string{"-", local} {
		r := ecstore(t, strings.NewReader("second"), c.cmd("put", src, "/x")...)
		if r.code != exitError || r.stderr != "ecstore: put /x: /x exists (use -f to replace it)\n" {
			t.Errorf("put %s onto /x: exit %d, stderr %q", src, r.code, r.stderr)
		}
	}
	if got := mustRun(t, nil, c.cmd("get", "/x", "-")...); got != "first" {
		t.Errorf("the refused put replaced /x with %q", got)
	}
	mustRun(t, strings.NewReader("second, longer"), c.cmd("put", "-f", "-", "/x")...)
	if got := mustRun(t, nil, c.cmd("get", "/x", "-")...); got != "second, longer" {
		t.Errorf("put -f: got %q", got)
	}
	mustRun(t, nil, c.cmd("put", "--force", local, "/x")...)
	if got := mustRun(t, nil, c.cmd("get", "/x", "-")...); got != "second" {
		t.Errorf("put --force: got %q", got)
	}
}

func TestPutErrors(t *testing.T) {
	c := newTestCluster(t)
	c.put("/dir/obj", []byte("x"))
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"missing local file", c.cmd("put", filepath.Join(t.TempDir(), "nope"), "/y"), "no such file or directory"},
		{"local directory", c.cmd("put", t.TempDir(), "/y"), "is a directory"},
		{"onto a directory", c.cmd("put", "-", "/dir"), "/dir: is a directory"},
		{"root", c.cmd("put", "-", "/"), "is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ecstore(t, nil, tt.args...)
			if r.code != exitError || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit 1 and %q", r.code, r.stderr, tt.want)
			}
		})
	}
}

// failingReader returns n bytes, then err.
type failingReader struct {
	n   int
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, f.err
	}
	k := min(len(p), f.n)
	clear(p[:k])
	f.n -= k
	return k, nil
}

// assertNothingVisible checks that path is not listed, cannot be read, and
// that no node holds a temporary file.
func assertNothingVisible(t *testing.T, c *testCluster, dir, path string) {
	t.Helper()
	if r := ecstore(t, nil, c.cmd("ls", dir)...); strings.Contains(r.stdout, filepath.Base(path)) {
		t.Errorf("ls %s shows %s:\n%s", dir, path, r.stdout)
	}
	r := ecstore(t, nil, c.cmd("get", path, "-")...)
	if r.code != exitError || !strings.Contains(r.stderr, path+": no such object") {
		t.Errorf("get %s: exit %d, stderr %q", path, r.code, r.stderr)
	}
	filepath.Walk(filepath.Join(c.dir, "nodes"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.Contains(fi.Name(), ".ecstore-tmp.") {
			t.Errorf("temporary file left: %s", p)
		}
		return nil
	})
}

func TestPutSourceErrorStoresNothing(t *testing.T) {
	c := newTestCluster(t)
	c.put("/keep", []byte("k")) // creates the cluster
	src := &failingReader{n: 20 << 20, err: errors.New("disk on fire")}
	r := ecstore(t, src, c.cmd("put", "-", "/broken")...)
	if r.code != exitError || !strings.Contains(r.stderr, "disk on fire") || !strings.Contains(r.stderr, "nothing was stored") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	assertNothingVisible(t, c, "/", "/broken")
}

// blockingReader returns n bytes, then blocks until released, like an idle
// pipe or a terminal.
type blockingReader struct {
	n       int
	reached chan struct{}
	release chan struct{}
}

func (b *blockingReader) Read(p []byte) (int, error) {
	if b.n == 0 {
		close(b.reached)
		<-b.release
		return 0, io.EOF
	}
	k := min(len(p), b.n)
	clear(p[:k])
	b.n -= k
	return k, nil
}

func TestPutInterruptedStoresNothing(t *testing.T) {
	c := newTestCluster(t)
	c.put("/keep", []byte("k"))
	ctx, cancel := context.WithCancel(context.Background())
	src := &blockingReader{n: 20 << 20, reached: make(chan struct{}), release: make(chan struct{})}
	defer close(src.release)
	go func() {
		<-src.reached // the put is blocked reading its input, as on SIGINT at a terminal
		cancel()
	}()
	r := ecstoreCtx(ctx, t, src, c.cmd("put", "-", "/interrupted")...)
	if r.code != 130 || !strings.Contains(r.stderr, "interrupted; nothing was stored") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	assertNothingVisible(t, c, "/", "/interrupted")
}

func TestPutProgress(t *testing.T) {
	c := newTestCluster(t)
	var out, errb bytes.Buffer
	e := &env{stdin: bytes.NewReader(make([]byte, 9<<20)), stdout: &out, stderr: &errb,
		isTerminal: func(io.Writer) bool { return true }}
	if code := run(context.Background(), e, c.cmd("put", "-", "/big")); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if s := errb.String(); !strings.Contains(s, "9.0 MiB") || !strings.Contains(s, "MB/s") || !strings.HasSuffix(s, "\n") {
		t.Errorf("no progress for a stream of unknown size on a terminal: %q", s)
	}
	// Small transfers and non-terminals stay quiet.
	r := ecstore(t, bytes.NewReader(make([]byte, 9<<20)), c.cmd("put", "-", "/big2")...)
	if r.stderr != "" {
		t.Errorf("progress on a non-terminal: %q", r.stderr)
	}
	e.stdin, e.stderr = bytes.NewReader(make([]byte, 1<<20)), &bytes.Buffer{}
	local := filepath.Join(t.TempDir(), "small")
	os.WriteFile(local, make([]byte, 1<<20), 0o644)
	if code := run(context.Background(), e, c.cmd("put", local, "/small")); code != 0 || e.stderr.(*bytes.Buffer).Len() != 0 {
		t.Errorf("progress for a 1 MiB file: %q", e.stderr.(*bytes.Buffer).String())
	}
}

// A put that stores an object degraded says so, tries to rebuild what is
// missing, and still succeeds: the object is stored and readable.
func TestPutWithNodesDownSaysItIsDegraded(t *testing.T) {
	c := newTestCluster(t)
	c.put("/first", []byte("creates the cluster"))
	// Three of the 12 nodes gone: one more than the spares.
	for _, n := range []string{"03", "04", "05"} {
		if err := os.RemoveAll(filepath.Join(c.dir, "nodes", n)); err != nil {
			t.Fatal(err)
		}
	}
	data := randBytes(newRand(t), 3<<20)
	for _, tc := range []struct {
		flag, want string
	}{
		{"--heal=true", "rebuilding them failed"}, // no node is left to hold the slot
		{"--heal=false", `"ecstore repair" rebuilds them`},
	} {
		path := "/degraded" + strings.TrimPrefix(tc.flag, "--heal=")
		r := ecstore(t, bytes.NewReader(data), c.cmd("put", tc.flag, "-", path)...)
		if r.code != 0 || !strings.Contains(r.stderr, "ecstore: put "+path+": stored degraded (slots [") || !strings.Contains(r.stderr, tc.want) {
			t.Fatalf("put %s with 3 of 12 nodes gone: exit %d, stderr:\n%s", tc.flag, r.code, r.stderr)
		}
		if got := mustRun(t, nil, c.cmd("get", path, "-")...); got != string(data) {
			t.Fatalf("get of the degraded object: %d bytes differ from the %d put", len(got), len(data))
		}
	}
	small := filepath.Join(t.TempDir(), "small") // a file: its size is announced
	if err := os.WriteFile(small, data[:1000], 0o644); err != nil {
		t.Fatal(err)
	}
	if r := ecstore(t, nil, c.cmd("put", small, "/small")...); r.code != 0 || strings.Contains(r.stderr, "degraded") {
		t.Fatalf("put of a small object whose 3 replicas fit on the nodes left: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}
