package object

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/erasure"
	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
)

var seedFlag = flag.Uint64("seed", 0, "random seed (0: derive from the test name)")

func seed(t testing.TB) uint64 {
	s := *seedFlag
	if s == 0 {
		for _, c := range t.Name() {
			s = s*31 + uint64(c)
		}
	}
	t.Logf("seed %d", s)
	return s
}

// cluster is a store over local directories for tests.
type cluster struct {
	store *Store
	dirs  []string
	nodes []node.Node
}

func newCluster(t testing.TB, n int, g layout.Geometry, mod ...func(*Options)) *cluster {
	t.Helper()
	c := &cluster{}
	base := t.TempDir()
	if _, ok := t.(*testing.B); ok {
		base = benchDir(t)
	}
	for i := range n {
		dir := filepath.Join(base, fmt.Sprintf("n%02d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		ln, err := node.NewLocal(fmt.Sprintf("n%02d", i), dir, node.LocalOptions{Fsync: false})
		if err != nil {
			t.Fatal(err)
		}
		c.dirs = append(c.dirs, dir)
		c.nodes = append(c.nodes, ln)
	}
	opts := Options{Geometry: g, MinFree: -1}
	for _, m := range mod {
		m(&opts)
	}
	s, err := New(c.nodes, opts)
	if err != nil {
		t.Fatal(err)
	}
	c.store = s
	return c
}

func randBytes(r *rand.Rand, n int64) []byte {
	var key [32]byte
	for i := range key {
		key[i] = byte(r.Uint32())
	}
	b := make([]byte, n)
	rand.NewChaCha8(key).Read(b)
	return b
}

func put(t testing.TB, s *Store, path string, data []byte) {
	t.Helper()
	w, err := s.Create(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Write in uneven pieces to exercise block assembly.
	for p := data; len(p) > 0; {
		n := min(len(p), 1+len(p)/3)
		if _, err := w.Write(p[:n]); err != nil {
			t.Fatal(err)
		}
		p = p[n:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func get(s *Store, path string) ([]byte, error) {
	ctx := context.Background()
	r, err := s.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var buf bytes.Buffer
	if _, err := r.WriteTo(ctx, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func TestRoundTripSizes(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 4096}
	c := newCluster(t, 8, g)
	r := rand.New(rand.NewPCG(seed(t), 1))
	cs, bs := g.ChunkSize, g.BlockSize()
	for _, size := range []int64{0, 1, cs - 1, cs, cs + 1, bs - 1, bs, bs + 1, 3*bs + 17, 10 * bs} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			data := randBytes(r, size)
			path := fmt.Sprintf("/sizes/f%d", size)
			put(t, c.store, path, data)
			got, err := get(c.store, path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("read back %d bytes differ from %d written", len(got), len(data))
			}
			info, err := c.store.Stat(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			if info.Size != size || info.Archives != g.Width() {
				t.Fatalf("stat: size %d archives %d", info.Size, info.Archives)
			}
		})
	}
}

// TestStoredChecksumsAreTheDatas checks the whole-object checksums a
// write stores against the data's own, for sizes that end inside a page,
// a chunk and a block: the writer derives the CRC-32C from the chunks'
// page checksums, and a last block's chunks are neither whole chunks nor
// whole pages, and end in padding. The second geometry's chunks span
// several of the pieces the writer encodes and sums at a time
// (erasure.SumPiece), the last one short.
func TestStoredChecksumsAreTheDatas(t *testing.T) {
	for _, g := range []layout.Geometry{
		{K: 3, M: 2, ChunkSize: 16 << 10},
		{K: 3, M: 2, ChunkSize: 2*erasure.SumPiece + 5*4096},
	} {
		t.Run(fmt.Sprintf("chunk=%d", g.ChunkSize), func(t *testing.T) {
			c := newCluster(t, 6, g, func(o *Options) { o.SmallObjectSize = 8 << 10 })
			r := rand.New(rand.NewPCG(seed(t), 1))
			cs, bs := g.ChunkSize, g.BlockSize()
			castagnoli := crc32.MakeTable(crc32.Castagnoli)
			for _, size := range []int64{0, 1, 4095, 4096, 4097, cs - 1, cs + 5, bs - 1, bs, bs + 1, 2*bs + 3*4096 + 7} {
				for _, hinted := range []bool{false, true} { // hinted and small: stored as 1+M copies
					data := randBytes(r, size)
					path := fmt.Sprintf("/sums/f%d-%v", size, hinted)
					hint := int64(0)
					if hinted {
						hint = size
					}
					putHint(t, c.store, path, data, hint)
					info, err := c.store.Stat(context.Background(), path)
					if err != nil {
						t.Fatal(err)
					}
					wantCRC := fmt.Sprintf("%08x", crc32.Checksum(data, castagnoli))
					wantAdler := fmt.Sprintf("%08x", adler32.Checksum(data))
					if info.CRC32C != wantCRC || info.Adler32 != wantAdler {
						t.Errorf("%s (%d bytes): crc32c %s adler32 %s, want %s %s", path, size, info.CRC32C, info.Adler32, wantCRC, wantAdler)
					}
					got, err := get(c.store, path)
					if err != nil || !bytes.Equal(got, data) {
						t.Errorf("%s (%d bytes): read back: err %v, equal %v", path, size, err, bytes.Equal(got, data))
					}
				}
			}
		})
	}
}

func TestDefaultGeometryRoundTrip(t *testing.T) {
	c := newCluster(t, 12, layout.Geometry{})
	r := rand.New(rand.NewPCG(seed(t), 2))
	for _, size := range []int64{0, 5, 8<<20 - 1, 8 << 20, 8<<20 + 1, 20 << 20} {
		data := randBytes(r, size)
		put(t, c.store, "/d/f", data)
		got, err := get(c.store, "/d/f")
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("size %d: err %v, equal %v", size, err, bytes.Equal(got, data))
		}
	}
}

// archivesOf returns the archive file of path on each node that has one.
func (c *cluster) archivesOf(path string) []string {
	var out []string
	for _, d := range c.dirs {
		p := filepath.Join(d, filepath.FromSlash(path))
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func TestLoseAnyMArchives(t *testing.T) {
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 1000}
	c := newCluster(t, 5, g)
	r := rand.New(rand.NewPCG(seed(t), 3))
	data := randBytes(r, 7*g.BlockSize()+123)
	for i := 0; i < 5; i++ {
		for j := i + 1; j < 5; j++ {
			path := fmt.Sprintf("/lose/%d-%d", i, j)
			put(t, c.store, path, data)
			arch := c.archivesOf(path)
			if len(arch) != 5 {
				t.Fatalf("%d archives", len(arch))
			}
			os.Remove(arch[i])
			os.Remove(arch[j])
			got, err := get(c.store, path)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("lost %d,%d: err %v", i, j, err)
			}
			// One more loss is unrecoverable, with a clear error.
			k := (j + 1) % 5
			if k == i {
				k = (k + 1) % 5
			}
			os.Remove(arch[k])
			_, err = get(c.store, path)
			var ue *UnrecoverableError
			if !errors.As(err, &ue) || !errors.Is(err, ErrUnrecoverable) {
				t.Fatalf("with 3 archives lost: err %v, want unrecoverable", err)
			}
			t.Log(err)
		}
	}
}

func TestCorruptionIsDetectedAndRepairedOnRead(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 512}
	c := newCluster(t, 6, g)
	r := rand.New(rand.NewPCG(seed(t), 4))
	data := randBytes(r, 5*g.BlockSize()+7)
	put(t, c.store, "/c/x", data)
	arch := c.archivesOf("/c/x")
	var degraded atomic.Int32
	c.store.opts.Events.DegradedRead = func(string, int64, []int) { degraded.Add(1) }
	for trial := 0; trial < 40; trial++ {
		// Flip one byte in the chunk area of one or two archives.
		var saved [][]byte
		for _, a := range arch[:1+trial%2] {
			b, _ := os.ReadFile(a)
			saved = append(saved, bytes.Clone(b))
			pos := r.IntN(len(b) * 3 / 4) // chunks are in the first part
			b[pos] ^= byte(1 + r.IntN(255))
			os.WriteFile(a, b, 0o644)
		}
		got, err := get(c.store, "/c/x")
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("trial %d: err %v equal %v", trial, err, bytes.Equal(got, data))
		}
		for i, b := range saved {
			os.WriteFile(arch[i], b, 0o644)
		}
	}
	if degraded.Load() == 0 {
		t.Fatal("no corruption was ever noticed")
	}
}

// Regression (fault schedule, seed 3993512496522188495): another copy
// of a slot's archive, as a rebuild leaves on a node other than the
// placement's, is read when the slot's own archive fails its checksum.
// The reader closed every archive but its slots' when it opened, the
// copies with the debris, so the copy's read failed ("file handle is not
// open") and a block with M other slots lost was unrecoverable.
func TestReaderReadsAnotherCopyOfASlot(t *testing.T) {
	ctx := context.Background()
	// Archives larger than what an open reads whole (node.WholeRead),
	// or the copy would be read from memory even once closed.
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 160 << 10}
	c := newCluster(t, 8, g)
	r := rand.New(rand.NewPCG(seed(t), 9))
	data := randBytes(r, 2*g.BlockSize()-1000)
	put(t, c.store, "/alt", data)
	info, err := c.store.Stat(ctx, "/alt")
	if err != nil {
		t.Fatal(err)
	}
	archive := func(id string) string {
		for i, n := range c.nodes {
			if n.ID() == id {
				return filepath.Join(c.dirs[i], "alt")
			}
		}
		t.Fatalf("no node %s", id)
		return ""
	}
	var free string
	for _, n := range c.nodes {
		if !slices.Contains(info.Placement, n.ID()) {
			free = n.ID()
			break
		}
	}
	home, err := os.ReadFile(archive(info.Placement[0]))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(archive(free), home, 0o644); err != nil {
		t.Fatal(err)
	}
	home[100] ^= 0xff // in the data of slot 0's chunk of block 0
	if err := os.WriteFile(archive(info.Placement[0]), home, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, id := range info.Placement[1:3] {
		if err := os.Remove(archive(id)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := get(c.store, "/alt")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get with slot 0 corrupt (a copy on %s) and slots 1, 2 lost: %d bytes, %v", free, len(got), err)
	}
	// A deep check finds slot 0 bad in block 0, and the object degraded,
	// not unrecoverable: the copy serves that block.
	in, err := c.store.Inspect(ctx, "/alt", true)
	if err != nil || in.Health != Degraded || !slices.Equal(in.Slots[0].Bad, []int64{0}) || in.SumErr != nil {
		t.Fatalf("deep inspection: %v, slot 0 bad in %v, sums %v, err %v; want degraded, slot 0 bad in [0]", in.Health, in.Slots[0].Bad, in.SumErr, err)
	}
}

func TestReadAtRandomRanges(t *testing.T) {
	g := layout.Geometry{K: 3, M: 1, ChunkSize: 100}
	c := newCluster(t, 4, g)
	r := rand.New(rand.NewPCG(seed(t), 5))
	data := randBytes(r, 2345)
	put(t, c.store, "/r", data)
	rd, err := c.store.Open(context.Background(), "/r")
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	for i := 0; i < 2000; i++ {
		off := r.Int64N(int64(len(data)) + 10)
		n := r.IntN(700)
		p := make([]byte, n)
		got, err := rd.ReadAt(context.Background(), p, off)
		wantN := max(0, min(n, len(data)-int(off)))
		if got != wantN {
			t.Fatalf("ReadAt(%d, %d) = %d, want %d (err %v)", off, n, got, wantN, err)
		}
		if off+int64(n) > int64(len(data)) && !errors.Is(err, io.EOF) {
			t.Fatalf("ReadAt past end: err %v, want EOF", err)
		}
		if off+int64(n) <= int64(len(data)) && err != nil {
			t.Fatalf("ReadAt(%d, %d): %v", off, n, err)
		}
		if got > 0 && !bytes.Equal(p[:got], data[off:off+int64(got)]) {
			t.Fatalf("ReadAt(%d, %d) returned wrong bytes", off, n)
		}
		// ReadSlices lends the same bytes, and the same end of file.
		bufs, release, serr := rd.ReadSlices(context.Background(), off, n)
		if (serr == nil) != (err == nil) || serr != nil && !errors.Is(serr, io.EOF) {
			t.Fatalf("ReadSlices(%d, %d): %v; ReadAt said %v", off, n, serr, err)
		}
		if joined := bytes.Join(bufs, nil); !bytes.Equal(joined, p[:got]) {
			t.Fatalf("ReadSlices(%d, %d) lent %d bytes unlike ReadAt's %d", off, n, len(joined), got)
		}
		release()
		// WriteRange sends the same bytes, and refuses a range past the end.
		var sent bytes.Buffer
		wn, werr := rd.WriteRange(context.Background(), &sent, off, int64(n))
		inside := off+int64(n) <= int64(len(data))
		if inside != (werr == nil) || inside && (wn != int64(n) || !bytes.Equal(sent.Bytes(), data[off:off+wn])) || !inside && wn != 0 {
			t.Fatalf("WriteRange(%d, %d) = %d, %v; sent %d bytes unlike the object's", off, n, wn, werr, sent.Len())
		}
	}
}

// failingWriter fails its write after taking ok bytes.
type failingWriter struct{ ok int }

var errWriterFailed = errors.New("writer failed")

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.ok {
		n := w.ok
		w.ok = 0
		return n, errWriterFailed
	}
	w.ok -= len(p)
	return len(p), nil
}

// WriteRange returns the error of the writer it sends to as it is, with
// the bytes written before it, and lends its block buffers only for the
// writes: a reader keeps serving after a failed send.
func TestWriteRangeStopsAtTheWritersError(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 4096}
	c := newCluster(t, 6, g)
	data := randBytes(rand.New(rand.NewPCG(seed(t), 41)), 3*g.BlockSize()+100)
	put(t, c.store, "/w", data)
	ctx := context.Background()
	rd, err := c.store.Open(ctx, "/w")
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	n, err := rd.WriteRange(ctx, &failingWriter{ok: 5000}, 1000, int64(len(data))-1000)
	if !errors.Is(err, errWriterFailed) || n != 5000 {
		t.Fatalf("WriteRange into a writer failing after 5000 bytes: %d, %v", n, err)
	}
	var all bytes.Buffer
	if n, err := rd.WriteTo(ctx, &all); err != nil || n != int64(len(data)) || !bytes.Equal(all.Bytes(), data) {
		t.Fatalf("WriteTo after the failed send: %d, %v", n, err)
	}
}

func TestAbortLeavesNothing(t *testing.T) {
	c := newCluster(t, 6, layout.Geometry{K: 4, M: 2, ChunkSize: 64})
	w, err := c.store.Create(context.Background(), "/a/b", nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(make([]byte, 1000))
	w.Abort()
	if _, err := c.store.Stat(context.Background(), "/a/b"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("stat after abort: %v", err)
	}
	for _, d := range c.dirs {
		ents, _ := os.ReadDir(filepath.Join(d, "a"))
		if len(ents) != 0 {
			t.Fatalf("debris left in %s: %v", d, ents)
		}
	}
	// Cancelling the context aborts too.
	ctx, cancel := context.WithCancel(context.Background())
	w, err = c.store.Create(ctx, "/a/c", nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(make([]byte, 1000))
	cancel()
	if err := w.Close(); err == nil {
		t.Fatal("Close after cancel succeeded")
	}
	if _, err := c.store.Stat(context.Background(), "/a/c"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("stat after cancel: %v", err)
	}
}

func TestOverwriteReplacesVersion(t *testing.T) {
	c := newCluster(t, 7, layout.Geometry{K: 4, M: 2, ChunkSize: 64})
	put(t, c.store, "/o", []byte("first version"))
	put(t, c.store, "/o", []byte("second, longer version of the object"))
	got, err := get(c.store, "/o")
	if err != nil || string(got) != "second, longer version of the object" {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestNamespace(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 6, layout.Geometry{K: 3, M: 2, ChunkSize: 64})
	s := c.store
	put(t, s, "/ns/a", []byte("aaaa"))
	put(t, s, "/ns/b", bytes.Repeat([]byte("b"), 1000))
	if err := s.Mkdir(ctx, "/ns/sub/deeper"); err != nil {
		t.Fatal(err)
	}
	ents, err := s.List(ctx, "/ns")
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, e := range ents {
		got += fmt.Sprintf("%s:%v:%d ", e.Name, e.IsDir, e.Size)
	}
	if got != "a:false:4 b:false:1000 sub:true:0 " {
		t.Fatalf("list: %s", got)
	}
	if _, err := s.List(ctx, "/ns/a"); !errors.Is(err, ErrNotDir) {
		t.Fatalf("list of a file: %v", err)
	}
	if _, err := s.List(ctx, "/nope"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("list of nothing: %v", err)
	}
	if err := s.Rename(ctx, "/ns/b", "/ns/sub/b2"); err != nil {
		t.Fatal(err)
	}
	if data, err := get(s, "/ns/sub/b2"); err != nil || len(data) != 1000 {
		t.Fatalf("after mv: %v", err)
	}
	if _, err := s.Stat(ctx, "/ns/b"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("old name after mv: %v", err)
	}
	// mv onto an existing object replaces it.
	if err := s.Rename(ctx, "/ns/a", "/ns/sub/b2"); err != nil {
		t.Fatal(err)
	}
	if data, _ := get(s, "/ns/sub/b2"); string(data) != "aaaa" {
		t.Fatalf("after mv over: %q", data)
	}
	if err := s.Remove(ctx, "/ns/sub/b2"); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(ctx, "/ns/sub/b2"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("second rm: %v", err)
	}
	if err := s.Remove(ctx, "/ns/sub"); !errors.Is(err, ErrIsDir) {
		t.Fatalf("rm of a dir: %v", err)
	}
	if err := s.Rmdir(ctx, "/ns/sub"); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("rmdir non-empty: %v", err)
	}
	if err := s.Rmdir(ctx, "/ns/sub/deeper"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"../x", "/a/../b", "rel", "/a/", "/a//b"} {
		if _, err := s.Create(ctx, bad, nil); !errors.Is(err, node.ErrPath) {
			t.Fatalf("create %q: %v", bad, err)
		}
	}
	if _, err := s.Open(ctx, "/none"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("open missing: %v", err)
	}
}

func removeFile(t testing.TB, dir, path string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(path))); err != nil {
		t.Fatal(err)
	}
}

// benchDir is where benchmarks keep their nodes: tmpfs (/dev/shm) when
// available, so that they measure the engine rather than a shared disk,
// or $ECSTORE_BENCH_DIR.
func benchDir(t testing.TB) string {
	parent := os.Getenv("ECSTORE_BENCH_DIR")
	if parent == "" {
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
			parent = "/dev/shm"
		}
	}
	if parent == "" {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp(parent, "ecstore-bench-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Logf("nodes in %s", dir)
	return dir
}

func readDirNames(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return err
	})
	return out, err
}

func TestUserMetadata(t *testing.T) {
	c := newCluster(t, 6, layout.Geometry{K: 4, M: 2, ChunkSize: 64})
	ctx := context.Background()
	w, err := c.store.Create(ctx, "/u", &CreateOptions{User: map[string]string{"content-type": "text/plain"}})
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("hello"))
	w.SetUser("etag", "5d41402abc4b2a76b9719d911017c592")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := c.store.Stat(ctx, "/u")
	if err != nil || info.User["content-type"] != "text/plain" || info.User["etag"] != "5d41402abc4b2a76b9719d911017c592" {
		t.Fatalf("user metadata: %v %v", info.User, err)
	}
}

// Regression (found by the S3 frontend): Mkdir under an object succeeded
// on the nodes that do not hold its archive.
func TestMkdirUnderObjectFails(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 7, layout.Geometry{K: 3, M: 2, ChunkSize: 64})
	put(t, c.store, "/a/obj", []byte("x"))
	if err := c.store.Mkdir(ctx, "/a/obj/sub"); !errors.Is(err, ErrNotDir) {
		t.Fatalf("mkdir under an object: %v", err)
	}
	if err := c.store.Mkdir(ctx, "/a/obj/sub/deeper"); !errors.Is(err, ErrNotDir) {
		t.Fatalf("mkdir two levels under an object: %v", err)
	}
	info, err := c.store.Stat(ctx, "/a/obj")
	if err != nil || info.IsDir {
		t.Fatalf("object became a directory: %+v %v", info, err)
	}
}

// TestReadDuringOverwriteCommit: an overwrite renames its archives into
// place node by node. A read that probes in the middle sees fewer than K
// archives of either version; it must wait for the commit, not fail.
// Regression test for a fault-suite failure (seed 1795316879435949654).
func TestReadDuringOverwriteCommit(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 1000}
	c := newCluster(t, 6, g, func(o *Options) { o.SmallObjectSize = -1 })
	r := rand.New(rand.NewPCG(seed(t), 9))
	v1, v2 := randBytes(r, 9000), randBytes(r, 11000)
	snapshot := func() [][]byte {
		var out [][]byte
		for _, d := range c.dirs {
			b, err := os.ReadFile(filepath.Join(d, "o"))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
		return out
	}
	replace := func(i int, b []byte) {
		p := filepath.Join(c.dirs[i], "o")
		if err := os.WriteFile(p+".tmp", b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p+".tmp", p); err != nil {
			t.Fatal(err)
		}
	}
	put(t, c.store, "/o", v1)
	old := snapshot()
	put(t, c.store, "/o", v2)
	nw := snapshot()
	// Half-way through the commit: three nodes still hold the old version.
	for i := range 3 {
		replace(i, old[i])
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(25 * time.Millisecond)
		for i := range 3 {
			replace(i, nw[i])
		}
	}()
	got, err := get(c.store, "/o")
	<-done
	if err != nil {
		t.Fatalf("read during the commit: %v", err)
	}
	if !bytes.Equal(got, v2) {
		t.Fatalf("read during the commit returned %d bytes, not the new version", len(got))
	}

	// With no commit in flight, the object really is unreadable, and
	// says so after the bounded wait.
	for i := range 3 {
		replace(i, old[i])
	}
	start := time.Now()
	_, err = get(c.store, "/o")
	var ue *UnrecoverableError
	if !errors.As(err, &ue) {
		t.Fatalf("mixed versions for good: got %v, want an UnrecoverableError", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("an unreadable object took %v to report", waited)
	}
}

// TestConcurrentReadersShareBlocks: concurrent sequential and random
// readers of one Reader, with pooled chunk buffers recycled as blocks
// leave the small cache, always get the right bytes (run with -race).
func TestConcurrentReadersShareBlocks(t *testing.T) {
	g := layout.Geometry{K: 3, M: 1, ChunkSize: 64 << 10}
	c := newCluster(t, 4, g, func(o *Options) { o.SmallObjectSize = -1 })
	r := rand.New(rand.NewPCG(seed(t), 11))
	data := randBytes(r, 3<<20+12345)
	put(t, c.store, "/r", data)
	rd, err := c.store.Open(context.Background(), "/r")
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			off := rng.Int64N(int64(len(data)))
			for range 300 {
				n := 1 + rng.IntN(300<<10)
				if w%2 == 1 { // random readers jump about
					off = rng.Int64N(int64(len(data)))
				}
				p := make([]byte, n)
				got, err := rd.ReadAt(context.Background(), p, off)
				if err != nil && !errors.Is(err, io.EOF) {
					errs <- fmt.Errorf("ReadAt(%d, %d): %v", off, n, err)
					return
				}
				if !bytes.Equal(p[:got], data[off:off+int64(got)]) {
					errs <- fmt.Errorf("ReadAt(%d, %d) returned wrong bytes", off, n)
					return
				}
				off += int64(got)
				if off >= int64(len(data)) {
					off = 0
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// uncomparableNode is a node whose dynamic type cannot be compared with
// ==, as a wrapper holding a map is.
type uncomparableNode struct {
	node.Node
	tags map[string]string
}

// Regression (CI, internal/s3.TestListingIsLazy): locate compared nodes
// as interface values, which panics for a node type that is not
// comparable. Nodes are told apart by their ids.
func TestUncomparableNodes(t *testing.T) {
	g := layout.Geometry{K: 2, M: 1, ChunkSize: 64 << 10}
	c := newCluster(t, 5, g)
	nodes := make([]node.Node, len(c.nodes))
	for i, n := range c.nodes {
		nodes[i] = uncomparableNode{Node: n, tags: map[string]string{}}
	}
	s, err := New(nodes, c.store.opts)
	if err != nil {
		t.Fatal(err)
	}
	data := randBytes(rand.New(rand.NewPCG(seed(t), 15)), 3*g.BlockSize())
	for _, size := range []int{len(data), 100} { // large, then small overwrite
		put(t, s, "/u", data[:size])
		if got, err := get(s, "/u"); err != nil || !bytes.Equal(got, data[:size]) {
			t.Fatalf("read back %d bytes: %d bytes, %v", size, len(got), err)
		}
	}
	if err := s.Remove(context.Background(), "/u"); err != nil {
		t.Fatal(err)
	}
}
