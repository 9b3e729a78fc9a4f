package object

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/ecstore/ecstore/internal/layout"
)

// Regression (found by review): a small object (1+M) is readable from
// one archive, and nothing tied an archive to the path it is read at (a
// moved object's archives keep their first path): one node holding a
// newer object's archive at the path, copied or renamed there, made every
// read of the path return that other object's bytes, although the other
// nodes held the object's. Such a stray version yields to the one written
// for the path that more nodes hold.
func TestForeignArchiveOfASmallObject(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 4096}
	c := newCluster(t, 6, g)
	a := bytes.Repeat([]byte("A"), 1000)
	b := bytes.Repeat([]byte("B"), 1000)
	putHint(t, c.store, "/a", a, int64(len(a)))
	putHint(t, c.store, "/b", b, int64(len(b))) // newer version
	done := false
	for _, d := range c.dirs {
		src, dst := filepath.Join(d, "b"), filepath.Join(d, "a")
		if _, err := os.Stat(src); err != nil {
			continue
		}
		if _, err := os.Stat(dst); err != nil {
			continue
		}
		p, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, p, 0o644); err != nil {
			t.Fatal(err)
		}
		done = true
		break
	}
	if !done {
		t.Fatal("no node holds archives of both objects")
	}
	s, err := New(c.nodes, c.store.opts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := get(s, "/a")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, a) {
		t.Fatalf("read of /a returned %q..., want %q...", got[:8], a[:8])
	}
}
