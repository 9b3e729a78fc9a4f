package object

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
)

// countingNode counts the chunk reads made on its files: reads of a
// chunk and its archive header, a little more than chunk bytes.
type countingNode struct {
	node.Node
	chunk int
	reads *atomic.Int64
	now   *atomic.Int64 // chunk reads in progress
	peak  *atomic.Int64 // the most at once
}

func (n countingNode) Open(ctx context.Context, path string) (node.File, error) {
	f, err := n.Node.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	return countingFile{f, n}, nil
}

type countingFile struct {
	node.File
	n countingNode
}

func (f countingFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if len(p) > f.n.chunk && len(p) <= f.n.chunk+1024 {
		f.n.reads.Add(1)
		n := f.n.now.Add(1)
		defer f.n.now.Add(-1)
		for p := f.n.peak.Load(); n > p && !f.n.peak.CompareAndSwap(p, n); p = f.n.peak.Load() {
		}
		time.Sleep(time.Millisecond) // as a remote node: reads overlap
	}
	return f.File.ReadAt(ctx, p, off)
}

// TestPipelinedReaderReadsEachChunkOnce reads an object the way xrdcp
// through the gateway does: several block-sized requests in flight, each
// served as consecutive chunk-sized ReadAt calls. Every data chunk must
// be fetched from its node once, not again because the block cache let
// it go while a request was still reading it, and the blocks fetched at
// once (which hold buffers) are bounded.
func TestPipelinedReaderReadsEachChunkOnce(t *testing.T) {
	g := layout.Geometry{K: 8, M: 2, ChunkSize: 64 << 10}
	var reads, now, peak atomic.Int64
	c := newCluster(t, 10, g)
	for i, n := range c.nodes {
		c.nodes[i] = countingNode{n, int(g.ChunkSize), &reads, &now, &peak}
	}
	// No hedged reads: a chunk read slowed past the hedge delay by a
	// loaded host (CI's parallel race runs) would add parity reads,
	// which this test would count as chunks read twice.
	opts := c.store.opts
	opts.HedgeDelay = time.Minute
	s, err := New(c.nodes, opts)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed(t), 5))
	const blocks = 40
	bs := int64(g.BlockSize())
	data := randBytes(r, blocks*bs)
	put(t, s, "/p", data)

	for _, tc := range []struct {
		inflight int
		alone    bool // the reader is the only transfer open: it reads LoneReadAhead ahead
	}{{1, true}, {4, true}, {8, true}, {4, false}, {8, false}} {
		t.Run(fmt.Sprintf("inflight=%d,alone=%v", tc.inflight, tc.alone), func(t *testing.T) {
			inflight := tc.inflight
			if !tc.alone {
				other, err := s.Open(context.Background(), "/p")
				if err != nil {
					t.Fatal(err)
				}
				defer other.Close()
			}
			reads.Store(0)
			peak.Store(0)
			rd, err := s.Open(context.Background(), "/p")
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			depth := s.opts.ReadAhead
			if tc.alone {
				depth = s.opts.LoneReadAhead
			}
			if rd.readAhead != depth {
				t.Fatalf("reader reads %d blocks ahead; want %d", rd.readAhead, depth)
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			for range inflight {
				wg.Add(1)
				go func() {
					defer wg.Done()
					p := make([]byte, g.ChunkSize)
					for {
						b := next.Add(1) - 1
						if b >= blocks {
							return
						}
						for off := b * bs; off < (b+1)*bs; off += int64(len(p)) {
							n, err := rd.ReadAt(context.Background(), p, off)
							if err != nil || !bytes.Equal(p[:n], data[off:off+int64(n)]) {
								t.Errorf("ReadAt(%d): %d bytes, %v, or wrong bytes", off, n, err)
								return
							}
						}
					}
				}()
			}
			wg.Wait()
			if got, want := reads.Load(), int64(blocks*g.K); got != want {
				t.Errorf("%d chunk reads from the nodes for %d data chunks", got, want)
			}
			// However many requests the client keeps in flight, the
			// reader fetches at most its read-ahead+1 blocks at once.
			if got, most := peak.Load(), int64((depth+1)*g.K); got > most {
				t.Errorf("%d chunk reads at once; want at most %d", got, most)
			}
		})
	}
}

// TestOpenTransfersCounted checks the count behind Events.Transfers, which
// the gateway's memory limit follows: readers and writers count while
// open, whichever way they end.
func TestOpenTransfersCounted(t *testing.T) {
	var last atomic.Int64
	c := newCluster(t, 6, layout.Geometry{K: 3, M: 2, ChunkSize: 4096}, func(o *Options) {
		o.Events.Transfers = func(open int) { last.Store(int64(open)) }
	})
	s, ctx := c.store, context.Background()
	check := func(want int) {
		t.Helper()
		if s.OpenTransfers() != want || last.Load() != int64(want) {
			t.Fatalf("open transfers %d, last reported %d; want %d", s.OpenTransfers(), last.Load(), want)
		}
	}
	w, err := s.Create(ctx, "/a", nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("hello"))
	check(1)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w.Abort() // after Close: nothing more to count
	check(0)
	r1, err := s.Open(ctx, "/a")
	if err != nil {
		t.Fatal(err)
	}
	w2, err := s.Create(ctx, "/b", nil)
	if err != nil {
		t.Fatal(err)
	}
	check(2)
	w2.Abort()
	w2.Close()
	r1.Close()
	r1.Close()
	check(0)
	if _, err := s.Open(ctx, "/missing"); err == nil {
		t.Fatal("opened a missing object")
	}
	check(0)
}

// TestTransferMemoryCounted checks the figure behind Events.TransferMemory,
// which the gateway's memory limit follows: a block per transfer, or the
// size of an object smaller than a block (announced to a writer, found
// by a reader), grown to a block when a writer's announcement falls
// short, more for a lone reader that reads further ahead; nothing once
// every transfer is closed.
func TestTransferMemoryCounted(t *testing.T) {
	var last atomic.Int64
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 4096}
	bs := g.BlockSize()
	c := newCluster(t, 6, g, func(o *Options) {
		o.SmallObjectSize = -1
		o.Events.TransferMemory = func(b int64) { last.Store(b) }
	})
	s, ctx := c.store, context.Background()
	check := func(want int64) {
		t.Helper()
		if last.Load() != want {
			t.Fatalf("transfer memory reported %d, want %d", last.Load(), want)
		}
	}
	small, err := s.Create(ctx, "/small", &CreateOptions{SizeHint: 100})
	if err != nil {
		t.Fatal(err)
	}
	check(102) // 100 and one byte more, rounded up to a multiple of K
	big, err := s.Create(ctx, "/big", nil)
	if err != nil {
		t.Fatal(err)
	}
	check(102 + bs)
	small.Write(make([]byte, 100))
	if err := small.Close(); err != nil {
		t.Fatal(err)
	}
	check(bs)
	big.Write(make([]byte, 3*bs+5))
	if err := big.Close(); err != nil {
		t.Fatal(err)
	}
	check(0)
	short, err := s.Create(ctx, "/short", &CreateOptions{SizeHint: 10})
	if err != nil {
		t.Fatal(err)
	}
	check(12)
	short.Write(make([]byte, 2*bs))
	check(bs) // grown to a block
	short.Abort()
	check(0)
	r, err := s.Open(ctx, "/small")
	if err != nil {
		t.Fatal(err)
	}
	check(100)
	r2, err := s.Open(ctx, "/big")
	if err != nil {
		t.Fatal(err)
	}
	check(100 + bs)
	r.Close()
	r2.Close()
	check(0)
	// A reader of several blocks that opens as the only transfer reads
	// LoneReadAhead (3) blocks ahead instead of ReadAhead (1), and counts
	// buffers for twice the depth of one.
	lone, err := s.Open(ctx, "/big")
	if err != nil {
		t.Fatal(err)
	}
	check(2 * bs)
	lone.Close()
	check(0)
}

// TestRandomReadsFetchOnlyTheirChunks reads an object as an analysis
// job reads a ROOT file: small reads at random offsets, which must fetch
// only the chunks that hold them, not whole blocks nor blocks ahead (the
// reader took reads within 160 MiB of the furthest point read for
// sequential ones, which fetched every chunk of a block and read ahead
// for most random reads of a file of a few hundred MiB). A sequential
// read that then wants the whole block fetches only the chunks the
// random one did not.
func TestRandomReadsFetchOnlyTheirChunks(t *testing.T) {
	g := layout.Geometry{K: 8, M: 2, ChunkSize: 64 << 10}
	var reads, now, peak atomic.Int64
	c := newCluster(t, 10, g)
	for i, n := range c.nodes {
		c.nodes[i] = countingNode{n, int(g.ChunkSize), &reads, &now, &peak}
	}
	opts := c.store.opts
	opts.HedgeDelay = time.Minute // no parity reads under load
	s, err := New(c.nodes, opts)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed(t), 6))
	const blocks = 20
	bs := int64(g.BlockSize())
	data := randBytes(r, blocks*bs)
	put(t, s, "/analysis", data)

	rd, err := s.Open(context.Background(), "/analysis")
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	chunks := map[int64]bool{} // the chunks the reads touch, by index
	p := make([]byte, 3000)
	for range 60 {
		off := r.Int64N(int64(len(data)) - int64(len(p)))
		if off%bs == 0 {
			off++ // a block's start counts as sequential
		}
		if n, err := rd.ReadAt(context.Background(), p, off); err != nil || !bytes.Equal(p[:n], data[off:off+int64(n)]) {
			t.Fatalf("ReadAt(%d): %d bytes, %v, or wrong bytes", off, n, err)
		}
		chunks[off/g.ChunkSize] = true
		chunks[(off+int64(len(p))-1)/g.ChunkSize] = true
	}
	if got := reads.Load(); got > int64(len(chunks)) {
		t.Errorf("%d chunk reads from the nodes for random reads within %d chunks", got, len(chunks))
	}

	// Random, then sequential on the same block: the chunk read first
	// is not read again.
	reads.Store(0)
	rd2, err := s.Open(context.Background(), "/analysis")
	if err != nil {
		t.Fatal(err)
	}
	defer rd2.Close()
	b := int64(blocks - 1)            // the last: nothing to read ahead after it
	off := b*bs + 3*g.ChunkSize + 100 // in the block's 4th chunk
	if _, err := rd2.ReadAt(context.Background(), p, off); err != nil {
		t.Fatal(err)
	}
	// Then the rest of the block, in order from the end of that read,
	// and its start: each byte is read once.
	readRange := func(from, to int64) {
		for at := from; at < to; at += int64(len(p)) {
			q := p[:min(int64(len(p)), to-at)]
			if n, err := rd2.ReadAt(context.Background(), q, at); err != nil || !bytes.Equal(q[:n], data[at:at+int64(n)]) {
				t.Fatalf("ReadAt(%d): %d bytes, %v, or wrong bytes", at, n, err)
			}
		}
	}
	readRange(off+int64(len(p)), (b+1)*bs)
	readRange(b*bs, off)
	// The block's 8 chunks, once each.
	if got := reads.Load(); got != int64(g.K) {
		t.Errorf("%d chunk reads for a block read randomly then whole; want %d", got, g.K)
	}
}
