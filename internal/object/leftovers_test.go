package object

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
)

// writeLosingTwoNodes writes 4 blocks of random data (seeded by stream)
// at path, taking the nodes of fs[0] and fs[1] down after the first, and
// returns the writer and what its Write and Close returned.
func writeLosingTwoNodes(t *testing.T, c *cluster, fs []*node.Faulty, g layout.Geometry, path string, stream uint64) (*Writer, error, error) {
	t.Helper()
	data := randBytes(rand.New(rand.NewPCG(seed(t), stream)), 4*g.BlockSize())
	w, err := c.store.Create(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data[:g.BlockSize()]); err != nil {
		t.Fatal(err)
	}
	fs[0].SetDown(true)
	fs[1].SetDown(true)
	_, werr := w.Write(data[g.BlockSize():])
	return w, werr, w.Close()
}

// failedWriteWithNodesDown writes /d/o on a 4+2 store of 6 nodes (no
// spare) and takes two of the nodes down in the middle of it, so that
// the write fails below quorum and the aborts of those two archives find
// their nodes down. It returns the cluster, its faulty nodes (0 and 1
// down), and the highest count of pending removals the store reported.
func failedWriteWithNodesDown(t *testing.T) (*cluster, []*node.Faulty, *atomic.Int64) {
	t.Helper()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 4096}
	var pending, peak atomic.Int64
	c, fs := faultyCluster(t, 6, g, func(o *Options) {
		o.Events.PendingTempRemovals = func(n int) {
			pending.Store(int64(n))
			if int64(n) > peak.Load() {
				peak.Store(int64(n))
			}
		}
	})
	ctx := context.Background()
	if err := c.store.Mkdir(ctx, "/d"); err != nil {
		t.Fatal(err)
	}
	w, werr, cerr := writeLosingTwoNodes(t, c, fs, g, "/d/o", 21)
	if !errors.Is(errors.Join(werr, cerr), ErrQuorum) {
		t.Fatalf("write with 2 of 6 nodes down mid-way (quorum 5): write %v, close %v\n%s", werr, cerr, writerState(w, fs))
	}
	// The aborts run in the background.
	for deadline := time.Now().Add(5 * time.Second); peak.Load() < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if peak.Load() != 2 {
		t.Fatalf("%d temporary archives kept for removal, want the 2 of the down nodes", peak.Load())
	}
	// Nodes 0 and 1 keep the temporary archive their abort could not
	// remove; the others' aborts (in the background) remove theirs.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var held []int
		for _, d := range c.dirs {
			names, _ := readDirNames(filepath.Join(d, "d"))
			held = append(held, len(names))
		}
		if slices.Equal(held, []int{1, 1, 0, 0, 0, 0}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("files the nodes hold after the failed write: %v, want 1 on the down nodes 0 and 1", held)
		}
	}
	return c, fs, &pending
}

// Drain (before the nodes are closed) stops the retries: what is left is
// repair's.
func TestDrainStopsTheRemovalOfTempFiles(t *testing.T) {
	c, fs, pending := failedWriteWithNodesDown(t)
	c.store.Drain()
	fs[0].SetDown(false)
	fs[1].SetDown(false)
	time.Sleep(1500 * time.Millisecond) // past the first retry
	for i, d := range c.dirs[:2] {
		if names, _ := readDirNames(d); len(names) != 1 || pending.Load() != 2 {
			t.Fatalf("node %d holds %v after Drain, %d removals pending; want the temporary archive kept", i, names, pending.Load())
		}
	}
}

// Regression: a write that failed while nodes were down left its
// temporary archives on them, and once they were back, rmdir of the
// directory failed for an hour ("holds temporary files of writes in
// progress"), until repair counted them as debris.
func TestRmdirRemovesTempFilesOfAFailedWrite(t *testing.T) {
	c, fs, pending := failedWriteWithNodesDown(t)
	fs[0].SetDown(false)
	fs[1].SetDown(false)
	if err := c.store.Rmdir(context.Background(), "/d"); err != nil {
		t.Fatalf("rmdir once the nodes are back: %v", err)
	}
	if _, err := c.store.Stat(context.Background(), "/d"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("stat after rmdir: %v", err)
	}
	if n := pending.Load(); n != 0 {
		t.Fatalf("%d removals still pending", n)
	}
}

func TestTempFilesOfAFailedWriteAreRemovedInTheBackground(t *testing.T) {
	c, fs, pending := failedWriteWithNodesDown(t)
	// Down for a few tries (1 s, then 2 s after it), then back.
	time.Sleep(1500 * time.Millisecond)
	if n := pending.Load(); n != 2 {
		t.Fatalf("%d removals pending while the nodes are down, want 2", n)
	}
	fs[0].SetDown(false)
	fs[1].SetDown(false)
	deadline := time.Now().Add(10 * time.Second)
	for pending.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d removals still pending 10 s after the nodes came back", pending.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i, d := range c.dirs {
		if names, _ := readDirNames(d); len(names) != 0 {
			t.Fatalf("node %d still holds %v", i, names)
		}
	}
}

// writerState describes a write's slots and the faults its nodes
// injected, for a failure message: a write that succeeds below its quorum
// (seen once, in CI, and never reproduced) would be a serious bug, one
// that raced its test's setup a harmless one, and this tells them apart.
func writerState(w *Writer, fs []*node.Faulty) string {
	var b strings.Builder
	fmt.Fprintf(&b, "quorum %d, failed %d, blocks %d, size %d\n", w.quorum, w.failed.Load(), w.block, w.size)
	for _, sw := range w.slots {
		fmt.Fprintf(&b, "slot %d on node %s: dropped %v, sent %d, done %d, err %v\n",
			sw.slot, sw.node.ID(), sw.dropped.Load(), sw.sent.Load(), sw.done.Load(), sw.err)
	}
	for i, f := range fs {
		fmt.Fprintf(&b, "faulty node %d (%s): injected %d\n", i, f.ID(), f.Injected(node.OpAny))
	}
	return b.String()
}
