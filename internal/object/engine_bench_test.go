package object

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
)

// durableCluster is newCluster with fsync on: node directories under
// $ECSTORE_BENCH_DIR, or the test's temporary directory (which must be on
// a real disk for the fsyncs to cost what they cost in production; not
// /dev/shm, where newCluster puts benchmark nodes).
func durableCluster(b *testing.B, n int, g layout.Geometry) *cluster {
	b.Helper()
	base := b.TempDir()
	if p := os.Getenv("ECSTORE_BENCH_DIR"); p != "" {
		d, err := os.MkdirTemp(p, "ecstore-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(d) })
		base = d
	}
	c := &cluster{}
	for i := range n {
		dir := filepath.Join(base, fmt.Sprintf("n%02d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		ln, err := node.NewLocal(fmt.Sprintf("n%02d", i), dir, node.LocalOptions{Fsync: true})
		if err != nil {
			b.Fatal(err)
		}
		c.dirs = append(c.dirs, dir)
		c.nodes = append(c.nodes, ln)
	}
	s, err := New(c.nodes, Options{Geometry: g, MinFree: -1})
	if err != nil {
		b.Fatal(err)
	}
	c.store = s
	return c
}

// BenchmarkSmallObjects measures the engine on 27 KB objects (one short
// block), the size of bench/run.sh's small-object rows: put of a new
// object, and get, on 10 local directories at 8+2 with 1 MiB chunks,
// with fsync off (page cache) and on (real disk, see durableCluster).
func BenchmarkSmallObjects(b *testing.B) {
	g := layout.Geometry{K: 8, M: 2, ChunkSize: 1 << 20}
	const size = 27_000
	data := randBytes(rand.New(rand.NewPCG(2, 2)), size)
	ctx := context.Background()
	for _, fsync := range []bool{false, true} {
		name := fmt.Sprintf("fsync=%v/k=%d/m=%d/chunk=1MiB/size=27KB", fsync, g.K, g.M)
		var c *cluster
		if fsync {
			c = durableCluster(b, 10, g)
		} else {
			c = newCluster(b, 10, g)
		}
		put(b, c.store, "/warm", data)
		b.Run("op=put/"+name, func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				w, err := c.store.Create(ctx, fmt.Sprintf("/small/%s/%d", b.Name(), i), nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := w.Write(data); err != nil {
					b.Fatal(err)
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
		const objects = 64
		for i := range objects {
			put(b, c.store, fmt.Sprintf("/get/%d", i), data)
		}
		b.Run("op=get/"+name, func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				r, err := c.store.Open(ctx, fmt.Sprintf("/get/%d", i%objects))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := r.WriteTo(ctx, io.Discard); err != nil {
					b.Fatal(err)
				}
				r.Close()
			}
		})
	}
}

// BenchmarkDurablePut is BenchmarkPutGet's put with fsync on: every
// archive fsynced, renamed and its directory fsynced before Close
// returns, as the gateway does by default.
func BenchmarkDurablePut(b *testing.B) {
	g := layout.Geometry{K: 8, M: 2, ChunkSize: 1 << 20}
	const size = 64 << 20
	data := randBytes(rand.New(rand.NewPCG(3, 3)), size)
	c := durableCluster(b, 10, g)
	ctx := context.Background()
	put(b, c.store, "/warm", data[:1<<20])
	b.Run(fmt.Sprintf("op=put/fsync=true/k=%d/m=%d/chunk=1MiB/size=64MiB", g.K, g.M), func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			w, err := c.store.Create(ctx, fmt.Sprintf("/durable/%d", i), nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := w.Write(data); err != nil {
				b.Fatal(err)
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
