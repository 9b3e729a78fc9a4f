// Package nodetest is a conformance suite for implementations of
// node.Node, in the manner of testing/fstest: a driver's tests call Run
// with a constructor, and Run checks the whole contract of package node
// (upload visibility and atomic replacement, ReadAt semantics, listing,
// removal, renaming, path validation, error sentinels, context
// cancellation, concurrency and, where kept, attributes).
//
// Run does not test durability across crashes, nor behaviour specific to
// one driver (such as symbolic links in a local directory); drivers test
// those themselves.
package nodetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/ecstore/ecstore/internal/node"
)

// Run tests the node contract on nodes made by newNode, which is called
// once per subtest and must return an empty node. The node is cleaned up
// by whatever newNode registers with t.Cleanup.
func Run(t *testing.T, newNode func(t *testing.T) node.Node) {
	tests := []struct {
		name string
		fn   func(t *testing.T, n node.Node)
	}{
		{"ID", testID},
		{"UploadVisibility", testUploadVisibility},
		{"Abort", testAbort},
		{"AbortAfterFailedCommit", testAbortAfterFailedCommit},
		{"Overwrite", testOverwrite},
		{"WriteAfterFinish", testWriteAfterFinish},
		{"ReadAt", testReadAt},
		{"ReadAtConcurrent", testReadAtConcurrent},
		{"StatList", testStatList},
		{"Remove", testRemove},
		{"Rename", testRename},
		{"Mkdir", testMkdir},
		{"BadPaths", testBadPaths},
		{"NotExist", testNotExist},
		{"WrongKind", testWrongKind},
		{"Canceled", testCanceled},
		{"ConcurrentUploads", testConcurrentUploads},
		{"Attrs", testAttrs},
		{"Space", testSpace},
		{"Debris", testDebris},
		{"DebrisCommit", testDebrisCommit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, newNode(t))
		})
	}
}

// put writes data to path through a complete upload.
func put(t *testing.T, n node.Node, path string, data []byte) {
	t.Helper()
	ctx := context.Background()
	u, err := n.Create(ctx, path)
	if err != nil {
		t.Fatalf("Create(%q): %v", path, err)
	}
	if err := u.Write(ctx, data); err != nil {
		t.Fatalf("Write(%q): %v", path, err)
	}
	if err := u.Finish(ctx); err != nil {
		t.Fatalf("Finish(%q): %v", path, err)
	}
	if err := u.Commit(ctx); err != nil {
		t.Fatalf("Commit(%q): %v", path, err)
	}
}

// get reads the whole file at path.
func get(t *testing.T, n node.Node, path string) []byte {
	t.Helper()
	ctx := context.Background()
	f, err := n.Open(ctx, path)
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	defer f.Close()
	buf := make([]byte, f.Size())
	m, err := f.ReadAt(ctx, buf, 0)
	if err != nil || m != len(buf) {
		t.Fatalf("ReadAt(%q, len %d, 0) = %d, %v; want %d, nil", path, len(buf), m, err, len(buf))
	}
	return buf
}

// pattern returns n bytes that differ at most offsets.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7+i/251) ^ seed
	}
	return b
}

// list returns the entries of dir by name.
func list(t *testing.T, n node.Node, dir string) map[string]node.FileInfo {
	t.Helper()
	fis, err := n.List(context.Background(), dir)
	if err != nil {
		t.Fatalf("List(%q): %v", dir, err)
	}
	m := make(map[string]node.FileInfo, len(fis))
	for _, fi := range fis {
		if _, dup := m[fi.Name]; dup {
			t.Errorf("List(%q): duplicate entry %q", dir, fi.Name)
		}
		m[fi.Name] = fi
	}
	return m
}

// names returns the sorted keys of a listing.
func names(m map[string]node.FileInfo) []string {
	return slices.Sorted(maps.Keys(m))
}

// temps returns the temporary names in a listing.
func temps(m map[string]node.FileInfo) []string {
	var out []string
	for name := range m {
		if node.IsTemp(name) {
			out = append(out, name)
		}
	}
	return out
}

// wantErr fails t unless err wraps target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: err = %v; want one wrapping %v", what, err, target)
	}
}

func testID(t *testing.T, n node.Node) {
	if n.ID() == "" {
		t.Error("ID() is empty")
	}
}

func testUploadVisibility(t *testing.T, n node.Node) {
	ctx := context.Background()
	const path = "/a/b/f"
	u, err := n.Create(ctx, path)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	notVisible := func(when string) {
		t.Helper()
		_, err := n.Stat(ctx, path)
		wantErr(t, "Stat "+when, err, node.ErrNotExist)
		_, err = n.Open(ctx, path)
		wantErr(t, "Open "+when, err, node.ErrNotExist)
		ents := list(t, n, "/a/b")
		if len(ents) != 1 {
			t.Fatalf("List %s: entries %v; want one temporary file", when, names(ents))
		}
		for name, fi := range ents {
			if !node.IsTemp(name) || fi.IsDir {
				t.Errorf("List %s: entry %q (dir %v) is not a temporary file", when, name, fi.IsDir)
			}
			if target, ok := node.TempTarget(name); !ok || target != "f" {
				t.Errorf("TempTarget(%q) = %q, %v; want \"f\", true", name, target, ok)
			}
		}
	}
	notVisible("after Create")
	for _, p := range []string{"hello", ", ", "world"} {
		if err := u.Write(ctx, []byte(p)); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	if err := u.Write(ctx, nil); err != nil {
		t.Fatalf("Write(nil): %v", err)
	}
	notVisible("after Write")
	if err := u.Finish(ctx); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	notVisible("after Finish")
	if err := u.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if got := get(t, n, path); string(got) != "hello, world" {
		t.Errorf("content = %q; want %q", got, "hello, world")
	}
	fi, err := n.Stat(ctx, path)
	if err != nil {
		t.Fatalf("Stat: %v", err)
	}
	if fi.Name != "f" || fi.Size != 12 || fi.IsDir || fi.ModTime.IsZero() {
		t.Errorf("Stat = %+v; want name f, size 12, a file with a mod time", fi)
	}
	if ents := list(t, n, "/a/b"); !slices.Equal(names(ents), []string{"f"}) {
		t.Errorf("List after Commit = %v; want [f]", names(ents))
	}
	if err := u.Abort(ctx); err != nil {
		t.Errorf("Abort after Commit: %v", err)
	}
	if got := get(t, n, path); string(got) != "hello, world" {
		t.Errorf("Abort after Commit changed the file to %q", got)
	}

	// An empty file.
	put(t, n, "/empty", nil)
	if fi, err := n.Stat(ctx, "/empty"); err != nil || fi.Size != 0 {
		t.Errorf("Stat(/empty) = %+v, %v; want size 0", fi, err)
	}
}

func testAbort(t *testing.T, n node.Node) {
	ctx := context.Background()
	for _, stage := range []string{"created", "written", "finished"} {
		t.Run(stage, func(t *testing.T) {
			path := "/d/" + stage
			u, err := n.Create(ctx, path)
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			if stage != "created" {
				if err := u.Write(ctx, pattern(1000, 1)); err != nil {
					t.Fatalf("Write: %v", err)
				}
			}
			if stage == "finished" {
				if err := u.Finish(ctx); err != nil {
					t.Fatalf("Finish: %v", err)
				}
			}
			if err := u.Abort(ctx); err != nil {
				t.Fatalf("Abort: %v", err)
			}
			if err := u.Abort(ctx); err != nil {
				t.Errorf("second Abort: %v", err)
			}
			if ents := list(t, n, "/d"); len(ents) != 0 {
				t.Errorf("List after Abort = %v; want empty", names(ents))
			}
			_, err = n.Stat(ctx, path)
			wantErr(t, "Stat after Abort", err, node.ErrNotExist)
			if err := u.Commit(ctx); err == nil {
				t.Error("Commit after Abort succeeded")
			}
			if ents := list(t, n, "/d"); len(ents) != 0 {
				t.Errorf("List after Commit after Abort = %v; want empty", names(ents))
			}
		})
	}
}

func testAbortAfterFailedCommit(t *testing.T, n node.Node) {
	ctx := context.Background()
	u, err := n.Create(ctx, "/d/f")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := u.Write(ctx, []byte("data")); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := u.Finish(ctx); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	// A directory appears at the path meanwhile: Commit must not replace it.
	if err := n.Mkdir(ctx, "/d/f/sub"); err != nil {
		t.Fatalf("Mkdir: %v", err)
	}
	if err := u.Commit(ctx); err == nil {
		t.Fatal("Commit onto a non-empty directory succeeded")
	}
	if err := u.Abort(ctx); err != nil {
		t.Fatalf("Abort after failed Commit: %v", err)
	}
	if ents := list(t, n, "/d"); !slices.Equal(names(ents), []string{"f"}) || !ents["f"].IsDir {
		t.Errorf("List(/d) after Abort = %v; want only the directory f", names(ents))
	}
	if ents := list(t, n, "/d/f"); !slices.Equal(names(ents), []string{"sub"}) {
		t.Errorf("List(/d/f) = %v; want [sub]", names(ents))
	}
}

func testOverwrite(t *testing.T, n node.Node) {
	ctx := context.Background()
	old, new := pattern(3000, 1), pattern(1234, 2)
	put(t, n, "/o", old)
	u, err := n.Create(ctx, "/o")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := u.Write(ctx, new); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := u.Finish(ctx); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if got := get(t, n, "/o"); !bytes.Equal(got, old) {
		t.Error("the old content changed before Commit")
	}
	if fi, err := n.Stat(ctx, "/o"); err != nil || fi.Size != int64(len(old)) {
		t.Errorf("Stat before Commit = %+v, %v; want size %d", fi, err, len(old))
	}
	if err := u.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if got := get(t, n, "/o"); !bytes.Equal(got, new) {
		t.Error("the content after Commit is not the new one")
	}
	if ents := list(t, n, "/"); !slices.Equal(names(ents), []string{"o"}) || ents["o"].Size != int64(len(new)) {
		t.Errorf("List(/) = %v (size %d); want [o] of size %d", names(ents), ents["o"].Size, len(new))
	}
}

func testWriteAfterFinish(t *testing.T, n node.Node) {
	ctx := context.Background()
	u, err := n.Create(ctx, "/f")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer u.Abort(ctx)
	if err := u.Write(ctx, []byte("x")); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := u.Finish(ctx); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if err := u.Write(ctx, []byte("y")); err == nil {
		t.Error("Write after Finish succeeded")
	}
}

func testReadAt(t *testing.T, n node.Node) {
	ctx := context.Background()
	const size = 10000
	data := pattern(size, 3)
	put(t, n, "/r", data)
	put(t, n, "/zero", nil)
	f, err := n.Open(ctx, "/r")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer f.Close()
	if f.Size() != size {
		t.Errorf("Size() = %d; want %d", f.Size(), size)
	}
	tests := []struct {
		name    string
		off     int64
		len     int
		wantN   int
		wantEOF bool
	}{
		{"whole", 0, size, size, false},
		{"head", 0, 100, 100, false},
		{"middle", 4321, 1000, 1000, false},
		{"to end", size - 10, 10, 10, false},
		{"empty buffer", 5, 0, 0, false},
		{"past end", size - 10, 20, 10, true},
		{"at end", size, 1, 0, true},
		{"beyond end", size + 100, 1, 0, true},
		{"longer than file", 0, size + 1, size, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Guard bytes after the part that may be filled.
			buf := bytes.Repeat([]byte{0xa5}, tt.len+8)
			m, err := f.ReadAt(ctx, buf[:tt.len], tt.off)
			if m != tt.wantN {
				t.Errorf("n = %d; want %d", m, tt.wantN)
			}
			if tt.wantEOF && err != io.EOF {
				t.Errorf("err = %v; want io.EOF", err)
			}
			if !tt.wantEOF && err != nil {
				t.Errorf("err = %v; want nil", err)
			}
			if m > 0 && m <= tt.len && !bytes.Equal(buf[:m], data[tt.off:tt.off+int64(m)]) {
				t.Error("wrong bytes")
			}
			if !bytes.Equal(buf[tt.len:], bytes.Repeat([]byte{0xa5}, 8)) {
				t.Error("ReadAt wrote past the end of its buffer")
			}
		})
	}
	if _, err := f.ReadAt(ctx, make([]byte, 1), -1); err == nil || err == io.EOF {
		t.Errorf("ReadAt at offset -1: err = %v; want a non-EOF error", err)
	}

	z, err := n.Open(ctx, "/zero")
	if err != nil {
		t.Fatalf("Open(/zero): %v", err)
	}
	defer z.Close()
	if z.Size() != 0 {
		t.Errorf("Size() of an empty file = %d", z.Size())
	}
	if m, err := z.ReadAt(ctx, make([]byte, 1), 0); m != 0 || err != io.EOF {
		t.Errorf("ReadAt of an empty file = %d, %v; want 0, io.EOF", m, err)
	}
}

func testReadAtConcurrent(t *testing.T, n node.Node) {
	ctx := context.Background()
	const size = 1 << 16
	data := pattern(size, 4)
	put(t, n, "/c", data)
	f, err := n.Open(ctx, "/c")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer f.Close()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			buf := make([]byte, 1000)
			for i := range 20 {
				off := int64((g*20+i)*997) % (size - 1000)
				m, err := f.ReadAt(ctx, buf, off)
				if err != nil || m != len(buf) || !bytes.Equal(buf, data[off:off+1000]) {
					t.Errorf("ReadAt(off %d) = %d, %v or wrong bytes", off, m, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func testStatList(t *testing.T, n node.Node) {
	ctx := context.Background()
	put(t, n, "/s/f1", pattern(10, 1))
	put(t, n, "/s/f2", pattern(2000, 2))
	put(t, n, "/s/d/g", pattern(5, 3))
	if err := n.Mkdir(ctx, "/s/empty"); err != nil {
		t.Fatalf("Mkdir: %v", err)
	}

	ents := list(t, n, "/s")
	if want := []string{"d", "empty", "f1", "f2"}; !slices.Equal(names(ents), want) {
		t.Fatalf("List(/s) = %v; want %v", names(ents), want)
	}
	for name, want := range map[string]struct {
		dir  bool
		size int64
	}{"f1": {false, 10}, "f2": {false, 2000}, "d": {true, -1}, "empty": {true, -1}} {
		fi := ents[name]
		if fi.IsDir != want.dir || !want.dir && fi.Size != want.size {
			t.Errorf("List entry %q = %+v; want dir %v size %d", name, fi, want.dir, want.size)
		}
		if fi.ModTime.IsZero() {
			t.Errorf("List entry %q has no mod time", name)
		}
		st, err := n.Stat(ctx, "/s/"+name)
		if err != nil {
			t.Errorf("Stat(%q): %v", name, err)
			continue
		}
		if st.Name != name || st.IsDir != want.dir || !want.dir && st.Size != want.size {
			t.Errorf("Stat(%q) = %+v; want dir %v size %d", name, st, want.dir, want.size)
		}
	}
	if ents := list(t, n, "/s/empty"); len(ents) != 0 {
		t.Errorf("List(/s/empty) = %v; want empty", names(ents))
	}
	if ents := list(t, n, "/"); !slices.Equal(names(ents), []string{"s"}) || !ents["s"].IsDir {
		t.Errorf("List(/) = %v; want the directory s", names(ents))
	}
	if fi, err := n.Stat(ctx, "/"); err != nil || !fi.IsDir {
		t.Errorf("Stat(/) = %+v, %v; want a directory", fi, err)
	}
}

func testRemove(t *testing.T, n node.Node) {
	ctx := context.Background()
	put(t, n, "/x/f", []byte("f"))
	put(t, n, "/x/sub/g", []byte("g"))
	if err := n.Mkdir(ctx, "/x/empty"); err != nil {
		t.Fatalf("Mkdir: %v", err)
	}

	if err := n.Remove(ctx, "/x/f"); err != nil {
		t.Errorf("Remove(file): %v", err)
	}
	_, err := n.Stat(ctx, "/x/f")
	wantErr(t, "Stat of a removed file", err, node.ErrNotExist)

	if err := n.Remove(ctx, "/x/empty"); err != nil {
		t.Errorf("Remove(empty dir): %v", err)
	}
	_, err = n.Stat(ctx, "/x/empty")
	wantErr(t, "Stat of a removed dir", err, node.ErrNotExist)

	wantErr(t, "Remove(non-empty dir)", n.Remove(ctx, "/x/sub"), node.ErrNotEmpty)
	if got := get(t, n, "/x/sub/g"); string(got) != "g" {
		t.Errorf("Remove of a non-empty dir changed its file to %q", got)
	}
	wantErr(t, "Remove(missing)", n.Remove(ctx, "/x/missing"), node.ErrNotExist)
	wantErr(t, "Remove(removed)", n.Remove(ctx, "/x/f"), node.ErrNotExist)
	if err := n.Remove(ctx, "/"); err == nil {
		t.Error("Remove(/) succeeded")
	}
}

func testRename(t *testing.T, n node.Node) {
	ctx := context.Background()
	t.Run("file into new dirs", func(t *testing.T) {
		put(t, n, "/r1/f", []byte("one"))
		if err := n.Rename(ctx, "/r1/f", "/r2/deep/er/g"); err != nil {
			t.Fatalf("Rename: %v", err)
		}
		if got := get(t, n, "/r2/deep/er/g"); string(got) != "one" {
			t.Errorf("renamed content = %q", got)
		}
		_, err := n.Stat(ctx, "/r1/f")
		wantErr(t, "Stat(old path)", err, node.ErrNotExist)
	})
	t.Run("replace file", func(t *testing.T) {
		put(t, n, "/a", []byte("a"))
		put(t, n, "/b", []byte("bbb"))
		if err := n.Rename(ctx, "/a", "/b"); err != nil {
			t.Fatalf("Rename: %v", err)
		}
		if got := get(t, n, "/b"); string(got) != "a" {
			t.Errorf("replaced content = %q; want %q", got, "a")
		}
		_, err := n.Stat(ctx, "/a")
		wantErr(t, "Stat(old path)", err, node.ErrNotExist)
	})
	t.Run("directory", func(t *testing.T) {
		put(t, n, "/dir1/x/f", []byte("f"))
		if err := n.Rename(ctx, "/dir1/x", "/dir2/y"); err != nil {
			t.Fatalf("Rename: %v", err)
		}
		if got := get(t, n, "/dir2/y/f"); string(got) != "f" {
			t.Errorf("content in renamed dir = %q", got)
		}
		if ents := list(t, n, "/dir1"); len(ents) != 0 {
			t.Errorf("List(/dir1) = %v; want empty", names(ents))
		}
	})
	t.Run("missing", func(t *testing.T) {
		wantErr(t, "Rename(missing)", n.Rename(ctx, "/nope", "/m/x"), node.ErrNotExist)
	})
}

func testMkdir(t *testing.T, n node.Node) {
	ctx := context.Background()
	for i := range 2 {
		if err := n.Mkdir(ctx, "/m/n/o"); err != nil {
			t.Errorf("Mkdir #%d: %v", i, err)
		}
	}
	for _, p := range []string{"/m", "/m/n", "/m/n/o"} {
		if fi, err := n.Stat(ctx, p); err != nil || !fi.IsDir {
			t.Errorf("Stat(%q) = %+v, %v; want a directory", p, fi, err)
		}
	}
	if err := n.Mkdir(ctx, "/"); err != nil {
		t.Errorf("Mkdir(/): %v", err)
	}
	put(t, n, "/m/file", []byte("x"))
	for _, p := range []string{"/m/file", "/m/file/sub"} {
		err := n.Mkdir(ctx, p)
		if !errors.Is(err, node.ErrNotDir) && !errors.Is(err, node.ErrExist) {
			t.Errorf("Mkdir(%q) over a file: err = %v; want ErrNotDir or ErrExist", p, err)
		}
	}
}

// badPaths are rejected by every operation.
var badPaths = []string{
	"", "a", "a/b", "../x", "/a/../b", "/./a", "/a/", "/a//b", "//", "/x\x00",
	"/x\ny", "/a/..", "/" + string(bytes.Repeat([]byte{'n'}, node.MaxNameLen+1)),
	"/d/" + node.TempName("f", "x") + "/g",
}

func testBadPaths(t *testing.T, n node.Node) {
	ctx := context.Background()
	put(t, n, "/ok", []byte("ok"))
	for _, p := range badPaths {
		t.Run(fmt.Sprintf("%q", p), func(t *testing.T) {
			_, err := n.Create(ctx, p)
			wantErr(t, "Create", err, node.ErrPath)
			_, err = n.Open(ctx, p)
			wantErr(t, "Open", err, node.ErrPath)
			_, err = n.Stat(ctx, p)
			wantErr(t, "Stat", err, node.ErrPath)
			_, err = n.List(ctx, p)
			wantErr(t, "List", err, node.ErrPath)
			wantErr(t, "Remove", n.Remove(ctx, p), node.ErrPath)
			wantErr(t, "Rename from", n.Rename(ctx, p, "/new"), node.ErrPath)
			wantErr(t, "Rename to", n.Rename(ctx, "/ok", p), node.ErrPath)
			wantErr(t, "Mkdir", n.Mkdir(ctx, p), node.ErrPath)
		})
	}
	// A temporary name as the last element reaches debris (Stat, Open,
	// Remove, the source of Rename) but can never be created, listed into
	// or renamed to.
	tmp := "/" + node.TempName("f", "123")
	_, err := n.Create(ctx, tmp)
	wantErr(t, "Create temp name", err, node.ErrPath)
	wantErr(t, "Mkdir temp name", n.Mkdir(ctx, tmp), node.ErrPath)
	wantErr(t, "Rename to temp name", n.Rename(ctx, "/ok", tmp), node.ErrPath)
	_, err = n.Stat(ctx, tmp)
	wantErr(t, "Stat missing temp name", err, node.ErrNotExist)
	wantErr(t, "Remove missing temp name", n.Remove(ctx, tmp), node.ErrNotExist)
	if got := get(t, n, "/ok"); string(got) != "ok" {
		t.Errorf("/ok changed to %q", got)
	}
	if ents := list(t, n, "/"); !slices.Equal(names(ents), []string{"ok"}) {
		t.Errorf("List(/) = %v; want [ok]", names(ents))
	}
}

func testNotExist(t *testing.T, n node.Node) {
	ctx := context.Background()
	put(t, n, "/here/f", []byte("x"))
	for _, p := range []string{"/missing", "/here/missing", "/nodir/f"} {
		_, err := n.Open(ctx, p)
		wantErr(t, "Open("+p+")", err, node.ErrNotExist)
		_, err = n.Stat(ctx, p)
		wantErr(t, "Stat("+p+")", err, node.ErrNotExist)
		_, err = n.List(ctx, p)
		wantErr(t, "List("+p+")", err, node.ErrNotExist)
		wantErr(t, "Remove("+p+")", n.Remove(ctx, p), node.ErrNotExist)
	}
	_, err := n.Open(ctx, "/missing")
	wantErr(t, "Open(/missing)", err, fs.ErrNotExist)
}

func testWrongKind(t *testing.T, n node.Node) {
	ctx := context.Background()
	put(t, n, "/dir/file", []byte("x"))
	_, err := n.Open(ctx, "/dir")
	wantErr(t, "Open(dir)", err, node.ErrIsDir)
	_, err = n.List(ctx, "/dir/file")
	wantErr(t, "List(file)", err, node.ErrNotDir)
	_, err = n.Create(ctx, "/dir")
	wantErr(t, "Create(dir)", err, node.ErrIsDir)
	_, err = n.Create(ctx, "/dir/file/x")
	wantErr(t, "Create(under a file)", err, node.ErrNotDir)
	_, err = n.Create(ctx, "/")
	if err == nil {
		t.Error("Create(/) succeeded")
	}
}

func testCanceled(t *testing.T, n node.Node) {
	bg := context.Background()
	put(t, n, "/f", []byte("data"))
	u, err := n.Create(bg, "/g")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer u.Abort(bg)
	f, err := n.Open(bg, "/f")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer f.Close()

	ctx, cancel := context.WithCancel(bg)
	cancel()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a canceled context: err = %v; want one wrapping context.Canceled", what, err)
		}
	}
	_, err = n.Create(ctx, "/h")
	check("Create", err)
	_, err = n.Open(ctx, "/f")
	check("Open", err)
	_, err = n.Stat(ctx, "/f")
	check("Stat", err)
	_, err = n.List(ctx, "/")
	check("List", err)
	check("Remove", n.Remove(ctx, "/f"))
	check("Rename", n.Rename(ctx, "/f", "/f2"))
	check("Mkdir", n.Mkdir(ctx, "/d"))
	_, err = n.Space(ctx)
	check("Space", err)
	_, err = f.ReadAt(ctx, make([]byte, 4), 0)
	check("ReadAt", err)
	check("Write", u.Write(ctx, []byte("x")))

	// Nothing happened.
	if got := get(t, n, "/f"); string(got) != "data" {
		t.Errorf("/f = %q", got)
	}
	for _, p := range []string{"/h", "/f2", "/d"} {
		_, err := n.Stat(bg, p)
		wantErr(t, "Stat("+p+")", err, node.ErrNotExist)
	}
}

func testConcurrentUploads(t *testing.T, n node.Node) {
	ctx := context.Background()
	const workers = 8
	paths := func(i int) []string {
		return []string{fmt.Sprintf("/same/f%d", i), fmt.Sprintf("/own%d/sub/f", i)}
	}
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			for j, p := range paths(i) {
				u, err := n.Create(ctx, p)
				if err != nil {
					t.Errorf("Create(%q): %v", p, err)
					return
				}
				for k := range 4 {
					if err := u.Write(ctx, pattern(3000, byte(i*16+j*4+k))); err != nil {
						t.Errorf("Write(%q): %v", p, err)
						u.Abort(ctx)
						return
					}
				}
				if err := u.Finish(ctx); err != nil {
					t.Errorf("Finish(%q): %v", p, err)
					u.Abort(ctx)
					return
				}
				if err := u.Commit(ctx); err != nil {
					t.Errorf("Commit(%q): %v", p, err)
					u.Abort(ctx)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i := range workers {
		for j, p := range paths(i) {
			var want []byte
			for k := range 4 {
				want = append(want, pattern(3000, byte(i*16+j*4+k))...)
			}
			if got := get(t, n, p); !bytes.Equal(got, want) {
				t.Errorf("%s: wrong content", p)
			}
		}
	}
	if ents := list(t, n, "/same"); len(ents) != workers || len(temps(ents)) != 0 {
		t.Errorf("List(/same) = %v; want %d files and no temporary ones", names(ents), workers)
	}
}

func testAttrs(t *testing.T, n node.Node) {
	ctx := context.Background()
	u, err := n.Create(ctx, "/at/f")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer u.Abort(ctx)
	a, ok := u.(node.Attributes)
	if !ok {
		t.Skip("uploads do not implement node.Attributes")
	}
	want := map[string]string{"size": "12345", "version": "1700000000-abcd", "crc32c": "0a1b2c3d"}
	if err := a.SetAttrs(ctx, want); err != nil {
		t.Fatalf("SetAttrs: %v", err)
	}
	if err := u.Write(ctx, []byte("payload")); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := u.Finish(ctx); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if err := a.SetAttrs(ctx, map[string]string{"late": "after finish"}); err != nil {
		t.Fatalf("SetAttrs after Finish: %v", err)
	}
	if err := u.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	want["late"] = "after finish"
	fi, err := n.Stat(ctx, "/at/f")
	if err != nil {
		t.Fatalf("Stat: %v", err)
	}
	got := attrsOf(t, n, "/at/f")
	if len(got) == 0 {
		t.Skip("the node keeps no attributes (unsupported by its storage)")
	}
	if !maps.Equal(got, want) {
		t.Errorf("attrs = %v; want %v", got, want)
	}
	// Stat and List report them where they read them cheaply.
	if len(fi.Attrs) > 0 && !maps.Equal(fi.Attrs, want) {
		t.Errorf("Stat attrs = %v; want %v", fi.Attrs, want)
	}
	ents := list(t, n, "/at")
	if got := ents["f"].Attrs; len(fi.Attrs) > 0 && !maps.Equal(got, want) {
		t.Errorf("List attrs = %v; want %v", got, want)
	}
	if a, ok := n.(node.AttrReader); ok {
		if _, err := a.ReadAttrs(ctx, "/at/missing"); !errors.Is(err, node.ErrNotExist) {
			t.Errorf("ReadAttrs of a missing file: %v; want ErrNotExist", err)
		}
	}
	if err := a.SetAttrs(ctx, map[string]string{"x": "y"}); err == nil {
		t.Error("SetAttrs after Commit succeeded")
	}
	// Attributes survive a rename.
	if err := n.Rename(ctx, "/at/f", "/at/g"); err != nil {
		t.Fatalf("Rename: %v", err)
	}
	if got := attrsOf(t, n, "/at/g"); !maps.Equal(got, want) {
		t.Errorf("attrs after Rename = %v; want %v", got, want)
	}
	// Files without attributes report none; directories report none.
	put(t, n, "/at/plain", []byte("x"))
	ents = list(t, n, "/")
	if len(ents["at"].Attrs) != 0 {
		t.Errorf("directory attrs = %v; want none", ents["at"].Attrs)
	}
	if got := attrsOf(t, n, "/at/plain"); len(got) != 0 {
		t.Errorf("attrs of /at/plain = %v; want none", got)
	}
}

// attrsOf returns the attributes of the file at path: by
// node.AttrReader, or else as Stat reports them.
func attrsOf(t *testing.T, n node.Node, path string) map[string]string {
	t.Helper()
	ctx := context.Background()
	if a, ok := n.(node.AttrReader); ok {
		attrs, err := a.ReadAttrs(ctx, path)
		if err != nil && !errors.Is(err, node.ErrNoAttrs) {
			t.Fatalf("ReadAttrs(%s): %v", path, err)
		}
		return attrs
	}
	fi, err := n.Stat(ctx, path)
	if err != nil {
		t.Fatalf("Stat(%s): %v", path, err)
	}
	return fi.Attrs
}

func testSpace(t *testing.T, n node.Node) {
	s, err := n.Space(context.Background())
	if err != nil {
		t.Fatalf("Space: %v", err)
	}
	if s.Total <= 0 || s.Free < 0 || s.Free > s.Total {
		t.Errorf("Space = %+v; want 0 <= Free <= Total, Total > 0", s)
	}
}

// testDebris checks that the temporary file of an abandoned upload is
// listed, can be stat'ed and opened, and can be removed by its name.
func testDebris(t *testing.T, n node.Node) {
	ctx := context.Background()
	up, err := n.Create(ctx, "/deb/f")
	if err != nil {
		t.Fatal(err)
	}
	if err := up.Write(ctx, []byte("partial")); err != nil {
		t.Fatal(err)
	}
	// Abandoned: neither committed nor aborted, as after a crash.
	var tmp string
	for _, fi := range list(t, n, "/deb") {
		if node.IsTemp(fi.Name) {
			tmp = fi.Name
		}
	}
	if tmp == "" {
		t.Fatal("abandoned upload's temporary file not listed")
	}
	if target, ok := node.TempTarget(tmp); !ok || target != "f" {
		t.Errorf("TempTarget(%q) = %q, %v; want f", tmp, target, ok)
	}
	p := "/deb/" + tmp
	if _, err := n.Stat(ctx, p); err != nil {
		t.Errorf("Stat debris: %v", err)
	}
	if err := n.Remove(ctx, p); err != nil {
		t.Fatalf("Remove debris: %v", err)
	}
	if ents := list(t, n, "/deb"); len(ents) != 0 {
		t.Errorf("List after removing debris = %v; want empty", names(ents))
	}
	_ = up.Abort(ctx)
}

// testDebrisCommit checks that the finished temporary file of an upload
// whose writer died can be renamed into place by another party, and that
// the writer's Abort afterwards does not touch the committed file.
func testDebrisCommit(t *testing.T, n node.Node) {
	ctx := context.Background()
	up, err := n.Create(ctx, "/debc/f")
	if err != nil {
		t.Fatal(err)
	}
	if err := up.Write(ctx, []byte("finished")); err != nil {
		t.Fatal(err)
	}
	if err := up.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	var tmp string
	for _, fi := range list(t, n, "/debc") {
		if node.IsTemp(fi.Name) {
			tmp = "/debc/" + fi.Name
		}
	}
	if tmp == "" {
		t.Fatal("finished upload's temporary file not listed")
	}
	if err := n.Rename(ctx, tmp, "/debc/f"); err != nil {
		t.Fatalf("Rename of a finished temporary file into place: %v", err)
	}
	wantErr(t, "Rename of a temporary file already renamed", n.Rename(ctx, tmp, "/debc/f"), node.ErrNotExist)
	if err := up.Commit(ctx); err == nil {
		t.Error("Commit of an upload whose temporary file was renamed away succeeded")
	}
	_ = up.Abort(ctx)
	if got := get(t, n, "/debc/f"); string(got) != "finished" {
		t.Errorf("/debc/f = %q after the rename and the writer's abort; want %q", got, "finished")
	}
	if ents := list(t, n, "/debc"); !slices.Equal(names(ents), []string{"f"}) {
		t.Errorf("List(/debc) = %v; want [f]", names(ents))
	}
}
