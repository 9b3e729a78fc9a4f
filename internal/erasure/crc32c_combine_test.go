package erasure

import (
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

func TestCombineCRC32C(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 20000)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	for _, cut := range []int{0, 1, 7, 4095, 4096, 4097, 12345, 20000} {
		for _, end := range []int{cut, cut + 1, cut + 4096, 20000} {
			if end > len(buf) || end < cut {
				continue
			}
			a, b := buf[:cut], buf[cut:end]
			got := CombineCRC32C(CRC32C(a), CRC32C(b), int64(len(b)))
			if want := CRC32C(buf[:end]); got != want {
				t.Errorf("combine at %d of %d: %08x, want %08x", cut, end, got, want)
			}
		}
	}
	if got, want := newCRCShift(PagedSize).apply(CRC32C(buf[:100]))^CRC32C(buf[100:100+PagedSize]), CRC32C(buf[:100+PagedSize]); got != want {
		t.Errorf("page shift: %08x, want %08x", got, want)
	}
}

// pageCRCs is what archive.AppendPageCRCs yields for chunk.
func pageCRCs(chunk []byte) []byte {
	var out []byte
	for len(chunk) > 0 {
		p := chunk[:min(len(chunk), PagedSize)]
		out = binary.BigEndian.AppendUint32(out, crc32.Checksum(p, castagnoli))
		chunk = chunk[len(p):]
	}
	return out
}

// TestWritePagedMatchesWrite feeds the same bytes through Write and
// WritePaged in chunks of the shapes the writer makes: whole pages, a
// short last page, and chunks cut short by the object's end (the rest
// padding, whose page CRCs cover bytes that are not the object's).
func TestWritePagedMatchesWrite(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, chunkLen := range []int{1, 100, PagedSize, PagedSize + 1, 3*PagedSize - 5, 1 << 20} {
		for _, take := range []int{0, 1, PagedSize - 1, PagedSize, PagedSize + 3, chunkLen - 1, chunkLen} {
			if take < 0 || take > chunkLen {
				continue
			}
			chunk := make([]byte, chunkLen)
			for i := range chunk[:take] {
				chunk[i] = byte(r.Uint32())
			}
			plain, paged := NewObjectSums(), NewObjectSums()
			prefix := []byte("bytes before this chunk")
			plain.Write(prefix)
			paged.Write(prefix)
			plain.Write(chunk[:take])
			paged.WritePaged(chunk, take, pageCRCs(chunk))
			if plain.CRC32C() != paged.CRC32C() || plain.Adler32() != paged.Adler32() || plain.Len() != paged.Len() {
				t.Errorf("chunk of %d, %d taken: paged crc32c %08x adler32 %08x len %d, want %08x %08x %d", chunkLen, take,
					paged.CRC32C(), paged.Adler32(), paged.Len(), plain.CRC32C(), plain.Adler32(), plain.Len())
			}
		}
	}
}

// BenchmarkObjectSumsPaged is BenchmarkObjectSums with the CRC-32C taken
// from page CRCs, as the writer does.
func BenchmarkObjectSumsPaged(b *testing.B) {
	const block, chunk = 8 << 20, 1 << 20
	mem := make([]byte, 64<<20)
	for i := range mem {
		mem[i] = byte(i * 7)
	}
	pages := make([][]byte, len(mem)/chunk)
	for i := range pages {
		pages[i] = pageCRCs(mem[i*chunk : (i+1)*chunk])
	}
	s := NewObjectSums()
	b.SetBytes(block)
	off := 0
	for b.Loop() {
		for c := off; c < off+block; c += chunk {
			s.WritePaged(mem[c:c+chunk], chunk, pages[c/chunk])
		}
		off = (off + block) % len(mem)
	}
}
