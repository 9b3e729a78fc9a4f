package node_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/node/nodetest"
)

func TestFaultyConformance(t *testing.T) {
	nodetest.Run(t, func(t *testing.T) node.Node {
		return node.Wrap(newLocal(t, node.LocalOptions{}))
	})
}

// put writes data to path on n.
func put(t *testing.T, n node.Node, path string, data []byte) {
	t.Helper()
	ctx := context.Background()
	u, err := n.Create(ctx, path)
	if err != nil {
		t.Fatalf("Create(%q): %v", path, err)
	}
	if err := u.Write(ctx, data); err != nil {
		t.Fatalf("Write(%q): %v", path, err)
	}
	if err := u.Commit(ctx); err != nil {
		t.Fatalf("Commit(%q): %v", path, err)
	}
}

// read returns the content of path on n.
func read(t *testing.T, n node.Node, path string) []byte {
	t.Helper()
	ctx := context.Background()
	f, err := n.Open(ctx, path)
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	defer f.Close()
	buf := make([]byte, f.Size())
	if _, err := f.ReadAt(ctx, buf, 0); err != nil {
		t.Fatalf("ReadAt(%q): %v", path, err)
	}
	return buf
}

func TestFaultyFail(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		op   node.Op
		call func(n node.Node) error
	}{
		{"create", node.OpCreate, func(n node.Node) error { _, err := n.Create(ctx, "/new"); return err }},
		{"open", node.OpOpen, func(n node.Node) error { _, err := n.Open(ctx, "/f"); return err }},
		{"stat", node.OpStat, func(n node.Node) error { _, err := n.Stat(ctx, "/f"); return err }},
		{"list", node.OpList, func(n node.Node) error { _, err := n.List(ctx, "/"); return err }},
		{"remove", node.OpRemove, func(n node.Node) error { return n.Remove(ctx, "/f") }},
		{"rename", node.OpRename, func(n node.Node) error { return n.Rename(ctx, "/f", "/g") }},
		{"mkdir", node.OpMkdir, func(n node.Node) error { return n.Mkdir(ctx, "/d") }},
		{"space", node.OpSpace, func(n node.Node) error { _, err := n.Space(ctx); return err }},
		{"readattrs", node.OpReadAttrs, func(n node.Node) error {
			_, err := n.(node.AttrReader).ReadAttrs(ctx, "/f")
			return err
		}},
		{"write", node.OpWrite, func(n node.Node) error {
			return withUpload(n, func(u node.Upload) error { return u.Write(ctx, []byte("x")) })
		}},
		{"finish", node.OpFinish, func(n node.Node) error { return withUpload(n, func(u node.Upload) error { return u.Finish(ctx) }) }},
		{"commit", node.OpCommit, func(n node.Node) error { return withUpload(n, func(u node.Upload) error { return u.Commit(ctx) }) }},
		{"abort", node.OpAbort, func(n node.Node) error {
			u, err := n.Create(ctx, "/up")
			if err != nil {
				return nil
			}
			return u.Abort(ctx)
		}},
		{"setattrs", node.OpSetAttrs, func(n node.Node) error {
			return withUpload(n, func(u node.Upload) error {
				return u.(node.Attributes).SetAttrs(ctx, map[string]string{"k": "v"})
			})
		}},
		{"read", node.OpRead, func(n node.Node) error {
			f, err := n.Open(ctx, "/f")
			if err != nil {
				return nil
			}
			defer f.Close()
			_, err = f.ReadAt(ctx, make([]byte, 1), 0)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			local := newLocal(t, node.LocalOptions{})
			put(t, local, "/f", []byte("data"))
			rule := node.Inject(tt.op, node.Fail(node.ErrNoSpace))
			f := node.Wrap(local, rule)
			err := tt.call(f)
			if !errors.Is(err, node.ErrInjected) || !errors.Is(err, node.ErrNoSpace) {
				t.Fatalf("err = %v; want one wrapping ErrInjected and ErrNoSpace", err)
			}
			if !strings.Contains(err.Error(), "node n1: "+tt.name) {
				t.Errorf("err = %q; want it to name the node and operation", err)
			}
			if got := rule.Fired(); got != 1 {
				t.Errorf("Fired() = %d; want 1", got)
			}
			if got := f.Injected(tt.op); got != 1 {
				t.Errorf("Injected(%v) = %d; want 1", tt.op, got)
			}
			if got := f.Injected(node.OpAny &^ tt.op); got != 0 {
				t.Errorf("Injected(other ops) = %d; want 0", got)
			}
			// The other operations pass.
			if tt.op != node.OpOpen && tt.op != node.OpRead {
				if got := read(t, f, "/f"); string(got) != "data" {
					t.Errorf("content = %q", got)
				}
			}
		})
	}
}

// withUpload creates an upload on n, calls fn and aborts the upload.
func withUpload(n node.Node, fn func(u node.Upload) error) error {
	ctx := context.Background()
	u, err := n.Create(ctx, "/up")
	if err != nil {
		return err
	}
	defer u.Abort(ctx)
	return fn(u)
}

func TestFaultyFailNil(t *testing.T) {
	f := node.Wrap(newLocal(t, node.LocalOptions{}), node.Inject(node.OpAny, node.Fail(nil)))
	_, err := f.Stat(context.Background(), "/")
	if !errors.Is(err, node.ErrInjected) {
		t.Errorf("err = %v; want ErrInjected", err)
	}
}

func TestFaultyOnIndex(t *testing.T) {
	ctx := context.Background()
	rule := node.Inject(node.OpWrite|node.OpFinish, node.Fail(nil)).OnIndex(2)
	f := node.Wrap(newLocal(t, node.LocalOptions{}), rule)
	u, err := f.Create(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer u.Abort(ctx)
	var got []bool
	for range 4 {
		got = append(got, u.Write(ctx, []byte("x")) == nil)
	}
	got = append(got, u.Finish(ctx) == nil)
	if want := []bool{true, true, false, true, true}; !slices.Equal(got, want) {
		t.Errorf("successes = %v; want %v", got, want)
	}
	if rule.Fired() != 1 {
		t.Errorf("Fired() = %d; want 1", rule.Fired())
	}
}

func TestFaultyPath(t *testing.T) {
	ctx := context.Background()
	bad := func(p string) bool { return strings.HasPrefix(p, "/bad/") }
	f := node.Wrap(newLocal(t, node.LocalOptions{}), node.Inject(node.OpAny, node.Fail(nil)).Path(bad))
	put(t, f, "/good/f", []byte("x"))
	if _, err := f.Create(ctx, "/bad/f"); !errors.Is(err, node.ErrInjected) {
		t.Errorf("Create(/bad/f): err = %v; want ErrInjected", err)
	}
	if err := f.Rename(ctx, "/good/f", "/bad/g"); !errors.Is(err, node.ErrInjected) {
		t.Errorf("Rename to /bad: err = %v; want ErrInjected", err)
	}
	if _, err := f.Space(ctx); err != nil {
		t.Errorf("Space: %v", err)
	}
	if f.Injected(node.OpAny) != 2 {
		t.Errorf("Injected = %d; want 2", f.Injected(node.OpAny))
	}
}

func TestFaultyFirstRuleWins(t *testing.T) {
	first := node.Inject(node.OpStat, node.Fail(node.ErrNotDir))
	second := node.Inject(node.OpStat, node.Fail(node.ErrIsDir))
	f := node.Wrap(newLocal(t, node.LocalOptions{}), first, second)
	_, err := f.Stat(context.Background(), "/")
	if !errors.Is(err, node.ErrNotDir) || first.Fired() != 1 || second.Fired() != 0 {
		t.Errorf("err = %v, fired %d, %d; want the first rule only", err, first.Fired(), second.Fired())
	}
}

func TestFaultyProbability(t *testing.T) {
	ctx := context.Background()
	local := newLocal(t, node.LocalOptions{})
	sequence := func(p float64, seed uint64) []bool {
		f := node.Wrap(local, node.Inject(node.OpStat, node.Fail(nil)).WithProbability(p, seed))
		out := make([]bool, 1000)
		for i := range out {
			_, err := f.Stat(ctx, "/")
			out[i] = err != nil
		}
		return out
	}
	count := func(s []bool) (n int) {
		for _, b := range s {
			if b {
				n++
			}
		}
		return n
	}
	a, b, c := sequence(0.3, 42), sequence(0.3, 42), sequence(0.3, 43)
	if !slices.Equal(a, b) {
		t.Error("the same seed gave different fault sequences")
	}
	if slices.Equal(a, c) {
		t.Error("different seeds gave the same fault sequence")
	}
	if n := count(a); n < 230 || n > 370 {
		t.Errorf("%d faults in 1000 calls at p=0.3", n)
	}
	if n := count(sequence(0, 1)); n != 0 {
		t.Errorf("%d faults at p=0", n)
	}
	if n := count(sequence(1, 1)); n != 1000 {
		t.Errorf("%d faults at p=1", n)
	}
}

func TestFaultyHang(t *testing.T) {
	local := newLocal(t, node.LocalOptions{})
	put(t, local, "/f", []byte("data"))
	f := node.Wrap(local, node.Inject(node.OpStat|node.OpRead, node.Hang()))

	t.Run("deadline", func(t *testing.T) {
		// start is taken before the deadline is set: taken after, it
		// is later than the deadline's own start, and the check below
		// failed now and then under load (1 run in 12 of 12 at once).
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err := f.Stat(ctx, "/f")
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, node.ErrInjected) {
			t.Errorf("err = %v; want DeadlineExceeded and ErrInjected", err)
		}
		if time.Since(start) < 20*time.Millisecond {
			t.Error("returned before the deadline")
		}
	})
	t.Run("cancel", func(t *testing.T) {
		file, err := f.Open(context.Background(), "/f")
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			_, err := file.ReadAt(ctx, make([]byte, 4), 0)
			done <- err
		}()
		select {
		case err := <-done:
			t.Fatalf("ReadAt returned %v before cancel", err)
		case <-time.After(10 * time.Millisecond):
		}
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v; want context.Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("ReadAt did not return after cancel")
		}
	})
}

// diff returns the offsets at which a and b differ.
func diff(a, b []byte) []int {
	var out []int
	for i := range a {
		if a[i] != b[i] {
			out = append(out, i)
		}
	}
	return out
}

func TestFaultyCorruptRead(t *testing.T) {
	ctx := context.Background()
	local := newLocal(t, node.LocalOptions{})
	data := bytes.Repeat([]byte("0123456789"), 100)
	put(t, local, "/f", data)
	readVia := func(seed uint64, off int64) []byte {
		f := node.Wrap(local, node.Inject(node.OpAny, node.Corrupt()).WithProbability(1, seed))
		file, err := f.Open(ctx, "/f")
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer file.Close()
		buf := make([]byte, 500)
		if n, err := file.ReadAt(ctx, buf, off); n != len(buf) || err != nil {
			t.Fatalf("ReadAt = %d, %v", n, err)
		}
		if f.Injected(node.OpRead) != 1 || f.Injected(node.OpAny) != 1 {
			t.Errorf("Injected = %d; want 1 on reads", f.Injected(node.OpAny))
		}
		return buf
	}
	a := readVia(7, 100)
	if d := diff(a, data[100:600]); len(d) != 1 {
		t.Errorf("corrupted bytes at %v; want exactly one", d)
	}
	if !bytes.Equal(a, readVia(7, 100)) {
		t.Error("the same seed and offset corrupted differently")
	}
	if bytes.Equal(a, readVia(8, 100)) && bytes.Equal(a, readVia(9, 100)) {
		t.Error("other seeds corrupt the same byte")
	}
}

func TestFaultyCorruptWrite(t *testing.T) {
	ctx := context.Background()
	local := newLocal(t, node.LocalOptions{})
	rule := node.Inject(node.OpWrite, node.Corrupt()).OnIndex(1)
	f := node.Wrap(local, rule)
	parts := [][]byte{bytes.Repeat([]byte{'a'}, 100), bytes.Repeat([]byte{'b'}, 100), bytes.Repeat([]byte{'c'}, 100)}
	u, err := f.Create(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		if err := u.Write(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := u.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	want := slices.Concat(parts...)
	if d := diff(read(t, local, "/f"), want); len(d) != 1 || d[0] < 100 || d[0] >= 200 {
		t.Errorf("corrupted bytes at %v; want one in the second write", d)
	}
	if !bytes.Equal(parts[1], bytes.Repeat([]byte{'b'}, 100)) {
		t.Error("Corrupt modified the caller's buffer")
	}
}

func TestFaultyCorruptOtherOps(t *testing.T) {
	rule := node.Inject(node.OpAny, node.Corrupt())
	local := newLocal(t, node.LocalOptions{})
	put(t, local, "/f", nil)
	f := node.Wrap(local, rule)
	if err := f.Mkdir(context.Background(), "/d"); err != nil {
		t.Errorf("Mkdir: %v", err)
	}
	if _, err := f.Stat(context.Background(), "/f"); err != nil {
		t.Errorf("Stat: %v", err)
	}
	if rule.Fired() != 0 {
		t.Errorf("Corrupt fired %d times on operations without data", rule.Fired())
	}
}

func TestFaultyDown(t *testing.T) {
	ctx := context.Background()
	local := newLocal(t, node.LocalOptions{})
	put(t, local, "/f", []byte("data"))
	f := node.Wrap(local)
	file, err := f.Open(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	u, err := f.Create(ctx, "/g")
	if err != nil {
		t.Fatal(err)
	}

	f.SetDown(true)
	errs := []error{
		u.Write(ctx, []byte("x")),
		u.Commit(ctx),
		f.Remove(ctx, "/f"),
		f.Mkdir(ctx, "/d"),
	}
	_, err = file.ReadAt(ctx, make([]byte, 4), 0)
	errs = append(errs, err)
	_, err = f.Stat(ctx, "/f")
	errs = append(errs, err)
	_, err = f.Space(ctx)
	errs = append(errs, err)
	for i, err := range errs {
		if !errors.Is(err, node.ErrInjected) {
			t.Errorf("call %d on a down node: err = %v; want ErrInjected", i, err)
		}
	}
	if got := f.Injected(node.OpAny); got != int64(len(errs)) {
		t.Errorf("Injected = %d; want %d", got, len(errs))
	}

	f.SetDown(false)
	if err := u.Abort(ctx); err != nil {
		t.Errorf("Abort after SetDown(false): %v", err)
	}
	if got := read(t, f, "/f"); string(got) != "data" {
		t.Errorf("content = %q", got)
	}
}

// plainNode hides the Attributes of its uploads.
type plainNode struct{ node.Node }

func (n plainNode) Create(ctx context.Context, path string) (node.Upload, error) {
	u, err := n.Node.Create(ctx, path)
	return struct{ node.Upload }{u}, err
}

func TestFaultyAttributes(t *testing.T) {
	ctx := context.Background()
	local := newLocal(t, node.LocalOptions{})
	for _, tt := range []struct {
		name  string
		inner node.Node
		want  bool
	}{{"local", local, true}, {"plain", plainNode{local}, false}} {
		u, err := node.Wrap(tt.inner).Create(ctx, "/"+tt.name)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := u.(node.Attributes); ok != tt.want {
			t.Errorf("%s: upload implements Attributes: %v; want %v", tt.name, ok, tt.want)
		}
		u.Abort(ctx)
	}
}

func TestOpString(t *testing.T) {
	for op, want := range map[node.Op]string{
		node.OpCreate:                 "create",
		node.OpRead | node.OpWrite:    "write|read",
		node.OpAny:                    "any",
		0:                             "none",
		node.OpSpace | node.Op(1<<30): "space|Op(0x40000000)",
	} {
		if got := op.String(); got != want {
			t.Errorf("Op(%#x).String() = %q; want %q", uint32(op), got, want)
		}
	}
}
