package xrootd

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

func TestPagesInPlace(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		off := r.Int64N(3 * PageSize)
		n := r.IntN(5 * PageSize)
		if r.IntN(4) == 0 {
			n = r.IntN(10)
		}
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		want := AppendPages(nil, off, data)
		buf := make([]byte, PagesLen(off, n)+r.IntN(100))
		copy(buf[PagesLen(off, n)-n:], data)
		if got := PagesInPlace(buf, off, n); !bytes.Equal(got, want) {
			t.Fatalf("PagesInPlace(off %d, %d bytes) differs from AppendPages", off, n)
		}
	}
}
