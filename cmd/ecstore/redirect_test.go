package main

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ecstore/ecstore/internal/dataserver"
	"github.com/ecstore/ecstore/internal/testcluster"
	"github.com/ecstore/ecstore/internal/testredirector"
)

// TestCommandsThroughARedirector points cp, ls, stat, mkdir, mv, rm,
// rmdir and bench at a redirector (what an XRootD manager does: every
// request redirected to a data server), as xrdcp is at WLCG sites:
// kXR_redirect was reported as an error ('redirected to host port N')
// and never followed, so every command failed.
func TestCommandsThroughARedirector(t *testing.T) {
	root := t.TempDir()
	fs, err := dataserver.New(root, dataserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	data := strings.TrimPrefix(strings.TrimSuffix(serveRoot(t, fs, fs.Close), "/"), "root://")
	mgr := testredirector.Start(t, data, "cms.tried=")
	url := "root://" + mgr.Addr + "/"

	dir := t.TempDir()
	content := testcluster.Rand(rand.New(rand.NewPCG(9, 9)), 2<<20+5)
	src := filepath.Join(dir, "in.bin")
	os.WriteFile(src, content, 0o644)
	mustRun(t, nil, "cp", src, url+"/run/in.bin")
	if got, err := os.ReadFile(filepath.Join(root, "run", "in.bin")); err != nil || !bytes.Equal(got, content) {
		t.Fatalf("the data server holds %d bytes (%v), want the %d uploaded", len(got), err, len(content))
	}
	out := filepath.Join(dir, "out.bin")
	mustRun(t, nil, "cp", url+"/run/in.bin", out)
	if got, _ := os.ReadFile(out); !bytes.Equal(got, content) {
		t.Fatal("downloaded bytes differ")
	}
	if ls := mustRun(t, nil, "ls", "-l", url+"/run"); !strings.Contains(ls, "in.bin") || !strings.Contains(ls, "2097157") {
		t.Fatalf("ls -l:\n%s", ls)
	}
	if st := mustRun(t, nil, "stat", url+"/run/in.bin"); !regexp.MustCompile(`size: +2097157`).MatchString(st) {
		t.Fatalf("stat:\n%s", st)
	}
	mustRun(t, nil, "mkdir", url+"/a/b")
	mustRun(t, nil, "mv", url+"/run/in.bin", url+"/a/b/f")
	mustRun(t, nil, "rm", url+"/a/b/f")
	mustRun(t, nil, "rmdir", url+"/a/b")
	if _, err := os.Stat(filepath.Join(root, "a", "b")); !os.IsNotExist(err) {
		t.Errorf("after mv, rm and rmdir through the redirector: %v", err)
	}
	mustRun(t, nil, "bench", "--mode", "small", "--ops", "8", url+"/bench")
	if n := mgr.Redirected.Load(); n < 10 {
		t.Errorf("the redirector redirected %d requests", n)
	}
}
