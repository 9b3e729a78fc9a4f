package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ecstore/ecstore/internal/xrootd"
)

// Mode is what a run does; see the package documentation.
type Mode string

// The modes.
const (
	ModePut   Mode = "put"
	ModeGet   Mode = "get"
	ModeMixed Mode = "mixed"
	ModeSmall Mode = "small"
	// ModeRandom reads prepared objects at random offsets, as an
	// analysis job reads a ROOT file.
	ModeRandom Mode = "random"
)

// Modes lists the modes in the order help texts show them.
var Modes = []Mode{ModePut, ModeGet, ModeMixed, ModeSmall, ModeRandom}

// Op is an operation type reported in a Result.
type Op string

// The operation types.
const (
	OpPut  Op = "put"
	OpStat Op = "stat"
	OpGet  Op = "get"
	OpRm   Op = "rm"
	// OpRead is one read request of random mode: a kXR_read, or a
	// kXR_readv of Config.Vector segments.
	OpRead Op = "read"
)

// numOps is the number of operation types.
const numOps = 5

// allOps lists the operation types in report order; an Op's index in it
// is its statistics slot.
var allOps = [numOps]Op{OpPut, OpStat, OpGet, OpRm, OpRead}

func opIndex(op Op) int {
	for i, o := range allOps {
		if o == op {
			return i
		}
	}
	panic("bench: unknown op " + string(op))
}

// Defaults applied by Run to zero Config fields.
const (
	DefaultSize         = 1 << 20
	DefaultSmallSize    = 27_000
	DefaultDuration     = 10 * time.Second
	DefaultReadFraction = 0.75
	DefaultReadSize     = 32 << 10
	// PieceSize is the most data one kXR_write or kXR_read of a put or
	// get carries.
	PieceSize = 8 << 20
)

// Errors of Run. Run wraps them with detail; test with errors.Is.
var (
	// ErrConfig reports an invalid Config.
	ErrConfig = errors.New("bench: invalid configuration")
	// ErrAllFailed is returned with the Result when every timed
	// operation failed.
	ErrAllFailed = errors.New("bench: every operation failed")
	// ErrSize reports an object or a read whose size is not what was
	// written.
	ErrSize = errors.New("bench: wrong object size")
	// ErrContent reports object data that differs from what was written
	// (only checked with Config.Verify).
	ErrContent = errors.New("bench: object content differs from what was written")
)

// Config describes a run. The zero value of each field selects its
// default.
type Config struct {
	// Addr is the server: "host:port", "host" (port 1094) or a root://
	// URL whose path is ignored. Required.
	Addr string
	// Prefix is the absolute directory under which the run makes its own
	// directory (Result.Dir). Default "/".
	Prefix string
	// Mode is what the run does. Default ModePut.
	Mode Mode
	// Size is the size of every object in bytes. Default DefaultSize, or
	// DefaultSmallSize in ModeSmall.
	Size int64
	// Objects is how many distinct objects get, mixed and random read,
	// written before the timed phase. Default max(2*Concurrency, min(64,
	// ceil(256 MiB / Size))), in ModeRandom Concurrency (worker i reads
	// object i mod Objects).
	Objects int
	// Concurrency is the number of workers, each with its own
	// connection. Default 1.
	Concurrency int
	// Duration bounds the timed phase. Default DefaultDuration when Ops
	// is 0 as well; with both set, whichever comes first ends the run.
	Duration time.Duration
	// Ops bounds the number of timed operations (in ModeSmall, of all
	// four phases together; see the package documentation).
	Ops int64
	// ReadFraction is the share of gets in ModeMixed, in (0, 1].
	// Default DefaultReadFraction.
	ReadFraction float64
	// KeepObjects leaves the run's directory and objects in place.
	KeepObjects bool
	// Seed seeds the object data and the mixed mode's choices.
	Seed uint64
	// Verify compares the content of every get with what was written.
	Verify bool
	// ParallelReads is how many reads of one object a get keeps
	// outstanding. Default 1 (one PieceSize read after another).
	ParallelReads int
	// ReadSize is the length of each random read (ModeRandom). Default
	// DefaultReadSize.
	ReadSize int
	// Vector is how many random reads one request makes (ModeRandom): 0
	// or 1 sends kXR_read, more a kXR_readv of that many segments, as
	// ROOT's TTreeCache does. At most xrootd.MaxReadVItems.
	Vector int
	// Fsync sends kXR_sync before closing each object written, so that a
	// server that does not sync on close (xrootd) makes it durable too.
	Fsync bool
	// DialOptions configure every connection; AppName defaults to
	// "ecstore-bench", and Redirects to xrootd.DefaultRedirects, so that
	// a redirector (an XRootD manager) may be benchmarked as xrdcp uses
	// it: each worker follows redirects over connections of its own.
	DialOptions *xrootd.DialOptions
	// Logger receives the run's lifecycle at Info level. Nil discards.
	Logger *slog.Logger
}

// OpStats are the results for one operation type. Durations encode as
// integer nanoseconds in JSON.
type OpStats struct {
	Op Op `json:"op"`
	// Ops counts successful operations, Errors failed ones.
	Ops    int64 `json:"ops"`
	Errors int64 `json:"errors"`
	// Bytes is the object data moved by the successful operations.
	Bytes int64 `json:"bytes"`
	// Elapsed is the wall-clock time of the phase the operations ran in.
	Elapsed   time.Duration `json:"elapsed_ns"`
	OpsPerSec float64       `json:"ops_per_sec"`
	MBPerSec  float64       `json:"mb_per_sec"`
	// Latencies of the successful operations.
	Min  time.Duration `json:"min_ns"`
	Mean time.Duration `json:"mean_ns"`
	P50  time.Duration `json:"p50_ns"`
	P90  time.Duration `json:"p90_ns"`
	P99  time.Duration `json:"p99_ns"`
	Max  time.Duration `json:"max_ns"`
	// FirstError is the text of the first error seen, if any.
	FirstError string `json:"first_error,omitempty"`
}

// Result is the outcome of a run: its settings after defaults, and the
// statistics of every operation type the mode performs, in the order
// put, stat, get, rm.
type Result struct {
	Mode          Mode    `json:"mode"`
	Addr          string  `json:"addr"`
	Dir           string  `json:"dir"`
	Size          int64   `json:"size"`
	Objects       int     `json:"objects,omitempty"`
	Concurrency   int     `json:"concurrency"`
	Seed          uint64  `json:"seed"`
	Verify        bool    `json:"verify"`
	ParallelReads int     `json:"parallel_reads"`
	Fsync         bool    `json:"fsync"`
	ReadFraction  float64 `json:"read_fraction,omitempty"`
	ReadSize      int     `json:"read_size,omitempty"`
	Vector        int     `json:"vector,omitempty"`
	// Duration and OpsLimit are the limits the run had (0: none).
	Duration time.Duration `json:"duration_ns"`
	OpsLimit int64         `json:"ops_limit"`
	// Prepare is the untimed time spent writing the objects of get and
	// mixed; Elapsed the sum of the timed phases.
	Prepare time.Duration `json:"prepare_ns"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Ops     []OpStats     `json:"ops"`
	// Reconnects counts connections dialled again after one broke.
	Reconnects int64 `json:"reconnects"`
	// Cleanup: objects removed, and the failures (with the first one).
	Removed       int64  `json:"removed"`
	CleanupErrors int64  `json:"cleanup_errors"`
	CleanupError  string `json:"cleanup_error,omitempty"`
}

// Op returns the statistics of op, or nil if the mode does not perform it.
func (r *Result) Op(op Op) *OpStats {
	for i := range r.Ops {
		if r.Ops[i].Op == op {
			return &r.Ops[i]
		}
	}
	return nil
}

// Errors returns the failed operations of all types.
func (r *Result) Errors() int64 {
	var n int64
	for _, s := range r.Ops {
		n += s.Errors
	}
	return n
}

// withDefaults checks cfg and fills in its defaults.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Addr == "" {
		return cfg, fmt.Errorf("%w: no server address", ErrConfig)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "/"
	}
	if !strings.HasPrefix(cfg.Prefix, "/") || path.Clean(cfg.Prefix) != cfg.Prefix {
		return cfg, fmt.Errorf("%w: prefix %q is not a clean absolute path", ErrConfig, cfg.Prefix)
	}
	switch cfg.Mode {
	case "":
		cfg.Mode = ModePut
	case ModePut, ModeGet, ModeMixed, ModeSmall, ModeRandom:
	default:
		return cfg, fmt.Errorf("%w: unknown mode %q", ErrConfig, cfg.Mode)
	}
	switch {
	case cfg.Size < 0:
		return cfg, fmt.Errorf("%w: negative size %d", ErrConfig, cfg.Size)
	case cfg.Size == 0 && cfg.Mode == ModeSmall:
		cfg.Size = DefaultSmallSize
	case cfg.Size == 0:
		cfg.Size = DefaultSize
	}
	switch {
	case cfg.Concurrency < 0:
		return cfg, fmt.Errorf("%w: negative concurrency %d", ErrConfig, cfg.Concurrency)
	case cfg.Concurrency == 0:
		cfg.Concurrency = 1
	}
	if cfg.Duration < 0 || cfg.Ops < 0 {
		return cfg, fmt.Errorf("%w: negative duration or operation count", ErrConfig)
	}
	if cfg.Duration == 0 && cfg.Ops == 0 {
		cfg.Duration = DefaultDuration
	}
	if cfg.Mode == ModeGet || cfg.Mode == ModeMixed || cfg.Mode == ModeRandom {
		switch {
		case cfg.Objects < 0:
			return cfg, fmt.Errorf("%w: negative object count %d", ErrConfig, cfg.Objects)
		case cfg.Objects == 0 && cfg.Mode == ModeRandom:
			cfg.Objects = cfg.Concurrency // worker i reads object i alone
		case cfg.Objects == 0:
			fill := int((256<<20 + cfg.Size - 1) / cfg.Size)
			cfg.Objects = max(2*cfg.Concurrency, min(64, fill))
		}
	} else {
		cfg.Objects = 0
	}
	if cfg.Mode == ModeMixed {
		switch {
		case cfg.ReadFraction == 0:
			cfg.ReadFraction = DefaultReadFraction
		case !(cfg.ReadFraction > 0 && cfg.ReadFraction <= 1):
			return cfg, fmt.Errorf("%w: read fraction %v is outside (0, 1]", ErrConfig, cfg.ReadFraction)
		}
	} else {
		cfg.ReadFraction = 0
	}
	if cfg.Mode == ModeRandom {
		switch {
		case cfg.ReadSize < 0 || cfg.ReadSize > xrootd.MaxReadVItemLen:
			return cfg, fmt.Errorf("%w: read size %d is outside [1, %d]", ErrConfig, cfg.ReadSize, xrootd.MaxReadVItemLen)
		case cfg.ReadSize == 0:
			cfg.ReadSize = DefaultReadSize
		}
		if int64(cfg.ReadSize) > cfg.Size {
			return cfg, fmt.Errorf("%w: read size %d exceeds the object size %d", ErrConfig, cfg.ReadSize, cfg.Size)
		}
		switch {
		case cfg.Vector < 0 || cfg.Vector > xrootd.MaxReadVItems:
			return cfg, fmt.Errorf("%w: vector of %d reads is outside [1, %d]", ErrConfig, cfg.Vector, xrootd.MaxReadVItems)
		case cfg.Vector == 0:
			cfg.Vector = 1
		}
	} else {
		cfg.ReadSize, cfg.Vector = 0, 0
	}
	switch {
	case cfg.ParallelReads < 0:
		return cfg, fmt.Errorf("%w: negative parallel reads %d", ErrConfig, cfg.ParallelReads)
	case cfg.ParallelReads == 0:
		cfg.ParallelReads = 1
	}
	var dopts xrootd.DialOptions
	if cfg.DialOptions != nil {
		dopts = *cfg.DialOptions
	}
	if dopts.AppName == "" {
		dopts.AppName = "ecstore-bench"
	}
	if dopts.Redirects == 0 {
		dopts.Redirects = xrootd.DefaultRedirects
	}
	cfg.DialOptions = &dopts
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}

// Run runs the benchmark cfg describes against cfg.Addr and returns its
// statistics. See the package documentation for what each mode does and
// for when Run fails; whenever the timed phase has started, the Result is
// returned, also together with an error.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &runner{
		cfg: cfg,
		log: cfg.Logger,
		gen: newGenerator(cfg.Seed, cfg.Size),
		dir: path.Join(cfg.Prefix, runName()),
	}
	r.log.Info("bench starting", "mode", cfg.Mode, "addr", cfg.Addr, "dir", r.dir, "size", cfg.Size,
		"concurrency", cfg.Concurrency, "seed", cfg.Seed)
	if err := r.dialAll(ctx); err != nil {
		return nil, err
	}
	defer r.closeAll()
	if !cfg.KeepObjects {
		r.made = r.missingPrefix(ctx)
	}

	res := &Result{
		Mode: cfg.Mode, Addr: cfg.Addr, Dir: r.dir, Size: cfg.Size, Objects: cfg.Objects,
		Concurrency: cfg.Concurrency, Seed: cfg.Seed, Verify: cfg.Verify, ParallelReads: cfg.ParallelReads,
		Fsync: cfg.Fsync, ReadFraction: cfg.ReadFraction, ReadSize: cfg.ReadSize, Vector: cfg.Vector,
		Duration: cfg.Duration, OpsLimit: cfg.Ops,
	}
	if cfg.Mode == ModeGet || cfg.Mode == ModeMixed || cfg.Mode == ModeRandom {
		start := time.Now()
		err := r.prepare(ctx)
		res.Prepare = time.Since(start)
		if err != nil {
			r.cleanup(ctx, res)
			return nil, err
		}
		r.log.Info("bench prepared", "objects", cfg.Objects, "elapsed", res.Prepare)
	}

	var elapsed [numOps]time.Duration
	switch cfg.Mode {
	case ModePut:
		d := r.phase(ctx, cfg.Duration, cfg.Ops, (*worker).putNew)
		elapsed[opIndex(OpPut)], res.Elapsed = d, d
	case ModeGet:
		d := r.phase(ctx, cfg.Duration, cfg.Ops, (*worker).getPrepared)
		elapsed[opIndex(OpGet)], res.Elapsed = d, d
	case ModeMixed:
		// One phase for both types: its time counts once in res.Elapsed.
		d := r.phase(ctx, cfg.Duration, cfg.Ops, (*worker).mixed)
		elapsed[opIndex(OpPut)], elapsed[opIndex(OpGet)], res.Elapsed = d, d, d
	case ModeSmall:
		elapsed = r.small(ctx)
		for _, d := range elapsed {
			res.Elapsed += d
		}
	case ModeRandom:
		r.openRandom(ctx)
		d := r.phase(ctx, cfg.Duration, cfg.Ops, (*worker).randomRead)
		elapsed[opIndex(OpRead)], res.Elapsed = d, d
		for _, w := range r.workers {
			w.closeRandom(ctx)
		}
	}
	res.Ops = r.collect(elapsed)
	res.Reconnects = r.reconnects.Load()
	r.cleanup(ctx, res)
	r.log.Info("bench done", "elapsed", res.Elapsed, "errors", res.Errors())

	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("bench: interrupted: %w", err)
	}
	var ok int64
	first := ""
	for _, s := range res.Ops {
		ok += s.Ops
		if first == "" {
			first = s.FirstError
		}
	}
	if ok == 0 && res.Errors() > 0 {
		return res, fmt.Errorf("%w (%d errors; first: %s)", ErrAllFailed, res.Errors(), first)
	}
	return res, nil
}

// modeOps lists the operation types each mode reports.
var modeOps = map[Mode][]Op{
	ModePut:    {OpPut},
	ModeGet:    {OpGet},
	ModeMixed:  {OpPut, OpGet},
	ModeSmall:  {OpPut, OpStat, OpGet, OpRm},
	ModeRandom: {OpRead},
}

// runName returns a directory name unique to this run.
func runName() string {
	return fmt.Sprintf("ecstore-bench-%s-%08x", time.Now().UTC().Format("20060102-150405"), rand.Uint32())
}

// collect merges the workers' statistics.
func (r *runner) collect(elapsed [numOps]time.Duration) []OpStats {
	var out []OpStats
	for _, op := range modeOps[r.cfg.Mode] {
		i := opIndex(op)
		var (
			h     histogram
			s     = OpStats{Op: op, Elapsed: elapsed[i]}
			first time.Time
		)
		for _, w := range r.workers {
			ws := &w.stats[i]
			h.merge(&ws.hist)
			s.Errors += ws.errors
			s.Bytes += ws.bytes
			if ws.firstErr != nil && (s.FirstError == "" || ws.firstAt.Before(first)) {
				s.FirstError, first = ws.firstErr.Error(), ws.firstAt
			}
		}
		s.Ops = int64(h.n)
		if secs := s.Elapsed.Seconds(); secs > 0 {
			s.OpsPerSec = float64(s.Ops) / secs
			s.MBPerSec = float64(s.Bytes) / 1e6 / secs
		}
		s.Min, s.Mean, s.Max = h.min, h.mean(), h.max
		s.P50, s.P90, s.P99 = h.quantile(0.50), h.quantile(0.90), h.quantile(0.99)
		out = append(out, s)
	}
	return out
}

// runner is the state of one Run.
type runner struct {
	cfg        Config
	log        *slog.Logger
	gen        *generator
	dir        string
	workers    []*worker
	reconnects atomic.Int64
	next       atomic.Int64 // shared cursor of the current phase
	made       []string     // directories of the prefix missing at the start, deepest first
	deadline   time.Time    // of the current phase; zero: none
}

// dialAll connects every worker; if one fails, Run fails.
func (r *runner) dialAll(ctx context.Context) error {
	r.workers = make([]*worker, r.cfg.Concurrency)
	errs := make([]error, len(r.workers))
	var wg sync.WaitGroup
	for i := range r.workers {
		w := newWorker(r, i)
		r.workers[i] = w
		wg.Go(func() { errs[i] = w.dial(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		r.closeAll()
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

func (r *runner) closeAll() {
	for _, w := range r.workers {
		if w != nil {
			w.drop()
		}
	}
}

// phase runs op on every worker until d has passed (d > 0) or limit
// operations were started (limit > 0), and returns the wall-clock time
// from its start to the end of the last operation. op gets the phase's
// sequence number of the operation. Without either bound it does nothing.
func (r *runner) phase(ctx context.Context, d time.Duration, limit int64, op func(w *worker, ctx context.Context, n int64)) time.Duration {
	if d <= 0 && limit <= 0 {
		return 0
	}
	r.next.Store(0)
	start := time.Now()
	var deadline time.Time
	if d > 0 {
		deadline = start.Add(d)
	}
	r.deadline = deadline
	var wg sync.WaitGroup
	for _, w := range r.workers {
		wg.Go(func() {
			for ctx.Err() == nil && (deadline.IsZero() || time.Now().Before(deadline)) {
				n := r.next.Add(1) - 1
				if limit > 0 && n >= limit {
					return
				}
				op(w, ctx, n)
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// prepare writes the objects of get and mixed, one per sequence number,
// untimed. Any failure fails the run.
func (r *runner) prepare(ctx context.Context) error {
	var (
		mu    sync.Mutex
		first error
	)
	r.phase(ctx, 0, int64(r.cfg.Objects), func(w *worker, ctx context.Context, n int64) {
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed {
			return
		}
		err := w.ensureConn(ctx)
		if err == nil {
			if _, err = w.put(ctx, r.preparedName(int(n)), preparedKey(int(n))); err == nil {
				return
			}
			w.afterError(err)
		}
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
	})
	if first == nil {
		first = ctx.Err()
	}
	if first != nil {
		return fmt.Errorf("bench: preparing %d objects: %w", r.cfg.Objects, first)
	}
	return nil
}

func (r *runner) preparedName(i int) string { return path.Join(r.dir, fmt.Sprintf("obj-%d", i)) }

func (r *runner) workerName(w int, seq int64) string {
	return path.Join(r.dir, fmt.Sprintf("w%d-%d", w, seq))
}

// small runs the four phases of ModeSmall and returns each phase's time.
func (r *runner) small(ctx context.Context) (elapsed [numOps]time.Duration) {
	d := r.cfg.Duration / 4
	var limit int64
	if r.cfg.Ops > 0 {
		limit = (r.cfg.Ops + 3) / 4
	}
	elapsed[opIndex(OpPut)] = r.phase(ctx, d, limit, (*worker).putSmall)
	var objs []objRef
	for _, w := range r.workers {
		objs = append(objs, w.written...)
		w.written = nil
	}
	r.log.Info("bench small: objects written", "objects", len(objs))
	if len(objs) == 0 {
		return elapsed
	}
	cycle := func(fn func(w *worker, ctx context.Context, o objRef)) func(w *worker, ctx context.Context, n int64) {
		return func(w *worker, ctx context.Context, n int64) { fn(w, ctx, objs[n%int64(len(objs))]) }
	}
	elapsed[opIndex(OpStat)] = r.phase(ctx, d, limit, cycle((*worker).statSmall))
	elapsed[opIndex(OpGet)] = r.phase(ctx, d, limit, cycle((*worker).getSmall))
	elapsed[opIndex(OpRm)] = r.phase(ctx, 0, int64(len(objs)), cycle((*worker).rmSmall))
	return elapsed
}

// openRandom opens every worker's object of random mode before the timed
// phase, so that the open stays out of its rates as it stays out of its
// latencies. A worker whose open fails opens again at its first read,
// where a failure is counted.
func (r *runner) openRandom(ctx context.Context) {
	var wg sync.WaitGroup
	for _, w := range r.workers {
		wg.Go(func() { _ = w.openRandom(ctx) })
	}
	wg.Wait()
}

// cleanupTimeout bounds the cleanup, which runs even after ctx ended.
const cleanupTimeout = time.Minute

// cleanup removes the run's directory and everything in it, using every
// worker's connection, and records the outcome in res.
func (r *runner) cleanup(ctx context.Context, res *Result) {
	if r.cfg.KeepObjects {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	var (
		mu    sync.Mutex
		first error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		res.CleanupErrors++
		if first == nil {
			first = err
		}
	}
	lead := r.workers[0]
	var ents []xrootd.FileInfo
	err := lead.ensureConn(ctx)
	if err == nil {
		ents, err = lead.c.Dirlist(ctx, r.dir, false)
	}
	if err != nil {
		if !isNotFound(err) { // nothing was ever written
			fail(err)
			lead.afterError(err)
		}
	} else {
		r.phase(ctx, 0, int64(len(ents)), func(w *worker, ctx context.Context, n int64) {
			err := w.ensureConn(ctx)
			if err == nil {
				if err = w.c.Rm(ctx, path.Join(r.dir, ents[n].Name)); err == nil {
					mu.Lock()
					res.Removed++
					mu.Unlock()
					return
				}
				w.afterError(err)
			}
			if !isNotFound(err) {
				fail(err)
			}
		})
		if err := lead.ensureConn(ctx); err != nil {
			fail(err)
		} else if err := r.rmdir(ctx, lead); err != nil {
			fail(err)
		}
	}
	if first == nil && lead.c != nil {
		// The directories of the prefix the puts made (kXR_mkpath), best
		// effort: one that holds something else by now stays.
		for _, d := range r.made {
			if err := lead.c.Rmdir(ctx, d); err != nil && !isNotFound(err) {
				break
			}
		}
	}
	if first != nil {
		res.CleanupError = first.Error()
	}
}

// missingPrefix returns the directories of the prefix that do not
// exist, deepest first: the puts' kXR_mkpath makes them, and the cleanup
// removes them again. It stops at the first that exists, or that the
// server cannot say about.
func (r *runner) missingPrefix(ctx context.Context) []string {
	var missing []string
	for d := r.cfg.Prefix; d != "/"; d = path.Dir(d) {
		if _, err := r.workers[0].c.Stat(ctx, d); !isNotFound(err) {
			break
		}
		missing = append(missing, d)
	}
	return missing
}

// rmdir removes the run's emptied directory. Uploads interrupted by a
// cancelled run are discarded by the server when their connection ends,
// which may be a moment after the cleanup lists the directory: an rmdir
// that finds the directory not yet empty is retried for a few seconds,
// removing what it holds by then (an upload the server finished rather
// than discarded) before each retry.
func (r *runner) rmdir(ctx context.Context, w *worker) error {
	var err error
	for delay := 50 * time.Millisecond; delay < 5*time.Second; delay *= 2 {
		err = w.c.Rmdir(ctx, r.dir)
		if err == nil || isNotFound(err) {
			return nil
		}
		if ents, lerr := w.c.Dirlist(ctx, r.dir, false); lerr == nil {
			for _, e := range ents {
				w.c.Rm(ctx, path.Join(r.dir, e.Name)) // best effort: rmdir says what is left
			}
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return err
		}
	}
	return err
}

// isNotFound reports whether err is the server's kXR_NotFound.
func isNotFound(err error) bool {
	var xe *xrootd.Error
	return errors.As(err, &xe) && xe.Code == xrootd.ErrNotFound
}
