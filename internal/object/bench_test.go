package object

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/ecstore/ecstore/internal/layout"
)

// BenchmarkPutGet measures end-to-end put and get through the engine on
// local directories (fsync off, page cache), for 8+2 with 1 MiB chunks.
func BenchmarkPutGet(b *testing.B) {
	g := layout.Geometry{K: 8, M: 2, ChunkSize: 1 << 20}
	const size = 64 << 20
	data := randBytes(rand.New(rand.NewPCG(1, 1)), size)
	name := fmt.Sprintf("k=%d/m=%d/chunk=1MiB/size=64MiB", g.K, g.M)
	c := newCluster(b, 12, g)
	ctx := context.Background()
	b.Run("op=put/"+name, func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			w, err := c.store.Create(ctx, "/bench/put", nil)
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
	put(b, c.store, "/bench/get", data)
	b.Run("op=get/"+name, func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			r, err := c.store.Open(ctx, "/bench/get")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := r.WriteTo(ctx, io.Discard); err != nil {
				b.Fatal(err)
			}
			r.Close()
		}
	})
	// Degraded: two archives gone, every block needs reconstruction.
	put(b, c.store, "/bench/degraded", data)
	info, _ := c.store.Stat(ctx, "/bench/degraded")
	for _, id := range info.Placement[:2] {
		for i, n := range c.nodes {
			if n.ID() == id {
				removeFile(b, c.dirs[i], "/bench/degraded")
			}
		}
	}
	b.Run("op=get-degraded2/"+name, func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			r, err := c.store.Open(ctx, "/bench/degraded")
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
