package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/bench"
	"github.com/ecstore/ecstore/internal/dataserver"
	"github.com/ecstore/ecstore/internal/testgateway"
	"github.com/ecstore/ecstore/internal/testredirector"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// startGateway serves an in-process gateway over a 3+2 test cluster and
// returns its address.
func startGateway(t *testing.T) string { return testgateway.Start(t) }

// startDataServer serves a plain data server over a temporary directory
// with handler wrap(fs) (nil: fs itself). stop kills the server at once.
func startDataServer(t *testing.T, wrap func(*dataserver.FS) xrootd.FileSystem) (addr string, stop func()) {
	t.Helper()
	fs, err := dataserver.New(t.TempDir(), dataserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	var h xrootd.FileSystem = fs
	if wrap != nil {
		h = wrap(fs)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&xrootd.Server{Handler: h}).Serve(ctx, ln) }()
	stop = sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(stop)
	return ln.Addr().String(), stop
}

// listDir lists dir on the server at addr; a missing dir has nothing.
func listDir(t *testing.T, addr, dir string) []string {
	t.Helper()
	ctx := context.Background()
	c, err := xrootd.Dial(ctx, addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ents, err := c.Dirlist(ctx, dir, false)
	var xe *xrootd.Error
	if errors.As(err, &xe) && xe.Code == xrootd.ErrNotFound {
		return nil // a prefix the run made and removed
	}
	if err != nil {
		t.Fatalf("dirlist %s: %v", dir, err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
	}
	return names
}

func TestRun(t *testing.T) {
	servers := []struct {
		name  string
		start func(t *testing.T) string
	}{
		{"gateway", startGateway},
		{"dataserver", func(t *testing.T) string { a, _ := startDataServer(t, nil); return a }},
	}
	tests := []struct {
		name string
		cfg  bench.Config
		want map[bench.Op]int64 // successful operations per type
	}{
		{"put", bench.Config{Mode: bench.ModePut, Size: 100 << 10, Concurrency: 4, Ops: 20},
			map[bench.Op]int64{bench.OpPut: 20}},
		{"put-tiny-fsync", bench.Config{Mode: bench.ModePut, Size: 1, Concurrency: 2, Ops: 6, Fsync: true},
			map[bench.Op]int64{bench.OpPut: 6}},
		{"get", bench.Config{Mode: bench.ModeGet, Size: 100 << 10, Concurrency: 3, Objects: 5, Ops: 17, Verify: true},
			map[bench.Op]int64{bench.OpGet: 17}},
		{"get-pieces-parallel", bench.Config{Mode: bench.ModeGet, Size: bench.PieceSize + 333_333, Concurrency: 2, Objects: 2,
			Ops: 4, Verify: true, ParallelReads: 2}, map[bench.Op]int64{bench.OpGet: 4}},
		{"mixed", bench.Config{Mode: bench.ModeMixed, Size: 50 << 10, Concurrency: 4, Objects: 4, Ops: 40, Verify: true},
			nil}, // put + get == 40, checked below
		{"small", bench.Config{Mode: bench.ModeSmall, Concurrency: 4, Ops: 40, Verify: true},
			map[bench.Op]int64{bench.OpPut: 10, bench.OpStat: 10, bench.OpGet: 10, bench.OpRm: 10}},
		{"small-duration", bench.Config{Mode: bench.ModeSmall, Size: 2000, Concurrency: 2, Duration: 400 * time.Millisecond},
			nil},
		{"random", bench.Config{Mode: bench.ModeRandom, Size: bench.PieceSize + 100_000, Concurrency: 2, Objects: 1,
			ReadSize: 30_000, Ops: 50, Verify: true}, map[bench.Op]int64{bench.OpRead: 50}},
		{"random-vector", bench.Config{Mode: bench.ModeRandom, Size: 3 << 20, Concurrency: 3, Objects: 2,
			ReadSize: 5000, Vector: 40, Ops: 12, Verify: true}, map[bench.Op]int64{bench.OpRead: 12}},
	}
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			addr := srv.start(t)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					cfg := tt.cfg
					cfg.Addr, cfg.Prefix, cfg.Seed = addr, "/bench/"+tt.name, 42
					res, err := bench.Run(context.Background(), cfg)
					if err != nil {
						t.Fatalf("Run: %v", err)
					}
					checkResult(t, res, cfg, tt.want)
					if names := listDir(t, addr, cfg.Prefix); len(names) != 0 {
						t.Errorf("left behind in %s: %v", cfg.Prefix, names)
					}
				})
			}
		})
	}
}

// checkResult checks the counts and the JSON form of a clean run.
func checkResult(t *testing.T, res *bench.Result, cfg bench.Config, want map[bench.Op]int64) {
	t.Helper()
	if res.Errors() != 0 || res.CleanupErrors != 0 {
		t.Fatalf("errors: %d, cleanup errors %d (%s); ops %+v", res.Errors(), res.CleanupErrors, res.CleanupError, res.Ops)
	}
	for op, n := range want {
		if s := res.Op(op); s == nil || s.Ops != n {
			t.Errorf("%s: %+v, want %d ops", op, s, n)
		}
	}
	var total int64
	for _, s := range res.Ops {
		total += s.Ops
		if s.Ops > 0 && (s.P50 <= 0 || s.P99 < s.P50 || s.Max < s.P99 || s.Min > s.P50 || s.OpsPerSec <= 0 || s.Elapsed <= 0) {
			t.Errorf("%s: implausible statistics %+v", s.Op, s)
		}
		if (s.Op == bench.OpPut || s.Op == bench.OpGet) && s.Bytes != s.Ops*res.Size {
			t.Errorf("%s: %d bytes for %d ops of %d", s.Op, s.Bytes, s.Ops, res.Size)
		}
	}
	switch cfg.Mode {
	case bench.ModeMixed:
		if total != cfg.Ops || res.Op(bench.OpPut) == nil || res.Op(bench.OpGet) == nil {
			t.Errorf("mixed: %d ops in all, want %d: %+v", total, cfg.Ops, res.Ops)
		}
	case bench.ModeSmall:
		if len(res.Ops) != 4 || res.Op(bench.OpPut).Ops == 0 || res.Op(bench.OpRm).Ops != res.Op(bench.OpPut).Ops {
			t.Errorf("small: %+v", res.Ops)
		}
	}
	if res.Removed == 0 && cfg.Mode != bench.ModeSmall {
		t.Errorf("cleanup removed nothing")
	}

	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("JSON: %v\n%s", err, b)
	}
	for _, k := range []string{"mode", "addr", "dir", "size", "concurrency", "seed", "elapsed_ns", "ops"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, b)
		}
	}
	opsJSON, _ := m["ops"].([]any)
	if len(opsJSON) != len(res.Ops) {
		t.Fatalf("JSON ops: %s", b)
	}
	for _, o := range opsJSON {
		om, _ := o.(map[string]any)
		for _, k := range []string{"op", "ops", "errors", "bytes", "ops_per_sec", "mb_per_sec", "p50_ns", "p99_ns", "max_ns"} {
			if _, ok := om[k]; !ok {
				t.Errorf("JSON op lacks %q: %v", k, om)
			}
		}
	}
	var buf bytes.Buffer
	if err := bench.WriteTable(&buf, res); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(buf.String()), "\n"); len(lines) != 1+len(res.Ops) || !strings.Contains(lines[0], "ops/s") {
		t.Errorf("table:\n%s", buf.String())
	}
}

// TestServerDiesMidRun kills the server during a put run: the failed
// operations are counted and the run still returns its Result.
func TestServerDiesMidRun(t *testing.T) {
	addr, stop := startDataServer(t, nil)
	time.AfterFunc(300*time.Millisecond, stop)
	start := time.Now()
	res, err := bench.Run(context.Background(), bench.Config{
		Addr: addr, Prefix: "/bench", Mode: bench.ModePut, Size: 64 << 10, Concurrency: 2,
		Duration: time.Second, Seed: 7,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	put := res.Op(bench.OpPut)
	t.Logf("after %v: %d puts, %d errors (%s), %d reconnects, cleanup errors %d (%s)",
		time.Since(start), put.Ops, put.Errors, put.FirstError, res.Reconnects, res.CleanupErrors, res.CleanupError)
	if put.Ops == 0 || put.Errors == 0 || put.FirstError == "" {
		t.Errorf("want puts and counted errors: %+v", put)
	}
	if res.CleanupErrors == 0 {
		t.Errorf("cleanup against a dead server reported no error")
	}
}

// corruptFS serves files whose reads flip one byte.
type corruptFS struct{ *dataserver.FS }

type corruptFile struct{ xrootd.File }

func (f corruptFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(ctx, p, off)
	if n > 0 {
		p[n/2] ^= 1
	}
	return n, err
}

func (c corruptFS) Open(ctx context.Context, name string, opts xrootd.OpenOptions) (xrootd.File, error) {
	f, err := c.FS.Open(ctx, name, opts)
	if err != nil || opts.Flags.Writable() {
		return f, err
	}
	return corruptFile{f}, nil
}

// TestVerify reads back corrupted data: with Verify every get fails (and
// so the run), without it the byte counts pass.
func TestVerify(t *testing.T) {
	addr, _ := startDataServer(t, func(fs *dataserver.FS) xrootd.FileSystem { return corruptFS{fs} })
	for _, verify := range []bool{false, true} {
		res, err := bench.Run(context.Background(), bench.Config{
			Addr: addr, Prefix: "/verify", Mode: bench.ModeGet, Size: 10_000, Objects: 2, Ops: 5, Verify: verify, Seed: 3,
		})
		get := res.Op(bench.OpGet)
		switch {
		case !verify && (err != nil || get.Ops != 5):
			t.Errorf("without verify: %v, %+v", err, get)
		case verify && (!errors.Is(err, bench.ErrAllFailed) || get.Errors != 5 || !strings.Contains(get.FirstError, "content differs")):
			t.Errorf("with verify: %v, %+v", err, get)
		}
	}
	if names := listDir(t, addr, "/verify"); len(names) != 0 {
		t.Errorf("left behind: %v", names)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []bench.Config{
		{},
		{Addr: "x", Mode: "frob"},
		{Addr: "x", Prefix: "rel"},
		{Addr: "x", Prefix: "/a/../b"},
		{Addr: "x", Size: -1},
		{Addr: "x", Mode: bench.ModeMixed, ReadFraction: 1.5},
		{Addr: "x", Ops: -1},
	} {
		if _, err := bench.Run(context.Background(), cfg); !errors.Is(err, bench.ErrConfig) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
	// No server: Run fails before the timed phase.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	if res, err := bench.Run(context.Background(), bench.Config{Addr: addr, Ops: 1}); err == nil || res != nil {
		t.Errorf("no server: %v, %v", res, err)
	}
}

// TestCancel interrupts a run: Run returns the Result with the context's
// error, does not count the interrupted operations and still cleans up.
func TestCancel(t *testing.T) {
	addr, _ := startDataServer(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res, err := bench.Run(ctx, bench.Config{Addr: addr, Prefix: "/c", Mode: bench.ModePut, Size: 256 << 10, Concurrency: 2, Duration: time.Minute})
	if !errors.Is(err, context.DeadlineExceeded) || res == nil {
		t.Fatalf("Run: %v, %v", res, err)
	}
	if put := res.Op(bench.OpPut); put.Ops == 0 || put.Errors != 0 || res.Elapsed > 10*time.Second {
		t.Errorf("put: %+v after %v", put, res.Elapsed)
	}
	if names := listDir(t, addr, "/c"); len(names) != 0 || res.CleanupErrors != 0 {
		t.Errorf("left behind: %v (%s)", names, res.CleanupError)
	}
}

// TestElapsedIsTheSumOfThePhases checks Result.Elapsed against the phases
// the operation types ran in: mixed mode's puts and gets share one phase,
// which was counted twice.
func TestElapsedIsTheSumOfThePhases(t *testing.T) {
	addr, _ := startDataServer(t, nil)
	for _, cfg := range []bench.Config{
		{Mode: bench.ModeMixed, Size: 1000, Objects: 2, Ops: 20, Concurrency: 2},
		{Mode: bench.ModePut, Size: 1000, Ops: 5},
		{Mode: bench.ModeSmall, Size: 1000, Ops: 8},
	} {
		t.Run(string(cfg.Mode), func(t *testing.T) {
			cfg.Addr, cfg.Prefix = addr, "/elapsed"
			res, err := bench.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			var want time.Duration
			switch cfg.Mode {
			case bench.ModeMixed:
				want = res.Op(bench.OpPut).Elapsed
				if res.Op(bench.OpGet).Elapsed != want {
					t.Errorf("put and get phases differ: %+v", res.Ops)
				}
			default:
				for _, s := range res.Ops {
					want += s.Elapsed
				}
			}
			if want <= 0 || res.Elapsed != want {
				t.Errorf("elapsed %v, want %v (ops %+v)", res.Elapsed, want, res.Ops)
			}
		})
	}
}

// slowOpenFS delays every open for reading.
type slowOpenFS struct {
	*dataserver.FS
	delay time.Duration
}

func (s slowOpenFS) Open(ctx context.Context, name string, opts xrootd.OpenOptions) (xrootd.File, error) {
	if !opts.Flags.Writable() {
		time.Sleep(s.delay)
	}
	return s.FS.Open(ctx, name, opts)
}

// TestRandomOpenIsNotTimed checks that random mode's open of the object,
// which its latencies leave out, is left out of its rates too: it was
// made in the timed phase, whose wall-clock time the rates divide by.
func TestRandomOpenIsNotTimed(t *testing.T) {
	const delay = time.Second
	addr, _ := startDataServer(t, func(fs *dataserver.FS) xrootd.FileSystem { return slowOpenFS{fs, delay} })
	res, err := bench.Run(context.Background(), bench.Config{
		Addr: addr, Prefix: "/random-open", Mode: bench.ModeRandom, Size: 100_000, Objects: 2, Concurrency: 2,
		ReadSize: 1000, Ops: 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	read := res.Op(bench.OpRead)
	if read.Ops != 20 || read.Elapsed >= delay || res.Elapsed >= delay {
		t.Errorf("20 reads in %v (run %v), %+v; the open takes %v", read.Elapsed, res.Elapsed, read, delay)
	}
}

// TestRandomObjectsDefault checks that random mode by default writes as
// many objects as it reads, one per worker: it wrote up to 64 (the get
// mode's default), of which all but Concurrency were never read.
func TestRandomObjectsDefault(t *testing.T) {
	addr, _ := startDataServer(t, nil)
	res, err := bench.Run(context.Background(), bench.Config{
		Addr: addr, Prefix: "/random-objects", Mode: bench.ModeRandom, Size: 100_000, Concurrency: 3, ReadSize: 1000, Ops: 6,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Objects != 3 || res.Removed != 3 {
		t.Errorf("%d objects written, %d removed; want 3, one per worker", res.Objects, res.Removed)
	}
}

// TestRemovesThePrefixItMade checks that a run removes the directories
// of its prefix that it made (its puts open with kXR_mkpath), and only
// those: every run against a new prefix left it behind, empty.
func TestRemovesThePrefixItMade(t *testing.T) {
	for _, srv := range []struct {
		name  string
		start func(t *testing.T) string
	}{
		{"gateway", startGateway},
		{"dataserver", func(t *testing.T) string { a, _ := startDataServer(t, nil); return a }},
	} {
		t.Run(srv.name, func(t *testing.T) {
			addr := srv.start(t)
			ctx := context.Background()
			c, err := xrootd.Dial(ctx, addr, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// /old exists with an object in it, /old/empty exists empty:
			// neither was made by a run, so both stay.
			if err := c.Mkdir(ctx, "/old/empty", 0o755, true); err != nil {
				t.Fatal(err)
			}
			f, err := c.Open(ctx, "/old/keep", xrootd.OpenNew, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Close(ctx); err != nil {
				t.Fatal(err)
			}
			for _, prefix := range []string{"/old/new/deeper", "/old/empty", "/fresh"} {
				res, err := bench.Run(ctx, bench.Config{Addr: addr, Prefix: prefix, Mode: bench.ModePut, Size: 10, Ops: 2})
				if err != nil || res.CleanupErrors != 0 {
					t.Fatalf("%s: %v, cleanup: %s", prefix, err, res.CleanupError)
				}
			}
			for _, name := range []string{"/old/keep", "/old/empty"} {
				if _, err := c.Stat(ctx, name); err != nil {
					t.Errorf("%s, not made by a run, is gone: %v", name, err)
				}
			}
			for _, name := range []string{"/old/new", "/fresh"} {
				if _, err := c.Stat(ctx, name); err == nil {
					t.Errorf("%s, made by a run, is left behind", name)
				}
			}
		})
	}
}

// TestRunThroughARedirector runs the benchmark against a redirector (an
// XRootD manager's part: every request redirected to the data server),
// as at WLCG sites: kXR_redirect was not followed, so every operation
// failed.
func TestRunThroughARedirector(t *testing.T) {
	data, _ := startDataServer(t, nil)
	mgr := testredirector.Start(t, data, "tried=")
	for _, cfg := range []bench.Config{
		{Mode: bench.ModePut, Size: 100 << 10, Concurrency: 2, Ops: 6},
		{Mode: bench.ModeGet, Size: 100 << 10, Concurrency: 2, Objects: 2, Ops: 6, Verify: true},
		{Mode: bench.ModeSmall, Concurrency: 2, Ops: 8, Verify: true},
		{Mode: bench.ModeRandom, Size: 1 << 20, Concurrency: 2, Objects: 1, ReadSize: 5000, Vector: 10, Ops: 6, Verify: true},
	} {
		t.Run(string(cfg.Mode), func(t *testing.T) {
			before := mgr.Redirected.Load()
			cfg.Addr, cfg.Prefix, cfg.Seed = mgr.Addr, "/bench/"+string(cfg.Mode), 42
			res, err := bench.Run(context.Background(), cfg)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			checkResult(t, res, cfg, nil)
			if mgr.Redirected.Load() == before {
				t.Errorf("nothing went through the redirector")
			}
			if names := listDir(t, data, cfg.Prefix); len(names) != 0 {
				t.Errorf("left behind in %s: %v", cfg.Prefix, names)
			}
		})
	}
}
