package main

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ecstore/ecstore/internal/testcluster"
	"github.com/ecstore/ecstore/internal/testgateway"
)

// gatewayURL starts an in-process gateway over a test cluster and returns
// its root:// prefix ("root://127.0.0.1:PORT/").
func gatewayURL(t *testing.T) string { return "root://" + testgateway.Start(t) + "/" }

func TestCpAndNamespaceOverRoot(t *testing.T) {
	url := gatewayURL(t)
	dir := t.TempDir()
	data := testcluster.Rand(rand.New(rand.NewPCG(5, 5)), 3<<20+77)
	src := filepath.Join(dir, "in.bin")
	os.WriteFile(src, data, 0o644)

	mustRun(t, nil, "cp", src, url+"/run/in.bin")
	// No -f: refuses to overwrite, both ways.
	if r := ecstore(t, nil, "cp", src, url+"/run/in.bin"); r.code == 0 || !strings.Contains(r.stderr, "exists") {
		t.Fatalf("cp onto existing object: exit %d, %s", r.code, r.stderr)
	}
	out := filepath.Join(dir, "out.bin")
	mustRun(t, nil, "cp", url+"/run/in.bin", out)
	if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
		t.Fatal("downloaded bytes differ")
	}
	if r := ecstore(t, nil, "cp", url+"/run/in.bin", out); r.code == 0 {
		t.Fatal("cp onto an existing local file without -f succeeded")
	}
	// Standard input and output.
	mustRun(t, strings.NewReader("from stdin"), "cp", "-f", "-", url+"/run/small")
	if got := mustRun(t, nil, "cp", url+"/run/small", "-"); got != "from stdin" {
		t.Fatalf("cp to stdout: %q", got)
	}
	// Namespace commands with URLs.
	ls := mustRun(t, nil, "ls", "-l", url+"/run")
	if !strings.Contains(ls, "3145805") || !strings.Contains(ls, "in.bin") || !strings.Contains(ls, "small") {
		t.Fatalf("ls -l:\n%s", ls)
	}
	st := mustRun(t, nil, "stat", url+"/run/in.bin")
	if !strings.Contains(st, "size:") || !strings.Contains(st, "adler32:") {
		t.Fatalf("stat:\n%s", st)
	}
	mustRun(t, nil, "mkdir", url+"/a/b/c")
	mustRun(t, nil, "mv", url+"/run/small", url+"/a/b/small")
	mustRun(t, nil, "rm", url+"/a/b/small")
	mustRun(t, nil, "rmdir", url+"/a/b/c")
	if r := ecstore(t, nil, "stat", url+"/a/b/small"); r.code == 0 {
		t.Fatal("stat after rm succeeded")
	}
	// Mixing URLs and object paths, or two local files, is a usage error.
	if r := ecstore(t, nil, "rm", url+"/run/in.bin", "/local"); r.code != exitUsage {
		t.Fatalf("mixed rm: exit %d", r.code)
	}
	if r := ecstore(t, nil, "cp", src, out); r.code != exitUsage {
		t.Fatalf("local cp: exit %d", r.code)
	}
}
