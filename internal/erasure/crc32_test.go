package erasure

import (
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"regexp"
	"runtime"
	"testing"
)

// TestChunkChecksumIsCRC32 checks ChunkChecksum against hash/crc32 over
// lengths around every boundary of the folding kernel (64-byte rounds,
// foldMin) and at every alignment of the start within a round.
func TestChunkChecksumIsCRC32(t *testing.T) {
	t.Logf("folding kernel in use: %v", useIEEEFold)
	r := rand.New(rand.NewPCG(5, 6))
	buf := make([]byte, 1<<20+200)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	var lengths []int
	for n := 0; n <= 1200; n++ {
		lengths = append(lengths, n)
	}
	lengths = append(lengths, 4095, 4096, 4097, 65536+63, 1<<20-1, 1<<20, 1<<20+64)
	for _, n := range lengths {
		for _, at := range []int{0, 1, 7, 31, 63} {
			p := buf[at : at+n]
			if got, want := ChunkChecksum(p), crc32.ChecksumIEEE(p); got != want {
				t.Fatalf("%d bytes at offset %d: %08x, want %08x", n, at, got, want)
			}
		}
	}
}

// TestFoldConstants derives the fold constants of crc32_amd64.s: for a
// 512-bit fold, x^(512+32) and x^(512-32) modulo the IEEE polynomial,
// bit-reflected and shifted left by one.
func TestFoldConstants(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the constants are amd64 assembly's")
	}
	src, err := os.ReadFile("crc32_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`DATA ieeeFold512<>\+(\d+)\(SB\)/8, \$(0x[0-9a-f]+)`).FindAllStringSubmatch(string(src), -1)
	if len(m) != 2 {
		t.Fatalf("found %d fold constants in crc32_amd64.s, want 2", len(m))
	}
	const ieeeReflected = 0xedb88320
	xPow := func(n int) uint64 {
		p := uint32(1) << 31 // x^0
		for range n {
			p = gfMulMod(p, 1<<30, ieeeReflected) // times x
		}
		return uint64(p) << 1
	}
	for i, n := range []int{544, 480} {
		if want := fmt.Sprintf("%#x", xPow(n)); m[i][2] != want {
			t.Errorf("constant at +%s is %s, want x^%d: %s", m[i][1], m[i][2], n, want)
		}
	}
}
