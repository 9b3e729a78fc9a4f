package object

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ecstore/ecstore/internal/layout"
)

// Regression: user metadata past what the archive format holds was
// found only at Close, once the whole body had been sent to every node
// (an S3 PUT or an xrdcp of gigabytes with oversized metadata sent them
// all for nothing). Create now refuses it with ErrMetadataTooLarge
// before any archive is opened; metadata that fits is still stored.
func TestMetadataTooLargeFailsAtCreate(t *testing.T) {
	c := newCluster(t, 6, layout.Geometry{K: 4, M: 2, ChunkSize: 64})
	ctx := context.Background()
	files := func() (n int) {
		for _, d := range c.dirs {
			filepath.WalkDir(d, func(_ string, e fs.DirEntry, err error) error {
				if err == nil && !e.IsDir() {
					n++
				}
				return nil
			})
		}
		return n
	}
	before := files()
	_, err := c.store.Create(ctx, "/big", &CreateOptions{User: map[string]string{"x": strings.Repeat("x", 1<<20)}})
	if !errors.Is(err, ErrMetadataTooLarge) {
		t.Fatalf("Create with 1 MiB of user metadata: %v, want ErrMetadataTooLarge", err)
	}
	if n := files(); n != before {
		t.Errorf("the refused Create left %d files on the nodes", n-before)
	}
	// Near the limit, what fits is stored.
	user := map[string]string{"x": strings.Repeat("x", 1<<20-4096)}
	w, err := c.store.Create(ctx, "/fits", &CreateOptions{User: user})
	if err != nil {
		t.Fatalf("Create with %d bytes of user metadata: %v", len(user["x"]), err)
	}
	if _, err := w.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if info, err := c.store.Stat(ctx, "/fits"); err != nil || len(info.User["x"]) != len(user["x"]) {
		t.Fatalf("stat: %v", err)
	}
}
