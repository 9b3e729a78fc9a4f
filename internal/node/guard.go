package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// ErrStuck means that a guarded node already has GuardOptions.MaxStuck
// calls stuck in its file system: further calls fail at once rather than
// leave one more thread blocked in the kernel.
var ErrStuck = errors.New("too many calls stuck in the file system")

// ErrLeftRunning is the reason given for a guarded call left running: its
// context ended before the file system answered. A read that fails with
// it may still write into its buffer until the file system answers: the
// caller must not reuse that buffer (return it to a pool), only drop it.
var ErrLeftRunning = errors.New("no answer from the file system (the call is left running)")

// GuardOptions configure Guard.
type GuardOptions struct {
	// MaxStuck bounds the calls left running after their context ended,
	// each a thread blocked in the kernel; past it, calls fail at once
	// with ErrStuck until some return. Default 32.
	MaxStuck int
	// MaxCall bounds a call whose context has no deadline. Default
	// DefaultMaxCall.
	MaxCall time.Duration
	// Logger is told when the file system stops answering and when it
	// answers again. Default: discard.
	Logger *slog.Logger
	// Stuck, if set, is told the node's count of stuck calls whenever it
	// changes (a gauge).
	Stuck func(id string, n int)
	// Observe, if set, is told of every call once it has returned, or
	// once its caller stopped waiting for it (Operation.Err then wraps
	// ErrLeftRunning), or failed at once because too many calls are
	// stuck, or an earlier call of the same upload is (ErrStuck).
	Observe func(Operation)
}

// DefaultMaxCall is GuardOptions.MaxCall's default: far longer than any
// one call of a healthy local file system takes (an fsync of a large
// archive on a busy disk, the listing of a huge directory), short enough
// that a transfer against a dead mount ends.
const DefaultMaxCall = 2 * time.Minute

// Guard returns n with every call bounded by its context, also when the
// call blocks in the kernel: a local directory on a network or FUSE file
// system whose server stopped answering, or on a disk stuck in its
// controller, blocks system calls for as long as that lasts, whatever
// the caller's deadline, and a Local node checks its context only
// before each call. A guarded call runs in a goroutine of its own; when
// its context ends first, the caller gets an error wrapping the
// context's and ErrLeftRunning, and the call is left running (stuck)
// until the file system answers: a file or upload it then returns is
// closed or aborted. A read left so keeps its buffer: it writes into it
// when it completes, so its caller must drop that buffer rather than
// reuse it (reads go straight into the caller's buffer: a copy through a
// buffer of the guard's cost the gateway 15 % more CPU on local gets).
//
// An upload one of whose calls is stuck fails every later call; its
// Abort then fails with ErrStuck and aborts the upload once the stuck
// call returns. Files whose whole content is in memory (ContentsFile)
// are not wrapped. Close of a file returns at once and closes it in the
// background. The optional interfaces AttrReader, NameLister and
// AttrsLister are offered as the inner node offers them; PartLister is
// not (no local node has it).
func Guard(n Node, opts GuardOptions) Node {
	if opts.MaxStuck <= 0 {
		opts.MaxStuck = 32
	}
	if opts.MaxCall <= 0 {
		opts.MaxCall = DefaultMaxCall
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &guarded{n: n, opts: opts}
}

// guarded is the Node of Guard.
type guarded struct {
	n     Node
	opts  GuardOptions
	stuck atomic.Int64
	// warned is set while the log says the file system is not answering:
	// a call ran out of time, not one its caller merely gave up on.
	warned atomic.Bool
}

var (
	_ Node        = (*guarded)(nil)
	_ AttrReader  = (*guarded)(nil)
	_ NameLister  = (*guarded)(nil)
	_ AttrsLister = (*guarded)(nil)
)

// Call states: running until the call returns (done) or its caller stops
// waiting (abandoned), whichever comes first.
const (
	callRunning int32 = iota
	callDone
	callAbandoned
)

// Within runs fn in a goroutine of its own and returns its result, or an
// error wrapping ErrLeftRunning and ctx's error once ctx ends first: fn
// is then left running, left (if not nil) is called at once, and late
// (if not nil) is given fn's result when it returns, never before left
// has returned. For calls that may block in the kernel past any deadline
// (Guard; the opening of a node directory).
func Within[T any](ctx context.Context, fn func() (T, error), left func(), late func(T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	var state atomic.Int32
	done := make(chan result, 1)
	leftDone := make(chan struct{})
	go func() {
		v, err := fn()
		if state.CompareAndSwap(callRunning, callDone) {
			done <- result{v, err}
			return
		}
		<-leftDone // abandoned: the caller has gone
		if late != nil {
			late(v, err)
		}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		if !state.CompareAndSwap(callRunning, callAbandoned) {
			r := <-done // it returned meanwhile
			return r.v, r.err
		}
		if left != nil {
			left()
		}
		close(leftDone)
		var zero T
		return zero, fmt.Errorf("%w: %w", ErrLeftRunning, ctx.Err())
	}
}

// guardCall runs fn as Within does, with ctx bounded by MaxCall when it
// has no deadline, counting the calls left running.
func guardCall[T any](g *guarded, ctx context.Context, op, path string, fn func(ctx context.Context) (T, error), late func(T, error)) (T, error) {
	return guardCallLeft(g, ctx, op, path, 0, fn, nil, late)
}

// guardCallLeft is guardCall with left, called as Within calls it, for a
// call that writes written bytes to the node (for GuardOptions.Observe).
func guardCallLeft[T any](g *guarded, ctx context.Context, op, path string, written int64, fn func(ctx context.Context) (T, error), left func(), late func(T, error)) (v T, err error) {
	if g.opts.Observe != nil {
		defer func(start time.Time) {
			o := Operation{Name: op, Duration: time.Since(start), Err: err}
			if err == nil {
				o.Read, o.Written = bytesRead(v), written
			}
			g.opts.Observe(o)
		}(time.Now())
	}
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, g.wrap(op, path, err)
	}
	if g.stuck.Load() >= int64(g.opts.MaxStuck) {
		return zero, g.wrap(op, path, ErrStuck)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.opts.MaxCall)
		defer cancel()
	}
	v, err = Within(ctx, func() (T, error) { return fn(ctx) }, func() {
		g.addStuck(op, path, ctx.Err())
		if left != nil {
			left()
		}
	}, func(v T, err error) {
		if late != nil {
			late(v, err)
		}
		g.unstuck(op, path)
	})
	if errors.Is(err, ErrLeftRunning) {
		return zero, g.wrap(op, path, err)
	}
	return v, err
}

// refused returns the error of call op refused at once, without running
// it, and tells GuardOptions.Observe of it.
func (g *guarded) refused(op, path string, err error) error {
	err = g.wrap(op, path, err)
	if g.opts.Observe != nil {
		g.opts.Observe(Operation{Name: op, Err: err})
	}
	return err
}

// bytesRead is how many data bytes a guarded call that returned v read:
// a ReadAt's count, a ReadSpan's span, a file an open read whole.
func bytesRead(v any) int64 {
	switch v := v.(type) {
	case int:
		return int64(v)
	case []byte:
		return int64(len(v))
	case ContentsFile:
		return int64(len(v.Contents()))
	}
	return 0
}

// addStuck counts a call left running because its context ended with
// cause. Only a call out of time says the file system is not answering:
// one whose caller went away (a refused or cancelled transfer) is
// counted, as it holds a thread until it returns, but not reported.
func (g *guarded) addStuck(op, path string, cause error) {
	n := g.stuck.Add(1)
	if errors.Is(cause, context.DeadlineExceeded) && !g.warned.Swap(true) {
		g.opts.Logger.Warn("node's file system is not answering: calls are left running until it does",
			"node", g.n.ID(), "op", op, "path", path)
	}
	g.report(n)
}

// unstuck counts a stuck call that returned.
func (g *guarded) unstuck(op, path string) {
	n := g.stuck.Add(-1)
	if n == 0 && g.warned.Swap(false) {
		g.opts.Logger.Warn("node's file system answers again: every stuck call has returned",
			"node", g.n.ID(), "last_op", op, "path", path)
	}
	g.report(n)
}

func (g *guarded) report(n int64) {
	if g.opts.Stuck != nil {
		g.opts.Stuck(g.n.ID(), int(n))
	}
}

func (g *guarded) wrap(op, path string, err error) error {
	return fmt.Errorf("node %s: %s %s: %w", g.n.ID(), op, path, err)
}

// guardErr runs fn, which returns only an error, as guardCall does.
func guardErr(g *guarded, ctx context.Context, op, path string, fn func(ctx context.Context) error) error {
	_, err := guardCall(g, ctx, op, path, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, fn(ctx)
	}, nil)
	return err
}

// ID implements Node.
func (g *guarded) ID() string { return g.n.ID() }

// Create implements Node.
func (g *guarded) Create(ctx context.Context, path string) (Upload, error) {
	u, err := guardCall(g, ctx, "create", path, func(ctx context.Context) (Upload, error) {
		return g.n.Create(ctx, path)
	}, func(u Upload, err error) {
		if err == nil {
			_ = u.Abort(context.Background())
		}
	})
	if err != nil {
		return nil, err
	}
	gu := &guardedUpload{g: g, u: u, path: path}
	if a, ok := u.(Attributes); ok {
		return &guardedAttrUpload{guardedUpload: gu, a: a}, nil
	}
	return gu, nil
}

// Open implements Node.
func (g *guarded) Open(ctx context.Context, path string) (File, error) {
	f, err := guardCall(g, ctx, "open", path, func(ctx context.Context) (File, error) {
		return g.n.Open(ctx, path)
	}, func(f File, err error) {
		if err == nil {
			_ = f.Close()
		}
	})
	if err != nil {
		return nil, err
	}
	switch f := f.(type) {
	case ContentsFile:
		return f, nil // in memory: its reads make no system call
	case SpanReader:
		return &guardedSpanFile{guardedFile{g: g, f: f, path: path}, f}, nil
	default:
		return &guardedFile{g: g, f: f, path: path}, nil
	}
}

// Stat implements Node.
func (g *guarded) Stat(ctx context.Context, path string) (FileInfo, error) {
	return guardCall(g, ctx, "stat", path, func(ctx context.Context) (FileInfo, error) {
		return g.n.Stat(ctx, path)
	}, nil)
}

// List implements Node.
func (g *guarded) List(ctx context.Context, dir string) ([]FileInfo, error) {
	return guardCall(g, ctx, "list", dir, func(ctx context.Context) ([]FileInfo, error) {
		return g.n.List(ctx, dir)
	}, nil)
}

// ListNames implements NameLister: the inner node's, or its List
// without the files' descriptions.
func (g *guarded) ListNames(ctx context.Context, dir string) ([]FileInfo, error) {
	return guardCall(g, ctx, "list", dir, func(ctx context.Context) ([]FileInfo, error) {
		return listNames(ctx, g.n, dir)
	}, nil)
}

// ListsAttrs implements AttrsLister: whether the inner node does.
func (g *guarded) ListsAttrs() bool {
	al, ok := g.n.(AttrsLister)
	return ok && al.ListsAttrs()
}

// ReadAttrs implements AttrReader when the inner node does; otherwise it
// fails with ErrNoAttrs.
func (g *guarded) ReadAttrs(ctx context.Context, path string) (map[string]string, error) {
	a, ok := g.n.(AttrReader)
	if !ok {
		return nil, g.wrap("readattrs", path, ErrNoAttrs)
	}
	return guardCall(g, ctx, "readattrs", path, func(ctx context.Context) (map[string]string, error) {
		return a.ReadAttrs(ctx, path)
	}, nil)
}

// KeepsAttrs implements AttrReader: whether the inner node does.
func (g *guarded) KeepsAttrs() bool {
	a, ok := g.n.(AttrReader)
	return ok && a.KeepsAttrs()
}

// Remove implements Node.
func (g *guarded) Remove(ctx context.Context, path string) error {
	return guardErr(g, ctx, "remove", path, func(ctx context.Context) error {
		return g.n.Remove(ctx, path)
	})
}

// Rename implements Node.
func (g *guarded) Rename(ctx context.Context, oldPath, newPath string) error {
	return guardErr(g, ctx, "rename", oldPath, func(ctx context.Context) error {
		return g.n.Rename(ctx, oldPath, newPath)
	})
}

// Mkdir implements Node.
func (g *guarded) Mkdir(ctx context.Context, path string) error {
	return guardErr(g, ctx, "mkdir", path, func(ctx context.Context) error {
		return g.n.Mkdir(ctx, path)
	})
}

// Space implements Node.
func (g *guarded) Space(ctx context.Context) (Space, error) {
	return guardCall(g, ctx, "space", "", func(ctx context.Context) (Space, error) {
		return g.n.Space(ctx)
	}, nil)
}

// guardedFile is a File of a guarded node.
type guardedFile struct {
	g    *guarded
	f    File
	path string
}

// ReadAt implements File. A read left running keeps p (ErrLeftRunning).
func (f *guardedFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	return guardCall(f.g, ctx, "read", f.path, func(ctx context.Context) (int, error) {
		return f.f.ReadAt(ctx, p, off)
	}, nil)
}

// Size implements File.
func (f *guardedFile) Size() int64 { return f.f.Size() }

// Close implements File: the inner file is closed in the background (a
// close blocks too where the file system does not answer).
func (f *guardedFile) Close() error {
	go func() { _ = f.f.Close() }()
	return nil
}

// guardedSpanFile is a guardedFile over a SpanReader.
type guardedSpanFile struct {
	guardedFile
	s SpanReader
}

// ReadSpan implements SpanReader. A read left running keeps buf
// (ErrLeftRunning).
func (f *guardedSpanFile) ReadSpan(ctx context.Context, buf []byte, off int64, n int) ([]byte, error) {
	return guardCall(f.g, ctx, "read", f.path, func(ctx context.Context) ([]byte, error) {
		return f.s.ReadSpan(ctx, buf, off, n)
	}, nil)
}

// guardedUpload is an Upload of a guarded node. After one of its calls
// is left running, the others fail: the inner upload is not safe for
// concurrent use.
type guardedUpload struct {
	g    *guarded
	u    Upload
	path string

	mu          sync.Mutex
	stuck       bool // a call of the upload is left running
	abortWanted bool // Abort came while a call was stuck
}

// do runs fn on the inner upload under the guard, unless a call of the
// upload is stuck.
func (u *guardedUpload) do(ctx context.Context, op string, fn func(ctx context.Context) error) error {
	return u.doWriting(ctx, op, 0, fn)
}

// doWriting is do for a call that writes n bytes.
func (u *guardedUpload) doWriting(ctx context.Context, op string, n int64, fn func(ctx context.Context) error) error {
	u.mu.Lock()
	stuck := u.stuck
	u.mu.Unlock()
	if stuck {
		return u.g.refused(op, u.path, fmt.Errorf("an earlier call of this upload is stuck: %w", ErrStuck))
	}
	_, err := guardCallLeft(u.g, ctx, op, u.path, n, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, fn(ctx)
	}, func() {
		u.mu.Lock()
		u.stuck = true
		u.mu.Unlock()
	}, func(struct{}, error) {
		u.mu.Lock()
		u.stuck = false
		abort := u.abortWanted
		u.mu.Unlock()
		if abort {
			_ = u.u.Abort(context.Background())
		}
	})
	return err
}

func (u *guardedUpload) Write(ctx context.Context, p []byte) error {
	return u.doWriting(ctx, "write", int64(len(p)), func(ctx context.Context) error { return u.u.Write(ctx, p) })
}

func (u *guardedUpload) Finish(ctx context.Context) error {
	return u.do(ctx, "finish", u.u.Finish)
}

func (u *guardedUpload) Commit(ctx context.Context) error {
	return u.do(ctx, "commit", u.u.Commit)
}

// Abort implements Upload. While a call of the upload is stuck it fails
// with ErrStuck, and the upload is aborted once that call returns.
func (u *guardedUpload) Abort(ctx context.Context) error {
	u.mu.Lock()
	if u.stuck {
		u.abortWanted = true
		u.mu.Unlock()
		return u.g.refused("abort", u.path, fmt.Errorf("a call of this upload is stuck; it is aborted once that returns: %w", ErrStuck))
	}
	u.mu.Unlock()
	if ctx.Err() != nil {
		// An abort must work with a cancelled context (Upload's
		// contract).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
		defer cancel()
	}
	return u.do(ctx, "abort", u.u.Abort)
}

// abortTimeout bounds an Abort called with a context already done.
const abortTimeout = 10 * time.Second

func (u *guardedUpload) TempPath() string { return u.u.TempPath() }

// guardedAttrUpload is a guardedUpload over an Upload with Attributes.
type guardedAttrUpload struct {
	*guardedUpload
	a Attributes
}

func (u *guardedAttrUpload) SetAttrs(ctx context.Context, attrs map[string]string) error {
	return u.do(ctx, "setattrs", func(ctx context.Context) error { return u.a.SetAttrs(ctx, attrs) })
}
