//go:build slow

package test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/archive"
)

func newRand(t *testing.T) *rand.Rand {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed>>1))
}

func randBytes(r *rand.Rand, n int) []byte {
	var key [32]byte
	for i := range key {
		key[i] = byte(r.Uint32())
	}
	b := make([]byte, n)
	rand.NewChaCha8(key).Read(b)
	return b
}

// (a) Round trips through files, bit-exact, at the sizes around the chunk
// and block boundaries of the default 8+2/1MiB geometry. Default fsync.
func TestCLIRoundTripSizes(t *testing.T) {
	c := newCluster(t)
	rnd := newRand(t)
	work := t.TempDir()
	const mib = 1 << 20
	for _, size := range []int{0, 1, mib - 1, mib, 8*mib - 1, 8 * mib, 8*mib + 1, 50 * mib} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			data := randBytes(rnd, size)
			in, out := filepath.Join(work, "in"), filepath.Join(work, "out")
			if err := os.WriteFile(in, data, 0o644); err != nil {
				t.Fatal(err)
			}
			path := fmt.Sprintf("/sizes/obj-%d", size)
			c.must(nil, "put", in, path)
			c.must(nil, "get", "-f", path, out)
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("read back %d bytes, differ from the %d stored", len(got), len(data))
			}
			if ls := c.must(nil, "ls", "-l", path); !strings.Contains(ls, fmt.Sprintf(" %d ", size)) {
				t.Errorf("ls -l %s: %q", path, ls)
			}
		})
	}
}

// aside moves files out of the cluster and returns a function that puts
// them back.
func aside(t *testing.T, files ...string) (restore func()) {
	t.Helper()
	tmp := t.TempDir()
	for i, f := range files {
		if err := os.Rename(f, filepath.Join(tmp, fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	return func() {
		t.Helper()
		for i, f := range files {
			if err := os.Rename(filepath.Join(tmp, fmt.Sprint(i)), f); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// checkGet reads path to stdout and compares it with want.
func checkGet(t *testing.T, c *cluster, path string, want []byte, what string) result {
	t.Helper()
	r := c.run(nil, "get", path, "-")
	if r.code != 0 || r.stdout != string(want) {
		t.Fatalf("%s: get exit %d, %d bytes (want %d, equal %v)\nstderr: %s", what, r.code, len(r.stdout), len(want), r.stdout == string(want), r.stderr)
	}
	return r
}

// checkUnrecoverable expects a get of path to fail as unrecoverable and to
// leave no local file.
func checkUnrecoverable(t *testing.T, c *cluster, path, what string) {
	t.Helper()
	local := filepath.Join(t.TempDir(), "out")
	r := c.run(nil, "get", path, local)
	if r.code == 0 || !strings.Contains(r.stderr, "unrecoverable") {
		t.Errorf("%s: get exit %d, stderr %q; want a failure saying unrecoverable", what, r.code, r.stderr)
	}
	if _, err := os.Stat(local); !os.IsNotExist(err) {
		t.Errorf("%s: failed get left %s", what, local)
	}
	if ents, _ := os.ReadDir(filepath.Dir(local)); len(ents) != 0 {
		t.Errorf("%s: failed get left %v", what, ents)
	}
}

// (b) Any M=2 archives of an object lost, or whole node directories: get
// is still bit-exact. Three lost: a clear "unrecoverable" failure.
func TestLoseArchivesAndNodes(t *testing.T) {
	c := newCluster(t, "--fsync=false")
	rnd := newRand(t)
	data := randBytes(rnd, 2*8<<20+12345) // three blocks, the last short
	c.must(bytes.NewReader(data), "put", "-", "/lose/obj")
	slots := c.placement("/lose/obj")
	if len(slots) != 10 {
		t.Fatalf("%d slots", len(slots))
	}
	nodeDir := func(i int) string { return filepath.Dir(filepath.Dir(slots[i].archive)) }

	for i := range slots {
		for j := i + 1; j < len(slots); j++ {
			restore := aside(t, slots[i].archive, slots[j].archive)
			checkGet(t, c, "/lose/obj", data, fmt.Sprintf("archives of slots %d and %d lost", i, j))
			restore()
		}
	}
	// Whole node directories: one with one archive, and two.
	for _, pair := range [][2]int{{0, 9}, {4, 5}} {
		restore := aside(t, nodeDir(pair[0]), slots[pair[1]].archive)
		r := checkGet(t, c, "/lose/obj", data, fmt.Sprintf("node dir of slot %d and archive of slot %d lost", pair[0], pair[1]))
		if !strings.Contains(r.stderr, "node is down") {
			t.Errorf("no warning about the missing node directory: %q", r.stderr)
		}
		restore()
		restore = aside(t, nodeDir(pair[0]), nodeDir(pair[1]))
		checkGet(t, c, "/lose/obj", data, fmt.Sprintf("node dirs of slots %d and %d lost", pair[0], pair[1]))
		restore()
	}

	// Three lost: unrecoverable.
	for n := 0; n < 6; n++ {
		p := rnd.Perm(len(slots))[:3]
		restore := aside(t, slots[p[0]].archive, slots[p[1]].archive, slots[p[2]].archive)
		checkUnrecoverable(t, c, "/lose/obj", fmt.Sprintf("archives of slots %v lost", p))
		restore()
	}
	restore := aside(t, nodeDir(1), nodeDir(2), nodeDir(3))
	checkUnrecoverable(t, c, "/lose/obj", "three node directories lost")
	restore()
	checkGet(t, c, "/lose/obj", data, "everything restored")
}

// corrupt flips one byte at a random offset inside block b's chunk in an
// archive and returns the chunk's stripe index.
func corrupt(t *testing.T, file string, b int64, rnd *rand.Rand) int {
	t.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	idx, err := archive.Parse(context.Background(), osFile{f}, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	c := idx.Chunks[b]
	off := c.Offset + c.Span() - c.Size + rnd.Int64N(c.Size)
	var one [1]byte
	if _, err := f.ReadAt(one[:], off); err != nil {
		t.Fatal(err)
	}
	one[0] ^= byte(1 + rnd.IntN(255))
	if _, err := f.WriteAt(one[:], off); err != nil {
		t.Fatal(err)
	}
	return c.Stripe
}

type osFile struct{ f *os.File }

func (o osFile) ReadAt(_ context.Context, p []byte, off int64) (int, error) {
	return o.f.ReadAt(p, off)
}

// (c) A flipped byte inside a stored chunk is caught by the chunk's
// checksum and the chunk rebuilt from parity: get stays bit-exact.
func TestFlippedByte(t *testing.T) {
	c := newCluster(t, "--fsync=false")
	rnd := newRand(t)
	data := randBytes(rnd, 2*8<<20+777)
	c.must(bytes.NewReader(data), "put", "-", "/flip/obj")
	slots := c.placement("/flip/obj")
	const k, width, blocks = 8, 10, 3

	// One corrupt data chunk at a time, on every slot.
	for s := range slots {
		// Slot s holds stripe (s-b) mod width of block b; parity is not
		// read when healthy, so pick a block where s holds data.
		b := int64(s % blocks)
		for (s-int(b)+width)%width >= k {
			b = (b + 1) % blocks
		}
		orig, err := os.ReadFile(slots[s].archive)
		if err != nil {
			t.Fatal(err)
		}
		if stripe := corrupt(t, slots[s].archive, b, rnd); stripe >= k {
			t.Fatalf("slot %d holds parity stripe %d of block %d", s, stripe, b)
		}
		r := checkGet(t, c, "/flip/obj", data, fmt.Sprintf("chunk of block %d on slot %d corrupt", b, s))
		if !strings.Contains(r.stderr, "degraded read") || !strings.Contains(r.stderr, "crc32") {
			t.Errorf("slot %d: the corruption was not reported: %q", s, r.stderr)
		}
		if err := os.WriteFile(slots[s].archive, orig, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Two corrupt chunks (data or parity) in every block at once.
	for b := int64(0); b < blocks; b++ {
		p := rnd.Perm(width)[:2]
		corrupt(t, slots[p[0]].archive, b, rnd)
		corrupt(t, slots[p[1]].archive, b, rnd)
	}
	checkGet(t, c, "/flip/obj", data, "two corrupt chunks in every block")
}

// tempFiles counts the temporary (uncommitted) archives under dir.
func tempFiles(dir string) (n int, bytes int64) {
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && strings.Contains(fi.Name(), ".ecstore-tmp.") {
			n++
			bytes += fi.Size()
		}
		return nil
	})
	return n, bytes
}

// (d) A put of a stream killed with SIGKILL midway leaves no visible
// object: only hidden temporary files, which ls and get ignore.
func TestPutKilled(t *testing.T) {
	c := newCluster(t, "--fsync=false")
	c.must(strings.NewReader("keep"), "put", "-", "/keep") // creates the cluster

	gen := generator(4<<30, 7)
	put := exec.Command(bin, c.args("put", "-", "/killed")...)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	gen.Stdout, put.Stdin = pw, pr
	var putErr bytes.Buffer
	put.Stderr = &putErr
	if err := gen.Start(); err != nil {
		t.Fatal(err)
	}
	if err := put.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	pw.Close()
	// Wait until the put has written a good part of its archives.
	deadline := time.Now().Add(time.Minute)
	for {
		n, size := tempFiles(filepath.Join(c.dir, "nodes"))
		if n == 10 && size > 40<<20 {
			t.Logf("killing put after %d MiB in %d temporary archives", size>>20, n)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("put did not get going: %d temporary archives, %d bytes; stderr %q", n, size, putErr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := put.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := put.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("put ended with %v, want killed", err)
	}
	gen.Process.Kill()
	gen.Wait()

	if n, _ := tempFiles(filepath.Join(c.dir, "nodes")); n == 0 {
		t.Errorf("no temporary archives left: the put was not killed midway")
	}
	if ls := c.must(nil, "ls", "-l", "/"); strings.Contains(ls, "killed") || !strings.Contains(ls, "keep") {
		t.Errorf("ls after the killed put:\n%s", ls)
	}
	r := c.run(nil, "get", "/killed", "-")
	if r.code != 1 || r.stderr != "ecstore: /killed: no such object\n" || r.stdout != "" {
		t.Errorf("get of the killed object: exit %d, stderr %q, %d bytes", r.code, r.stderr, len(r.stdout))
	}
	r = c.run(nil, "stat", "/killed")
	if r.code != 1 || !strings.Contains(r.stderr, "no such object") {
		t.Errorf("stat of the killed object: exit %d, stderr %q", r.code, r.stderr)
	}
	// The debris does not stand in the way of a new write.
	c.must(strings.NewReader("again"), "put", "-", "/killed")
	if got := c.must(nil, "get", "/killed", "-"); got != "again" {
		t.Errorf("put after the killed one: %q", got)
	}
}
