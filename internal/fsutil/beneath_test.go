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
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "a/b"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "a/b/f"), []byte("in"), 0o644))
	must(os.WriteFile(filepath.Join(outside, "secret"), []byte("out"), 0o644))
	must(os.Symlink("b/f", filepath.Join(dir, "a/inner")))
	must(os.Symlink(outside, filepath.Join(dir, "abs")))
	must(os.Symlink("../../"+filepath.Base(outside), filepath.Join(dir, "rel")))
	b, err := NewBeneath(dir)
	must(err)
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
