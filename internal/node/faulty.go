package node

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrInjected is wrapped by every error a Faulty node injects.
var ErrInjected = errors.New("node: injected fault")

// Op is a set of node operations, used by a Rule to select the calls it
// applies to. Ops combine with |.
type Op uint32

// The operations of a node, its uploads and its files.
const (
	OpCreate    Op = 1 << iota // Node.Create
	OpWrite                    // Upload.Write
	OpFinish                   // Upload.Finish
	OpCommit                   // Upload.Commit
	OpAbort                    // Upload.Abort
	OpSetAttrs                 // Attributes.SetAttrs
	OpOpen                     // Node.Open
	OpRead                     // File.ReadAt
	OpStat                     // Node.Stat
	OpList                     // Node.List
	OpRemove                   // Node.Remove
	OpRename                   // Node.Rename
	OpMkdir                    // Node.Mkdir
	OpSpace                    // Node.Space
	OpReadAttrs                // AttrReader.ReadAttrs

	opEnd // one past the last operation

	// OpAny is every operation.
	OpAny = opEnd - 1
)

var opNames = [...]string{
	"create", "write", "finish", "commit", "abort", "setattrs", "open",
	"read", "stat", "list", "remove", "rename", "mkdir", "space", "readattrs",
}

// String returns the operation names joined by "|", or "any" for OpAny.
func (o Op) String() string {
	if o == OpAny {
		return "any"
	}
	var names []string
	for i, name := range opNames {
		if o&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	if rest := o &^ OpAny; rest != 0 {
		names = append(names, fmt.Sprintf("Op(%#x)", uint32(rest)))
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "|")
}

// Action is what a Rule does to a call it fires on.
type Action struct {
	kind  actionKind
	err   error
	delay time.Duration // of Delay
}

type actionKind int

const (
	actFail actionKind = iota
	actHang
	actDelay
	actCorrupt
)

// Fail returns an Action that makes the call return an error wrapping
// ErrInjected and, if err is not nil, err too (so Fail(ErrNoSpace)
// simulates a full disk). The inner node is not called.
func Fail(err error) Action { return Action{kind: actFail, err: err} }

// Hang returns an Action that blocks the call until its context is done
// and then returns an error wrapping ErrInjected and ctx.Err(). The inner
// node is not called. A call with a context that is never done hangs
// forever.
func Hang() Action { return Action{kind: actHang} }

// Delay returns an Action that holds the call for d (less if its context
// is done first, which then fails the call as Hang does) and then passes
// it to the inner node: a slow node rather than a hung one. Delayed
// calls count in Injected like other faults, even when they succeed.
func Delay(d time.Duration) Action { return Action{kind: actDelay, delay: d} }

// Corrupt returns an Action that flips one bit of the data: for OpRead,
// of the bytes the inner File returned; for OpWrite, of a copy of the
// bytes passed to the inner Upload. The byte and bit are a deterministic
// function of the rule's seed (see WithProbability; 0 otherwise) and the
// offset of the data in the file. A Corrupt rule never fires on other
// operations; a read that returns no bytes is left as it is.
func Corrupt() Action { return Action{kind: actCorrupt} }

// Rule selects calls of a Faulty node and the Action to take on them. A
// Rule is built with Inject and refined with its methods before it is
// passed to Wrap; it is safe for concurrent use and keeps its own call
// count, so share it between Faulty nodes only on purpose.
type Rule struct {
	ops     Op
	action  Action
	match   func(path string) bool
	index   int64 // -1: every call
	from    int64 // calls before this one are let through
	prob    float64
	hasProb bool
	seed    uint64

	mu    sync.Mutex
	calls int64 // matching calls seen
	rng   *rand.Rand
	fired atomic.Int64
}

// Inject returns a rule that takes action on every call of the operations
// ops.
func Inject(ops Op, action Action) *Rule {
	if action.kind == actCorrupt {
		ops &= OpRead | OpWrite
	}
	return &Rule{ops: ops, action: action, index: -1}
}

// Path restricts r to calls whose path satisfies match. Rename calls
// match if either path does; Space calls have the empty path.
func (r *Rule) Path(match func(path string) bool) *Rule {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.match = match
	return r
}

// OnIndex restricts r to the n-th (0-based) call that matches its
// operations and path; the rule fires at most once. A negative n removes
// the restriction.
func (r *Rule) OnIndex(n int64) *Rule {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.index = max(n, -1)
	return r
}

// FromIndex restricts r to the n-th (0-based) call that matches its
// operations and path and every later one.
func (r *Rule) FromIndex(n int64) *Rule {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.from = max(n, 0)
	return r
}

// WithProbability makes r fire on each matching call with probability p,
// drawn from a generator seeded with seed: the same seed and the same
// sequence of calls give the same faults. Probabilities outside [0, 1] are
// clamped.
func (r *Rule) WithProbability(p float64, seed uint64) *Rule {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prob = min(max(p, 0), 1)
	r.hasProb = true
	r.seed = seed
	r.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return r
}

// Fired returns how many times r has fired.
func (r *Rule) Fired() int64 { return r.fired.Load() }

// fires decides whether r takes action on a call of op on paths, and
// counts the call if it matches.
func (r *Rule) fires(op Op, paths ...string) bool {
	if r.ops&op == 0 {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.match != nil {
		ok := false
		for _, p := range paths {
			ok = ok || r.match(p)
		}
		if !ok {
			return false
		}
	}
	i := r.calls
	r.calls++
	if r.index >= 0 && i != r.index || i < r.from {
		return false
	}
	if r.hasProb && r.rng.Float64() >= r.prob {
		return false
	}
	r.fired.Add(1)
	return true
}

// corrupt flips one bit of p, which holds the file's bytes at off.
func (r *Rule) corrupt(p []byte, off int64) {
	if len(p) == 0 {
		return
	}
	h := mix(r.seed ^ mix(uint64(off)))
	p[h%uint64(len(p))] ^= 1 << (h >> 61)
}

// mix is the splitmix64 finalizer.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Faulty is a Node that injects faults into the calls it passes to
// another Node, in the manner of pebble's vfs/errorfs. Rules are
// consulted in order for each call; the first that fires decides, and
// later rules do not see the call. Uploads and files opened through a
// Faulty node are subject to its rules and to SetDown too. File.Close,
// File.Size and ID are never faulted.
//
// A Faulty node is safe for concurrent use; rules with an index or a
// probability are deterministic only if the calls reach them in a
// deterministic order.
type Faulty struct {
	n        Node
	rules    []*Rule
	down     atomic.Bool
	injected [len(opNames)]atomic.Int64 // by operation bit
}

var _ Node = (*Faulty)(nil)

// Wrap returns a Faulty node that passes calls to n, subject to rules.
func Wrap(n Node, rules ...*Rule) *Faulty {
	return &Faulty{n: n, rules: rules}
}

// SetDown makes every later call, including those on uploads and files
// already open, fail at once with an error wrapping ErrInjected, as if the
// node had died; SetDown(false) brings it back.
func (f *Faulty) SetDown(down bool) { f.down.Store(down) }

// Injected returns how many faults f has injected into the operations
// ops, counting the failures of a down node.
func (f *Faulty) Injected(ops Op) int64 {
	var n int64
	for i := range f.injected {
		if ops&(1<<i) != 0 {
			n += f.injected[i].Load()
		}
	}
	return n
}

// fault decides the fate of a call of op on paths. It returns an error to
// return instead of calling the inner node, or the rule that corrupts the
// call's data, or neither.
func (f *Faulty) fault(ctx context.Context, op Op, paths ...string) (*Rule, error) {
	what := strings.Join(paths, " -> ")
	if op == OpSpace {
		what = ""
	}
	if f.down.Load() {
		f.count(op)
		return nil, f.wrap(op, what, fmt.Errorf("%w: node down", ErrInjected))
	}
	for _, r := range f.rules {
		if !r.fires(op, paths...) {
			continue
		}
		f.count(op)
		switch r.action.kind {
		case actHang:
			<-ctx.Done()
			return nil, f.wrap(op, what, fmt.Errorf("%w: hang: %w", ErrInjected, ctx.Err()))
		case actDelay:
			t := time.NewTimer(r.action.delay)
			select {
			case <-t.C:
				return nil, nil
			case <-ctx.Done():
				t.Stop()
				return nil, f.wrap(op, what, fmt.Errorf("%w: delay: %w", ErrInjected, ctx.Err()))
			}
		case actCorrupt:
			return r, nil
		default:
			if r.action.err != nil {
				return nil, f.wrap(op, what, fmt.Errorf("%w: %w", ErrInjected, r.action.err))
			}
			return nil, f.wrap(op, what, ErrInjected)
		}
	}
	return nil, nil
}

func (f *Faulty) count(op Op) {
	f.injected[bits.TrailingZeros32(uint32(op))].Add(1)
}

func (f *Faulty) wrap(op Op, what string, err error) error {
	if what == "" {
		return fmt.Errorf("node %s: %s: %w", f.n.ID(), op, err)
	}
	return fmt.Errorf("node %s: %s %s: %w", f.n.ID(), op, what, err)
}

// ID returns the inner node's ID.
func (f *Faulty) ID() string { return f.n.ID() }

// Create implements Node. The Upload implements Attributes if the inner
// node's does.
func (f *Faulty) Create(ctx context.Context, path string) (Upload, error) {
	if _, err := f.fault(ctx, OpCreate, path); err != nil {
		return nil, err
	}
	u, err := f.n.Create(ctx, path)
	if err != nil {
		return nil, err
	}
	fu := &faultyUpload{f: f, u: u, path: path}
	if a, ok := u.(Attributes); ok {
		return &faultyAttrUpload{faultyUpload: fu, a: a}, nil
	}
	return fu, nil
}

// Open implements Node.
func (f *Faulty) Open(ctx context.Context, path string) (File, error) {
	if _, err := f.fault(ctx, OpOpen, path); err != nil {
		return nil, err
	}
	file, err := f.n.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	return &faultyFile{f: f, file: file, path: path}, nil
}

// Stat implements Node.
func (f *Faulty) Stat(ctx context.Context, path string) (FileInfo, error) {
	if _, err := f.fault(ctx, OpStat, path); err != nil {
		return FileInfo{}, err
	}
	return f.n.Stat(ctx, path)
}

// ReadAttrs implements AttrReader when the inner node does; otherwise it
// fails with ErrNoAttrs.
func (f *Faulty) ReadAttrs(ctx context.Context, path string) (map[string]string, error) {
	a, ok := f.n.(AttrReader)
	if !ok {
		return nil, fmt.Errorf("node %s: readattrs %s: %w", f.n.ID(), path, ErrNoAttrs)
	}
	if _, err := f.fault(ctx, OpReadAttrs, path); err != nil {
		return nil, err
	}
	return a.ReadAttrs(ctx, path)
}

// KeepsAttrs implements AttrReader: whether the inner node does.
func (f *Faulty) KeepsAttrs() bool {
	a, ok := f.n.(AttrReader)
	return ok && a.KeepsAttrs()
}

// List implements Node.
func (f *Faulty) List(ctx context.Context, dir string) ([]FileInfo, error) {
	if _, err := f.fault(ctx, OpList, dir); err != nil {
		return nil, err
	}
	return f.n.List(ctx, dir)
}

// ListNames implements NameLister, with OpList's faults: the inner
// node's ListNames, or its List without the files' descriptions.
func (f *Faulty) ListNames(ctx context.Context, dir string) ([]FileInfo, error) {
	if _, err := f.fault(ctx, OpList, dir); err != nil {
		return nil, err
	}
	return listNames(ctx, f.n, dir)
}

// listNames is n's ListNames, or its List without the files'
// descriptions: a wrapper's NameLister over any node.
func listNames(ctx context.Context, n Node, dir string) ([]FileInfo, error) {
	if nl, ok := n.(NameLister); ok {
		return nl.ListNames(ctx, dir)
	}
	fis, err := n.List(ctx, dir)
	for i := range fis {
		if !fis[i].IsDir {
			fis[i] = FileInfo{Name: fis[i].Name}
		}
	}
	return fis, err
}

// ListsAttrs implements AttrsLister: whether the inner node does.
func (f *Faulty) ListsAttrs() bool {
	al, ok := f.n.(AttrsLister)
	return ok && al.ListsAttrs()
}

// Remove implements Node.
func (f *Faulty) Remove(ctx context.Context, path string) error {
	if _, err := f.fault(ctx, OpRemove, path); err != nil {
		return err
	}
	return f.n.Remove(ctx, path)
}

// Rename implements Node.
func (f *Faulty) Rename(ctx context.Context, oldPath, newPath string) error {
	if _, err := f.fault(ctx, OpRename, oldPath, newPath); err != nil {
		return err
	}
	return f.n.Rename(ctx, oldPath, newPath)
}

// Mkdir implements Node.
func (f *Faulty) Mkdir(ctx context.Context, path string) error {
	if _, err := f.fault(ctx, OpMkdir, path); err != nil {
		return err
	}
	return f.n.Mkdir(ctx, path)
}

// Space implements Node.
func (f *Faulty) Space(ctx context.Context) (Space, error) {
	if _, err := f.fault(ctx, OpSpace, ""); err != nil {
		return Space{}, err
	}
	return f.n.Space(ctx)
}

// faultyUpload is the Upload of a Faulty node.
type faultyUpload struct {
	f    *Faulty
	u    Upload
	path string
	off  int64 // bytes written so far, for Corrupt
}

func (u *faultyUpload) Write(ctx context.Context, p []byte) error {
	r, err := u.f.fault(ctx, OpWrite, u.path)
	if err != nil {
		return err
	}
	if r != nil {
		p = append([]byte(nil), p...)
		r.corrupt(p, u.off)
	}
	if err := u.u.Write(ctx, p); err != nil {
		return err
	}
	u.off += int64(len(p))
	return nil
}

func (u *faultyUpload) Finish(ctx context.Context) error {
	if _, err := u.f.fault(ctx, OpFinish, u.path); err != nil {
		return err
	}
	return u.u.Finish(ctx)
}

func (u *faultyUpload) Commit(ctx context.Context) error {
	if _, err := u.f.fault(ctx, OpCommit, u.path); err != nil {
		return err
	}
	return u.u.Commit(ctx)
}

func (u *faultyUpload) Abort(ctx context.Context) error {
	if _, err := u.f.fault(ctx, OpAbort, u.path); err != nil {
		return err
	}
	return u.u.Abort(ctx)
}

func (u *faultyUpload) TempPath() string { return u.u.TempPath() }

// faultyAttrUpload is a faultyUpload over an Upload with Attributes.
type faultyAttrUpload struct {
	*faultyUpload
	a Attributes
}

func (u *faultyAttrUpload) SetAttrs(ctx context.Context, attrs map[string]string) error {
	if _, err := u.f.fault(ctx, OpSetAttrs, u.path); err != nil {
		return err
	}
	return u.a.SetAttrs(ctx, attrs)
}

// faultyFile is the File of a Faulty node.
type faultyFile struct {
	f    *Faulty
	file File
	path string
}

func (f *faultyFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	r, err := f.f.fault(ctx, OpRead, f.path)
	if err != nil {
		return 0, err
	}
	n, err := f.file.ReadAt(ctx, p, off)
	if r != nil && n > 0 {
		r.corrupt(p[:n], off)
	}
	return n, err
}

func (f *faultyFile) Size() int64  { return f.file.Size() }
func (f *faultyFile) Close() error { return f.file.Close() }
