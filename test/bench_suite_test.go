//go:build slow

package test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// benchSuiteRows lists the row ids of the table bench/run.sh writes: L
// machine limits, X the plain xrootd baseline, N ecstore on ecstore
// nodes, D ecstore on local directories.
var benchSuiteRows = map[string]int{"L": 6, "X": 15, "N": 19, "D": 20}

// TestBenchSuiteQuick is the smoke test of the benchmark suite: it runs
// bench/run.sh --quick (real xrootd, xrdcp, ten ecstore nodes, local
// directories) into a temporary RESULTS file and checks that the table
// has every row with a numeric result and no failed measurement, and
// that the machine is described, with two runs of each repeated row (the
// full suite takes the median of three). It asserts no speed. It needs the
// XRootD tools (scripts/install-deps.sh): without them it is skipped,
// or fails when CI=true.
func TestBenchSuiteQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("the benchmark suite smoke run is skipped with -short")
	}
	for _, tool := range []string{"bash", "xrdcp", "xrdfs", "xrootd", "go", "bindfs"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("required tool missing (CI=true): %s: %v", tool, err)
			}
			t.Skipf("tool missing (install with scripts/install-deps.sh): %s: %v", tool, err)
		}
	}
	script, err := filepath.Abs(filepath.Join("..", "bench", "run.sh"))
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir: its parents are mode 0700, and xrootd runs as an
	// unprivileged user when the test runs as root.
	base, err := os.MkdirTemp("", "ecstore-bench-suite-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(base, "RESULTS.md")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script, "--quick", "--out", out)
	cmd.Env = append(os.Environ(), "BENCH_DIR="+base, "ECSTORE_BIN="+bin, "BENCH_KEEP=0", "BENCH_REPEATS=2")
	// On timeout, SIGTERM lets the script's trap kill what it started.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	start := time.Now()
	output, err := cmd.CombinedOutput()
	t.Logf("bench/run.sh --quick took %v", time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatalf("bench/run.sh --quick: %v\n%s", err, output)
	}
	md, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("no results file: %v\n%s", err, output)
	}
	if !strings.Contains(string(output), "| id ") {
		t.Errorf("bench/run.sh printed no table:\n%s", output)
	}
	for _, want := range []string{"**CPU**", "**RAM**", "**kernel**", "**node directories**", "**Go**", "**ecstore**", "## Limit arithmetic", "## Where the CPU goes"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("%s has no %q", out, want)
		}
	}

	// Every repeated row lists its two runs: the get with 2 nodes killed
	// on ecstore nodes, and the 8-stream gets on local directories.
	for _, key := range []string{"nodes.get_killed2", "local.streams.get", "xrootd.put_fsync"} {
		if !regexp.MustCompile(`median of 2 runs[^\n]* ` + regexp.QuoteMeta(key) + ` [0-9.]+/[0-9.]+[;.]`).Match(md) {
			t.Errorf("%s has no two runs of %s in the note on repeated runs", out, key)
		}
	}

	rows := tableRows(string(md))
	var ids []string
	for prefix, n := range benchSuiteRows {
		for i := 1; i <= n; i++ {
			ids = append(ids, fmt.Sprintf("%s%d", prefix, i))
		}
		if prefix == "N" || prefix == "D" {
			// the healthy gets timed right before the degraded get (row 3)
			ids = append(ids, prefix+"3h")
		}
	}
	for _, id := range ids {
		cells, ok := rows[id]
		switch {
		case !ok:
			t.Errorf("row %s missing", id)
		case len(cells) != 11:
			t.Errorf("row %s has %d cells, want 11: %q", id, len(cells), cells)
		default:
			if _, err := strconv.ParseFloat(cells[3], 64); err != nil {
				t.Errorf("row %s (%s): result %q is not a number", id, cells[1], cells[3])
			}
			if strings.HasPrefix(cells[10], "ERR") {
				t.Errorf("row %s (%s): %s", id, cells[1], cells[10])
			}
		}
	}
	// The degraded gets are compared with the healthy gets timed right
	// before them, not with N2 and D2.
	for _, id := range []string{"N3", "D3"} {
		if cells := rows[id]; len(cells) == 11 && !strings.HasSuffix(cells[6], "× "+id+"h") {
			t.Errorf("row %s is compared with %q, want %sh", id, cells[6], id)
		}
	}
	// The timed transfers carry the machine's CPU per GB and how busy its
	// cores were, with the server's share (and the nodes' on nodes).
	cpuCell := regexp.MustCompile(`^[0-9]+\.[0-9]{2}( \([0-9]+\.[0-9]{2}(, [0-9]+\.[0-9]{2})?\))?$`)
	for id, shares := range map[string]int{"L1": 0, "X2": 1, "X3": 1, "N1": 2, "N2": 2, "N17": 2, "D1": 1, "D14": 1} {
		cells := rows[id]
		if len(cells) != 11 {
			continue
		}
		if !cpuCell.MatchString(cells[7]) || strings.Count(cells[7], ".") != shares+1 {
			t.Errorf("row %s: CPU cell %q, want the machine's s/GB and %d shares", id, cells[7], shares)
		}
		if !regexp.MustCompile(`^[0-9]+%$`).MatchString(cells[8]) {
			t.Errorf("row %s: busy cell %q is not a percentage", id, cells[8])
		}
	}
	if t.Failed() {
		t.Logf("%s:\n%s", out, md)
	}
}

var rowIDRE = regexp.MustCompile(`^[LXND][0-9]+h?$`)

// tableRows returns the cells of the results table's rows by row id.
func tableRows(md string) map[string][]string {
	rows := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(md))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		// the first table holds the results; later ones (the CPU
		// section) name some of its rows again
		if _, seen := rows[cells[0]]; rowIDRE.MatchString(cells[0]) && !seen {
			rows[cells[0]] = cells
		}
	}
	return rows
}
