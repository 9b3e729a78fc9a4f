//go:build slow

package test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/archive"
)

// pipeline runs "generator | ecstore args..." and returns ecstore's
// stderr. wrap, if not nil, prefixes the ecstore command (e.g.
// /usr/bin/time -v).
func pipeline(t *testing.T, size int64, seed uint64, wrap []string, args ...string) string {
	t.Helper()
	gen := generator(size, seed)
	argv := append(append(append([]string(nil), wrap...), bin), args...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	gen.Stdout, cmd.Stdin = pw, pr
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := gen.Start(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	pw.Close()
	cerr := cmd.Wait()
	gerr := gen.Wait()
	if cerr != nil || gerr != nil {
		t.Fatalf("generator (%v) | %s: %v\nstderr: %s", gerr, strings.Join(argv, " "), cerr, stderr.String())
	}
	return stderr.String()
}

// hashOf returns the sha256 of the stream sparseGen(seed, size).
func hashOf(seed uint64, size int64) string {
	h := sha256.New()
	io.CopyBuffer(h, newSparseGen(seed, size), make([]byte, 1<<20))
	return hex.EncodeToString(h.Sum(nil))
}

// (e) A 5 GiB sparse-ish object streamed from a generator process round
// trips; compared by sha256 of the generated stream and of get's stdout,
// so no copy of it is ever stored. The cluster is 1+1 so that each
// archive holds the whole object (over 4 GiB) and must be ZIP64.
func TestHugeSparseObject(t *testing.T) {
	const size = 5<<30 + 12345
	const seed = 42
	c := newCluster(t, "--ec", "1+1", "--spares", "0", "--fsync=false")
	want := make(chan string, 1)
	go func() { want <- hashOf(seed, size) }()

	start := time.Now()
	pipeline(t, size, seed, nil, c.args("put", "-", "/huge/obj")...)
	putTime := time.Since(start)

	start = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	get := exec.CommandContext(ctx, bin, c.args("get", "/huge/obj", "-")...)
	var stderr bytes.Buffer
	get.Stderr = &stderr
	out, err := get.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := get.Start(); err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, cerr := io.CopyBuffer(h, out, make([]byte, 1<<20))
	if err := get.Wait(); err != nil || cerr != nil {
		t.Fatalf("get: %v %v\nstderr: %s", err, cerr, stderr.String())
	}
	getTime := time.Since(start)
	if n != size {
		t.Fatalf("get returned %d bytes, want %d", n, size)
	}
	if got, w := hex.EncodeToString(h.Sum(nil)), <-want; got != w {
		t.Fatalf("sha256 of get %s, of the generated stream %s", got, w)
	}
	t.Logf("5 GiB object (1+1): put %v (%.0f MB/s), get %v (%.0f MB/s)",
		putTime.Round(time.Second), size/putTime.Seconds()/1e6, getTime.Round(time.Second), size/getTime.Seconds()/1e6)

	// Both archives are ZIP64: chunk offsets beyond 4 GiB, ZIP64 end
	// records, and unzip lists them.
	slots := c.placement("/huge/obj")
	if len(slots) != 2 {
		t.Fatalf("%d slots", len(slots))
	}
	for _, s := range slots {
		checkZip64(t, s.archive, size)
	}
}

func checkZip64(t *testing.T, file string, objSize int64) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	idx, err := archive.Parse(context.Background(), osFile{f}, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	last := idx.Chunks[len(idx.Chunks)-1]
	if idx.Size <= 1<<32 || last.Offset <= 1<<32 || idx.Meta.Size != objSize {
		t.Errorf("%s: archive %d bytes, last chunk at %d, object size %d: not beyond 4 GiB", file, idx.Size, last.Offset, idx.Meta.Size)
	}
	tail := make([]byte, 64<<10)
	f.ReadAt(tail, fi.Size()-int64(len(tail)))
	if !bytes.Contains(tail, []byte("PK\x06\x06")) || !bytes.Contains(tail, []byte("PK\x06\x07")) {
		t.Errorf("%s: no ZIP64 end of central directory record and locator", file)
	}
	unzip, err := exec.LookPath("unzip")
	if err != nil {
		t.Fatalf("unzip is needed (scripts/install-deps.sh installs it): %v", err)
	}
	out, err := exec.Command(unzip, "-l", file).CombinedOutput()
	if err != nil {
		t.Fatalf("unzip -l %s: %v\n%s", file, err, out)
	}
	// The last line is "  <total length>  <n> files".
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	m := regexp.MustCompile(`^\s*(\d+)\s+(\d+) files$`).FindStringSubmatch(lines[len(lines)-1])
	if m == nil {
		t.Fatalf("unzip -l %s: no total line:\n%s", file, lines[len(lines)-1])
	}
	total, _ := strconv.ParseInt(m[1], 10, 64)
	files, _ := strconv.Atoi(m[2])
	// Entries: the chunks, the page checksums of every 64 blocks, the
	// metadata.
	entries := len(idx.Chunks) + (len(idx.Chunks)+archive.PageGroup-1)/archive.PageGroup + 1
	if total < objSize || files != entries {
		t.Errorf("unzip -l %s: %d bytes in %d files, want >= %d bytes in %d files", file, total, files, objSize, entries)
	}
	if !strings.Contains(string(out), fmt.Sprintf("obj.%d.", len(idx.Chunks)-1)) {
		t.Errorf("unzip -l %s does not list the last chunk", file)
	}
	t.Logf("%s: %d bytes, %d entries, last chunk at offset %d; unzip -l lists %d bytes in %d files",
		file, idx.Size, len(idx.Chunks), last.Offset, total, files)
}

// (f) Peak memory of "ecstore put" of a 2 GiB stream, as /usr/bin/time -v
// measures it, stays under 128 MiB.
func TestPutPeakMemory(t *testing.T) {
	const size = 2 << 30
	timeBin := "/usr/bin/time"
	if _, err := os.Stat(timeBin); err != nil {
		t.Fatalf("%s is needed (Debian package time; scripts/install-deps.sh installs it): %v", timeBin, err)
	}
	c := newCluster(t, "--fsync=false")
	start := time.Now()
	stderr := pipeline(t, size, 9, []string{timeBin, "-v"}, c.args("put", "-", "/rss/obj")...)
	elapsed := time.Since(start)
	m := regexp.MustCompile(`Maximum resident set size \(kbytes\): (\d+)`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no maximum resident set size in:\n%s", stderr)
	}
	kb, _ := strconv.ParseInt(m[1], 10, 64)
	t.Logf("ecstore put of a 2 GiB stream (8+2, 1 MiB chunks): peak RSS %.1f MiB, %v (%.0f MB/s)",
		float64(kb)/1024, elapsed.Round(time.Second), size/elapsed.Seconds()/1e6)
	if kb*1024 >= 128<<20 {
		t.Errorf("peak RSS %d KiB, want under 128 MiB", kb)
	}
	if ls := c.must(nil, "ls", "-l", "/rss"); !strings.Contains(ls, fmt.Sprintf(" %d ", size)) {
		t.Errorf("ls -l /rss: %q", ls)
	}
}
