package fsutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Beneath opens what lies under its directory, symbolic links inside it
// included, and refuses every path that leads out, as os.Root does.
func TestBeneath(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "a/b"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "a/b/f"), []byte("in"), 0o644))
	must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("out"), 0o644))
	must(t, os.Symlink("b/f", filepath.Join(dir, "a/inner")))
	must(t, os.Symlink(outside, filepath.Join(dir, "abs")))
	must(t, os.Symlink("../../"+filepath.Base(outside), filepath.Join(dir, "rel")))
	b, err := NewBeneath(dir)
	must(t, err)
	defer b.Close()

	open := func(rel string, flag int, perm os.FileMode) (*os.File, error) {
		t.Helper()
		f, done, err := b.Open(rel, flag, perm)
		if !done {
			t.Skip("no openat2 on this kernel: os.Root serves alone")
		}
		return f, err
	}
	for _, rel := range []string{"a/b/f", "a/inner"} {
		f, err := open(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			t.Fatalf("open %s: %v", rel, err)
		}
		buf := make([]byte, 8)
		n, _ := f.Read(buf)
		f.Close()
		if string(buf[:n]) != "in" {
			t.Errorf("open %s read %q", rel, buf[:n])
		}
	}
	for _, rel := range []string{"../" + filepath.Base(outside) + "/secret", "abs/secret", "rel/secret", "a/../../x"} {
		if f, err := open(rel, os.O_RDONLY, 0); !errors.Is(err, ErrEscapes) {
			if f != nil {
				f.Close()
			}
			t.Errorf("open %s: %v; want ErrEscapes", rel, err)
		}
	}
	if _, err := open("a/missing", os.O_RDONLY, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("open of a missing file: %v", err)
	}
	if _, err := open("a/b/f", os.O_RDONLY|syscall.O_DIRECTORY, 0); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("open of a file as a directory: %v", err)
	}
	f, err := open("a/new", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	f.Close()
	if fi, err := os.Stat(filepath.Join(dir, "a/new")); err != nil || fi.Mode().Perm()&^0o022 != 0o640&^0o022 {
		t.Errorf("created file: %v, %v", fi, err)
	}
	if _, err := open("a/new", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o640); !errors.Is(err, fs.ErrExist) {
		t.Errorf("exclusive create of an existing file: %v", err)
	}
	b.Close()
	if _, _, err := b.Open("a/b/f", os.O_RDONLY, 0); err == nil {
		t.Error("open after Close succeeded")
	}
}

// Remove takes away a file, or with dirs an empty directory, never
// anything outside the directory: a symbolic link as the last element is
// removed itself, and a parent outside is refused.
func TestBeneathRemove(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "a/empty"), 0o755))
	must(t, os.MkdirAll(filepath.Join(dir, "a/full"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "a/full/f"), nil, 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "top"), nil, 0o644))
	must(t, os.WriteFile(filepath.Join(outside, "secret"), nil, 0o644))
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "a/link")))
	must(t, os.Symlink(outside, filepath.Join(dir, "out")))
	root, err := os.OpenRoot(dir)
	must(t, err)
	defer root.Close()
	b, err := NewBeneath(dir)
	must(t, err)
	defer b.Close()
	for _, bb := range []*Beneath{b, nil} { // with openat2, and os.Root alone
		if bb == nil {
			must(t, os.WriteFile(filepath.Join(dir, "top"), nil, 0o644))
			must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "a/link")))
			must(t, os.MkdirAll(filepath.Join(dir, "a/empty"), 0o755))
		}
		must(t, bb.Remove(root, "top", false, true))
		must(t, bb.Remove(root, "a/link", false, true))
		if _, err := os.Stat(filepath.Join(outside, "secret")); err != nil {
			t.Fatalf("removing a link removed its target: %v", err)
		}
		if err := bb.Remove(root, "a/empty", false, false); !errors.Is(err, syscall.EISDIR) {
			t.Errorf("remove of a directory without dirs: %v; want EISDIR", err)
		}
		must(t, bb.Remove(root, "a/empty", true, false))
		if err := bb.Remove(root, "a/full", true, false); !errors.Is(err, syscall.ENOTEMPTY) {
			t.Errorf("remove of a full directory: %v; want ENOTEMPTY", err)
		}
		if err := bb.Remove(root, "out/secret", false, false); err == nil {
			t.Error("remove through a link to outside succeeded")
		}
		if err := bb.Remove(root, "a/missing", false, false); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("remove of a missing file: %v", err)
		}
		for _, p := range []string{"top", "a/link", "a/empty"} {
			if _, err := os.Lstat(filepath.Join(dir, p)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s still there: %v", p, err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "secret")); err != nil {
		t.Fatalf("the file outside is gone: %v", err)
	}
}

// Rename replaces a file, refuses a directory as the target (EEXIST, as
// os.Root.Rename), reports a missing source or target parent as not
// existing, and never reaches outside the directory.
func TestBeneathRename(t *testing.T) {
	for _, withOpenat2 := range []bool{true, false} {
		dir, outside := t.TempDir(), t.TempDir()
		must(t, os.MkdirAll(filepath.Join(dir, "a/d"), 0o755))
		must(t, os.MkdirAll(filepath.Join(dir, "b"), 0o755))
		for _, f := range []string{"a/f1", "a/f2", "a/f3"} {
			must(t, os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644))
		}
		must(t, os.Symlink(outside, filepath.Join(dir, "out")))
		root, err := os.OpenRoot(dir)
		must(t, err)
		defer root.Close()
		var b *Beneath
		if withOpenat2 {
			b, err = NewBeneath(dir)
			must(t, err)
			defer b.Close()
		}
		must(t, b.Rename(root, "a/f1", "a/f2", true)) // replaces f2
		if got, err := os.ReadFile(filepath.Join(dir, "a/f2")); err != nil || string(got) != "a/f1" {
			t.Errorf("after replacing: a/f2 holds %q, %v", got, err)
		}
		must(t, b.Rename(root, "a/f2", "b/g", true)) // across directories
		if _, err := os.Stat(filepath.Join(dir, "b/g")); err != nil {
			t.Errorf("b/g: %v", err)
		}
		if err := b.Rename(root, "a/f3", "a/d", false); !errors.Is(err, fs.ErrExist) {
			t.Errorf("rename onto a directory: %v; want EEXIST", err)
		}
		for _, c := range []struct{ from, to string }{{"a/missing", "a/x"}, {"a/f3", "nodir/x"}} {
			if err := b.Rename(root, c.from, c.to, false); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("rename %s -> %s: %v; want not exist", c.from, c.to, err)
			}
		}
		if err := b.Rename(root, "a/f3", "out/stolen", false); err == nil {
			t.Error("rename into a link to outside succeeded")
		}
		if ents, _ := os.ReadDir(outside); len(ents) != 0 {
			t.Errorf("the directory outside holds %d entries", len(ents))
		}
	}
}

// must stops the test on a setup error.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// IsDir tells directories from files and symbolic links (not followed),
// reports a missing path as not existing, and refuses to look outside.
func TestBeneathIsDir(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "a/b"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "a/f"), []byte("x"), 0o644))
	must(t, os.Symlink("b", filepath.Join(dir, "a/link")))
	must(t, os.Symlink(outside, filepath.Join(dir, "abs")))
	b, err := NewBeneath(dir)
	must(t, err)
	defer b.Close()
	for _, tc := range []struct {
		rel   string
		isDir bool
		err   error
	}{
		{"a", true, nil},
		{"a/b", true, nil},
		{"a/f", false, nil},
		{"a/link", false, nil},
		{"a/missing", false, fs.ErrNotExist},
		{"a/f/under", false, syscall.ENOTDIR},
		{"abs/x", false, ErrEscapes},
	} {
		isDir, done, err := b.IsDir(tc.rel)
		if !done {
			t.Skip("no openat2 on this kernel: os.Root serves alone")
		}
		if isDir != tc.isDir || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("IsDir(%s) = %v, %v; want %v, %v", tc.rel, isDir, err, tc.isDir, tc.err)
		}
	}
}
