package dataserver

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ecstore/ecstore/internal/xrootd"
)

var seedFlag = flag.Uint64("seed", 0, "seed for random test data (0: time-based)")

// testRand returns a seeded source of test data and logs the seed.
func testRand(t testing.TB) *rand.Rand {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, 0x5eed))
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// serve runs an FS on a fresh directory behind a real xrootd.Server on
// a loopback port until the test ends, and returns the directory and
// the server's address.
func serve(t testing.TB, opts Options) (dir, addr string) {
	t.Helper()
	dir = t.TempDir()
	fsys, err := New(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &xrootd.Server{Handler: fsys, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, xrootd.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
		if err := fsys.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return dir, ln.Addr().String()
}

// dial connects a client for the test.
func dial(t testing.TB, addr string) *xrootd.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := xrootd.Dial(ctx, addr, &xrootd.DialOptions{WriteChunk: 256 << 10, ReadChunk: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// wantCode fails t unless err is a kXR_error with code.
func wantCode(t *testing.T, what string, err error, code xrootd.ErrorCode) {
	t.Helper()
	var xe *xrootd.Error
	if !errors.As(err, &xe) || xe.Code != code {
		t.Errorf("%s: err = %v; want kXR_error %v", what, err, code)
	}
}

// wantFSError fails t unless err is kXR_FSError whose text holds msg.
func wantFSError(t *testing.T, what string, err error, msg string) {
	t.Helper()
	var xe *xrootd.Error
	if !errors.As(err, &xe) || xe.Code != xrootd.ErrFSError || !strings.Contains(xe.Message, msg) {
		t.Errorf("%s: err = %v; want kXR_FSError %q", what, err, msg)
	}
}

// put creates name with data through the protocol.
func put(t *testing.T, c *xrootd.Client, name string, data []byte) {
	t.Helper()
	ctx := testCtx(t)
	f, err := c.Open(ctx, name, xrootd.OpenDelete|xrootd.OpenMkpath, 0o644)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	if _, err := f.WriteAt(ctx, data, 0); err != nil {
		t.Fatalf("write %s: %v", name, err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatalf("close %s: %v", name, err)
	}
}

func readAll(t *testing.T, c *xrootd.Client, name string) []byte {
	t.Helper()
	ctx := testCtx(t)
	f, err := c.Open(ctx, name, xrootd.OpenRead, 0)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	defer f.Close(ctx)
	buf := make([]byte, f.OpenInfo().Size+1)
	n, err := f.ReadAt(ctx, buf, 0)
	if err != io.EOF {
		t.Fatalf("read %s: %d, %v; want io.EOF", name, n, err)
	}
	return buf[:n]
}

func TestNewMissingDir(t *testing.T) {
	if _, err := New(filepath.Join(t.TempDir(), "missing"), Options{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("New(missing dir) = %v; want fs.ErrNotExist", err)
	}
}

func TestOpenWrite(t *testing.T) {
	for _, fsync := range []bool{false, true} {
		t.Run(fmt.Sprintf("fsync=%v", fsync), func(t *testing.T) {
			r := testRand(t)
			dir, addr := serve(t, Options{Fsync: fsync})
			c := dial(t, addr)
			ctx := testCtx(t)
			data := randomBytes(r, 1<<20+12345)

			// Pages, then plain writes, then out of order and with a hole.
			f, err := c.Open(ctx, "/w/f", xrootd.OpenNew|xrootd.OpenMkpath, 0o640)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.PgWriteAt(ctx, data[:700000], 0); err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(ctx, data[900000:], 900000); err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(ctx, data[700000:900000], 700000); err != nil {
				t.Fatal(err)
			}
			if err := f.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if fi, err := f.Stat(ctx); err != nil || fi.Size != int64(len(data)) {
				t.Errorf("stat by handle = %+v, %v; want size %d", fi, err, len(data))
			}
			if err := f.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(filepath.Join(dir, "w", "f")); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("file on disk: %d bytes, %v; want the %d written", len(got), err, len(data))
			}
			if fi, err := os.Stat(filepath.Join(dir, "w", "f")); err != nil || fi.Mode().Perm() != 0o640 {
				t.Errorf("mode on disk = %v, %v; want 0640", fi.Mode(), err)
			}
			if got := readAll(t, c, "/w/f"); !bytes.Equal(got, data) {
				t.Error("read back differs")
			}

			_, err = c.Open(ctx, "/w/f", xrootd.OpenNew|xrootd.OpenMkpath, 0o644)
			wantCode(t, "kXR_new on an existing file", err, xrootd.ErrItExists)

			// kXR_delete truncates.
			put(t, c, "/w/f", []byte("short"))
			if got := readAll(t, c, "/w/f"); string(got) != "short" {
				t.Errorf("after kXR_delete: %q", got)
			}

			// kXR_open_updt rewrites in place; it does not create.
			f, err = c.Open(ctx, "/w/f", xrootd.OpenUpdate, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(ctx, []byte("SH"), 0); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, c, "/w/f"); string(got) != "SHort" {
				t.Errorf("after update: %q", got)
			}
			_, err = c.Open(ctx, "/w/none", xrootd.OpenUpdate, 0)
			wantCode(t, "update of a missing file", err, xrootd.ErrNotFound)
		})
	}
}

func TestOpenParents(t *testing.T) {
	_, addr := serve(t, Options{})
	c := dial(t, addr)
	ctx := testCtx(t)
	put(t, c, "/file", []byte("x"))
	tests := []struct {
		name  string
		path  string
		flags xrootd.OpenFlags
		code  xrootd.ErrorCode // 0: success
	}{
		{"new+mkpath", "/a/b/new", xrootd.OpenNew | xrootd.OpenMkpath, 0},
		{"delete+async (xrdcp)", "/c/d/del", xrootd.OpenDelete | xrootd.OpenUpdate | xrootd.OpenAsync, 0},
		{"new without mkpath", "/e/f/g", xrootd.OpenNew, xrootd.ErrNotFound},
		{"delete without mkpath", "/e/f/g", xrootd.OpenDelete | xrootd.OpenUpdate, xrootd.ErrNotFound},
		{"under a file", "/file/x", xrootd.OpenNew | xrootd.OpenMkpath, xrootd.ErrFSError},
		{"new on a directory", "/a", xrootd.OpenNew | xrootd.OpenMkpath, xrootd.ErrItExists},
		{"delete on a directory", "/a", xrootd.OpenDelete | xrootd.OpenMkpath, xrootd.ErrIsDirectory},
		{"read a directory", "/a", xrootd.OpenRead, xrootd.ErrIsDirectory},
		{"read missing", "/missing", xrootd.OpenRead, xrootd.ErrNotFound},
		{"write the root", "/", xrootd.OpenDelete, xrootd.ErrIsDirectory},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := c.Open(ctx, tt.path, tt.flags, 0o644)
			if tt.code != 0 {
				wantCode(t, "open", err, tt.code)
				return
			}
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if err := f.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if fi, err := c.Stat(ctx, tt.path); err != nil || fi.Size != 0 || fi.IsDir() {
				t.Errorf("stat = %+v, %v; want an empty file", fi, err)
			}
		})
	}
}

func TestRead(t *testing.T) {
	r := testRand(t)
	dir, addr := serve(t, Options{})
	c := dial(t, addr)
	ctx := testCtx(t)
	data := randomBytes(r, 3<<20+77)
	if err := os.WriteFile(filepath.Join(dir, "r"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := c.Open(ctx, "/r", xrootd.OpenRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(ctx)
	if f.OpenInfo().Size != int64(len(data)) {
		t.Errorf("open stat size %d", f.OpenInfo().Size)
	}
	for _, tt := range []struct {
		off int64
		n   int
	}{{0, 10}, {4095, 1 << 20}, {int64(len(data)) - 5, 5}, {int64(len(data)) - 5, 50}, {int64(len(data)), 1}} {
		for _, pages := range []bool{false, true} {
			buf := make([]byte, tt.n)
			read := f.ReadAt
			if pages {
				read = f.PgReadAt
			}
			n, err := read(ctx, buf, tt.off)
			want := data[min(tt.off, int64(len(data))):min(tt.off+int64(tt.n), int64(len(data)))]
			wantEOF := len(want) < tt.n
			if !bytes.Equal(buf[:n], want) || (err == io.EOF) != wantEOF || (err != nil && err != io.EOF) {
				t.Errorf("read(off %d, len %d, pages %v) = %d, %v; want %d bytes, EOF %v", tt.off, tt.n, pages, n, err, len(want), wantEOF)
			}
		}
	}
	if _, err := f.WriteAt(ctx, []byte("x"), 0); err == nil {
		t.Error("write to a file opened for reading succeeded")
	}
}

func TestStatList(t *testing.T) {
	dir, addr := serve(t, Options{})
	c := dial(t, addr)
	ctx := testCtx(t)
	put(t, c, "/s/f1", []byte("0123456789"))
	if err := c.Mkdir(ctx, "/s/sub", 0o755, true); err != nil {
		t.Fatal(err)
	}
	const many = 3*listBatch + 7
	for i := range many {
		if err := os.WriteFile(filepath.Join(dir, "s", "sub", fmt.Sprintf("f%04d", i)), make([]byte, i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(dir, "s", "f1"), past, past); err != nil {
		t.Fatal(err)
	}

	fi, err := c.Stat(ctx, "/s/f1")
	if err != nil || fi.Size != 10 || fi.IsDir() || !fi.ModTime.Equal(past) || fi.Flags&xrootd.StatReadable == 0 {
		t.Errorf("stat file = %+v, %v; want size 10, mtime %v, readable", fi, err, past)
	}
	if fi, err := c.Stat(ctx, "/s/sub"); err != nil || !fi.IsDir() {
		t.Errorf("stat dir = %+v, %v", fi, err)
	}
	if fi, err := c.Stat(ctx, "/"); err != nil || !fi.IsDir() {
		t.Errorf("stat / = %+v, %v", fi, err)
	}
	_, err = c.Stat(ctx, "/s/missing")
	wantCode(t, "stat missing", err, xrootd.ErrNotFound)
	_, err = c.Stat(ctx, "/s/f1/x")
	wantFSError(t, "stat under a file", err, "not a directory")

	list, err := c.Dirlist(ctx, "/s", true)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(list, func(a, b xrootd.FileInfo) int { return strings.Compare(a.Name, b.Name) })
	if len(list) != 2 || list[0].Name != "f1" || list[0].Size != 10 || list[0].IsDir() || !list[0].ModTime.Equal(past) ||
		list[1].Name != "sub" || !list[1].IsDir() {
		t.Errorf("dirlist /s = %+v", list)
	}
	list, err = c.Dirlist(ctx, "/s/sub", true)
	if err != nil || len(list) != many {
		t.Fatalf("dirlist of %d entries: %d, %v", many, len(list), err)
	}
	for _, e := range list {
		var i int
		if _, err := fmt.Sscanf(e.Name, "f%04d", &i); err != nil || e.Size != int64(i) {
			t.Errorf("entry %+v", e)
		}
	}
	_, err = c.Dirlist(ctx, "/s/f1", true)
	wantFSError(t, "dirlist of a file", err, "not a directory")
	_, err = c.Dirlist(ctx, "/nope", false)
	wantCode(t, "dirlist missing", err, xrootd.ErrNotFound)
}

func TestRemove(t *testing.T) {
	_, addr := serve(t, Options{Fsync: true})
	c := dial(t, addr)
	ctx := testCtx(t)
	put(t, c, "/d/f", []byte("x"))
	put(t, c, "/d/sub/g", []byte("y"))
	if err := c.Mkdir(ctx, "/d/empty", 0o755, false); err != nil {
		t.Fatal(err)
	}

	wantCode(t, "rm dir", c.Rm(ctx, "/d/empty"), xrootd.ErrIsDirectory)
	wantCode(t, "rm missing", c.Rm(ctx, "/d/missing"), xrootd.ErrNotFound)
	wantCode(t, "rm /", c.Rm(ctx, "/"), xrootd.ErrNotAuthorized)
	if err := c.Rm(ctx, "/d/f"); err != nil {
		t.Errorf("rm file: %v", err)
	}
	_, err := c.Stat(ctx, "/d/f")
	wantCode(t, "stat removed", err, xrootd.ErrNotFound)

	wantFSError(t, "rmdir non-empty", c.Rmdir(ctx, "/d/sub"), "directory not empty")
	wantFSError(t, "rmdir file", c.Rmdir(ctx, "/d/sub/g"), "not a directory")
	wantCode(t, "rmdir missing", c.Rmdir(ctx, "/d/missing"), xrootd.ErrNotFound)
	wantCode(t, "rmdir /", c.Rmdir(ctx, "/"), xrootd.ErrNotAuthorized)
	if err := c.Rmdir(ctx, "/d/empty"); err != nil {
		t.Errorf("rmdir empty: %v", err)
	}
	if _, err := c.Stat(ctx, "/d/empty"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat of removed dir: %v", err)
	}
}

func TestRename(t *testing.T) {
	_, addr := serve(t, Options{Fsync: true})
	c := dial(t, addr)
	ctx := testCtx(t)
	put(t, c, "/a", []byte("a"))
	put(t, c, "/b", []byte("bbb"))
	put(t, c, "/dir/x", []byte("x"))

	if err := c.Mv(ctx, "/a", "/b"); err != nil {
		t.Fatalf("mv replacing a file: %v", err)
	}
	if got := readAll(t, c, "/b"); string(got) != "a" {
		t.Errorf("replaced content %q", got)
	}
	if err := c.Mv(ctx, "/b", "/new/deep/b"); err != nil {
		t.Fatalf("mv into new directories: %v", err)
	}
	if got := readAll(t, c, "/new/deep/b"); string(got) != "a" {
		t.Errorf("moved content %q", got)
	}
	if err := c.Mv(ctx, "/dir", "/dir2"); err != nil {
		t.Fatalf("mv directory: %v", err)
	}
	if got := readAll(t, c, "/dir2/x"); string(got) != "x" {
		t.Errorf("content in moved dir %q", got)
	}
	if err := c.Mv(ctx, "/dir2/x", "/dir2/x"); err != nil {
		t.Errorf("mv onto itself: %v", err)
	}
	if err := c.Mkdir(ctx, "/emptydir", 0o755, false); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "mv file onto a directory", c.Mv(ctx, "/new/deep/b", "/dir2"), xrootd.ErrItExists)
	wantCode(t, "mv directory onto an empty directory", c.Mv(ctx, "/dir2", "/emptydir"), xrootd.ErrItExists)
	wantCode(t, "mv missing", c.Mv(ctx, "/missing", "/m2"), xrootd.ErrNotFound)
	wantFSError(t, "mv under a file", c.Mv(ctx, "/dir2/x", "/new/deep/b/x"), "not a directory")
	wantCode(t, "mv /", c.Mv(ctx, "/", "/root2"), xrootd.ErrNotAuthorized)
}

func TestMkdir(t *testing.T) {
	_, addr := serve(t, Options{Fsync: true})
	c := dial(t, addr)
	ctx := testCtx(t)
	for range 2 {
		if err := c.Mkdir(ctx, "/m/n/o", 0o750, true); err != nil {
			t.Errorf("mkdir -p: %v", err)
		}
	}
	if fi, err := c.Stat(ctx, "/m/n/o"); err != nil || !fi.IsDir() || fi.Mode.Perm() != 0o750 {
		t.Errorf("stat = %+v, %v; want a 0750 directory", fi, err)
	}
	if err := c.Mkdir(ctx, "/m", 0o755, false); err != nil {
		t.Errorf("mkdir of an existing directory: %v", err)
	}
	wantCode(t, "mkdir without parents", c.Mkdir(ctx, "/x/y", 0o755, false), xrootd.ErrNotFound)
	put(t, c, "/m/file", nil)
	wantCode(t, "mkdir -p over a file", c.Mkdir(ctx, "/m/file", 0o755, true), xrootd.ErrItExists)
	wantCode(t, "mkdir over a file", c.Mkdir(ctx, "/m/file", 0o755, false), xrootd.ErrItExists)
	wantFSError(t, "mkdir -p under a file", c.Mkdir(ctx, "/m/file/sub", 0o755, true), "not a directory")
	if err := c.Mkdir(ctx, "/", 0o755, true); err != nil {
		t.Errorf("mkdir -p /: %v", err)
	}
}

func TestSpace(t *testing.T) {
	_, addr := serve(t, Options{})
	c := dial(t, addr)
	sp, err := c.Space(testCtx(t), "/")
	if err != nil || sp.Total <= 0 || sp.Free < 0 || sp.Free > sp.Total || sp.Used < 0 {
		t.Errorf("space = %+v, %v", sp, err)
	}
}

func TestSymlinks(t *testing.T) {
	dir, addr := serve(t, Options{})
	c := dial(t, addr)
	ctx := testCtx(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	put(t, c, "/in/f", []byte("inside"))
	for name, target := range map[string]string{
		"out":     outside,
		"outfile": filepath.Join(outside, "secret"),
		"rel":     "../" + filepath.Base(outside),
		"ok":      "in/f",
	} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"/out/secret", "/outfile", "/rel/secret"} {
		_, err := c.Open(ctx, p, xrootd.OpenRead, 0)
		wantCode(t, "open "+p, err, xrootd.ErrNotAuthorized)
		_, err = c.Stat(ctx, p)
		wantCode(t, "stat "+p, err, xrootd.ErrNotAuthorized)
		_, err = c.Open(ctx, p, xrootd.OpenDelete|xrootd.OpenMkpath, 0o644)
		wantCode(t, "create "+p, err, xrootd.ErrNotAuthorized)
	}
	_, err := c.Dirlist(ctx, "/out", false)
	wantCode(t, "dirlist /out", err, xrootd.ErrNotAuthorized)
	wantCode(t, "mv into /out", c.Mv(ctx, "/in/f", "/out/stolen"), xrootd.ErrNotAuthorized)
	if got := readAll(t, c, "/ok"); string(got) != "inside" {
		t.Errorf("symlink within the tree: %q", got)
	}
	// rm removes the link, not its target.
	if err := c.Rm(ctx, "/outfile"); err != nil {
		t.Errorf("rm of a symlink: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(b) != "secret" {
		t.Errorf("target of a removed link: %q, %v", b, err)
	}
}

// TestAbortKeepsPartial checks that a file left open by a client that
// goes away is closed and kept as written.
func TestAbortKeepsPartial(t *testing.T) {
	dir, addr := serve(t, Options{Fsync: true})
	c := dial(t, addr)
	ctx := testCtx(t)
	f, err := c.Open(ctx, "/p/partial", xrootd.OpenNew|xrootd.OpenMkpath, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ctx, []byte("partial"), 0); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c2 := dial(t, addr)
	for deadline := time.Now().Add(10 * time.Second); ; {
		// The handle is released once the server notices the disconnect;
		// until then the file may still be open, but its bytes are there.
		if b, err := os.ReadFile(filepath.Join(dir, "p", "partial")); err == nil && string(b) == "partial" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("partial file not kept")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if fi, err := c2.Stat(ctx, "/p/partial"); err != nil || fi.Size != 7 {
		t.Errorf("stat partial = %+v, %v", fi, err)
	}
}

// TestLargeWritesStream: writes of 256 KiB and more (plain and paged,
// including one at an unaligned offset) go straight from the connection
// to the file, and land intact.
func TestLargeWritesStream(t *testing.T) {
	dir, addr := serve(t, Options{})
	c := dial(t, addr)
	ctx := testCtx(t)
	data := randomBytes(testRand(t), 3<<20+999)
	f, err := c.Open(ctx, "/big", xrootd.OpenNew, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cut := 1<<20 + 3
	if _, err := f.WriteAt(ctx, data[:cut], 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.PgWriteAt(ctx, data[cut:], int64(cut)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "big"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("file holds %d bytes (%v), not the %d written", len(got), err, len(data))
	}
}

// residentPages counts the pages of the file at path held in the page
// cache, and its pages in all.
func residentPages(t *testing.T, path string) (resident, total int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		t.Fatalf("stat %s: %v, size %d", path, err, fi.Size())
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	for _, v := range vec {
		resident += int(v & 1)
	}
	return resident, len(vec)
}

// TestSequentialWritesBypassPageCache: a file written from its start in
// order goes to the disk with O_DIRECT (its pages are not cached), every
// acknowledged byte is visible to a read or stat on the handle, and a
// write out of order falls back to ordinary writes without losing bytes.
func TestSequentialWritesBypassPageCache(t *testing.T) {
	dir, addr := serve(t, Options{Fsync: true})
	c := dial(t, addr)
	ctx := testCtx(t)
	data := randomBytes(testRand(t), 4<<20+999)
	f, err := c.Open(ctx, "/seq", xrootd.OpenNew, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	// Small and large writes, plain and paged, in order.
	cuts := []int{0, 30, 1<<20 + 30, 1<<20 + 100, 3<<20 + 7}
	for i := 1; i < len(cuts); i++ {
		p, off := data[cuts[i-1]:cuts[i]], int64(cuts[i-1])
		if i%2 == 0 {
			_, err = f.PgWriteAt(ctx, p, off)
		} else {
			_, err = f.WriteAt(ctx, p, off)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	probe, perr := os.OpenFile(filepath.Join(dir, "probe"), os.O_CREATE|os.O_WRONLY|unix.O_DIRECT, 0o644)
	if perr == nil {
		probe.Close()
		if res, total := residentPages(t, filepath.Join(dir, "seq")); total < 512 || res > total/4 {
			t.Errorf("%d of the %d pages written so far are in the page cache; want most of them written direct", res, total)
		}
	} else {
		t.Logf("the test directory refuses O_DIRECT (%v): only the bytes are checked", perr)
	}
	// Everything acknowledged is visible on the handle.
	if fi, err := f.Stat(ctx); err != nil || fi.Size != int64(cuts[len(cuts)-1]) {
		t.Fatalf("stat during the write: %+v, %v; want size %d", fi, err, cuts[len(cuts)-1])
	}
	got := make([]byte, 100)
	if n, err := f.ReadAt(ctx, got, int64(cuts[len(cuts)-1])-100); (err != nil && err != io.EOF) || n != 100 || !bytes.Equal(got, data[cuts[len(cuts)-1]-100:cuts[len(cuts)-1]]) {
		t.Fatalf("read of the last acknowledged bytes: %d, %v", n, err)
	}
	// The rest in order, then a rewrite out of order.
	if _, err := f.WriteAt(ctx, data[cuts[len(cuts)-1]:], int64(cuts[len(cuts)-1])); err != nil {
		t.Fatal(err)
	}
	copy(data[5:9], "XXXX")
	if _, err := f.WriteAt(ctx, data[5:9], 5); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "seq")); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("file holds %d bytes (%v), not the %d written", len(b), err, len(data))
	}
}

// A durable server makes a created file's directory entry durable at the
// file's first sync or close, right after the file (where the directory
// then usually has nothing left to write), not at the open; and a close
// right after a kXR_sync does not fsync the unchanged file again. (On a
// file system whose file fsync does not cover the entry; the test's own
// may.)
func TestCreateSyncsEntryWithTheFile(t *testing.T) {
	ctx := testCtx(t)
	s, want := syncRecorder(t, false)
	create := xrootd.OpenOptions{Flags: xrootd.OpenNew | xrootd.OpenMkpath}
	f, err := s.Open(ctx, "/d/a", create)
	if err != nil {
		t.Fatal(err)
	}
	want("open creating /d", "dir") // the new directory /d, in /
	w := f.(xrootd.FileWriter)
	if _, err := w.WriteAt(ctx, []byte("data"), 0); err != nil {
		t.Fatal(err)
	}
	want("write")
	if err := f.(xrootd.FileSyncer).Sync(ctx); err != nil {
		t.Fatal(err)
	}
	want("sync", "file", "dir")
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	want("close after sync")

	// Written after its sync: the close fsyncs the file again, not the
	// entry.
	f, err = s.Open(ctx, "/d/b", create)
	if err != nil {
		t.Fatal(err)
	}
	want("open in an existing directory")
	w = f.(xrootd.FileWriter)
	if err := f.(xrootd.FileSyncer).Sync(ctx); err != nil {
		t.Fatal(err)
	}
	want("sync", "file", "dir")
	if _, err := w.WriteAt(ctx, []byte("more"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	want("close after a write", "file")

	// Created and closed unwritten: both at the close.
	f, err = s.Open(ctx, "/d/c", create)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	want("close of an empty new file", "file", "dir")

	// Rewritten in place: no entry to sync.
	f, err = s.Open(ctx, "/d/c", xrootd.OpenOptions{Flags: xrootd.OpenUpdate})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	want("close of an updated file", "file")
	for _, name := range []string{"a", "b", "c"} {
		if _, err := os.Stat(filepath.Join(s.dir, "d", name)); err != nil {
			t.Error(err)
		}
	}
}

// syncRecorder returns a durable FS in a new directory, entryWithFile
// as given, and want, which checks the fsyncs ("file", "dir") made since
// its last call.
func syncRecorder(t *testing.T, entryWithFile bool) (s *FS, want func(step string, w ...string)) {
	t.Helper()
	s, err := New(t.TempDir(), Options{Fsync: true})
	if err != nil {
		t.Fatal(err)
	}
	s.entryWithFile = entryWithFile
	var syncs []string
	s.synced = func(what string) { syncs = append(syncs, what) }
	return s, func(step string, w ...string) {
		t.Helper()
		if !slices.Equal(syncs, w) {
			t.Errorf("%s: fsyncs %q; want %q", step, syncs, w)
		}
		syncs = nil
	}
}

// Where the file's fsync makes its new entry durable (ext4, XFS), a
// sync or close of a created file fsyncs the file alone; a directory the
// open created is still fsynced, and so is the directory of a file on
// another file system.
func TestCreateLeavesTheEntryToTheFilesFsync(t *testing.T) {
	ctx := testCtx(t)
	s, want := syncRecorder(t, true)
	f, err := s.Open(ctx, "/d/a", xrootd.OpenOptions{Flags: xrootd.OpenNew | xrootd.OpenMkpath})
	if err != nil {
		t.Fatal(err)
	}
	want("open creating /d", "dir")
	if _, err := f.(xrootd.FileWriter).WriteAt(ctx, []byte("data"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.(xrootd.FileSyncer).Sync(ctx); err != nil {
		t.Fatal(err)
	}
	want("sync", "file")
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	want("close after sync")
	f, err = s.Open(ctx, "/d/c", xrootd.OpenOptions{Flags: xrootd.OpenNew})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	want("close of an empty new file", "file")
	if b, err := os.ReadFile(filepath.Join(s.dir, "d", "a")); err != nil || string(b) != "data" {
		t.Errorf("file: %q, %v", b, err)
	}

	// A file on another file system (one mounted below the directory,
	// here one the server takes the directory's to be different from):
	// its directory is fsynced after it, as elsewhere.
	s.entryDev++
	f, err = s.Open(ctx, "/d/e", xrootd.OpenOptions{Flags: xrootd.OpenNew})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	want("close of a new file on another file system", "file", "dir")
}

// Extended attributes over kXR_fattr: set, get (a missing one is
// AttrNotFound, the others still answered), set-if-new refused, del; on
// disk as user.U.<name>, as a plain xrootd keeps them; a missing file,
// a path escaping the directory and a FIFO are refused.
func TestAttrs(t *testing.T) {
	dir, addr := serve(t, Options{Fsync: true})
	c := dial(t, addr)
	ctx := testCtx(t)
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	value := bytes.Repeat([]byte{0, 1, 2, 255}, 300)
	set, err := c.SetAttrs(ctx, "/f", []xrootd.Attr{{Name: "user.ecstore", Value: value}, {Name: "b", Value: nil}}, false)
	if err != nil || xrootd.AttrErr(set) != nil {
		t.Fatalf("set: %v %v", err, xrootd.AttrErr(set))
	}
	onDisk := make([]byte, 2000)
	if n, err := unix.Getxattr(filepath.Join(dir, "f"), "user.U.user.ecstore", onDisk); err != nil || !bytes.Equal(onDisk[:n], value) {
		t.Errorf("on disk: %d bytes, %v", n, err)
	}
	got, err := c.GetAttrs(ctx, "/f", "user.ecstore", "missing", "b")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[0].Value, value) || got[0].Err != nil || got[2].Err != nil || len(got[2].Value) != 0 {
		t.Errorf("get: %+v", got)
	}
	wantCode(t, "a missing attribute", got[1].Err, xrootd.ErrAttrNotFound)
	again, err := c.SetAttrs(ctx, "/f", []xrootd.Attr{{Name: "b", Value: []byte("new")}}, true)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "set-if-new of an existing attribute", again[0].Err, xrootd.ErrItExists)
	if del, err := c.DelAttrs(ctx, "/f", "user.ecstore", "missing"); err != nil {
		t.Fatal(err)
	} else {
		if del[0].Err != nil {
			t.Errorf("del: %v", del[0].Err)
		}
		wantCode(t, "del of a missing attribute", del[1].Err, xrootd.ErrAttrNotFound)
	}
	got, err = c.GetAttrs(ctx, "/nofile", "b")
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "an attribute of a missing file", got[0].Err, xrootd.ErrNotFound)
	got, err = c.GetAttrs(ctx, "/../etc/passwd", "b")
	if err == nil && got[0].Err == nil {
		t.Errorf("an attribute of a path outside the directory was read")
	}
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err = c.GetAttrs(ctx, "/fifo", "b")
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "an attribute of a FIFO", got[0].Err, xrootd.ErrNotFile)
}

// Extended attributes on an open file's handle: set on a file being
// written, made durable by its close (counted as a write, no fsync of
// their own); got over the wire on a file open for reading, which
// refuses a set.
func TestAttrsOnHandle(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	s, err := New(dir, Options{Fsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var syncs []string
	s.synced = func(what string) { syncs = append(syncs, what) }
	f, err := s.Open(ctx, "/h", xrootd.OpenOptions{Flags: xrootd.OpenNew})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.(xrootd.FileWriter).WriteAt(ctx, []byte("data"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.(xrootd.FileSyncer).Sync(ctx); err != nil {
		t.Fatal(err)
	}
	syncs = nil
	set, err := f.(xrootd.FileAttrKeeper).SetAttrs(ctx, []xrootd.Attr{{Name: "user.ecstore", Value: []byte("v=1")}}, false)
	if err != nil || xrootd.AttrErr(set) != nil {
		t.Fatalf("set on the open file: %v %v", err, xrootd.AttrErr(set))
	}
	if len(syncs) != 0 {
		t.Errorf("the set fsynced at once: %v", syncs)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(syncs, []string{"file"}) {
		t.Errorf("the close after a set fsynced %q, want the file", syncs)
	}
	buf := make([]byte, 16)
	if n, err := unix.Getxattr(filepath.Join(dir, "h"), "user.U.user.ecstore", buf); err != nil || string(buf[:n]) != "v=1" {
		t.Errorf("on disk: %q %v", buf[:max(n, 0)], err)
	}

	sdir, addr := serve(t, Options{Fsync: true})
	if err := os.WriteFile(filepath.Join(sdir, "h"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(sdir, "h"), "user.U.user.ecstore", []byte("v=2"), 0); err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr)
	r, err := c.Open(ctx, "/h", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	got, err := r.GetAttrs(ctx, "user.ecstore", "missing")
	if err != nil || string(got[0].Value) != "v=2" {
		t.Fatalf("get by handle: %+v %v", got, err)
	}
	wantCode(t, "a missing attribute by handle", got[1].Err, xrootd.ErrAttrNotFound)
	_, err = r.SetAttrs(ctx, []xrootd.Attr{{Name: "x", Value: []byte("y")}}, false)
	wantCode(t, "a set on a file open for reading", err, xrootd.ErrInvalidRequest)
}

// A listing with attributes (xrootd.AttrLister) describes every entry as
// kXR_dirlist with kXR_dstat does and carries each regular file's value
// of the attribute, read where kXR_fattr keeps it; symbolic links are not
// followed, and paths outside the directory are refused.
func TestListAttr(t *testing.T) {
	dir, addr := serve(t, Options{})
	c := dial(t, addr)
	ctx := testCtx(t)
	value := []byte("v=1&s=2")
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a", "b"} {
		if err := os.WriteFile(filepath.Join(dir, "d", f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if set, err := c.SetAttrs(ctx, "/d/a", []xrootd.Attr{{Name: "ecstore", Value: value}}, false); err != nil || xrootd.AttrErr(set) != nil {
		t.Fatalf("set: %v %v", err, xrootd.AttrErr(set))
	}
	if err := os.Mkdir(filepath.Join(dir, "d", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(dir, "d", "link")); err != nil {
		t.Fatal(err)
	}
	got, err := c.ListAttr(ctx, "/d", "ecstore")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := c.Dirlist(ctx, "/d", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(plain) || len(got) != 4 {
		t.Fatalf("ListAttr: %+v; Dirlist: %+v", got, plain)
	}
	stats := map[string]xrootd.FileInfo{}
	for _, fi := range plain {
		stats[fi.Name] = fi
	}
	for _, e := range got {
		want := map[string]string{"a": string(value)}[e.Name]
		if fi := stats[e.Name]; fi.Size != e.Size || fi.IsDir() != e.IsDir() || !fi.ModTime.Equal(e.ModTime) || fi.Flags != e.Flags {
			t.Errorf("%s: ListAttr says %+v, Dirlist %+v", e.Name, e.FileInfo, fi)
		}
		if e.HasValue != (want != "") || string(e.Value) != want {
			t.Errorf("%s: value %q (%v); want %q", e.Name, e.Value, e.HasValue, want)
		}
	}
	_, err = c.ListAttr(ctx, "/nothing", "ecstore")
	wantCode(t, "a listing of a missing directory", err, xrootd.ErrNotFound)
	_, err = c.ListAttr(ctx, "/d/a", "ecstore")
	if err == nil {
		t.Error("a listing of a file succeeded")
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	_, err = c.ListAttr(ctx, "/out", "ecstore")
	wantCode(t, "a listing through a link out of the directory", err, xrootd.ErrNotAuthorized)
	_, err = c.ListAttr(ctx, "/d", "")
	wantCode(t, "a listing without an attribute name", err, xrootd.ErrUnsupported)
}

// The open that reads small files whole (xrootd.WholeOpener) answers a
// file of at most the size asked for with its content and leaves it
// closed; a larger one (or one larger than the server sends whole) comes
// open, as kXR_open with kXR_retstat opens it. Directories, missing
// files, FIFOs and paths out of the directory fail as kXR_open fails.
func TestOpenWhole(t *testing.T) {
	dir, addr := serve(t, Options{})
	c := dial(t, addr)
	ctx := testCtx(t)
	small := bytes.Repeat([]byte("small archive "), 100)
	large := make([]byte, openWholeMax+1)
	for i := range large {
		large[i] = byte(i * 7)
	}
	for name, b := range map[string][]byte{"small": small, "large": large, "empty": nil} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, max := range []int64{int64(len(small)), openWholeMax} {
		content, f, err := c.OpenWhole(ctx, "/small", max)
		if err != nil || f != nil || !bytes.Equal(content, small) {
			t.Fatalf("OpenWhole(small, %d) = %d bytes, %v, %v; want the content", max, len(content), f, err)
		}
	}
	if content, f, err := c.OpenWhole(ctx, "/empty", 0); err != nil || f != nil || len(content) != 0 {
		t.Fatalf("OpenWhole(empty, 0) = %q, %v, %v; want no content", content, f, err)
	}
	for _, tc := range []struct {
		path string
		max  int64
		want []byte
	}{
		{"/small", int64(len(small)) - 1, small},
		{"/large", 2 * openWholeMax, large}, // beyond what the server sends whole
	} {
		content, f, err := c.OpenWhole(ctx, tc.path, tc.max)
		if err != nil || f == nil || content != nil {
			t.Fatalf("OpenWhole(%s, %d) = %d bytes, %v, %v; want an open file", tc.path, tc.max, len(content), f, err)
		}
		if f.OpenInfo().Size != int64(len(tc.want)) {
			t.Errorf("%s: open says size %d; want %d", tc.path, f.OpenInfo().Size, len(tc.want))
		}
		got := make([]byte, len(tc.want))
		if n, err := f.ReadAt(ctx, got, 0); n != len(got) || !bytes.Equal(got, tc.want) {
			t.Errorf("%s: read %d bytes (%v), same: %v", tc.path, n, err, bytes.Equal(got, tc.want))
		}
		if err := f.Close(ctx); err != nil {
			t.Errorf("%s: close: %v", tc.path, err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		code xrootd.ErrorCode
	}{
		{"/nothing", xrootd.ErrNotFound},
		{"/d", xrootd.ErrIsDirectory},
		{"/out/secret", xrootd.ErrNotAuthorized},
	} {
		_, _, err := c.OpenWhole(ctx, tc.path, openWholeMax)
		wantCode(t, "OpenWhole of "+tc.path, err, tc.code)
	}
	if _, _, err := c.OpenWhole(ctx, "/fifo", openWholeMax); err == nil {
		t.Error("OpenWhole of a FIFO succeeded")
	}
	if _, _, err := c.OpenWhole(ctx, "/small", -1); err == nil {
		t.Error("OpenWhole with a negative size succeeded")
	}
}

// The removal that says what it removed (xrootd.AttrRemover) removes a
// file or symbolic link as kXR_rm does, answering with the attribute
// asked for, and leaves directories and other files alone.
func TestRemoveWithAttr(t *testing.T) {
	dir, addr := serve(t, Options{Fsync: true})
	c := dial(t, addr)
	ctx := testCtx(t)
	put(t, c, "/d/f", []byte("x"))
	put(t, c, "/d/g", []byte("y"))
	if _, err := c.SetAttrs(ctx, "/d/f", []xrootd.Attr{{Name: "ecstore", Value: []byte("v=1&n=2")}}, false); err != nil {
		t.Fatal(err)
	}
	put(t, c, "/d/big", []byte("z"))
	long := strings.Repeat("v", 3000) // more than the first buffer
	if _, err := c.SetAttrs(ctx, "/d/big", []xrootd.Attr{{Name: "ecstore", Value: []byte(long)}}, false); err != nil {
		t.Fatal(err)
	}
	if err := c.Mkdir(ctx, "/d/e", 0o755, false); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("g", filepath.Join(dir, "d", "l")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "d", "p"), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		path, value string
		had         bool
	}{
		{"/d/f", "v=1&n=2", true},
		{"/d/big", long, true},
		{"/d/g", "", false},
		{"/d/l", "", false},
	} {
		value, had, err := c.RemoveWithAttr(ctx, tc.path, "ecstore")
		if err != nil || had != tc.had || string(value) != tc.value {
			t.Errorf("remove %s = %q, %v, %v; want %q, %v", tc.path, value, had, err, tc.value, tc.had)
		}
		if _, err := os.Lstat(filepath.Join(dir, tc.path)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after its removal: %v", tc.path, err)
		}
	}
	_, _, err := c.RemoveWithAttr(ctx, "/d/e", "ecstore")
	wantCode(t, "remove dir", err, xrootd.ErrIsDirectory)
	_, _, err = c.RemoveWithAttr(ctx, "/d/p", "ecstore")
	wantCode(t, "remove fifo", err, xrootd.ErrNotFile)
	for _, p := range []string{"d/e", "d/p"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); err != nil {
			t.Errorf("%s refused, yet: %v", p, err)
		}
	}
	_, _, err = c.RemoveWithAttr(ctx, "/d/missing", "ecstore")
	wantCode(t, "remove missing", err, xrootd.ErrNotFound)
	_, _, err = c.RemoveWithAttr(ctx, "/", "ecstore")
	wantCode(t, "remove /", err, xrootd.ErrNotAuthorized)
	_, _, err = c.RemoveWithAttr(ctx, "/d/e", "")
	wantCode(t, "remove naming no attribute", err, xrootd.ErrArgInvalid)
	if _, _, err = c.RemoveWithAttr(ctx, "/../x", "ecstore"); err == nil {
		t.Error("remove of /../x succeeded")
	}
}

// The server says whether its closes make files durable.
func TestConfigSaysWhetherCloseSyncs(t *testing.T) {
	for _, durable := range []bool{true, false} {
		_, addr := serve(t, Options{Fsync: durable})
		c := dial(t, addr)
		vals, err := c.QueryConfig(testCtx(t), xrootd.CloseSyncsKey)
		want := map[bool]string{true: "1", false: "0"}[durable]
		if err != nil || len(vals) != 1 || vals[0] != want {
			t.Errorf("fsync %v: %s = %q, %v; want %s", durable, xrootd.CloseSyncsKey, vals, err, want)
		}
	}
}

// TestPersistOnClose: the server announces kXR_supposc, and a file opened
// with kXR_posc whose client goes away before closing it is removed
// (large sequential writes staged in memory included), while one closed
// is kept, and a posc file replaced at its name since its open leaves the
// new file alone. Regression: kXR_posc was ignored, so an xrdcp --posc or
// an "ecstore cp" killed during an upload left its partial file.
func TestPersistOnClose(t *testing.T) {
	dir, addr := serve(t, Options{Fsync: true})
	ctx := testCtx(t)
	c := dial(t, addr)
	if c.Protocol().Flags&xrootd.FlagSupPOSC == 0 {
		t.Errorf("protocol flags %#x lack kXR_supposc", c.Protocol().Flags)
	}
	gone := func(name string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			_, err := os.Stat(filepath.Join(dir, name))
			if errors.Is(err, fs.ErrNotExist) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: kept after its client went away (%v)", name, err)
			}
		}
	}
	data := randomBytes(testRand(t), 3<<20+100)

	// Abandoned: removed.
	c1 := dial(t, addr)
	f, err := c1.Open(ctx, "/p/abandoned", xrootd.OpenNew|xrootd.OpenMkpath|xrootd.OpenPOSC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "p", "abandoned")); err != nil {
		t.Fatalf("the file being written is not there: %v", err)
	}
	c1.Close()
	gone("p/abandoned")

	// Closed: kept.
	f, err = c.Open(ctx, "/p/closed", xrootd.OpenNew|xrootd.OpenMkpath|xrootd.OpenPOSC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "p", "closed")); err != nil || !bytes.Equal(b, data) {
		t.Errorf("closed posc file: %d bytes, %v", len(b), err)
	}

	// Replaced at its name while open: the replacement stays.
	c3 := dial(t, addr)
	f, err = c3.Open(ctx, "/p/replaced", xrootd.OpenNew|xrootd.OpenMkpath|xrootd.OpenPOSC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ctx, []byte("partial"), 0); err != nil {
		t.Fatal(err)
	}
	put(t, c, "/p/other", []byte("whole"))
	if err := c.Mv(ctx, "/p/other", "/p/replaced"); err != nil {
		t.Fatal(err)
	}
	c3.Close()
	time.Sleep(200 * time.Millisecond) // the server notices the disconnect
	if b, err := os.ReadFile(filepath.Join(dir, "p", "replaced")); err != nil || string(b) != "whole" {
		t.Errorf("file moved onto an abandoned posc file's name: %q, %v", b, err)
	}
}
