package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ecstore/ecstore/internal/bench"
	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/xrootd"
)

const benchHelp = `
Generates load against a root:// server — an ecstore gateway, an ecstore
node or any XRootD server, or a redirector (an XRootD manager, whose
redirects are followed as xrdcp follows them; each worker then keeps a
connection to each server it is sent to) — and prints, per operation type, the
successful operations, ops/s, MB/s (10^6 bytes), p50/p99/max latency and
the errors, as a table or as JSON. Objects go to a new directory
PREFIX/ecstore-bench-<time>-<random>, removed at the end (--cleanup),
with the directories of PREFIX that the run made.
Each of the --concurrency workers keeps one connection for all its
operations.

Modes:
  put    every operation creates a new object: open (kXR_new|kXR_mkpath),
         sequential writes of up to 8 MiB, close
  get    --objects objects are written first (not timed); every operation
         reads one whole, in reads of up to 8 MiB, cycling over them
  mixed  like get, with --read-fraction of the operations gets and the
         rest puts of new objects
  small  many small objects in four timed phases: put new objects, stat
         them, get them, rm them; each phase is reported on its own row.
         --duration D gives D/4 to each of put, stat and get (rm takes as
         long as it takes); --ops N gives N/4 operations to each phase
  random --objects objects are written first (not timed); each worker
         opens one and every operation is one read request at random
         offsets, as an analysis job reads a ROOT file: a kXR_read of
         --read-size bytes, or with --vector N a kXR_readv of N such
         reads (ROOT's TTreeCache sends vector reads)

Rates are wall-clock: a phase's successful operations over the time from
its start to the end of its last operation. Latency percentiles come from
a log-bucketed histogram (within 0.8% of a measured latency). A put is
timed from open to the acknowledged close, a get from open to close.
Gets check the object's size; --verify also compares every byte with
what was written (the data is regenerated from --seed). Failed
operations are counted (the errors column; the first error of each
operation type is printed on stderr) and the run goes on.

Exit status: 0 when every operation succeeded; 1 when any operation
failed, after the table (or the JSON) of all the runs is printed, or when
the run could not start; 2 for a usage error. A cleanup that failed is
reported on stderr without changing the exit status.

A flag that the mode does not use (--objects in put mode, --read-size
outside random mode, --verify in put mode, ...) is refused.

Durability is the server's: an ecstore gateway syncs on close unless it
runs with --fsync=false; a plain xrootd does not, unless the client asks
with --fsync here.

Examples:
  ecstore bench --mode small --concurrency 1,8,64 root://gw.example.org//scratch
  ecstore bench --mode get --size 64MiB --parallel-reads 4 root://127.0.0.1:1094//bench
  ecstore bench --mode put --ops 100 --json root://127.0.0.1:1094//bench
  ecstore bench --mode random --size 1GiB --objects 1 --vector 64 root://127.0.0.1:1094//bench
`

// sizeFlag is a byte count flag whose zero value means "the default".
type sizeFlag struct{ n int64 }

func (f *sizeFlag) String() string {
	if f == nil || f.n == 0 {
		return ""
	}
	return layout.FormatSize(f.n)
}

func (f *sizeFlag) Set(s string) error {
	n, err := layout.ParseSize(s)
	if err != nil {
		return err
	}
	if n == 0 {
		return errors.New("size must be positive")
	}
	f.n = n
	return nil
}

// cmdBench is "ecstore bench [flags] root://host[:port]//prefix".
func cmdBench(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "bench", "bench [flags] root://host[:port]//prefix", benchHelp)
	mode := fs.String("mode", "put", "`MODE`: put, get, mixed, small or random (default put)")
	var size sizeFlag
	fs.Var(&size, "size", "object `SIZE` (default 1MiB; 27KB in small mode)")
	objects := fs.Int("objects", 0, "`N` distinct objects that get, mixed and random read (default\nmax(2×concurrency, min(64, 256MiB/size)); in random mode the concurrency)")
	concurrency := fs.String("concurrency", "1", "`LIST` of worker counts, one run per comma-separated value (default 1)")
	duration := fs.Duration("duration", bench.DefaultDuration, "run for `D` (default 10s unless --ops is given)")
	ops := fs.Int64("ops", 0, "stop after `N` operations (with --duration too: whichever comes first)")
	asJSON := fs.Bool("json", false, `print {"runs": [...]} as JSON instead of the table`)
	cleanup := fs.Bool("cleanup", true, "remove the objects written (default true)")
	seed := fs.Uint64("seed", 1, "`SEED` of the object data and of mixed's choices (default 1)")
	verify := fs.Bool("verify", false, "compare the content of every get with what was written")
	parallel := fs.Int("parallel-reads", 1, "`P` reads of 8 MiB outstanding per get (default 1)")
	readFrac := fs.Float64("read-fraction", bench.DefaultReadFraction, "share `F` of gets in mixed mode (default 0.75)")
	var readSize sizeFlag
	fs.Var(&readSize, "read-size", "`SIZE` of each read in random mode (default 32KiB)")
	vector := fs.Int("vector", 1, "`N` reads per request in random mode: 1 sends kXR_read, more\na kXR_readv (default 1)")
	fsync := fs.Bool("fsync", false, "send kXR_sync before closing each object written (durable puts\non servers that do not sync on close, such as xrootd)")
	pos, err := fs.parse(args, 1, 1)
	if err != nil {
		return err
	}
	u, ok, err := parseRootURL(pos[0])
	if err != nil {
		return err
	}
	if !ok {
		return usageErrorf("bench: %q is not a root:// URL", pos[0])
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	cfg := bench.Config{
		Addr: u.addr, Prefix: u.path, Mode: bench.Mode(*mode), Size: size.n, Objects: *objects,
		Duration: *duration, Ops: *ops, KeepObjects: !*cleanup, Seed: *seed, Verify: *verify,
		ParallelReads: *parallel, Fsync: *fsync, DialOptions: dialOptions(u),
	}
	if cfg.Mode == bench.ModeRandom {
		if readSize.n > int64(xrootd.MaxReadVItemLen) {
			return usageErrorf("bench: --read-size %s: at most %d bytes", layout.FormatSize(readSize.n), xrootd.MaxReadVItemLen)
		}
		cfg.ReadSize, cfg.Vector = int(readSize.n), *vector
	}
	cfg.DialOptions.AppName = "ecstore-bench"
	if !slices.Contains(bench.Modes, cfg.Mode) {
		return usageErrorf("bench: --mode %q: want put, get, mixed, small or random", *mode)
	}
	for _, name := range []string{"objects", "read-fraction", "read-size", "vector", "parallel-reads", "verify"} {
		if set[name] && !slices.Contains(benchFlagModes[name], cfg.Mode) {
			return usageErrorf("bench: --%s is not used in %s mode", name, cfg.Mode)
		}
	}
	if cfg.Mode == bench.ModeMixed {
		cfg.ReadFraction = *readFrac
		if !(*readFrac > 0 && *readFrac <= 1) {
			return usageErrorf("bench: --read-fraction %v: want a number in (0, 1]", *readFrac)
		}
	}
	if *ops > 0 && !set["duration"] {
		cfg.Duration = 0
	}
	switch {
	case *duration <= 0 && set["duration"]:
		return usageErrorf("bench: --duration must be positive")
	case *ops < 0 || *objects < 0 || *parallel < 1:
		return usageErrorf("bench: --ops and --objects must not be negative, --parallel-reads at least 1")
	}
	var levels []int
	for _, s := range strings.Split(*concurrency, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return usageErrorf("bench: --concurrency %q: want positive worker counts such as 1,8,64", *concurrency)
		}
		levels = append(levels, n)
	}

	var (
		results []*bench.Result
		runErr  error
	)
	for _, c := range levels {
		cfg.Concurrency = c
		res, err := bench.Run(ctx, cfg)
		if res != nil {
			results = append(results, res)
			reportRun(e, res)
		}
		if err != nil {
			runErr = err
			break
		}
	}
	if len(results) > 0 {
		if err := printBench(e, results, *asJSON); err != nil {
			return err
		}
	}
	switch {
	case runErr == nil:
		return failedOps(u.String(), results)
	case ctx.Err() != nil:
		return errInterrupted
	case errors.Is(runErr, bench.ErrConfig):
		return usageErrorf("%v", runErr)
	}
	return fmt.Errorf("%s: %w", u, runErr)
}

// failedOps returns an error when any operation of the results failed,
// so that a script running bench learns of it by the exit status; nil
// when every one succeeded.
func failedOps(url string, results []*bench.Result) error {
	var failed, total int64
	for _, r := range results {
		for _, s := range r.Ops {
			failed += s.Errors
			total += s.Ops + s.Errors
		}
	}
	if failed == 0 {
		return nil
	}
	return fmt.Errorf("bench %s: %d of %d operations failed", url, failed, total)
}

// benchFlagModes lists the modes that use each flag some modes ignore; a
// run given one its mode ignores is refused rather than measuring what
// the flag did not ask for.
var benchFlagModes = map[string][]bench.Mode{
	"objects":        {bench.ModeGet, bench.ModeMixed, bench.ModeRandom},
	"read-fraction":  {bench.ModeMixed},
	"read-size":      {bench.ModeRandom},
	"vector":         {bench.ModeRandom},
	"parallel-reads": {bench.ModeGet, bench.ModeMixed, bench.ModeSmall},
	"verify":         {bench.ModeGet, bench.ModeMixed, bench.ModeSmall, bench.ModeRandom},
}

// reportRun tells on stderr what a table does not show: errors, kept
// objects and failed cleanups.
func reportRun(e *env, r *bench.Result) {
	for _, s := range r.Ops {
		if s.Errors > 0 {
			fmt.Fprintf(e.stderr, "ecstore: bench: %s (concurrency %d): %d errors; first: %s\n", s.Op, r.Concurrency, s.Errors, s.FirstError)
		}
	}
	if r.CleanupErrors > 0 {
		fmt.Fprintf(e.stderr, "ecstore: bench: cleanup of root://%s/%s: %d errors; first: %s\n", r.Addr, r.Dir, r.CleanupErrors, r.CleanupError)
	}
}

// printBench prints the results as JSON or as a table under a line
// describing the runs.
func printBench(e *env, results []*bench.Result, asJSON bool) error {
	first := results[0]
	if asJSON {
		b, err := json.MarshalIndent(struct {
			Runs []*bench.Result `json:"runs"`
		}{results}, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(e.stdout, "%s\n", b)
		return err
	}
	limit := fmt.Sprintf("%v", first.Duration)
	switch {
	case first.OpsLimit > 0 && first.Duration > 0:
		limit = fmt.Sprintf("%d ops or %v", first.OpsLimit, first.Duration)
	case first.OpsLimit > 0:
		limit = fmt.Sprintf("%d ops", first.OpsLimit)
	}
	fmt.Fprintf(e.stdout, "ecstore bench %s: %s objects (%d bytes), root://%s/%s, %s, seed %d", first.Mode,
		layout.HumanSize(first.Size), first.Size, first.Addr, prefixOf(first.Dir), limit, first.Seed)
	if first.Objects > 0 {
		fmt.Fprintf(e.stdout, ", %d objects", first.Objects)
	}
	if first.Verify {
		fmt.Fprint(e.stdout, ", verified")
	}
	if first.Fsync {
		fmt.Fprint(e.stdout, ", kXR_sync before close")
	}
	if first.ParallelReads > 1 {
		fmt.Fprintf(e.stdout, ", %d parallel reads", first.ParallelReads)
	}
	if first.ReadSize > 0 {
		fmt.Fprintf(e.stdout, ", reads of %s", layout.HumanSize(int64(first.ReadSize)))
		if first.Vector > 1 {
			fmt.Fprintf(e.stdout, " in vectors of %d", first.Vector)
		}
	}
	fmt.Fprintln(e.stdout)
	return bench.WriteTable(e.stdout, results...)
}

// prefixOf returns the directory a run directory was made in.
func prefixOf(dir string) string {
	if i := strings.LastIndexByte(dir, '/'); i > 0 {
		return dir[:i]
	}
	return "/"
}
