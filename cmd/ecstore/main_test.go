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

	"github.com/ecstore/ecstore/internal/archive"
	"github.com/ecstore/ecstore/internal/cluster"
	"github.com/ecstore/ecstore/internal/object"
)

// result is what one in-process run of the CLI produced.
type result struct {
	code           int
	stdout, stderr string
}

// ecstoreCtx runs the CLI in-process with args and stdin.
func ecstoreCtx(ctx context.Context, t *testing.T, stdin io.Reader, args ...string) result {
	t.Helper()
	// Standard error is written by log lines of goroutines that may
	// outlive the command (calls left running on a node), so it is read
	// under a lock.
	var out bytes.Buffer
	var errb syncBuffer
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	e := &env{stdin: stdin, stdout: &out, stderr: &errb, isTerminal: func(io.Writer) bool { return false }}
	code := run(ctx, e, args)
	return result{code, out.String(), errb.String()}
}

func ecstore(t *testing.T, stdin io.Reader, args ...string) result {
	t.Helper()
	return ecstoreCtx(context.Background(), t, stdin, args...)
}

// mustRun runs the CLI and fails the test unless it exits 0.
func mustRun(t *testing.T, stdin io.Reader, args ...string) string {
	t.Helper()
	r := ecstore(t, stdin, args...)
	if r.code != 0 {
		t.Fatalf("ecstore %s: exit %d\nstderr: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// testCluster is an embedded cluster in a temporary directory.
type testCluster struct {
	t    *testing.T
	dir  string
	args []string // cluster flags for every command
}

// newTestCluster returns the flags of a fresh embedded cluster (default
// 8+2 geometry, fsync off for speed); it is created by the first put.
func newTestCluster(t *testing.T, extra ...string) *testCluster {
	dir := filepath.Join(t.TempDir(), "data")
	return &testCluster{t: t, dir: dir, args: append([]string{"--data", dir, "--fsync=false"}, extra...)}
}

// cmd returns args for subcommand name with the cluster flags.
func (c *testCluster) cmd(name string, args ...string) []string {
	return append(append([]string{name}, c.args...), args...)
}

// put stores data at path through "ecstore put - path".
func (c *testCluster) put(path string, data []byte) {
	c.t.Helper()
	mustRun(c.t, bytes.NewReader(data), c.cmd("put", "-", path)...)
}

// open opens the cluster directly (not through the CLI).
func (c *testCluster) open() *cluster.Cluster {
	c.t.Helper()
	cl, err := cluster.Open(cluster.Options{DataDir: c.dir})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

// archives returns the archive file of every slot of the object at path.
func (c *testCluster) archives(path string) (files []string, info *object.Info) {
	c.t.Helper()
	cl := c.open()
	info, err := cl.Store().Stat(context.Background(), path)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, id := range info.Placement {
		files = append(files, filepath.Join(c.dir, "nodes", id, filepath.FromSlash(path[1:])))
	}
	return files, info
}

// fileAt adapts an os.File to archive.ReaderAt.
type fileAt struct{ f *os.File }

func (f fileAt) ReadAt(_ context.Context, p []byte, off int64) (int, error) {
	return f.f.ReadAt(p, off)
}

// corruptChunk flips one byte inside the data of block b's chunk in an
// archive file and returns the chunk's stripe index.
func corruptChunk(t *testing.T, file string, b int64, r *rand.Rand) int {
	t.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	idx, err := archive.Parse(context.Background(), fileAt{f}, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	c := idx.Chunks[b]
	off := c.Offset + c.Span() - c.Size + r.Int64N(c.Size)
	var one [1]byte
	if _, err := f.ReadAt(one[:], off); err != nil {
		t.Fatal(err)
	}
	one[0] ^= 0x5a
	if _, err := f.WriteAt(one[:], off); err != nil {
		t.Fatal(err)
	}
	return c.Stripe
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func newRand(t *testing.T) *rand.Rand {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 0))
}

func TestUsage(t *testing.T) {
	r := ecstore(t, nil)
	if r.code != exitUsage || !strings.Contains(r.stderr, "usage: ecstore COMMAND") {
		t.Errorf("no arguments: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		r := ecstore(t, nil, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "commands:") {
			t.Errorf("%v: exit %d, stdout %q", args, r.code, r.stdout)
		}
		for _, c := range commands {
			if !strings.Contains(r.stdout, "  "+c.name+" ") {
				t.Errorf("%v: %s not listed", args, c.name)
			}
		}
	}
	r = ecstore(t, nil, "frobnicate")
	if r.code != exitUsage || !strings.Contains(r.stderr, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: exit %d, stderr %q", r.code, r.stderr)
	}
	r = ecstore(t, nil, "help", "frobnicate")
	if r.code != exitUsage {
		t.Errorf("help of unknown command: exit %d", r.code)
	}
}

// TestHelpOfHelp asks help for its own usage, as every command gives
// its own: "help --help" said `unknown command "--help"`, and "help
// help" printed the list of commands.
func TestHelpOfHelp(t *testing.T) {
	for _, args := range [][]string{{"help", "--help"}, {"help", "-h"}, {"help", "-help"}, {"help", "help"}} {
		r := ecstore(t, nil, args...)
		if r.code != 0 || r.stderr != "" || !strings.HasPrefix(r.stdout, "usage: ecstore help [COMMAND]\n") ||
			!strings.Contains(r.stdout, "Without COMMAND") || strings.Contains(r.stdout, "commands:") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"help", "frob"}, `unknown command "frob"`},
		{[]string{"help", "put", "get"}, "help: takes at most 1 arguments"},
		{[]string{"help", "--frob"}, "flag provided but not defined"},
	} {
		if r := ecstore(t, nil, tt.args...); r.code != exitUsage || !strings.Contains(r.stderr, tt.want) || r.stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tt.args, r.code, r.stdout, r.stderr, tt.want)
		}
	}
}

func TestHelpEveryCommand(t *testing.T) {
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			for _, args := range [][]string{{"help", c.name}, {c.name, "--help"}, {c.name, "-h"}} {
				r := ecstore(t, nil, args...)
				if r.code != 0 || !strings.HasPrefix(r.stdout, "usage: ecstore "+c.name) {
					t.Errorf("%v: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
				}
				// Commands that name a cluster take the cluster flags; cp
				// talks to root:// servers and node serves one directory.
				clusterless := c.name == "version" || c.name == "cp" || c.name == "node" || c.name == "help"
				if !clusterless && !strings.Contains(r.stdout, "--fsync\n") {
					t.Errorf("%v: help lacks the cluster flags:\n%s", args, r.stdout)
				}
			}
		})
	}
	r := ecstore(t, nil, "put", "--help")
	if !strings.Contains(r.stdout, "--fsync=false is for scratch data") || !strings.Contains(r.stdout, "crash may lose or corrupt") {
		t.Errorf("put help does not explain --fsync=false:\n%s", r.stdout)
	}
}

// TestHelpShowsDefaults checks that every flag's help says its default
// (the flag package's own "(default X)" was not printed, so serve's
// --root-addr, --heal-rate or fsck's --debris-age never said theirs),
// that the cluster flags every command takes are listed together, and
// that one-letter flags read as the README writes them (-f, not --f).
func TestHelpShowsDefaults(t *testing.T) {
	tests := []struct {
		cmd  string
		want []string
	}{
		{"serve", []string{
			"--root-addr HOST:PORT\n      root:// listen HOST:PORT (default 127.0.0.1:1094)\n",
			"(empty: off) (default 127.0.0.1:9094)\n",
			"(default 20MB)", "their parts (0: never) (default 24h)\n", "(default 8MiB)", "or off (default auto)\n",
			"--heal\n      rebuild, in the background, objects that reads and writes find degraded (default true)\n",
		}},
		{"node", []string{"listen HOST:PORT (default 127.0.0.1:1094)\n", "scratch data (default true)\n", "(default warn)"}},
		{"fsck", []string{"--debris-age DURATION\n", "not debris (default 1h)\n"}},
		{"repair", []string{"writes in progress (default 1h)\n"}},
		{"put", []string{"during the write (default true)\n"}},
		{"get", []string{"\n  -f, --force\n      replace LOCAL"}},
		{"ls", []string{"\n  -l\n      long listing"}},
		{"cp", []string{"\n  -f, --force\n      replace DST", "--tpc MODE\n"}},
	}
	for _, tt := range tests {
		r := ecstore(t, nil, tt.cmd, "--help")
		for _, w := range tt.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("%s --help lacks %q:\n%s", tt.cmd, w, r.stdout)
			}
		}
	}
	for _, c := range commands {
		if c.name == "help" || c.name == "version" || c.name == "cp" || c.name == "node" || c.name == "bench" {
			continue
		}
		r := ecstore(t, nil, c.name, "--help")
		_, common, ok := strings.Cut(r.stdout, "cluster flags (all commands that use a cluster):")
		if !ok {
			t.Errorf("%s --help has no cluster flags:\n%s", c.name, r.stdout)
			continue
		}
		for _, name := range []string{"--data", "--ec", "--write-quorum", "--small-object-size", "--retired", "--log-level"} {
			if !strings.Contains(common, "\n  "+name+" ") {
				t.Errorf("%s --help does not list %s among the cluster flags:\n%s", c.name, name, r.stdout)
			}
		}
	}
}

func TestUsageErrors(t *testing.T) {
	c := newTestCluster(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad flag", c.cmd("ls", "--frob"), "flag provided but not defined: -frob"},
		{"bad ec", c.cmd("put", "--ec", "8x2", "-", "/x"), "ec"},
		{"too few args", c.cmd("put", "-"), "put: takes 2 arguments, got 1"},
		{"too many args", c.cmd("get", "/a", "b", "c"), "get: takes 2 arguments, got 3"},
		{"relative path", c.cmd("put", "-", "x"), `invalid object path "x"`},
		{"dot dot", c.cmd("stat", "/a/../b"), `invalid object path "/a/../b"`},
		{"trailing slash", c.cmd("rm", "/a/"), `invalid object path "/a/"`},
		{"two cluster names", c.cmd("ls", "--nodes", "/a,/b"), "one of --data, --config and --nodes"},
		{"version args", []string{"version", "x"}, "version: takes 0 arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ecstore(t, nil, tt.args...)
			if r.code != exitUsage || !strings.HasPrefix(r.stderr, "ecstore: ") || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit 2 and %q", r.code, r.stderr, tt.want)
			}
		})
	}
}

func TestNoClusterYet(t *testing.T) {
	c := newTestCluster(t)
	for _, args := range [][]string{c.cmd("ls"), c.cmd("get", "/x", "-"), c.cmd("stat", "/x"), c.cmd("rm", "/x")} {
		r := ecstore(t, nil, args...)
		if r.code != exitError || !strings.Contains(r.stderr, "not created yet") {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	if _, err := os.Stat(c.dir); !os.IsNotExist(err) {
		t.Errorf("a command that only reads created the cluster")
	}
}

func TestVersion(t *testing.T) {
	out := mustRun(t, nil, "version")
	if !strings.HasPrefix(out, "ecstore ") || !strings.Contains(out, "archive format 1") {
		t.Errorf("version printed %q", out)
	}
}
