package object

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
)

// closeMid makes TestReaderMixedReads close the reader while its reads
// run, every other round.
var closeMid = true

// TestReaderMixedReads runs random small reads, whole blocks, sequences
// that continue each other and ReadSlices on one reader from 8 goroutines,
// closing it meanwhile every other round: right bytes or ErrClosed, and
// no data race (a fetch completing a partial one read its base's error
// before the base was done when Close woke it; found by review).
func TestReaderMixedReads(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 16 << 10}
	c := newCluster(t, 6, g, func(o *Options) { o.ReadAhead = 2 })
	r := rand.New(rand.NewPCG(seed(t), 12))
	bs := g.BlockSize()
	data := randBytes(r, 40*bs+333)
	put(t, c.store, "/f", data)
	for round := range 20 {
		rd, err := c.store.Open(context.Background(), "/f")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rr := rand.New(rand.NewPCG(uint64(round), uint64(w)))
				for i := 0; i < 200; i++ {
					var off int64
					var n int
					switch rr.IntN(4) {
					case 0: // random small
						off, n = rr.Int64N(int64(len(data))), 1+rr.IntN(5000)
					case 1: // block aligned, whole block
						off, n = rr.Int64N(40)*bs, int(bs)
					case 2: // continue: a sequence
						off = rr.Int64N(int64(len(data)))
						for j := 0; j < 5; j++ {
							n = 3000
							p := make([]byte, n)
							k, err := rd.ReadAt(context.Background(), p, off)
							if errors.Is(err, ErrClosed) {
								return
							}
							if (err != nil && err != io.EOF) || !bytes.Equal(p[:k], data[off:off+int64(k)]) {
								t.Errorf("seq ReadAt(%d): %d %v", off, k, err)
								return
							}
							off += int64(k)
							if off >= int64(len(data)) {
								break
							}
						}
						continue
					case 3: // slices
						off, n = rr.Int64N(int64(len(data))), 1+rr.IntN(40000)
						bufs, release, err := rd.ReadSlices(context.Background(), off, n)
						if errors.Is(err, ErrClosed) {
							return
						}
						if err != nil && err != io.EOF {
							t.Errorf("ReadSlices: %v", err)
							return
						}
						got := bytes.Join(bufs, nil)
						if !bytes.Equal(got, data[off:off+int64(len(got))]) {
							t.Errorf("ReadSlices(%d,%d) wrong bytes", off, n)
						}
						release()
						continue
					}
					p := make([]byte, n)
					k, err := rd.ReadAt(context.Background(), p, off)
					if errors.Is(err, ErrClosed) {
						return
					}
					if (err != nil && err != io.EOF) || !bytes.Equal(p[:k], data[off:off+int64(k)]) {
						t.Errorf("ReadAt(%d,%d): %d %v", off, n, k, err)
						return
					}
				}
			}()
		}
		if round%2 == 1 && closeMid {
			time.Sleep(time.Duration(r.IntN(30)) * time.Millisecond)
			rd.Close()
		}
		wg.Wait()
		rd.Close()
	}
}

// TestReaderMixedReadsNoClose is TestReaderMixedReads without Close.
func TestReaderMixedReadsNoClose(t *testing.T) {
	closeMid = false
	defer func() { closeMid = true }()
	TestReaderMixedReads(t)
}
