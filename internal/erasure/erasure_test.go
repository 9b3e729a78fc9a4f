package erasure

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

func TestSelfTest(t *testing.T) {
	if err := SelfTest(); err != nil {
		t.Fatal(err)
	}
}

func TestGeometryLimits(t *testing.T) {
	for _, km := range [][2]int{{0, 1}, {-1, 2}, {65, 2}, {8, -1}, {8, 33}} {
		if _, err := New(km[0], km[1]); err == nil {
			t.Errorf("New(%d, %d) accepted", km[0], km[1])
		}
	}
}

// TestAnyKRecover checks the MDS property exhaustively for small
// geometries: every subset of K chunks recovers the data.
func TestAnyKRecover(t *testing.T) {
	geos := [][2]int{{1, 0}, {1, 1}, {1, 2}, {2, 1}, {3, 2}, {4, 2}, {4, 4}, {6, 3}, {8, 2}, {10, 4}}
	if !testing.Short() {
		geos = append(geos, [2]int{16, 4}, [2]int{16, 8})
	}
	r := rand.New(rand.NewPCG(7, 7))
	for _, km := range geos {
		k, m := km[0], km[1]
		t.Run(fmt.Sprintf("k=%d/m=%d", k, m), func(t *testing.T) {
			c, err := New(k, m)
			if err != nil {
				t.Fatal(err)
			}
			chunks := make([][]byte, k+m)
			for i := range chunks {
				chunks[i] = make([]byte, 33)
				if i < k {
					for j := range chunks[i] {
						chunks[i][j] = byte(r.Uint32())
					}
				}
			}
			if err := c.Encode(chunks); err != nil {
				t.Fatal(err)
			}
			n := k + m
			tried := 0
			for mask := 0; mask < 1<<n; mask++ {
				lost := 0
				for i := 0; i < n; i++ {
					if mask&(1<<i) != 0 {
						lost++
					}
				}
				if lost > m || (n > 16 && lost != m) { // keep 24-wide sweeps bounded
					continue
				}
				if n > 16 && tried > 3000 {
					break
				}
				tried++
				work := make([][]byte, n)
				for i := range work {
					if mask&(1<<i) == 0 {
						work[i] = bytes.Clone(chunks[i])
					}
				}
				if err := c.Reconstruct(work); err != nil {
					t.Fatalf("lost mask %b: %v", mask, err)
				}
				for i := range work {
					if !bytes.Equal(work[i], chunks[i]) {
						t.Fatalf("lost mask %b: chunk %d wrong", mask, i)
					}
				}
			}
			// One chunk too many lost.
			work := make([][]byte, n)
			copy(work[m+1:], chunks[m+1:])
			if err := c.ReconstructData(work); !errors.Is(err, ErrTooFewChunks) {
				t.Fatalf("with %d lost: %v, want ErrTooFewChunks", m+1, err)
			}
		})
	}
}

func TestObjectSums(t *testing.T) {
	s := NewObjectSums()
	s.Write([]byte("hello "))
	s.Write([]byte("world"))
	// adler32("hello world") = 0x1a0b045d; crc32c("hello world") = 0xc99465aa
	if a, c := FormatSum(s.Adler32()), FormatSum(s.CRC32C()); a != "1a0b045d" || c != "c99465aa" || s.Len() != 11 {
		t.Fatalf("adler32 %s crc32c %s len %d", a, c, s.Len())
	}
}

func BenchmarkEncode(b *testing.B) {
	for _, g := range []struct {
		k, m  int
		chunk int
	}{{8, 2, 1 << 20}, {4, 2, 1 << 20}, {10, 4, 1 << 20}, {16, 8, 256 << 10}} {
		b.Run(fmt.Sprintf("k=%d/m=%d/chunk=%dKiB", g.k, g.m, g.chunk>>10), func(b *testing.B) {
			c, err := New(g.k, g.m)
			if err != nil {
				b.Fatal(err)
			}
			chunks := make([][]byte, g.k+g.m)
			for i := range chunks {
				chunks[i] = make([]byte, g.chunk)
			}
			c.Encode(chunks)
			b.SetBytes(int64(g.k * g.chunk))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := c.Encode(chunks); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkChunkChecksum(b *testing.B) {
	p := make([]byte, 1<<20)
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		ChunkChecksum(p)
	}
}

// BenchmarkChunkChecksumHashCRC32 is BenchmarkChunkChecksum's baseline:
// hash/crc32 alone, which ChunkChecksum uses where the CPU has no
// VPCLMULQDQ without AVX-512 (useIEEEFold).
func BenchmarkChunkChecksumHashCRC32(b *testing.B) {
	p := make([]byte, 1<<20)
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		crc32.ChecksumIEEE(p)
	}
}

// BenchmarkObjectSums feeds whole 8 MiB blocks, as the writer does, from
// 64 MiB of memory: more than the caches hold, so every block comes from
// memory as a block just read from a socket does.
func BenchmarkObjectSums(b *testing.B) {
	const block = 8 << 20
	mem := make([]byte, 64<<20)
	for i := range mem {
		mem[i] = byte(i * 7)
	}
	s := NewObjectSums()
	b.SetBytes(block)
	off := 0
	for b.Loop() {
		s.Write(mem[off : off+block])
		off = (off + block) % len(mem)
	}
}
