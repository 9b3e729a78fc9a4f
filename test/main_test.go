//go:build slow

// Package test holds cross-process suites: they build the ecstore binary
// once and drive it as a user would, through pipes, files, signals and
// damaged node directories. Run with: go test -tags slow ./test/...
package test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// bin is the ecstore binary built by TestMain.
var bin string

// genEnv makes the test binary a generator process: "SIZE,SEED" writes
// sparseGen(SEED, SIZE) to stdout and exits.
const genEnv = "ECSTORE_TEST_GENERATE"

func TestMain(m *testing.M) {
	if spec := os.Getenv(genEnv); spec != "" {
		os.Exit(generate(spec))
	}
	dir, err := os.MkdirTemp("", "ecstore-slow-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "ecstore")
	build := exec.Command("go", "build", "-o", bin, "github.com/ecstore/ecstore/cmd/ecstore")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building ecstore:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// generate is the generator process's main.
func generate(spec string) int {
	a, b, _ := strings.Cut(spec, ",")
	size, err1 := strconv.ParseInt(a, 10, 64)
	seed, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil {
		fmt.Fprintf(os.Stderr, "bad %s=%q\n", genEnv, spec)
		return 2
	}
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	if _, err := io.Copy(w, newSparseGen(seed, size)); err != nil {
		return 1 // the reader went away (a killed put)
	}
	if err := w.Flush(); err != nil {
		return 1
	}
	return 0
}

// generator returns a command that writes sparseGen(seed, size) to its
// stdout.
func generator(size int64, seed uint64) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%d", genEnv, size, seed))
	cmd.Stderr = os.Stderr
	return cmd
}

// result of one ecstore run.
type result struct {
	code           int
	stdout, stderr string
}

// ecstore runs the binary with args and stdin, with a timeout.
func ecstore(t *testing.T, stdin io.Reader, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("ecstore %s: %v", strings.Join(args, " "), err)
		}
		code = ee.ExitCode()
	}
	return result{code, out.String(), errb.String()}
}

func mustRun(t *testing.T, stdin io.Reader, args ...string) string {
	t.Helper()
	r := ecstore(t, stdin, args...)
	if r.code != 0 {
		t.Fatalf("ecstore %s: exit %d\nstderr: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// cluster is an embedded cluster in a temporary directory.
type cluster struct {
	t     *testing.T
	dir   string
	flags []string
}

func newCluster(t *testing.T, flags ...string) *cluster {
	dir := filepath.Join(t.TempDir(), "data")
	return &cluster{t: t, dir: dir, flags: append([]string{"--data", dir}, flags...)}
}

// args returns the arguments of subcommand name on this cluster.
func (c *cluster) args(name string, args ...string) []string {
	return append(append([]string{name}, c.flags...), args...)
}

func (c *cluster) run(stdin io.Reader, name string, args ...string) result {
	c.t.Helper()
	return ecstore(c.t, stdin, c.args(name, args...)...)
}

func (c *cluster) must(stdin io.Reader, name string, args ...string) string {
	c.t.Helper()
	return mustRun(c.t, stdin, c.args(name, args...)...)
}

// slot is one line of "ecstore stat"'s placement.
type slot struct {
	node    string
	state   string
	archive string // the archive's file
}

// placement parses "ecstore stat path".
func (c *cluster) placement(path string) []slot {
	c.t.Helper()
	out := c.must(nil, "stat", path)
	_, list, ok := strings.Cut(out, "placement:\n")
	if !ok {
		c.t.Fatalf("stat %s has no placement:\n%s", path, out)
	}
	var slots []slot
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		f := strings.Fields(line) // slot N node ID STATE... DIR
		if len(f) < 6 || f[0] != "slot" || f[2] != "node" {
			c.t.Fatalf("bad placement line %q", line)
		}
		dir := f[len(f)-1]
		slots = append(slots, slot{node: f[3], state: strings.Join(f[4:len(f)-1], " "),
			archive: filepath.Join(dir, filepath.FromSlash(path[1:]))})
	}
	return slots
}
