package main

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ecstore/ecstore/internal/dataserver"
)

// nodeURL serves a fresh directory with an in-process `ecstore node`
// and returns its root:// prefix and the directory.
func nodeURL(t *testing.T) (url, dir string) {
	t.Helper()
	dir = t.TempDir()
	fsys, err := dataserver.New(dir, dataserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return serveRoot(t, fsys, fsys.Close), dir
}

// treeFiles lists the files under dir, relative to it.
func treeFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, rel)
		}
		return nil
	})
	return files
}

// Regression: an upload that cp abandoned (its source changed size, or
// Ctrl-C) to a plain data server (an `ecstore node`, or xrootd without
// persist-on-close) left the partial file at DST, where only an ecstore
// gateway showed nothing. cp now uploads to such a server under a
// temporary name and renames it to DST only when the upload is
// complete, and removes it when it abandons the upload: DST never holds
// a partial file and nothing is left. (test/interop does the same
// against a real xrootd.)
func TestCpAbandonedUploadLeavesNothing(t *testing.T) {
	url, dir := nodeURL(t)
	t.Run("source grew", func(t *testing.T) {
		r := ecstore(t, nil, "cp", "/proc/self/status", url+"/up/grown")
		if r.code != exitError || !strings.Contains(r.stderr, "grew while it was read") {
			t.Errorf("exit %d, stderr %q", r.code, r.stderr)
		}
		if files := treeFiles(t, dir); len(files) != 0 {
			t.Errorf("the abandoned upload left %v", files)
		}
	})
	t.Run("interrupted", func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(context.Background())
		src := &blockingReader{n: 20 << 20, reached: make(chan struct{}), release: make(chan struct{})}
		defer close(src.release)
		var during []string
		go func() {
			<-src.reached
			during = treeFiles(t, dir)
			cancel(interrupt{syscall.SIGINT})
		}()
		r := ecstoreCtx(ctx, t, src, "cp", "-", url+"/up/interrupted")
		if r.code != 130 || r.stderr != "ecstore: cp: interrupted\n" {
			t.Errorf("exit %d, stderr %q", r.code, r.stderr)
		}
		for _, f := range during {
			if f == filepath.Join("up", "interrupted") {
				t.Errorf("DST existed during the upload: %v", during)
			}
		}
		if files := treeFiles(t, dir); len(files) != 0 {
			t.Errorf("the interrupted upload left %v", files)
		}
	})
	t.Run("complete", func(t *testing.T) {
		mustRun(t, strings.NewReader("first"), "cp", "-", url+"/up/f")
		if r := ecstore(t, strings.NewReader("second"), "cp", "-", url+"/up/f"); r.code != exitError || !strings.Contains(r.stderr, "exists (use -f to replace it)") {
			t.Errorf("cp onto an existing file without -f: exit %d, stderr %q", r.code, r.stderr)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, "up", "f")); string(got) != "first" {
			t.Errorf("a refused cp left %q", got)
		}
		mustRun(t, strings.NewReader("second"), "cp", "-f", "-", url+"/up/f")
		if got, _ := os.ReadFile(filepath.Join(dir, "up", "f")); string(got) != "second" {
			t.Errorf("cp -f left %q", got)
		}
		if files := treeFiles(t, dir); len(files) != 1 {
			t.Errorf("files after the uploads: %v, want up/f alone", files)
		}
	})
}
