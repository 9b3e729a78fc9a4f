package object

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/ecstore/ecstore/internal/archive"
	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
)

// byteCountingNode counts the bytes its files' reads ask for, and the
// reads when calls is set.
type byteCountingNode struct {
	node.Node
	bytes *atomic.Int64
	calls *atomic.Int64
}

func (n byteCountingNode) Open(ctx context.Context, path string) (node.File, error) {
	f, err := n.Node.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	return byteCountingFile{f, n}, nil
}

type byteCountingFile struct {
	node.File
	n byteCountingNode
}

func (f byteCountingFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	f.n.bytes.Add(int64(len(p)))
	if f.n.calls != nil {
		f.n.calls.Add(1)
	}
	return f.File.ReadAt(ctx, p, off)
}

// osReaderAt reads a local file for archive.Parse.
type osReaderAt struct{ f *os.File }

func (r osReaderAt) ReadAt(_ context.Context, p []byte, off int64) (int, error) {
	return r.f.ReadAt(p, off)
}

// pagesOf parses the archive file at p and returns where block b's
// chunk data and page checksums are.
func pagesOf(t *testing.T, p string, b int64) archive.PageSpan {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	idx, err := archive.Parse(context.Background(), osReaderAt{f}, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	span, ok := idx.Pages(b)
	if !ok {
		t.Fatalf("%s: no page checksums for block %d", p, b)
	}
	return span
}

// TestRandomReadsReadPages checks that a small read at a random offset
// reads the pages that hold it and their checksums, not whole chunks;
// and that a page that fails its checksum, or a checksum that does not
// match its page, is not returned: the chunk is then read whole, and a
// corrupt one replaced from parity.
func TestRandomReadsReadPages(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 64 << 10}
	var read atomic.Int64
	c := newCluster(t, 6, g)
	for i, n := range c.nodes {
		c.nodes[i] = byteCountingNode{n, &read, nil}
	}
	s, err := New(c.nodes, c.store.opts)
	if err != nil {
		t.Fatal(err)
	}
	c.store = s
	r := rand.New(rand.NewPCG(seed(t), 7))
	bs := g.BlockSize()
	data := randBytes(r, 10*bs+777)
	put(t, s, "/run.root", data)

	rd, err := s.Open(context.Background(), "/run.root")
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	read.Store(0)
	p := make([]byte, 3000)
	const reads = 100
	for range reads {
		off := 1 + r.Int64N(int64(len(data)-len(p)-1))
		n, err := rd.ReadAt(context.Background(), p, off)
		if err != nil || !bytes.Equal(p[:n], data[off:off+int64(n)]) {
			t.Fatalf("ReadAt(%d): %d bytes, %v, or wrong bytes", off, n, err)
		}
	}
	// At most two pages and their checksums a read (a read across two
	// chunks takes a page of each), and the page checksums of the whole
	// object once (the store's cache holds them); a chunk each would be
	// 64 KiB.
	if got, most := read.Load(), int64(reads*2*(archive.PageSize+4)+(4+2)*11*16*4); got > most {
		t.Errorf("%d bytes read from the nodes for %d random reads of %d bytes; want at most %d", got, reads, len(p), most)
	}

	// Damage block 3's data chunk 1: a byte of a page, in one archive,
	// and a page checksum of its chunk 2, in another.
	const b = 3
	archiveOf := func(stripe int) string {
		return filepath.Join(c.dirs[c.slotNode(t, "/run.root", g.Slot(b, stripe))], "run.root")
	}
	span := pagesOf(t, archiveOf(1), b)
	corrupt(t, archiveOf(1), span.Data+5000) // page 1 of chunk 1
	span = pagesOf(t, archiveOf(2), b)
	corrupt(t, archiveOf(2), span.CRCs+4*3) // the checksum of page 3 of chunk 2

	// Stores of their own, whose caches have not kept the checksums read
	// before the damage: with its cache, the damaged checksum fails its
	// entry's CRC-32; without, its page.
	for _, cache := range []int64{DefaultPageChecksumCache, -1} {
		opts := c.store.opts
		opts.PageChecksumCache = cache
		s2, err := New(c.nodes, opts)
		if err != nil {
			t.Fatal(err)
		}
		rd2, err := s2.Open(context.Background(), "/run.root")
		if err != nil {
			t.Fatal(err)
		}
		for _, off := range []int64{
			b*bs + g.ChunkSize + 4900,     // the damaged page of chunk 1
			b*bs + 2*g.ChunkSize + 3*4096, // the page of chunk 2 whose checksum is damaged
		} {
			n, err := rd2.ReadAt(context.Background(), p, off)
			if err != nil || !bytes.Equal(p[:n], data[off:off+int64(n)]) {
				t.Fatalf("cache %d: ReadAt(%d) of a damaged page: %d bytes, %v, or wrong bytes", cache, off, n, err)
			}
		}
		rd2.Close()
	}
}

// TestDeepInspectionChecksPages checks that a deep inspection finds an
// archive whose page checksums do not match its (sound) chunk, and that
// the rebuild of that slot writes them right again.
func TestDeepInspectionChecksPages(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 16 << 10}
	c := newCluster(t, 6, g)
	r := rand.New(rand.NewPCG(seed(t), 8))
	data := randBytes(r, 3*g.BlockSize()+100)
	put(t, c.store, "/p", data)
	if in, err := c.store.Inspect(ctx, "/p", true); err != nil || in.Health != Healthy {
		t.Fatalf("inspect: %+v, %v", in, err)
	}
	const slot, b = 2, 1
	p := filepath.Join(c.dirs[c.slotNode(t, "/p", slot)], "p")
	corrupt(t, p, pagesOf(t, p, b).CRCs+4) // page 1's checksum
	in, err := c.store.Inspect(ctx, "/p", true)
	if err != nil || in.Health == Healthy || len(in.Slots[slot].Bad) != 1 || in.Slots[slot].Bad[0] != b {
		t.Fatalf("inspect with a page checksum damaged: %+v, %v", in, err)
	}
	if _, err := c.store.Rebuild(ctx, "/p", []int{slot}, RebuildOptions{}); err != nil {
		t.Fatal(err)
	}
	if in, err := c.store.Inspect(ctx, "/p", true); err != nil || in.Health != Healthy {
		t.Fatalf("inspect after the rebuild: %+v, %v", in, err)
	}
}
