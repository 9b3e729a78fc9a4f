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
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/ecstore/ecstore/internal/archive"
	"github.com/ecstore/ecstore/internal/bufpool"
	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
)

// stuckChecksumsNode: once armed, a read of a few bytes (page checksums)
// blocks until released and then writes into its buffer, and a read of
// a few pages (page data) fails at once: a disk with a bad sector that
// is also slow.
type stuckChecksumsNode struct {
	node.Node
	armed   *atomic.Bool
	release chan struct{}
	mu      *sync.Mutex
	stuck   *[][]byte // buffers handed to the blocked reads
}

func (n stuckChecksumsNode) Open(ctx context.Context, path string) (node.File, error) {
	f, err := n.Node.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	return stuckChecksumsFile{File: f, n: n}, nil
}

type stuckChecksumsFile struct {
	node.File
	n stuckChecksumsNode
}

func (f stuckChecksumsFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if f.n.armed.Load() {
		switch {
		case len(p) < archive.PageSize: // a block's checksums, or a group's
			f.n.mu.Lock()
			*f.n.stuck = append(*f.n.stuck, p)
			f.n.mu.Unlock()
			<-f.n.release
			for i := range p {
				p[i] = 0xEE
			}
			return len(p), nil
		case len(p) <= 16384:
			return 0, syscall.EIO
		}
	}
	return f.File.ReadAt(ctx, p, off)
}

// TestPageReadLeftRunningKeepsItsBuffer checks that a page read whose
// checksum read node.Guard left running (its file system not answering)
// while the data read failed otherwise does not give its buffer back to
// the pool: the blocked read writes into it when the kernel answers,
// which would corrupt another read's verified bytes (found by review:
// only the data read's error was kept). The checksums are read into the
// pooled buffer without the checksum cache, into one of their own with
// it.
func TestPageReadLeftRunningKeepsItsBuffer(t *testing.T) {
	for _, cache := range []int64{-1, DefaultPageChecksumCache} {
		t.Run(fmt.Sprintf("cache=%d", cache), func(t *testing.T) { testPageReadLeftRunning(t, cache) })
	}
}

func testPageReadLeftRunning(t *testing.T, cache int64) {
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 64 << 10}
	var armed atomic.Bool
	release := make(chan struct{})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	var mu sync.Mutex
	var stuck [][]byte
	c := newCluster(t, 6, g, func(o *Options) {
		o.HedgeDelay = 50 * time.Millisecond
		o.ChunkTimeout = 100 * time.Millisecond
		o.PageChecksumCache = cache
	})
	for i, n := range c.nodes {
		c.nodes[i] = node.Guard(stuckChecksumsNode{n, &armed, release, &mu, &stuck}, node.GuardOptions{})
	}
	s, err := New(c.nodes, c.store.opts)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed(t), 9))
	data := randBytes(r, 10*g.BlockSize()+777)
	put(t, s, "/f", data)
	rd, err := s.Open(context.Background(), "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	armed.Store(true)
	p := make([]byte, 3000)
	off := 3*g.BlockSize() + 12345
	if n, err := rd.ReadAt(context.Background(), p, off); err != nil || !bytes.Equal(p[:n], data[off:off+int64(n)]) {
		t.Fatalf("ReadAt: %d, %v, or wrong bytes", n, err)
	}
	time.Sleep(400 * time.Millisecond) // past the chunk timeout: the blocked reads are left running
	mu.Lock()
	held := append([][]byte(nil), stuck...)
	mu.Unlock()
	if len(held) == 0 {
		t.Fatal("no page checksum read blocked")
	}
	for range 64 {
		b, ok := bufpool.TryGet(bufpool.Granule)
		if !ok {
			break
		}
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(b[:1])))
		for _, h := range held {
			if a := uintptr(unsafe.Pointer(unsafe.SliceData(h[:1]))); a >= lo && a < lo+uintptr(cap(b)) {
				t.Fatal("a buffer that a read left running still writes into is back in the pool")
			}
		}
	}
}

// slowSmallReadsNode: once armed, reads of at most 16 KiB take 400 ms (a
// busy disk: slow, not hung).
type slowSmallReadsNode struct {
	node.Node
	armed *atomic.Bool
}

func (n slowSmallReadsNode) Open(ctx context.Context, path string) (node.File, error) {
	f, err := n.Node.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	return slowSmallReadsFile{f, n.armed}, nil
}

type slowSmallReadsFile struct {
	node.File
	armed *atomic.Bool
}

func (f slowSmallReadsFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if f.armed.Load() && len(p) <= 16384 {
		time.Sleep(400 * time.Millisecond)
	}
	return f.File.ReadAt(ctx, p, off)
}

// TestSlowDiskPageReadsAreNotStuck checks that random reads on a local
// node whose disk is slow (400 ms a read) but answers do not leave their
// calls running: cut at the hedge delay, each counted as stuck in
// node.Guard, and a few dozen made the node refuse every call with
// ErrStuck (found by review).
func TestSlowDiskPageReadsAreNotStuck(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 64 << 10}
	var armed atomic.Bool
	var mostStuck atomic.Int64
	c := newCluster(t, 6, g)
	for i, n := range c.nodes {
		c.nodes[i] = node.Guard(slowSmallReadsNode{n, &armed}, node.GuardOptions{Stuck: func(id string, n int) {
			for m := mostStuck.Load(); int64(n) > m && !mostStuck.CompareAndSwap(m, int64(n)); m = mostStuck.Load() {
			}
		}})
	}
	s, err := New(c.nodes, c.store.opts)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed(t), 10))
	data := randBytes(r, 20*g.BlockSize()+777)
	put(t, s, "/f", data)
	rd, err := s.Open(context.Background(), "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	armed.Store(true)
	var wg sync.WaitGroup
	for b := int64(0); b < 20; b++ {
		if st := (6 - b%6) % 6; st < 4 { // chunks on slot 0's node
			for j := int64(0); j < 4; j++ {
				off := b*g.BlockSize() + st*g.ChunkSize + 1000 + j*12000
				wg.Go(func() {
					p := make([]byte, 3000)
					if n, err := rd.ReadAt(context.Background(), p, off); err != nil || !bytes.Equal(p[:n], data[off:off+int64(n)]) {
						t.Errorf("ReadAt(%d): %d, %v, or wrong bytes", off, n, err)
					}
				})
			}
		}
	}
	time.Sleep(300 * time.Millisecond)
	refusing := 0
	for _, n := range c.nodes {
		if _, err := n.Stat(context.Background(), "/f"); errors.Is(err, node.ErrStuck) {
			refusing++
		}
	}
	wg.Wait()
	if refusing > 0 || mostStuck.Load() > 0 {
		t.Errorf("%d nodes refuse calls (ErrStuck), %d calls were stuck at most on a node: a slow disk's reads were left running", refusing, mostStuck.Load())
	}
}

// TestBadPageChecksumsAloneAreNotDataLoss checks that a deep inspection
// counts a chunk whose page checksums are wrong, its data sound, as
// readable (readers read it whole): damaged checksums of one block in
// M+1 archives made the object "unrecoverable" (found by review).
func TestBadPageChecksumsAloneAreNotDataLoss(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 16 << 10}
	c := newCluster(t, 6, g)
	r := rand.New(rand.NewPCG(seed(t), 11))
	data := randBytes(r, 3*g.BlockSize()+100)
	put(t, c.store, "/p", data)
	const b = 1
	for slot := range g.M + 1 {
		p := filepath.Join(c.dirs[c.slotNode(t, "/p", slot)], "p")
		corrupt(t, p, pagesOf(t, p, b).CRCs+4)
	}
	if got, err := get(c.store, "/p"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get: %v, or wrong bytes", err)
	}
	in, err := c.store.Inspect(ctx, "/p", true)
	if err != nil || in.Health == Unrecoverable || in.Health == Healthy {
		t.Fatalf("inspect with bad page checksums in %d archives: %+v, %v", g.M+1, in, err)
	}
}
