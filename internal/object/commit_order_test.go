package object

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
)

// Regression: an overwrite whose renames stopped after more than M but
// fewer than K archives (the client gone during Close, or renames failing
// on more than M nodes) removed the finished archives of the slots left,
// and with them the last whole version: neither the old object nor the
// new one could be read. The renames now outlive the client by
// WriteTimeout, and the archives a failed rename leaves are kept for the
// next read to roll the commit forward.
func TestPartialCommitKeepsAVersion(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 256}
	old := randBytes(rand.New(rand.NewPCG(seed(t), 1)), 3000)
	fresh := bytes.Repeat([]byte("n"), 3000)
	for _, tc := range []struct {
		name   string
		rename node.Action // on 3 nodes: more than M, fewer than K
		cancel bool        // the client goes away during Close
		ok     bool        // Close succeeds
	}{
		{"client gone, renames slow", node.Delay(200 * time.Millisecond), true, true},
		{"client gone, renames hang", node.Hang(), true, false},
		{"renames fail", node.Fail(errors.New("rename failed")), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, fs := faultyCluster(t, 6, g, func(o *Options) { o.Spares = -1 })
			put(t, c.store, "/x", old)
			nodes := slices.Clone(c.nodes)
			for i := range 3 {
				nodes[i] = node.Wrap(fs[i], node.Inject(node.OpCommit, tc.rename))
			}
			s := c.storeOver(t, nodes, func(o *Options) { o.WriteTimeout = 300 * time.Millisecond })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w, err := s.Create(ctx, "/x", nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(fresh); err != nil {
				t.Fatal(err)
			}
			if tc.cancel {
				time.AfterFunc(100*time.Millisecond, cancel)
			}
			cerr := w.Close()
			if (cerr == nil) != tc.ok || cerr != nil && !errors.Is(cerr, ErrInDoubt) {
				t.Errorf("close: %v; want success %v, or ErrInDoubt", cerr, tc.ok)
			}
			s.Drain() // background aborts and removals
			got, err := get(c.store, "/x")
			if err != nil {
				t.Fatalf("after the interrupted overwrite /x is unreadable: %v", err)
			}
			// More than M archives of the old version were replaced: only
			// the new one can be whole.
			if !bytes.Equal(got, fresh) {
				t.Errorf("read %d bytes, not the new version's", len(got))
			}
		})
	}
}

// Two overwrites of a path through one gateway commit in turn: the
// renames of the second do not land between those of the first, which
// left some nodes with one version and the rest with the other, neither
// readable, while both writes reported success.
func TestOverwritesThroughOneGatewayDoNotInterleave(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 256}
	c, fs := faultyCluster(t, 6, g, func(o *Options) { o.Spares = -1 })
	put(t, c.store, "/x", bytes.Repeat([]byte("o"), 3000))
	// The first commit's renames are slow on nodes 0-2; the second
	// commit's (each node's second rename) are not.
	nodes := slices.Clone(c.nodes)
	for i := range 3 {
		nodes[i] = node.Wrap(fs[i], node.Inject(node.OpCommit, node.Delay(300*time.Millisecond)).OnIndex(0))
	}
	s := c.storeOver(t, nodes, func(o *Options) { o.WriteLag = 5 * time.Second })
	a, b := bytes.Repeat([]byte("a"), 3000), bytes.Repeat([]byte("b"), 3000)
	wa, err := s.Create(ctx, "/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	wb, err := s.Create(ctx, "/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	wa.Write(a)
	wb.Write(b)
	done := make(chan error, 1)
	go func() { done <- wa.Close() }()
	time.Sleep(100 * time.Millisecond) // a's renames are under way
	if err := wb.Close(); err != nil {
		t.Fatalf("close b: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("close a: %v", err)
	}
	got, err := get(c.store, "/x")
	if err != nil {
		t.Fatalf("both writes succeeded, yet /x is unreadable: %v", err)
	}
	if !bytes.Equal(got, b) {
		t.Errorf("read %.1q..., want the later commit's bytes", got[:1])
	}
}

// A removal through the gateway that is committing the path waits for
// the commit: interleaved, it removed what had been renamed and the late
// renames then left a part of the new version, unreadable, after both
// calls succeeded.
func TestRemoveWaitsForACommitInFlight(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 256}
	c, fs := faultyCluster(t, 6, g, func(o *Options) { o.Spares = -1 })
	put(t, c.store, "/x", bytes.Repeat([]byte("o"), 3000))
	nodes := slices.Clone(c.nodes)
	for i := range 3 {
		nodes[i] = node.Wrap(fs[i], node.Inject(node.OpCommit, node.Delay(300*time.Millisecond)))
	}
	s := c.storeOver(t, nodes, func(o *Options) { o.WriteLag = 5 * time.Second })
	w, err := s.Create(ctx, "/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(bytes.Repeat([]byte("n"), 3000))
	removed := make(chan error, 1)
	time.AfterFunc(100*time.Millisecond, func() { removed <- s.Remove(ctx, "/x") })
	if err := w.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := <-removed; err != nil {
		t.Fatalf("remove: %v", err)
	}
	if _, err := get(c.store, "/x"); !errors.Is(err, ErrNotExist) {
		t.Errorf("after the commit and then the removal, read /x: %v; want ErrNotExist", err)
	}
	if left := c.archivesOf("/x"); len(left) != 0 {
		t.Errorf("archives left: %v", left)
	}
}

// A write's Precondition sees, at commit, the object the path holds then
// (nil for none); refused, the write leaves the path as it was.
func TestPreconditionAtCommit(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 6, layout.Geometry{K: 4, M: 2, ChunkSize: 256})
	old := bytes.Repeat([]byte("o"), 3000)
	refuse := errors.New("refused")
	var seen []*Info
	write := func(path string, data []byte, ok bool) error {
		w, err := c.store.Create(ctx, path, &CreateOptions{Precondition: func(cur *Info) error {
			seen = append(seen, cur)
			if !ok {
				return refuse
			}
			return nil
		}})
		if err != nil {
			return err
		}
		w.Write(data)
		return w.Close()
	}
	if err := write("/p", old, true); err != nil {
		t.Fatal(err)
	}
	if err := write("/p", []byte("new"), false); !errors.Is(err, refuse) {
		t.Fatalf("refused write: %v", err)
	}
	if len(seen) != 2 || seen[0] != nil || seen[1] == nil || seen[1].Size != int64(len(old)) {
		t.Errorf("preconditions saw %+v; want nothing, then the object of %d bytes", seen, len(old))
	}
	if got, err := get(c.store, "/p"); err != nil || !bytes.Equal(got, old) {
		t.Errorf("after the refused write: %d bytes, %v; want the old object", len(got), err)
	}
	if tmp := c.tempFiles(t); len(tmp) != 0 {
		c.store.Drain()
		if tmp = c.tempFiles(t); len(tmp) != 0 {
			t.Errorf("temporary archives left: %v", tmp)
		}
	}
}
