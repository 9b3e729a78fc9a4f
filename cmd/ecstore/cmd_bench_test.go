package main

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ecstore/ecstore/internal/dataserver"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// benchDataServerURL serves a plain data server over a temporary
// directory and returns its root:// prefix ("root://127.0.0.1:PORT/").
func benchDataServerURL(t *testing.T) string {
	t.Helper()
	fs, err := dataserver.New(t.TempDir(), dataserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return serveRoot(t, fs, fs.Close)
}

// serveRoot serves h over root:// until the test ends, then calls
// closeFS, and returns the server's root:// prefix
// ("root://127.0.0.1:PORT/").
func serveRoot(t *testing.T, h xrootd.FileSystem, closeFS func() error) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&xrootd.Server{Handler: h}).Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done; closeFS() })
	return "root://" + ln.Addr().String() + "/"
}

// benchJSON is the part of "bench --json" the tests read.
type benchJSON struct {
	Runs []struct {
		Mode        string `json:"mode"`
		Concurrency int    `json:"concurrency"`
		Size        int64  `json:"size"`
		Dir         string `json:"dir"`
		ElapsedNS   int64  `json:"elapsed_ns"`
		Ops         []struct {
			Op        string  `json:"op"`
			Ops       int64   `json:"ops"`
			Errors    int64   `json:"errors"`
			Bytes     int64   `json:"bytes"`
			OpsPerSec float64 `json:"ops_per_sec"`
			MBPerSec  float64 `json:"mb_per_sec"`
			P50       int64   `json:"p50_ns"`
			P99       int64   `json:"p99_ns"`
			Max       int64   `json:"max_ns"`
		} `json:"ops"`
	} `json:"runs"`
}

func TestBench(t *testing.T) {
	servers := []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"gateway", gatewayURL},
		{"dataserver", benchDataServerURL},
	}
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			url := srv.url(t)
			for _, tt := range []struct {
				mode  string
				extra []string
				ops   map[string]int64 // per run
			}{
				{"put", []string{"--size", "64KiB", "--ops", "12"}, map[string]int64{"put": 12}},
				{"get", []string{"--size", "64KiB", "--ops", "12", "--objects", "3", "--verify"}, map[string]int64{"get": 12}},
				{"mixed", []string{"--size", "32KiB", "--ops", "16", "--objects", "3", "--verify"}, nil},
				{"small", []string{"--ops", "16", "--verify"}, map[string]int64{"put": 4, "stat": 4, "get": 4, "rm": 4}},
			} {
				t.Run(tt.mode, func(t *testing.T) {
					prefix := url + "/bench/" + tt.mode
					args := append([]string{"bench", "--mode", tt.mode, "--concurrency", "1,3", "--json"}, tt.extra...)
					out := mustRun(t, nil, append(args, prefix)...)
					var got benchJSON
					if err := json.Unmarshal([]byte(out), &got); err != nil {
						t.Fatalf("JSON: %v\n%s", err, out)
					}
					if len(got.Runs) != 2 || got.Runs[0].Concurrency != 1 || got.Runs[1].Concurrency != 3 {
						t.Fatalf("runs: %s", out)
					}
					for _, run := range got.Runs {
						var total int64
						for _, o := range run.Ops {
							total += o.Ops
							if o.Errors != 0 || o.Ops > 0 && (o.P50 <= 0 || o.OpsPerSec <= 0 || o.Max < o.P99) {
								t.Errorf("%s: %+v", o.Op, o)
							}
							if want, ok := tt.ops[o.Op]; ok && o.Ops != want {
								t.Errorf("%s: %d ops, want %d", o.Op, o.Ops, want)
							}
						}
						if run.Mode != tt.mode || run.ElapsedNS <= 0 || tt.mode == "mixed" && (total != 16 || len(run.Ops) != 2) {
							t.Errorf("run %+v", run)
						}
					}
					// The run made the prefix, so it removes it too.
					if r := ecstore(t, nil, "ls", prefix); r.code == 0 || !strings.Contains(r.stderr, "no such file") && !strings.Contains(r.stderr, "does not exist") {
						t.Errorf("left behind in %s: exit %d\n%s%s", prefix, r.code, r.stdout, r.stderr)
					}
				})
			}
		})
	}
}

func TestBenchTable(t *testing.T) {
	url := benchDataServerURL(t)
	out := mustRun(t, nil, "bench", "--mode", "small", "--size", "1000", "--ops", "8", "--concurrency", "2,1", url+"/t")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2+2*4 || !strings.HasPrefix(lines[0], "ecstore bench small: ") {
		t.Fatalf("table:\n%s", out)
	}
	for _, col := range []string{"mode", "conc", "op", "ops/s", "MB/s", "p50", "p99", "max", "errors"} {
		if !strings.Contains(lines[1], col) {
			t.Errorf("header lacks %q: %s", col, lines[1])
		}
	}
	for i, op := range []string{"put", "stat", "get", "rm", "put", "stat", "get", "rm"} {
		f := strings.Fields(lines[2+i])
		if len(f) != 10 || f[0] != "small" || f[2] != op || f[3] != "2" || f[9] != "0" {
			t.Errorf("row %d: %q", i, lines[2+i])
		}
	}
	// --cleanup=false keeps the run directory.
	mustRun(t, nil, "bench", "--ops", "2", "--size", "10", "--cleanup=false", url+"/keep")
	if ls := mustRun(t, nil, "ls", url+"/keep"); !strings.HasPrefix(ls, "ecstore-bench-") {
		t.Errorf("kept directory: %q", ls)
	}
}

func TestBenchErrors(t *testing.T) {
	url := benchDataServerURL(t)
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no url", []string{"bench", "/local"}, "not a root:// URL"},
		{"bad mode", []string{"bench", "--mode", "frob", url}, `--mode "frob"`},
		{"bad concurrency", []string{"bench", "--concurrency", "1,x", url}, "--concurrency"},
		{"zero concurrency", []string{"bench", "--concurrency", "0", url}, "--concurrency"},
		{"bad size", []string{"bench", "--size", "lots", url}, "size"},
		{"bad fraction", []string{"bench", "--mode", "mixed", "--read-fraction", "2", url}, "--read-fraction"},
		{"two urls", []string{"bench", url, url}, "takes 1 arguments"},
		// Flags the mode does not use were ignored without a word.
		{"objects in put", []string{"bench", "--objects", "5", url}, "--objects is not used in put mode"},
		{"objects in small", []string{"bench", "--mode", "small", "--objects", "5", url}, "--objects is not used in small mode"},
		{"fraction in get", []string{"bench", "--mode", "get", "--read-fraction", "0.5", url}, "--read-fraction is not used in get mode"},
		{"read size in get", []string{"bench", "--mode", "get", "--read-size", "4KiB", url}, "--read-size is not used in get mode"},
		{"vector in mixed", []string{"bench", "--mode", "mixed", "--vector", "8", url}, "--vector is not used in mixed mode"},
		{"parallel in put", []string{"bench", "--parallel-reads", "4", url}, "--parallel-reads is not used in put mode"},
		{"parallel in random", []string{"bench", "--mode", "random", "--parallel-reads", "4", url}, "--parallel-reads is not used in random mode"},
		{"verify in put", []string{"bench", "--verify", url}, "--verify is not used in put mode"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := ecstore(t, nil, tt.args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit 2 and %q", r.code, r.stderr, tt.want)
			}
		})
	}
	// No server: exit 1 with the connection error.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "root://" + ln.Addr().String() + "//x"
	ln.Close()
	if r := ecstore(t, nil, "bench", "--ops", "1", dead); r.code != exitError || !strings.Contains(r.stderr, "refused") {
		t.Errorf("dead server: exit %d, stderr %q", r.code, r.stderr)
	}
}

// flakyFS is a data server that refuses every other create.
type flakyFS struct {
	*dataserver.FS
	creates atomic.Int64
}

func (f *flakyFS) Open(ctx context.Context, name string, opts xrootd.OpenOptions) (xrootd.File, error) {
	if opts.Flags.Create() && f.creates.Add(1)%2 == 0 {
		return nil, xrootd.Errorf(xrootd.ErrIOError, "flaky: create refused")
	}
	return f.FS.Open(ctx, name, opts)
}

// TestBenchExitsNonZeroOnErrors runs bench against a server that fails
// half the puts: the table (or the JSON) is still printed in full, with
// the failures in its errors column, and the exit status is 1, where it
// was 0 unless every operation failed.
func TestBenchExitsNonZeroOnErrors(t *testing.T) {
	fs, err := dataserver.New(t.TempDir(), dataserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	url := serveRoot(t, &flakyFS{FS: fs}, fs.Close)
	r := ecstore(t, nil, "bench", "--ops", "6", "--size", "1000", "--json", url+"/flaky")
	var got benchJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("JSON: %v\n%s", err, r.stdout)
	}
	if len(got.Runs) != 1 || len(got.Runs[0].Ops) != 1 || got.Runs[0].Ops[0].Ops != 3 || got.Runs[0].Ops[0].Errors != 3 {
		t.Fatalf("want 3 puts and 3 errors: %s", r.stdout)
	}
	if r.code != exitError || !strings.Contains(r.stderr, "3 of 6 operations failed") || !strings.Contains(r.stderr, "create refused") {
		t.Errorf("--json: exit %d, stderr %q; want exit 1 and the failures", r.code, r.stderr)
	}
	// The table too, over two runs: the second's errors count as well.
	r = ecstore(t, nil, "bench", "--ops", "4", "--size", "1000", "--concurrency", "1,2", url+"/flaky")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "ecstore bench put: ") {
		t.Fatalf("table:\n%s", r.stdout)
	}
	for _, row := range lines[2:] {
		if f := strings.Fields(row); len(f) != 10 || f[9] != "2" {
			t.Errorf("row %q: want 2 errors", row)
		}
	}
	if r.code != exitError || !strings.Contains(r.stderr, "4 of 8 operations failed") {
		t.Errorf("table: exit %d, stderr %q; want exit 1", r.code, r.stderr)
	}
}
