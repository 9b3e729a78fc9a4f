//go:build interop

package xrdnode

// The driver against the real xrootd data server of XRootD 5.5:
//
//	go test -tags interop ./internal/node/xrdnode/
//
// A missing xrootd skips these tests, except with CI=true, where it
// fails them.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/node/nodetest"
)

func TestInteropConformance(t *testing.T) {
	s := startReal(t)
	var seq atomic.Int32
	nodetest.Run(t, func(t *testing.T) node.Node {
		return newNode(t, fmt.Sprintf("root://%s//nodes/n%d", s.addr, seq.Add(1)), Options{Fsync: true})
	})
}

// TestInteropNames checks names that root:// carries as they are.
func TestInteropNames(t *testing.T) {
	s := startReal(t)
	n := newNode(t, "root://"+s.addr+"//names", Options{})
	ctx := context.Background()
	for _, name := range []string{"with space", "per%25cent", "hash#tag", "amp&eq=1", "ünïcödé", "semi;colon", "'quote\""} {
		t.Run(name, func(t *testing.T) {
			p := "/d/" + name
			u, err := n.Create(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if err := u.Write(ctx, []byte(name)); err != nil {
				t.Fatal(err)
			}
			if err := u.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, n, ctx, p); string(got) != name {
				t.Errorf("content %q", got)
			}
			ents, err := n.List(ctx, "/d")
			if err != nil || !slices.ContainsFunc(ents, func(fi node.FileInfo) bool { return fi.Name == name }) {
				t.Errorf("List = %+v, %v; want %q", ents, err, name)
			}
			if err := n.Rename(ctx, p, p+" moved"); err != nil {
				t.Fatal(err)
			}
			if err := n.Remove(ctx, p+" moved"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestInteropRenameOntoDirectory checks the mapping of xrootd's answers
// (and of rename(2)'s replacing an empty directory) to the contract.
func TestInteropRenameOntoDirectory(t *testing.T) {
	s := startReal(t)
	testRenameOntoDirectory(t, newNode(t, "root://"+s.addr+"//mv", Options{}))
}

// TestInteropReconnect kills xrootd and starts it again on the same
// port: calls after the restart succeed on new connections.
func TestInteropReconnect(t *testing.T) {
	s := startReal(t)
	n := newNode(t, "root://"+s.addr+"//r", Options{Conns: 3})
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	putFile(t, n, "/f", data)
	for range 6 {
		if _, err := n.Stat(ctx, "/f"); err != nil {
			t.Fatal(err)
		}
	}
	s.stop()
	start := time.Now()
	s.start()
	t.Logf("xrootd restarted in %v", time.Since(start))
	for i := range 6 {
		if fi, err := n.Stat(ctx, "/f"); err != nil || fi.Size != int64(len(data)) {
			t.Fatalf("Stat #%d after restart = %+v, %v", i, fi, err)
		}
	}
	if got := readAll(t, n, ctx, "/f"); !bytes.Equal(got, data) {
		t.Error("content differs after restart")
	}
}

// TestInteropStopped stops xrootd with SIGSTOP: calls return at their
// deadline, and the node works again after SIGCONT.
func TestInteropStopped(t *testing.T) {
	s := startReal(t)
	n := newNode(t, "root://"+s.addr+"//s", Options{
		DialTimeout:    300 * time.Millisecond,
		CleanupTimeout: 300 * time.Millisecond,
		WriteBuffer:    64 << 10,
	})
	ctx := context.Background()
	u, err := n.Create(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Write(ctx, []byte("data")); err != nil {
		t.Fatal(err)
	}
	if err := u.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	f, err := n.Open(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := n.Create(ctx, "/g")
	if err != nil {
		t.Fatal(err)
	}

	s.pause()
	// All at once, so that each meets a hung connection rather than one
	// already dropped as unresponsive.
	const deadline = 300 * time.Millisecond
	var wg sync.WaitGroup
	check := func(what string, fn func(ctx context.Context) error) {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, deadline)
			defer cancel()
			start := time.Now()
			err := fn(cctx)
			took := time.Since(start)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s: err = %v; want context.DeadlineExceeded", what, err)
			}
			if took > deadline+time.Second {
				t.Errorf("%s took %v; deadline %v", what, took, deadline)
			}
		})
	}
	check("ReadAt", func(ctx context.Context) error { _, err := f.ReadAt(ctx, make([]byte, 4), 0); return err })
	check("Stat", func(ctx context.Context) error { _, err := n.Stat(ctx, "/f"); return err })
	check("List", func(ctx context.Context) error { _, err := n.List(ctx, "/"); return err })
	check("Create", func(ctx context.Context) error { _, err := n.Create(ctx, "/h"); return err })
	check("Write+Finish", func(ctx context.Context) error {
		for range 16 {
			if err := w.Write(ctx, make([]byte, 64<<10)); err != nil {
				return err
			}
		}
		return w.Finish(ctx)
	})
	wg.Wait()
	start := time.Now()
	_ = w.Abort(ctx)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Abort took %v", took)
	}
	s.signal(syscall.SIGCONT)

	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The pings of requests that timed out may still be running, and
	// one that began shortly before the thaw can still fail (the server
	// works through its backlog first) and drop its connection under a
	// new request. Wait for them: they end within DialTimeout.
	waitPings(t, n)
	// Connections whose pings failed were dropped; the others answer
	// again.
	if got := readAll(t, n, cctx, "/f"); string(got) != "data" {
		t.Errorf("read after SIGCONT = %q", got)
	}
}

// waitPings waits until no connection of n's pool is being pinged.
func waitPings(t *testing.T, n *Node) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		busy := false
		for i := range n.pool.slots {
			sl := &n.pool.slots[i]
			sl.mu.Lock()
			busy = busy || sl.cur != nil && sl.cur.probing.Load()
			sl.mu.Unlock()
		}
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("connection pings still running 5 s after the thaw")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func init() {
	benchServers = append(benchServers, benchServer{name: "xrootd", remote: true, start: func(b *testing.B) (string, node.Node) {
		return "root://" + startReal(b).addr + "//bench", nil
	}})
}

// A real xrootd is not taken to run a file's writes in order: uploads
// wait for each answer before the next request.
func TestInteropWritesWaitForAnswers(t *testing.T) {
	s := startReal(t)
	n := newNode(t, "root://"+s.addr+"//ordered", Options{Fsync: true})
	putFile(t, n, "/f", []byte("small archive"))
	if ordered, live := orderedConns(n); live == 0 || ordered != 0 {
		t.Errorf("%d of %d connections to xrootd are taken to run writes in order", ordered, live)
	}
}

// A plain xrootd answers the open that reads small files whole with
// kXR_Unsupported: the node opens files with kXR_open from then on, and
// small ones are read as large ones are.
func TestInteropOpenWithoutWholeReads(t *testing.T) {
	s := startReal(t)
	n := newNode(t, "root://"+s.addr+"//whole", Options{})
	ctx := context.Background()
	putFile(t, n, "/f", []byte("small archive"))
	for range 2 {
		f, err := n.Open(ctx, "/f")
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 13)
		if k, err := f.ReadAt(ctx, got, 0); k != 13 || string(got) != "small archive" {
			t.Fatalf("read %q, %v", got[:k], err)
		}
		if _, whole := f.(node.ContentsFile); whole {
			t.Fatal("a plain xrootd's file came whole")
		}
		f.Close()
		if !n.noOpenWhole.active() {
			t.Fatal("the server's kXR_Unsupported did not turn whole reads off")
		}
	}
}

// A plain xrootd answers the listing with attributes kXR_Unsupported:
// the node lists with kXR_dirlist from then on, and the files come
// without attributes (the store reads them by path).
func TestInteropListWithoutAttrListing(t *testing.T) {
	s := startReal(t)
	n := newNode(t, "root://"+s.addr+"//listing", Options{})
	ctx := context.Background()
	putFile(t, n, "/d/f", []byte("x"))
	for range 2 {
		ents, err := n.List(ctx, "/d")
		if err != nil || len(ents) != 1 || ents[0].Name != "f" || ents[0].Size != 1 || ents[0].Attrs != nil {
			t.Fatalf("List = %+v, %v; want f, without attributes", ents, err)
		}
		if !n.noAttrList.active() {
			t.Fatal("the server's kXR_Unsupported did not turn attribute listings off")
		}
	}
	if !n.KeepsAttrs() {
		t.Error("the node keeps attributes, and says it does not")
	}
}

// A plain xrootd refuses the removal that says what it removed: the file
// stays, RemoveWithAttrs says node.ErrUnsupported (the store then reads
// the summary and removes the file as two requests), and the refusal is
// remembered.
func TestInteropRemoveWithoutAttrRemoval(t *testing.T) {
	s := startReal(t)
	n := newNode(t, "root://"+s.addr+"//rmattr", Options{})
	ctx := context.Background()
	putFile(t, n, "/f", []byte("x"))
	for range 2 {
		if _, err := n.RemoveWithAttrs(ctx, "/f"); !errors.Is(err, node.ErrUnsupported) {
			t.Fatalf("RemoveWithAttrs = %v; want ErrUnsupported", err)
		}
		if !n.noRemoveAttr.active() {
			t.Fatal("the server's refusal did not turn removals that say what they removed off")
		}
	}
	if _, err := n.Stat(ctx, "/f"); err != nil {
		t.Errorf("the file after the refused removals: %v", err)
	}
}
