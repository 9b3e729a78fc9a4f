package erasure

import (
	"encoding/binary"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// sumChunk takes chunk through a ChunkSummer in pieces of piece bytes,
// as the writer does with SumPiece.
func sumChunk(chunk []byte, n, piece int, pages []byte) ChunkSums {
	c := NewChunkSummer(n, pages)
	for off := 0; off < len(chunk); off += piece {
		c.Write(chunk[off:min(off+piece, len(chunk))])
	}
	return c.Sums()
}

// TestSumChunkMatchesSeparatePasses checks ChunkSummer against hash/crc32
// and hash/adler32 at lengths around its piece, page and fold sizes, with
// every kind of n (parity, a whole data chunk, a partial last block), in
// the writer's pieces, in pages and in one piece.
func TestSumChunkMatchesSeparatePasses(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 3*SumPiece+2*PagedSize+100)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	lengths := []int{0, 1, 63, 64, 65, foldMin - 1, foldMin, PagedSize - 1, PagedSize, PagedSize + 1,
		SumPiece - 64, SumPiece, SumPiece + 1, 2*SumPiece + PagedSize + 7, len(buf)}
	for _, l := range lengths {
		for _, align := range []int{0, 1} { // misaligned slices too
			if align+l > len(buf) {
				continue
			}
			chunk := buf[align : align+l]
			for _, c := range []struct{ n, piece int }{
				{0, SumPiece}, {1, SumPiece}, {l / 3, SumPiece}, {l - 1, SumPiece}, {l, SumPiece},
				{l / 3, PagedSize}, {l - 1, max(l, 1)},
			} {
				n, piece := c.n, c.piece
				if n < 0 || n > l {
					continue
				}
				t.Run(fmt.Sprintf("len=%d/align=%d/n=%d/piece=%d", l, align, n, piece), func(t *testing.T) {
					got := sumChunk(chunk, n, piece, nil)
					if want := crc32.ChecksumIEEE(chunk); got.CRC32 != want {
						t.Errorf("CRC32 %08x, want %08x", got.CRC32, want)
					}
					if want := ChunkChecksum(chunk); got.CRC32 != want {
						t.Errorf("CRC32 %08x, ChunkChecksum %08x", got.CRC32, want)
					}
					if want := adler32.Checksum(chunk[:n]); got.Adler32 != want {
						t.Errorf("Adler32 %08x, want %08x", got.Adler32, want)
					}
					if want := pageCRCs(chunk); string(got.Pages) != string(want) {
						t.Errorf("pages differ: %d bytes, want %d", len(got.Pages), len(want))
					}
				})
			}
		}
	}
}

// TestSumChunkAppends checks that the page CRCs go after what pages held.
func TestSumChunkAppends(t *testing.T) {
	chunk := make([]byte, 3*PagedSize)
	got := sumChunk(chunk, 0, SumPiece, []byte("head"))
	if want := append([]byte("head"), pageCRCs(chunk)...); string(got.Pages) != string(want) {
		t.Fatalf("pages %x, want %x", got.Pages, want)
	}
}

func TestCombineAdler32(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 200000)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	// all 0xff bytes drive both sums to their largest values
	ff := make([]byte, 70000)
	for i := range ff {
		ff[i] = 0xff
	}
	for _, src := range [][]byte{buf, ff} {
		for _, cut := range []int{0, 1, 5552, adlerMod - 1, adlerMod, adlerMod + 1, len(src) / 2, len(src) - 1, len(src)} {
			if cut > len(src) {
				continue
			}
			a, b := adler32.Checksum(src[:cut]), adler32.Checksum(src[cut:])
			if got, want := CombineAdler32(a, b, int64(len(src)-cut)), adler32.Checksum(src); got != want {
				t.Errorf("len %d cut %d: %08x, want %08x", len(src), cut, got, want)
			}
		}
	}
}

func FuzzCombineAdler32(f *testing.F) {
	f.Add([]byte("hello, world"), uint16(5))
	f.Fuzz(func(t *testing.T, p []byte, cut uint16) {
		c := int(cut) % (len(p) + 1)
		a, b := adler32.Checksum(p[:c]), adler32.Checksum(p[c:])
		if got, want := CombineAdler32(a, b, int64(len(p)-c)), adler32.Checksum(p); got != want {
			t.Fatalf("cut %d of %d: %08x, want %08x", c, len(p), got, want)
		}
	})
}

// TestAddChunkMatchesWrite checks that whole-object sums built from
// chunk sums equal those of the bytes written in order, a partial last
// chunk included.
func TestAddChunkMatchesWrite(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const cl = 3*PagedSize + 100
	chunks := make([][]byte, 5)
	for i := range chunks {
		chunks[i] = make([]byte, cl)
		for j := range chunks[i] {
			chunks[i][j] = byte(rng.Uint32())
		}
	}
	ns := []int{cl, cl, cl, 2*PagedSize + 17, 0}
	want, got := NewObjectSums(), NewObjectSums()
	for i, c := range chunks {
		want.Write(c[:ns[i]])
		got.AddChunk(c, ns[i], sumChunk(c, ns[i], SumPiece, nil))
	}
	if got.Adler32() != want.Adler32() || got.CRC32C() != want.CRC32C() || got.Len() != want.Len() {
		t.Fatalf("AddChunk: adler %08x crc32c %08x len %d, Write: %08x %08x %d",
			got.Adler32(), got.CRC32C(), got.Len(), want.Adler32(), want.CRC32C(), want.Len())
	}
}

// BenchmarkChunkSums compares SumChunk's one pass with the three passes
// it replaces, on chunks larger than the caches (cold) and on one chunk
// read again and again (warm).
func BenchmarkChunkSums(b *testing.B) {
	const cl = 1 << 20
	for _, cold := range []bool{false, true} {
		nchunks := 1
		if cold {
			nchunks = 64 // 64 MiB, beyond the caches
		}
		chunks := make([][]byte, nchunks)
		for i := range chunks {
			chunks[i] = make([]byte, cl)
			for j := range chunks[i] {
				chunks[i][j] = byte(i + j*7)
			}
		}
		pages := make([]byte, 0, cl/PagedSize*4)
		name := map[bool]string{false: "warm", true: "cold"}[cold]
		b.Run("impl=onepass/chunk=1MiB/cache="+name, func(b *testing.B) {
			b.SetBytes(cl)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				sumChunk(chunks[i%nchunks], cl, SumPiece, pages[:0])
			}
		})
		b.Run("impl=threepass/chunk=1MiB/cache="+name, func(b *testing.B) {
			b.SetBytes(cl)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				c := chunks[i%nchunks]
				ChunkChecksum(c)
				p := pages[:0]
				for q := c; len(q) > 0; q = q[PagedSize:] {
					p = binary.BigEndian.AppendUint32(p, crc32.Checksum(q[:PagedSize], castagnoli))
				}
				updateAdler32(1, c)
			}
		})
	}
}
