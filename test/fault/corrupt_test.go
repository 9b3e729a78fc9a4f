//go:build fault

package fault

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/archive"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// Corruption rounds of TestCorruption: 10 × 100 = 1000 flipped bytes.
const (
	corruptRounds   = 10
	corruptPerRound = 100
)

// flip is one corrupted byte of an archive on disk.
type flip struct {
	path  string // object
	node  string // node id
	file  string
	off   int64
	block int64 // chunk whose data holds the byte; -1 outside chunk data
}

// TestCorruption flips 1000 random single bytes in the archives of ten
// objects (0 bytes to three blocks) of a gateway over local node
// directories, in rounds of 100. In each round every block gets at most M
// corrupt chunks: for each object and block two victim slots are drawn,
// and bytes are flipped only in those slots' chunks of that block — or,
// for a slot that is a victim of every block, anywhere in its archive
// (local headers, metadata entry, central directory). Then
//
//   - fsck --deep --json must name every corrupted chunk whose data holds
//     a flipped byte (slot on that node, block in corrupt_blocks), which
//     the suite locates with internal/archive.Parse on the archive file;
//   - every object must read back bit-exact through the gateway (xrdcp)
//     and the CLI (ecstore get), or fail with a clear error, never with
//     wrong bytes; and so must 20 reads of 3000 bytes at random offsets
//     of each (the reads that take pages and their checksums, not whole
//     chunks);
//   - repair --deep must succeed, and a second fsck --deep be clean, with
//     every archive on disk verifying again.
func TestCorruption(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 4))
	c := newCluster(t, clusterOptions{kind: localDirs})
	bodies := newContents(t, workDir(t, c, "bodies"), seed)
	tmp := workDir(t, c, "downloads")
	sizes := []int64{0, 1, 100 * kib, 3*mib + 17, 8 * mib, 9*mib + 5, 17*mib + 3, 20 * mib, 2*mib + 512*kib, 12 * mib}
	var paths []string
	objs := map[string]*content{}
	for i, size := range sizes {
		p := fmt.Sprintf("/corrupt/o%d", i)
		objs[p] = bodies.make(size)
		put(t, c, p, objs[p])
		paths = append(paths, p)
	}
	mustBeClean(t, c)
	var (
		total, inData, named, readErrs int
		repairBytes, repairSecs        float64
		start                          = time.Now()
	)
	for round := range corruptRounds {
		flips := corruptRound(t, c, rng, paths, corruptPerRound)
		total += len(flips)
		// fsck --deep must name every chunk whose data was hit.
		rep, r := fsck(t, c, "--deep")
		if rep.Clean || r.code == 0 {
			t.Errorf("round %d: fsck --deep reports a clean cluster after %d flipped bytes", round, len(flips))
		}
		type chunkKey struct {
			path, node string
			block      int64
		}
		reported := map[chunkKey]bool{}
		unreadable := map[[2]string]bool{} // path, node: archive reported with an error
		for _, o := range rep.Objects {
			for _, s := range o.Slots {
				node := s.FoundOn
				if node == "" {
					node = s.Node
				}
				for _, b := range s.Corrupt {
					reported[chunkKey{o.Path, node, b}] = true
				}
				if s.Error != "" || s.FoundOn == "" {
					unreadable[[2]string{o.Path, s.Node}] = true
				}
			}
		}
		headerHit := map[[2]string]bool{}
		for _, f := range flips {
			if f.block < 0 {
				headerHit[[2]string{f.path, f.node}] = true
			}
		}
		seen := map[chunkKey]bool{}
		for _, f := range flips {
			if f.block < 0 {
				continue
			}
			k := chunkKey{f.path, f.node, f.block}
			if seen[k] {
				continue
			}
			seen[k] = true
			inData++
			switch {
			case reported[k]:
				named++
			case headerHit[[2]string{f.path, f.node}] && unreadable[[2]string{f.path, f.node}]:
				// The archive's directory or metadata was hit too and fsck
				// reports the whole archive: its chunks are all lost.
				named++
			default:
				t.Errorf("round %d: fsck --deep --json does not name corrupt chunk of block %d of %s on node %s (byte %d of %s)",
					round, f.block, f.path, f.node, f.off, f.file)
			}
		}
		// Reads: correct bytes or a clear error, never wrong bytes.
		for i, p := range paths {
			got, diff, r := getVia(t, c, tmp, p, 2*time.Minute, objs[p])
			switch {
			case !r.ok():
				readErrs++
				t.Logf("round %d: get %s via xrdcp failed (accepted as a clear error, but within M corrupt chunks per block it should not): %s", round, p, oneLine(r))
			case got == nil:
				t.Errorf("round %d: get %s via xrdcp returned wrong bytes: %s", round, p, diff)
			}
			if i%3 == round%3 {
				local := fmt.Sprintf("%s/cli-%d", tmp, i)
				r := c.cli(2*time.Minute, "get", p, local)
				if !r.ok() {
					readErrs++
					t.Logf("round %d: ecstore get %s failed: %s", round, p, oneLine(r))
				} else if m, diff, _ := matchFile(local, []*content{objs[p]}); m == nil {
					t.Errorf("round %d: ecstore get %s returned wrong bytes: %s", round, p, diff)
				}
				os.Remove(local)
			}
		}
		// Random reads of a few KB, as ROOT's, which read pages and their
		// checksums (a flipped page, or a flipped checksum, must send
		// the read to the whole chunk): right bytes or a clear error.
		readErrs += randomReads(t, c, rng, paths, objs, round)
		out := mustRepair(t, c, "--deep")
		b, secs := repairStats(out)
		repairBytes += b
		repairSecs += secs
		if round == 0 {
			t.Logf("round 0 repair: %s", lastLines(out, 2))
		}
		mustBeClean(t, c)
		for _, p := range paths {
			good, want := 0, 0
			for _, a := range c.scanObject(p, true) {
				if a.good() && a.idx.Meta.CRC32C == objs[p].crc32c {
					good++
					want = a.idx.Meta.K + a.idx.Meta.M // 1+M for small objects
				}
			}
			if good != want || want == 0 {
				t.Errorf("round %d: after repair %s has %d good archives on disk, want %d", round, p, good, want)
			}
		}
		if t.Failed() {
			t.Fatalf("round %d failed (seed %d)", round, baseSeed())
		}
	}
	for _, p := range paths {
		mustGet(t, c, tmp, p, objs[p])
	}
	t.Logf("%d bytes flipped in %d rounds in %v: %d distinct corrupt chunks (by data bytes), %d named by fsck --deep; %d reads failed with an error; repair --deep rebuilt %.1f MB in %.1fs (%.1f MB/s)",
		total, corruptRounds, time.Since(start).Round(time.Millisecond), inData, named, readErrs,
		repairBytes/1e6, repairSecs, repairBytes/1e6/max(repairSecs, 1e-9))
}

// randomReads reads 20 ranges of 3000 bytes at random offsets of each
// object through the gateway, on one connection, and compares them with
// the objects' content. It fails the test for wrong bytes and returns
// how many reads failed with an error.
func randomReads(t *testing.T, c *cluster, rng *rand.Rand, paths []string, objs map[string]*content, round int) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := xrootd.Dial(ctx, c.addr, nil)
	if err != nil {
		t.Fatalf("round %d: dial the gateway: %v", round, err)
	}
	defer cl.Close()
	errs := 0
	for _, p := range paths {
		o := objs[p]
		if o.size < 2*3000 {
			continue
		}
		want, err := os.Open(o.file)
		if err != nil {
			t.Fatal(err)
		}
		f, err := cl.Open(ctx, p, xrootd.OpenRead, 0)
		if err != nil {
			want.Close()
			errs++
			t.Logf("round %d: open %s for random reads: %v", round, p, err)
			continue
		}
		got, exp := make([]byte, 3000), make([]byte, 3000)
		for range 20 {
			off := 1 + rng.Int64N(o.size-int64(len(got))-1)
			if _, err := want.ReadAt(exp, off); err != nil {
				t.Fatal(err)
			}
			if n, err := f.ReadAt(ctx, got, off); err != nil || n != len(got) {
				errs++
				t.Logf("round %d: read of %d bytes at %d of %s: %d bytes, %v", round, len(got), off, p, n, err)
			} else if !bytes.Equal(got, exp) {
				t.Errorf("round %d: read of %d bytes at %d of %s returned wrong bytes", round, len(got), off, p)
			}
		}
		f.Close(ctx)
		want.Close()
	}
	return errs
}

// corruptRound flips n bytes across the archives of paths so that no
// block of any object has more than M corrupt chunks, and returns them.
func corruptRound(t *testing.T, c *cluster, rng *rand.Rand, paths []string, n int) []flip {
	t.Helper()
	type target struct {
		path    string
		bySlot  map[int]*diskArchive
		victims [][]int // by block: the slots that may be hit
		whole   []int   // slots that are victims of every block
	}
	var targets []*target
	for _, p := range paths {
		tg := &target{path: p, bySlot: map[int]*diskArchive{}}
		for _, a := range c.scanObject(p, false) {
			if a.idx == nil {
				t.Fatalf("%s: archive %s does not parse at the start of a round: %v", p, a.file, a.err)
			}
			tg.bySlot[a.idx.Meta.Slot] = a
		}
		meta := tg.bySlot[0].idx.Meta // slot 0 exists after every repair
		width := meta.K + meta.M      // 1+M for small objects
		if len(tg.bySlot) != width {
			t.Fatalf("%s: %d archives on disk at the start of a round, want %d", p, len(tg.bySlot), width)
		}
		slots := make([]int, width)
		for i := range slots {
			slots[i] = i
		}
		blocks := len(tg.bySlot[0].idx.Chunks)
		for range blocks {
			tg.victims = append(tg.victims, pick(rng, slots, geoM))
		}
		if blocks == 0 {
			tg.whole = pick(rng, slots, geoM)
		} else {
			for _, s := range tg.victims[0] {
				all := true
				for _, v := range tg.victims[1:] {
					all = all && slices.Contains(v, s)
				}
				if all {
					tg.whole = append(tg.whole, s)
				}
			}
		}
		targets = append(targets, tg)
	}
	used := map[string]map[int64]bool{}
	var flips []flip
	for len(flips) < n {
		tg := targets[rng.IntN(len(targets))]
		var a *diskArchive
		var off, block int64 = 0, -1
		if len(tg.victims) > 0 && (len(tg.whole) == 0 || rng.IntN(8) > 0) {
			block = rng.Int64N(int64(len(tg.victims)))
			v := tg.victims[block]
			a = tg.bySlot[v[rng.IntN(len(v))]]
			ch := a.idx.Chunks[block]
			off = ch.Offset + ch.Span() - ch.Size + rng.Int64N(ch.Size)
		} else if len(tg.whole) > 0 {
			a = tg.bySlot[tg.whole[rng.IntN(len(tg.whole))]]
			off = rng.Int64N(a.size)
			block = dataBlock(a.idx, off)
		} else {
			continue
		}
		if used[a.file] == nil {
			used[a.file] = map[int64]bool{}
		}
		if used[a.file][off] {
			continue
		}
		used[a.file][off] = true
		flipByte(t, a.file, off, byte(1+rng.IntN(255)))
		flips = append(flips, flip{path: tg.path, node: c.nodes[a.node].id, file: a.file, off: off, block: block})
	}
	var inData int
	for _, f := range flips {
		if f.block >= 0 {
			inData++
		}
	}
	t.Logf("flipped %d bytes (%d in chunk data, %d in headers, metadata or directory)", len(flips), inData, len(flips)-inData)
	return flips
}

// dataBlock returns the block whose chunk data holds byte off of an
// archive, or -1 if it lies outside every chunk's data.
func dataBlock(idx *archive.Index, off int64) int64 {
	for _, ch := range idx.Chunks {
		start := ch.Offset + ch.Span() - ch.Size
		if off >= start && off < start+ch.Size {
			return ch.Block
		}
	}
	return -1
}

// flipByte XORs the byte at off of file with x (non-zero).
func flipByte(t testing.TB, file string, off int64, x byte) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= x
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}
