package object

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/ecstore/ecstore/internal/layout"
)

// The store's promise: with up to M of an object's archives damaged
// (bytes flipped anywhere, in the directory and metadata tail, runs
// zeroed, the file cut short), every read, whole or of a range, returns
// the object's bytes. Random damage, a new object each trial (the seed
// is logged; -count and the seed flags replay it).
func TestRandomDamageNeverChangesWhatIsRead(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 32 << 10}
	c := newCluster(t, 6, g)
	r := rand.New(rand.NewPCG(seed(t), 99))
	ctx := context.Background()
	trials := 60
	for trial := 0; trial < trials; trial++ {
		size := int64(r.IntN(int(9*g.BlockSize()))) + 1
		data := randBytes(r, size)
		path := fmt.Sprintf("/rc/%d", trial)
		put(t, c.store, path, data)
		arch := c.archivesOf(path)
		r.Shuffle(len(arch), func(i, j int) { arch[i], arch[j] = arch[j], arch[i] })
		nbad := 1 + r.IntN(g.M)
		for _, a := range arch[:nbad] {
			b, _ := os.ReadFile(a)
			switch r.IntN(4) {
			case 0: // flip a few bytes anywhere
				for range 1 + r.IntN(4) {
					b[r.IntN(len(b))] ^= byte(1 + r.IntN(255))
				}
			case 1: // flip bytes in the tail (directory, metadata)
				for range 1 + r.IntN(3) {
					pos := len(b) - 1 - r.IntN(min(len(b), 2000))
					b[pos] ^= byte(1 + r.IntN(255))
				}
			case 2: // truncate
				b = b[:r.IntN(len(b))]
			case 3: // zero a run
				at := r.IntN(len(b))
				clear(b[at:min(len(b), at+r.IntN(9000))])
			}
			os.WriteFile(a, b, 0o644)
		}
		s, err := New(c.nodes, c.store.opts)
		if err != nil {
			t.Fatal(err)
		}
		got, err := get(s, path)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("trial %d (%d archives damaged): whole read: %d bytes, %v (want %d)", trial, nbad, len(got), err, len(data))
		}
		rd, err := s.Open(ctx, path)
		if err != nil {
			t.Fatalf("trial %d: open: %v", trial, err)
		}
		if rd.Size() != size {
			t.Fatalf("trial %d: size %d, want %d", trial, rd.Size(), size)
		}
		for range 50 {
			off := r.Int64N(size)
			n := 1 + r.IntN(6000)
			p := make([]byte, n)
			m, err := rd.ReadAt(ctx, p, off)
			want := data[off:min(size, off+int64(n))]
			if err != nil && !errors.Is(err, io.EOF) {
				t.Fatalf("trial %d: read %d+%d: %v", trial, off, n, err)
			}
			if !bytes.Equal(p[:m], want) {
				t.Fatalf("trial %d: ReadAt(%d, %d) returned wrong bytes (n=%d, want %d)", trial, off, n, m, len(want))
			}
		}
		rd.Close()
	}
}
