package object

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
// order, and that a failed load is not kept but a damaged entry is
// remembered.
func TestPageSumsEvictsTheLeastRecentlyUsed(t *testing.T) {
	ctx := context.Background()
	const size = 1000
	c := newPageSums(3 * (size + entryOverhead))
	key := func(i int) pageSumsKey { return pageSumsKey{version: "v", slot: 1, first: int64(i) * 64, size: size} }
	loads := 0
	load := func(context.Context) ([]byte, error) { loads++; return make([]byte, size), nil }
	for i := range 3 {
		if _, loaded, err := c.get(ctx, key(i), load); !loaded || err != nil {
			t.Fatalf("first get of %d: loaded %v, %v", i, loaded, err)
		}
	}
	if _, st := c.lookup(key(0)); st != entryHeld { // 0 is now the most recent
		t.Fatal("entry 0 not held within the budget")
	}
	c.get(ctx, key(3), load) // over the budget: the least recent, 1, goes
	if _, st := c.lookup(key(1)); st != entryAbsent {
		t.Error("entry 1, the least recently used, was kept past the budget")
	}
	for _, i := range []int{0, 2, 3} {
		if _, loaded, _ := c.get(ctx, key(i), load); loaded {
			t.Errorf("entry %d not held", i)
		}
	}
	if c.used != 3*(size+entryOverhead) || loads != 4 {
		t.Errorf("%d bytes held after %d loads, want %d after 4", c.used, loads, 3*(size+entryOverhead))
	}
	bad := errors.New("node failed")
	if _, _, err := c.get(ctx, key(9), func(context.Context) ([]byte, error) { return nil, bad }); !errors.Is(err, bad) {
		t.Fatalf("a failed load returned %v", err)
	}
	if _, st := c.lookup(key(9)); st != entryAbsent {
		t.Error("a failed load was kept")
	}
	damaged := func(context.Context) ([]byte, error) { loads++; return nil, archive.ErrChecksum }
	if _, _, err := c.get(ctx, key(8), damaged); !errors.Is(err, archive.ErrChecksum) {
		t.Fatalf("a damaged entry's load returned %v", err)
	}
	loads = 0
	if _, _, err := c.get(ctx, key(8), damaged); !errors.Is(err, archive.ErrChecksum) || loads != 0 {
		t.Errorf("a damaged entry again: %v after %d loads, want ErrChecksum without one", err, loads)
	}
	if _, st := c.lookup(key(8)); st != entryDamaged {
		t.Errorf("a damaged entry is %v", st)
	}
	if c.holds(c.budget/8+1) || !c.holds(c.budget/8) || (*pageSums)(nil).holds(1) {
		t.Error("holds: wrong bound")
	}
	if newPageSums(-1) != nil {
		t.Error("a negative budget made a cache")
	}
}

// TestPageSumsAdmitsAtTheSecondMiss checks that a group is worth reading
// whole at its second miss among the latest seenMax.
func TestPageSumsAdmitsAtTheSecondMiss(t *testing.T) {
	c := newPageSums(1 << 20)
	key := func(i int) pageSumsKey { return pageSumsKey{version: "v", first: int64(i) * 64, size: 100} }
	if c.admit(key(0)) || !c.admit(key(0)) {
		t.Fatal("a group was not admitted at its second miss")
	}
	for i := 1; i <= seenMax; i++ {
		c.admit(key(i))
	}
	if c.admit(key(0)) {
		t.Error("a group missed before the latest seenMax others was admitted")
	}
	if len(c.seen) != seenMax || len(c.seenOrder) != seenMax {
		t.Errorf("%d groups remembered, %d in order; want %d", len(c.seen), len(c.seenOrder), seenMax)
	}
}

// TestPageSumsLoadsOnceForConcurrentMisses checks that callers missing
// the same entry at once wait for one load, that one whose context ends
// stops waiting, and that waiters load the entry themselves when the
// loader's own context ended.
func TestPageSumsLoadsOnceForConcurrentMisses(t *testing.T) {
	c := newPageSums(1 << 20)
	key := pageSumsKey{version: "v", slot: 0, first: 0, size: 4}
	var loads atomic.Int32
	release := make(chan struct{})
	load := func(ctx context.Context) ([]byte, error) {
		loads.Add(1)
		select {
		case <-release:
			return []byte("sums"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Second):
			return nil, errors.New("never released")
		}
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

	// A loader whose context ends (its reader closed) while another
	// waits: the waiter loads the entry itself.
	key.first = 64
	lctx, lcancel := context.WithCancel(context.Background())
	started, done := make(chan struct{}), make(chan error, 1)
	go func() {
		_, _, err := c.get(lctx, key, func(ctx context.Context) ([]byte, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		})
		done <- err
	}()
	<-started
	waiter := make(chan error, 1)
	go func() {
		b, loaded, err := c.get(context.Background(), key, func(context.Context) ([]byte, error) { return []byte("mine"), nil })
		if err == nil && (!loaded || string(b) != "mine") {
			err = fmt.Errorf("got %q, loaded %v", b, loaded)
		}
		waiter <- err
	}()
	time.Sleep(10 * time.Millisecond)
	lcancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the loader: %v", err)
	}
	if err := <-waiter; err != nil {
		t.Errorf("a waiter after its loader's context ended: %v", err)
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
	// Each data slot's two entries are missed once (the own checksums
	// read), then read whole (some twice, by pieces that missed
	// together); every other read is of pages only.
	if with > without*6/10 {
		t.Errorf("%d node reads with the cache, %d without: want well under two thirds", with, without)
	}
	if keys := int64(g.K) * 2; misses.Load() > 4*keys || hits.Load() < int64(len(offsets))*85/100 {
		t.Errorf("%d hits and %d misses for %d reads", hits.Load(), misses.Load(), len(offsets))
	}
	// A second reader of the object finds them all.
	h0, m0 := hits.Load(), misses.Load()
	again := readAll(cached)
	if misses.Load() != m0 || hits.Load()-h0 < int64(len(offsets)) || again > int64(len(offsets))*11/10 {
		t.Errorf("a second reader: %d node reads, %d hits, %d misses", again, hits.Load()-h0, misses.Load()-m0)
	}

	// Damage the checksum entry of group 0 in one data archive: a new
	// store reads its pages right (through the whole chunk), remembers
	// the entry as damaged, and reads of the group's other blocks in that
	// archive read only their pages and their own checksums.
	const b = 3
	slot := g.Slot(b, 1)
	path := filepath.Join(c.dirs[c.slotNode(t, "/run.root", slot)], "run.root")
	span := pagesOf(t, path, b)
	corrupt(t, path, span.CRCs+4)
	damaged := store(DefaultPageChecksumCache)
	p := make([]byte, 100)
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
	key := pageSumsKey{version: version, slot: slot, first: 0, size: span.Entry.Size}
	if _, st := damaged.pageSums.lookup(key); st != entryDamaged {
		t.Fatalf("a damaged checksum entry is %v in the cache, want damaged", st)
	}
	rd, err := damaged.Open(context.Background(), "/run.root")
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	w := int64(g.Width())
	reads := 0
	bytesRead.Store(0)
	for b2 := int64(0); b2 < 64; b2++ {
		stripe := ((int64(slot)-b2)%w + w) % w
		if b2 == b || stripe >= int64(g.K) {
			continue
		}
		off := b2*bs + stripe*g.ChunkSize + 100
		n, err := rd.ReadAt(context.Background(), p, off)
		if err != nil || !bytes.Equal(p[:n], data[off:off+int64(n)]) {
			t.Fatalf("ReadAt(%d): %d bytes, %v, or wrong bytes", off, n, err)
		}
		reads++
	}
	if most := int64(reads) * (archive.PageSize + 4); bytesRead.Load() > most {
		t.Errorf("%d bytes read for %d reads of 100 bytes in the group of a damaged entry; want at most %d (a page and its checksum each)",
			bytesRead.Load(), reads, most)
	}
}
