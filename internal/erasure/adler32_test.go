package erasure

import (
	"bytes"
	"fmt"
	"hash"
	"hash/adler32"
	"math/rand/v2"
	"testing"
)

// updateAdler32 must agree with hash/adler32 for every length (around
// the word size and the reduction interval), content (random, all 0xff,
// which drives the sums hardest) and starting value.
func TestUpdateAdler32(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var lengths []int
	for n := 0; n <= 70; n++ {
		lengths = append(lengths, n)
	}
	lengths = append(lengths, 8*adlerWords, 8*adlerWords-1, 8*adlerWords+1, 8*adlerWords+8, 3*8*adlerWords+5, 1<<20, 1<<20+3)
	// Around the vector kernel's threshold and its largest call.
	lengths = append(lengths, adlerVectorMin-1, adlerVectorMin, adlerVectorMin+31, adlerVectorMin+32,
		adlerBlock*adlerBlocks-1, adlerBlock*adlerBlocks, adlerBlock*adlerBlocks+1, 2*adlerBlock*adlerBlocks+33)
	for _, n := range lengths {
		for _, fill := range []string{"random", "ff", "zero"} {
			p := make([]byte, n)
			switch fill {
			case "random":
				for i := range p {
					p[i] = byte(r.Uint32())
				}
			case "ff":
				for i := range p {
					p[i] = 0xff
				}
			}
			if got, want := updateAdler32(1, p), adler32.Checksum(p); got != want {
				t.Errorf("%s, %d bytes: %08x, want %08x", fill, n, got, want)
			}
			if got, want := updateAdler32Words(1, p), adler32.Checksum(p); got != want {
				t.Errorf("%s, %d bytes, without the vector kernel: %08x, want %08x", fill, n, got, want)
			}
			// Split at a random point: updating in two steps.
			cut := 0
			if n > 0 {
				cut = r.IntN(n)
			}
			if got, want := updateAdler32(updateAdler32(1, p[:cut]), p[cut:]), adler32.Checksum(p); got != want {
				t.Errorf("%s, %d bytes split at %d: %08x, want %08x", fill, n, cut, got, want)
			}
		}
	}
}

func FuzzUpdateAdler32(f *testing.F) {
	f.Add([]byte("Wikipedia"), uint16(0))
	f.Add(bytes.Repeat([]byte{0xff}, 9000), uint16(100))
	f.Fuzz(func(t *testing.T, p []byte, cut uint16) {
		c := min(int(cut), len(p))
		h := adler32.New()
		h.Write(p)
		if got, want := updateAdler32(updateAdler32(1, p[:c]), p[c:]), h.Sum32(); got != want {
			t.Fatalf("%d bytes split at %d: %08x, want %08x", len(p), c, got, want)
		}
	})
}

func BenchmarkAdler32(b *testing.B) {
	p := make([]byte, 1<<20)
	for i := range p {
		p[i] = byte(i * 7)
	}
	for _, impl := range []struct {
		name string
		fn   func([]byte) uint32
	}{
		{"stdlib", adler32.Checksum},
		{"ecstore", func(p []byte) uint32 { return updateAdler32(1, p) }},
		{"ecstore-words", func(p []byte) uint32 { return updateAdler32Words(1, p) }},
	} {
		b.Run(fmt.Sprintf("%s/1MiB", impl.name), func(b *testing.B) {
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				impl.fn(p)
			}
		})
	}
}

// Adler32 is a hash.Hash32 like hash/adler32's.
func TestAdler32Hash(t *testing.T) {
	var h hash.Hash32 = NewAdler32()
	ref := adler32.New()
	p := bytes.Repeat([]byte("ecstore adler32 "), 1000)
	for _, w := range [][]byte{p[:3], p[3:500], p[500:]} {
		h.Write(w)
		ref.Write(w)
	}
	if h.Sum32() != ref.Sum32() || !bytes.Equal(h.Sum([]byte{9}), ref.Sum([]byte{9})) || h.Size() != ref.Size() {
		t.Fatalf("sum %08x %x, want %08x %x", h.Sum32(), h.Sum(nil), ref.Sum32(), ref.Sum(nil))
	}
	h.Reset()
	if h.Sum32() != 1 {
		t.Fatalf("after Reset: %08x, want 00000001", h.Sum32())
	}
}
