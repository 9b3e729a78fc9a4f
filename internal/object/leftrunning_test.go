package object

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/ecstore/ecstore/internal/archive"
	"github.com/ecstore/ecstore/internal/bufpool"
	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
)

// leftRunningFile is a File whose reads fail as a guarded node's read
// left running does (node.ErrLeftRunning), remembering the buffer that
// read still holds.
type leftRunningFile struct {
	size int64
	held []byte
}

func (f *leftRunningFile) ReadAt(_ context.Context, p []byte, _ int64) (int, error) {
	f.held = p
	return 0, fmt.Errorf("node n00: read /o: %w", node.ErrLeftRunning)
}
func (f *leftRunningFile) Size() int64  { return f.size }
func (f *leftRunningFile) Close() error { return nil }

// A chunk read left running keeps its buffer: readChunkOf must not give
// it back to the pool, from which another transfer would take memory
// that the late read then overwrites (after that transfer verified it).
func TestChunkReadLeftRunningKeepsItsBuffer(t *testing.T) {
	g := layout.Geometry{K: 2, M: 1, ChunkSize: 256 << 10}
	c := newCluster(t, 3, g)
	ctx := context.Background()
	put(t, c.store, "/o", randBytes(rand.New(rand.NewPCG(seed(t), 7)), g.BlockSize()))
	b, err := os.ReadFile(filepath.Join(c.dirs[0], "o"))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := archive.Parse(ctx, bytesArchive(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	idx.Whole = nil // read through the file, as a large archive is
	f := &leftRunningFile{size: int64(len(b))}
	ref := &archiveRef{node: c.nodes[0], file: f, idx: idx}
	if _, _, err := readChunkOf(ctx, ref, 0, false); err == nil {
		t.Fatal("readChunkOf of a read left running succeeded")
	}
	if f.held == nil {
		t.Fatal("the read was not made")
	}
	held := unsafe.SliceData(f.held[:cap(f.held)])
	for range 1000 {
		p := bufpool.Get(cap(f.held))
		if unsafe.SliceData(p[:cap(p)]) == held {
			t.Fatal("the buffer of a read left running went back to the pool")
		}
		defer bufpool.Put(p)
	}
}
