package object

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/archive"
	"github.com/ecstore/ecstore/internal/layout"
)

// TestPageSumsEvictsTheLeastRecentlyUsed checks the cache's budget and
// order, and that a failed load is not kept.
func TestPageSumsEvictsTheLeastRecentlyUsed(t *testing.T) {
	ctx := context.Background()
	c := newPageSums(3000)
	key := func(i int) pageSumsKey { return pageSumsKey{version: "v", slot: 1, first: int64(i) * 64} }
	loads := 0
	load := func(n int) func(context.Context) ([]byte, error) {
		return func(context.Context) ([]byte, error) { loads++; return make([]byte, n), nil }
	}
	for i := range 3 {
		if _, hit, err := c.get(ctx, key(i), load(1000)); hit || err != nil {
			t.Fatalf("first get of %d: hit %v, %v", i, hit, err)
		}
	}
	if _, ok := c.lookup(key(0)); !ok { // 0 is now the most recent
		t.Fatal("entry 0 not held within the budget")
	}
	c.get(ctx, key(3), load(1000)) // 4000 bytes: the least recent, 1, goes
	if _, ok := c.lookup(key(1)); ok {
		t.Error("entry 1, the least recently used, was kept past the budget")
	}
	for _, i := range []int{0, 2, 3} {
		if _, hit, _ := c.get(ctx, key(i), load(1000)); !hit {
			t.Errorf("entry %d not held", i)
		}
	}
	if c.used != 3000 || loads != 4 {
		t.Errorf("%d bytes held after %d loads, want 3000 after 4", c.used, loads)
	}
	bad := errors.New("damaged")
	if _, _, err := c.get(ctx, key(9), func(context.Context) ([]byte, error) { return nil, bad }); !errors.Is(err, bad) {
		t.Fatalf("a failed load returned %v", err)
	}
	if _, ok := c.lookup(key(9)); ok {
		t.Error("a failed load was kept")
	}
	if c.holds(3000/8+1) || !c.holds(3000/8) || (*pageSums)(nil).holds(1) {
		t.Error("holds: wrong bound")
	}
	if newPageSums(-1) != nil {
		t.Error("a negative budget made a cache")
	}
}

// TestPageSumsLoadsOnceForConcurrentMisses checks that callers missing
// the same entry at once wait for one load, and that one whose context
// ends stops waiting.
func TestPageSumsLoadsOnceForConcurrentMisses(t *testing.T) {
	c := newPageSums(1 << 20)
	key := pageSumsKey{version: "v", slot: 0, first: 0}
	var loads atomic.Int32
	release := make(chan struct{})
	load := func(context.Context) ([]byte, error) {
		loads.Add(1)
		<-release
		return []byte("sums"), nil
	}
	var wg sync.WaitGroup
	got := make([][]byte, 8)
	for i := range got {
		wg.Go(func() {
			b, _, err := c.get(context.Background(), key, load)
			if err != nil {
				t.Error(err)
			}
			got[i] = b
		})
	}
	for loads.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := c.get(ctx, key, load); !errors.Is(err, context.Canceled) {
		t.Errorf("a waiter whose context ended: %v", err)
	}
	time.Sleep(10 * time.Millisecond) // let the others queue behind the load
	close(release)
	wg.Wait()
	if loads.Load() != 1 {
		t.Errorf("%d loads for concurrent misses, want 1", loads.Load())
	}
	for i, b := range got {
		if string(b) != "sums" {
			t.Errorf("caller %d got %q", i, b)
		}
	}
}

// TestRandomReadsReuseCachedPageChecksums checks that random reads,
// once their groups' checksums are cached, cost a node one request
// each rather than two; that other readers of the object share them;
// and that a damaged checksum entry is not kept, its reads still
// right.
func TestRandomReadsReuseCachedPageChecksums(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 64 << 10}
	c := newCluster(t, 6, g)
	var bytesRead, calls atomic.Int64
	for i, n := range c.nodes {
		c.nodes[i] = byteCountingNode{n, &bytesRead, &calls}
	}
	r := rand.New(rand.NewPCG(seed(t), 11))
	bs := g.BlockSize()
	data := randBytes(r, 100*bs+777) // two groups of blocks
	put(t, c.store, "/run.root", data)

	offsets := make([]int64, 200)
	for i := range offsets {
		offsets[i] = 1 + r.Int64N(int64(len(data)-3000-1))
	}
	// readAll opens the object in a store of its own with a cache of
	// cache bytes and reads at offsets; it returns the node reads the
	// random reads cost, and the store.
	var hits, misses atomic.Int64
	readAll := func(s *Store) int64 {
		t.Helper()
		rd, err := s.Open(context.Background(), "/run.root")
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		calls.Store(0)
		p := make([]byte, 3000)
		for _, off := range offsets {
			n, err := rd.ReadAt(context.Background(), p, off)
			if err != nil || !bytes.Equal(p[:n], data[off:off+int64(n)]) {
				t.Fatalf("ReadAt(%d): %d bytes, %v, or wrong bytes", off, n, err)
			}
		}
		return calls.Load()
	}
	store := func(cache int64) *Store {
		opts := c.store.opts
		opts.PageChecksumCache = cache
		opts.Events.PageChecksums = func(hit bool) {
			if hit {
				hits.Add(1)
			} else {
				misses.Add(1)
			}
		}
		s, err := New(c.nodes, opts)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	without := readAll(store(-1))
	if hits.Load()+misses.Load() != 0 {
		t.Fatalf("without a cache: %d hits, %d misses counted", hits.Load(), misses.Load())
	}
	cached := store(DefaultPageChecksumCache)
	with := readAll(cached)
	t.Logf("node reads: %d without the cache, %d with; %d hits, %d misses", without, with, hits.Load(), misses.Load())
	// Each data slot's two entries are read once (some twice, by pieces
	// that missed together); every other read is of pages only.
	if with > without*6/10 {
		t.Errorf("%d node reads with the cache, %d without: want well under two thirds", with, without)
	}
	if misses.Load() > 2*int64(g.K)*2 || hits.Load() < int64(len(offsets))*9/10 {
		t.Errorf("%d hits and %d misses for %d reads", hits.Load(), misses.Load(), len(offsets))
	}
	// A second reader of the object finds them all.
	h0, m0 := hits.Load(), misses.Load()
	again := readAll(cached)
	if misses.Load() != m0 || hits.Load()-h0 < int64(len(offsets)) || again > int64(len(offsets))*11/10 {
		t.Errorf("a second reader: %d node reads, %d hits, %d misses", again, hits.Load()-h0, misses.Load()-m0)
	}

	// Damage the checksum entry of group 0 in one data archive: a new
	// store reads its pages right (through the whole chunks) and keeps
	// the entry out of its cache.
	const b = 3
	slot := g.Slot(b, 1)
	path := filepath.Join(c.dirs[c.slotNode(t, "/run.root", slot)], "run.root")
	span := pagesOf(t, path, b)
	corrupt(t, path, span.CRCs+4)
	damaged := store(DefaultPageChecksumCache)
	p := make([]byte, 3000)
	var version archive.Version
	for range 3 { // each reader of its own: a fallback leaves the block in its reader's cache
		rd, err := damaged.Open(context.Background(), "/run.root")
		if err != nil {
			t.Fatal(err)
		}
		off := b*bs + g.ChunkSize + 100 // block 3, chunk 1
		n, err := rd.ReadAt(context.Background(), p, off)
		if err != nil || !bytes.Equal(p[:n], data[off:off+int64(n)]) {
			t.Fatalf("ReadAt(%d) with a damaged checksum entry: %d bytes, %v, or wrong bytes", off, n, err)
		}
		version = rd.loc.meta.Version
		rd.Close()
	}
	if _, ok := damaged.pageSums.lookup(pageSumsKey{version: version, slot: slot, first: 0}); ok {
		t.Error("a damaged checksum entry was kept")
	}
}
