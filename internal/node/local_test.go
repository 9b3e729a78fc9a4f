package node_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/directio"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/node/nodetest"
	"golang.org/x/sys/unix"
)

// newLocal returns a Local node over a fresh temporary directory.
func newLocal(t *testing.T, opts node.LocalOptions) *node.Local {
	t.Helper()
	l, err := node.NewLocal("n1", t.TempDir(), opts)
	if err != nil {
		t.Fatalf("NewLocal: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

func TestLocal(t *testing.T) {
	for _, fsync := range []bool{true, false} {
		t.Run(fmt.Sprintf("fsync=%v", fsync), func(t *testing.T) {
			nodetest.Run(t, func(t *testing.T) node.Node {
				return newLocal(t, node.LocalOptions{Fsync: fsync})
			})
		})
	}
}

func TestNewLocal(t *testing.T) {
	_, err := node.NewLocal("n1", filepath.Join(t.TempDir(), "missing"), node.LocalOptions{})
	if !errors.Is(err, node.ErrNotExist) {
		t.Errorf("NewLocal(missing dir): err = %v; want ErrNotExist", err)
	}
	if _, err := node.NewLocal("", t.TempDir(), node.LocalOptions{}); err == nil {
		t.Error("NewLocal with an empty id succeeded")
	}
	dir := t.TempDir()
	l, err := node.NewLocal("n7", dir, node.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.ID() != "n7" || l.Dir() != dir {
		t.Errorf("ID, Dir = %q, %q; want n7, %q", l.ID(), l.Dir(), dir)
	}
}

// TestLocalOnDisk checks where an upload's bytes and attributes land.
func TestLocalOnDisk(t *testing.T) {
	ctx := context.Background()
	l := newLocal(t, node.LocalOptions{Fsync: true})
	u, err := l.Create(ctx, "/a/f")
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Write(ctx, []byte("data")); err != nil {
		t.Fatal(err)
	}
	if err := u.(node.Attributes).SetAttrs(ctx, map[string]string{"size": "4"}); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(filepath.Join(l.Dir(), "a"))
	if err != nil || len(ents) != 1 || !node.IsTemp(ents[0].Name()) {
		t.Fatalf("directory holds %v, %v; want one temporary file", ents, err)
	}
	err = u.(node.Attributes).SetAttrs(ctx, map[string]string{"bad key": "x"})
	if err == nil {
		t.Error("SetAttrs with an invalid key succeeded")
	}
	if err := u.Commit(ctx); err != nil { // without Finish
		t.Fatal(err)
	}
	p := filepath.Join(l.Dir(), "a", "f")
	if got, err := os.ReadFile(p); err != nil || string(got) != "data" {
		t.Errorf("file = %q, %v", got, err)
	}
	buf := make([]byte, 16)
	n, err := unix.Getxattr(p, "user.ecstore", buf)
	switch {
	case errors.Is(err, unix.ENOTSUP):
		t.Log("file system without user xattrs")
	case err != nil || string(buf[:max(n, 0)]) != "size=4":
		t.Errorf("xattr user.ecstore = %q, %v; want size=4", buf[:max(n, 0)], err)
	}
}

// Files whose attributes were written one xattr per key
// (user.ecstore.KEY, before they were kept in one) report them as
// before, through Stat and List.
func TestLocalReadsAttributesKeptPerKey(t *testing.T) {
	ctx := context.Background()
	l := newLocal(t, node.LocalOptions{})
	put(t, l, "/d/old", []byte("data"))
	p := filepath.Join(l.Dir(), "d", "old")
	want := map[string]string{"size": "4", "version": "0001-ab", "ec": "1+2"}
	for k, v := range want {
		if err := unix.Setxattr(p, "user.ecstore."+k, []byte(v), 0); errors.Is(err, unix.ENOTSUP) {
			t.Skip("file system without user xattrs")
		} else if err != nil {
			t.Fatal(err)
		}
	}
	fi, err := l.Stat(ctx, "/d/old")
	if err != nil || !maps.Equal(fi.Attrs, want) {
		t.Errorf("Stat: attrs %v, %v; want %v", fi.Attrs, err, want)
	}
	ents, err := l.List(ctx, "/d")
	if err != nil || len(ents) != 1 || !maps.Equal(ents[0].Attrs, want) {
		t.Errorf("List: %+v, %v; want one entry with attrs %v", ents, err, want)
	}
}

// TestLocalSymlinkEscape checks that symbolic links inside the directory
// cannot be used to read, write, list or remove anything outside it.
func TestLocalSymlinkEscape(t *testing.T) {
	ctx := context.Background()
	l := newLocal(t, node.LocalOptions{})
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"dirlink":  outside,
		"filelink": secret,
		"rellink":  "../../" + filepath.Base(outside),
	} {
		if err := os.Symlink(target, filepath.Join(l.Dir(), name)); err != nil {
			t.Fatal(err)
		}
	}
	outsideEntries := func() []string {
		ents, err := os.ReadDir(outside)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}

	for _, p := range []string{"/dirlink/secret", "/filelink", "/rellink/secret"} {
		if f, err := l.Open(ctx, p); err == nil {
			buf := make([]byte, 6)
			n, _ := f.ReadAt(ctx, buf, 0)
			f.Close()
			t.Errorf("Open(%q) succeeded and read %q", p, buf[:n])
		}
		if fi, err := l.Stat(ctx, p); err == nil {
			t.Errorf("Stat(%q) = %+v; want an error", p, fi)
		}
	}
	for _, p := range []string{"/dirlink", "/rellink"} {
		if ents, err := l.List(ctx, p); err == nil {
			t.Errorf("List(%q) = %v; want an error", p, ents)
		}
	}
	for _, p := range []string{"/dirlink/new", "/dirlink/secret", "/rellink/sub/new"} {
		if u, err := l.Create(ctx, p); err == nil {
			u.Write(ctx, []byte("pwned"))
			err = u.Commit(ctx)
			u.Abort(ctx)
			t.Errorf("Create(%q) succeeded; Commit: %v", p, err)
		} else if !errors.Is(err, node.ErrPath) {
			t.Errorf("Create(%q): err = %v; want ErrPath", p, err)
		}
	}
	if err := l.Mkdir(ctx, "/dirlink/newdir"); err == nil {
		t.Error("Mkdir through a link succeeded")
	}
	if err := l.Remove(ctx, "/dirlink/secret"); err == nil {
		t.Error("Remove through a link succeeded")
	}
	if err := l.Rename(ctx, "/dirlink/secret", "/stolen"); err == nil {
		t.Error("Rename from outside succeeded")
	}
	if err := l.Rename(ctx, "/filelink", "/dirlink/moved"); err == nil {
		t.Error("Rename to outside succeeded")
	}

	// Committing over a link replaces the link, not its target.
	u, err := l.Create(ctx, "/filelink")
	if err != nil {
		t.Fatalf("Create(/filelink): %v", err)
	}
	if err := u.Write(ctx, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := u.Commit(ctx); err != nil {
		t.Fatalf("Commit(/filelink): %v", err)
	}
	if fi, err := os.Lstat(filepath.Join(l.Dir(), "filelink")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("filelink after Commit: %v, %v; want a regular file", fi, err)
	}

	if got, err := os.ReadFile(secret); err != nil || !bytes.Equal(got, []byte("secret")) {
		t.Errorf("the outside file is now %q, %v", got, err)
	}
	if got := outsideEntries(); !slices.Equal(got, []string{"secret"}) {
		t.Errorf("the outside directory now holds %v", got)
	}
}

// TestLocalVariants runs the conformance suite on the code paths the
// machine running the tests may not take by itself.
func TestLocalVariants(t *testing.T) {
	t.Run("no /proc", func(t *testing.T) {
		nodetest.Run(t, func(t *testing.T) node.Node {
			l := newLocal(t, node.LocalOptions{})
			node.SetProcFD(l, false)
			return l
		})
	})
	t.Run("no xattrs", func(t *testing.T) {
		nodetest.Run(t, func(t *testing.T) node.Node {
			l := newLocal(t, node.LocalOptions{})
			node.SetNoAttrs(l)
			return l
		})
	})
	t.Run("no openat2", func(t *testing.T) {
		nodetest.Run(t, func(t *testing.T) node.Node {
			l := newLocal(t, node.LocalOptions{})
			node.SetNoOpenat2(l)
			return l
		})
	})
}

// Open reads a file shorter than WholeRead whole into memory (a
// ContentsFile, of the file's bytes) and opens a longer one as a file
// (where openat2 is missing, every one), around the boundary and at its
// extremes; either way the File reads the file's bytes.
func TestLocalOpenSizes(t *testing.T) {
	ctx := context.Background()
	for _, openat2 := range []bool{true, false} {
		l := newLocal(t, node.LocalOptions{})
		if !openat2 {
			node.SetNoOpenat2(l)
		}
		for _, size := range []int{0, 1, node.WholeRead - 1, node.WholeRead, node.WholeRead + 1, 300000} {
			content := pattern(size)
			path := fmt.Sprintf("/f%d", size)
			put(t, l, path, content)
			f, err := l.Open(ctx, path)
			if err != nil {
				t.Fatalf("openat2 %v, %d bytes: open: %v", openat2, size, err)
			}
			c, inMemory := f.(node.ContentsFile)
			if want := openat2 && size < node.WholeRead; inMemory != want {
				t.Errorf("openat2 %v, %d bytes: held in memory: %v, want %v", openat2, size, inMemory, want)
			}
			if inMemory && !bytes.Equal(c.Contents(), content) {
				t.Errorf("openat2 %v, %d bytes: contents differ", openat2, size)
			}
			if f.Size() != int64(size) {
				t.Errorf("openat2 %v, %d bytes: Size %d", openat2, size, f.Size())
			}
			got := make([]byte, size+10)
			n, err := f.ReadAt(ctx, got, 0)
			if n != size || err != io.EOF || !bytes.Equal(got[:n], content) {
				t.Errorf("openat2 %v, %d bytes: ReadAt read %d (%v), equal %v", openat2, size, n, err, bytes.Equal(got[:n], content))
			}
			if err := f.Close(); err != nil {
				t.Errorf("openat2 %v, %d bytes: close: %v", openat2, size, err)
			}
		}
	}
}

// A FIFO planted in a node directory is refused at once, with or
// without openat2: the open neither blocks for a writer nor reads it.
func TestLocalOpenFIFO(t *testing.T) {
	for _, openat2 := range []bool{true, false} {
		l := newLocal(t, node.LocalOptions{})
		if !openat2 {
			node.SetNoOpenat2(l)
		}
		if err := unix.Mkfifo(filepath.Join(l.Dir(), "fifo"), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		f, err := l.Open(ctx, "/fifo")
		cancel()
		if err == nil {
			f.Close()
			t.Fatalf("openat2 %v: a FIFO opened as a file", openat2)
		}
		if !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("openat2 %v: open of a FIFO: %v, want 'not a regular file'", openat2, err)
		}
	}
}

// A local file's ReadSpan returns the span's bytes whether it reads with
// O_DIRECT (a large span in a buffer with SpanSlack), through the page
// cache (a small span, or no slack), and reports a span past the end.
func TestLocalReadSpan(t *testing.T) {
	l := newLocal(t, node.LocalOptions{})
	t.Run("local", func(t *testing.T) { testReadSpan(t, l) })
	t.Run("guarded", func(t *testing.T) { testReadSpan(t, node.Guard(l, node.GuardOptions{})) })
}

func testReadSpan(t *testing.T, l node.Node) {
	ctx := context.Background()
	content := bytes.Repeat([]byte("0123456789abcdefghij"), 30000) // 600 000 bytes
	put(t, l, "/span", content)
	f, err := l.Open(ctx, "/span")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sr, ok := f.(node.SpanReader)
	if !ok {
		t.Fatal("a local file is no SpanReader")
	}
	for _, tc := range []struct {
		off, n, slack int
	}{
		{0, node.DirectSpan, node.SpanSlack},
		{77, node.DirectSpan + 333, node.SpanSlack},
		{len(content) - node.DirectSpan, node.DirectSpan, node.SpanSlack},
		{5, 100, node.SpanSlack},
		{4099, node.DirectSpan, 0},
	} {
		buf := make([]byte, tc.n+tc.slack)
		got, err := sr.ReadSpan(ctx, buf, int64(tc.off), tc.n)
		if err != nil {
			t.Fatalf("span %d+%d: %v", tc.off, tc.n, err)
		}
		if !bytes.Equal(got, content[tc.off:tc.off+tc.n]) {
			t.Errorf("span %d+%d (slack %d): wrong bytes", tc.off, tc.n, tc.slack)
		}
	}
	for _, slack := range []int{0, node.SpanSlack} {
		n := node.DirectSpan
		if _, err := sr.ReadSpan(ctx, make([]byte, n+slack), int64(len(content)-n+1), n); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("span past the end (slack %d): %v, want io.ErrUnexpectedEOF", slack, err)
		}
	}
}

// Regression (CI, -race): a reader closes its archives while a late
// hedge or read-ahead may still read one. The direct read used the raw
// descriptor, which Close could free (and the kernel reuse) under it.
// Reads racing Close must fail cleanly or return the right bytes.
func TestLocalReadSpanRacingClose(t *testing.T) {
	ctx := context.Background()
	l := newLocal(t, node.LocalOptions{})
	content := bytes.Repeat([]byte("abcdefghijklmnopqrstuvwxyz012345"), 16384) // 512 KiB
	put(t, l, "/race", content)
	for range 20 {
		f, err := l.Open(ctx, "/race")
		if err != nil {
			t.Fatal(err)
		}
		sr := f.(node.SpanReader)
		done := make(chan struct{})
		for g := range 4 {
			go func() {
				defer func() { done <- struct{}{} }()
				buf := make([]byte, node.DirectSpan+node.SpanSlack)
				off := int64(g * 1000)
				for {
					got, err := sr.ReadSpan(ctx, buf, off, node.DirectSpan)
					if err != nil {
						return
					}
					if !bytes.Equal(got, content[off:off+node.DirectSpan]) {
						t.Error("wrong bytes from a read racing Close")
						return
					}
				}
			}()
		}
		f.Close()
		for range 4 {
			<-done
		}
	}
}

// Uploads written in large pieces take large staging buffers only up to
// the process's budget, the others keep the small ones, every buffer is
// given back by Commit or Abort, and the bytes land either way.
func TestLocalLargeStagingBudget(t *testing.T) {
	l := newLocal(t, node.LocalOptions{})
	ctx := context.Background()
	if held := node.LargeBuffersHeld(); held != 0 {
		t.Fatalf("%d bytes of large buffers held before the test", held)
	}
	n := int(node.LargeBufferBudget/node.LargeUploadBuffer) + 4
	piece := bytes.Repeat([]byte{'x'}, node.LargeUploadBuffer/2)
	small := []byte("header")
	var ups []node.Upload
	for i := range n {
		u, err := l.Create(ctx, fmt.Sprintf("/big%d", i))
		if err != nil {
			t.Fatal(err)
		}
		ups = append(ups, u)
		for _, p := range [][]byte{small, piece, small, piece, piece} {
			if err := u.Write(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	if held := node.LargeBuffersHeld(); held != node.LargeBufferBudget {
		t.Errorf("%d uploads hold %d bytes of large buffers, want the budget %d", n, held, node.LargeBufferBudget)
	}
	want := append(append(append(append(append([]byte{}, small...), piece...), small...), piece...), piece...)
	for i, u := range ups {
		if i%2 == 1 {
			if err := u.Abort(ctx); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := u.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(l.Dir(), fmt.Sprintf("big%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("big%d: %d bytes differ from the %d written", i, len(got), len(want))
		}
	}
	if held := node.LargeBuffersHeld(); held != 0 {
		t.Errorf("%d bytes of large buffers still held after every upload ended", held)
	}
}

// pattern returns n bytes that differ from one offset to the next.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

// Opening a large file reads none of it: on a file that is not in the
// page cache (cold, or just written with O_DIRECT) such a read is a disk
// access of its own before the archive's tail is read.
func TestLocalOpenReadsNothingOfALargeFile(t *testing.T) {
	l := newLocal(t, node.LocalOptions{})
	put(t, l, "/large", pattern(4*node.WholeRead))
	p := filepath.Join(l.Dir(), "large")
	headCached := func() bool { return cachedPages(t, p, 0, node.WholeRead) > 0 }
	for _, openat2 := range []bool{true, false} {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		_ = f.Sync()
		err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
		if err != nil || headCached() {
			t.Skipf("cannot drop the file from the page cache here (fadvise: %v)", err)
		}
		if !openat2 {
			node.SetNoOpenat2(l)
		}
		nf, err := l.Open(context.Background(), "/large")
		if err != nil {
			t.Fatal(err)
		}
		nf.Close()
		if headCached() {
			t.Errorf("openat2 %v: the open of a %d-byte file read its start", openat2, 4*node.WholeRead)
		}
	}
}

// cachedPages counts the pages of the file at p, from off for n bytes
// (off page-aligned), that are in the page cache.
func cachedPages(t *testing.T, p string, off, n int64) int {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := directio.CachedPages(f, off, n)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A file written with O_DIRECT has its last directio.TailCached bytes
// read back into the page cache, where archive readers look first.
func TestLocalWriteLeavesItsTailCached(t *testing.T) {
	l := newLocal(t, node.LocalOptions{})
	const size = 1<<20 + 1000
	put(t, l, "/big", pattern(size))
	p := filepath.Join(l.Dir(), "big")
	if cachedPages(t, p, 0, 64<<10) > 0 {
		t.Skip("the file system took the writes through the page cache (no O_DIRECT)")
	}
	off := int64(size-directio.TailCached) &^ int64(os.Getpagesize()-1)
	pages := (size - off + int64(os.Getpagesize()) - 1) / int64(os.Getpagesize())
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got := cachedPages(t, p, off, size-off)
		if int64(got) == pages {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the last %d pages in the page cache", got, pages)
		}
	}
}

// ListNames lists what List lists, describing the directories alone:
// files come by name, without attributes, size or time.
func TestLocalListNames(t *testing.T) {
	ctx := context.Background()
	l := newLocal(t, node.LocalOptions{})
	for _, p := range []string{"/d/f1", "/d/f2", "/d/sub/f3"} {
		u, err := l.Create(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if err := u.Write(ctx, []byte("data")); err != nil {
			t.Fatal(err)
		}
		if err := u.(node.Attributes).SetAttrs(ctx, map[string]string{"v": "1"}); err != nil {
			t.Fatal(err)
		}
		if err := u.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	full, err := l.List(ctx, "/d")
	if err != nil {
		t.Fatal(err)
	}
	names, err := l.ListNames(ctx, "/d")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]node.FileInfo{}
	for _, fi := range full {
		byName[fi.Name] = fi
	}
	if len(names) != len(full) || len(full) != 3 {
		t.Fatalf("ListNames %+v; List %+v", names, full)
	}
	for _, fi := range names {
		want, ok := byName[fi.Name]
		switch {
		case !ok || fi.IsDir != want.IsDir:
			t.Errorf("ListNames: %+v; List: %+v", fi, want)
		case fi.IsDir && !fi.ModTime.Equal(want.ModTime):
			t.Errorf("directory %s: time %v; List says %v", fi.Name, fi.ModTime, want.ModTime)
		case !fi.IsDir && (fi.Attrs != nil || fi.Size != 0 || !fi.ModTime.IsZero()):
			t.Errorf("file %s described by ListNames: %+v", fi.Name, fi)
		}
	}
	if _, err := l.ListNames(ctx, "/d/f1"); !errors.Is(err, node.ErrNotDir) {
		t.Errorf("ListNames of a file: %v; want ErrNotDir", err)
	}
	if _, err := l.ListNames(ctx, "/nothing"); !errors.Is(err, node.ErrNotExist) {
		t.Errorf("ListNames of nothing: %v; want ErrNotExist", err)
	}
}
