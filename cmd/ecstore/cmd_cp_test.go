package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/dataserver"
	"github.com/ecstore/ecstore/internal/testcluster"
	"github.com/ecstore/ecstore/internal/testgateway"
	"github.com/ecstore/ecstore/internal/xrootd"
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

// TestCpWhileOverwritten: downloads race overwrites of the source. Every
// download ends with one whole version, verified against the checksum of
// that same version: the checksum is asked by path, so cp must notice an
// overwrite between its open and that query (regression test for a
// fault-suite "adler32 mismatch").
func TestCpWhileOverwritten(t *testing.T) {
	url := gatewayURL(t)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(6, 6))
	versions := [][]byte{testcluster.Rand(rng, 700<<10), testcluster.Rand(rng, 900<<10)}
	var files []string
	for i, v := range versions {
		f := filepath.Join(dir, fmt.Sprintf("v%d", i))
		os.WriteFile(f, v, 0o644)
		files = append(files, f)
	}
	mustRun(t, nil, "cp", files[0], url+"/race/x")
	stop := make(chan struct{})
	writerDone := make(chan error, 1)
	go func() {
		for i := 1; ; i++ {
			select {
			case <-stop:
				writerDone <- nil
				return
			default:
			}
			if r := ecstore(t, nil, "cp", "-f", files[i%2], url+"/race/x"); r.code != 0 {
				writerDone <- fmt.Errorf("overwrite %d: %s", i, r.stderr)
				return
			}
			time.Sleep(10 * time.Millisecond) // an overwrite every few tens of ms

		}
	}()
	out := filepath.Join(dir, "out")
	for i := range 25 {
		r := ecstore(t, nil, "cp", "-f", url+"/race/x", out)
		if r.code != 0 {
			t.Errorf("download %d: exit %d: %s", i, r.code, r.stderr)
			continue
		}
		got, _ := os.ReadFile(out)
		if !bytes.Equal(got, versions[0]) && !bytes.Equal(got, versions[1]) {
			t.Errorf("download %d: %d bytes that are neither version", i, len(got))
		}
	}
	close(stop)
	if err := <-writerDone; err != nil {
		t.Fatal(err)
	}
}

// TestCpThirdParty: cp --tpc has one gateway pull an object from
// another; -f is needed over an existing one; --tpc only fails against a
// server without third-party copies (an ecstore node) and --tpc first
// then streams through the process.
func TestCpThirdParty(t *testing.T) {
	a, b := gatewayURL(t), gatewayURL(t)
	data := testcluster.Rand(rand.New(rand.NewPCG(7, 7)), 2<<20+13)
	src := filepath.Join(t.TempDir(), "in.bin")
	os.WriteFile(src, data, 0o644)
	mustRun(t, nil, "cp", src, a+"/tpc/in.bin")

	mustRun(t, nil, "cp", "--tpc", "only", a+"/tpc/in.bin", b+"/tpc/pulled")
	out := filepath.Join(t.TempDir(), "out.bin")
	mustRun(t, nil, "cp", b+"/tpc/pulled", out)
	if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
		t.Fatal("the pulled object differs")
	}
	if r := ecstore(t, nil, "cp", "--tpc", "only", a+"/tpc/in.bin", b+"/tpc/pulled"); r.code == 0 || !strings.Contains(r.stderr, "exists") {
		t.Errorf("cp --tpc onto an existing object: exit %d, %s", r.code, r.stderr)
	}
	mustRun(t, nil, "cp", "-f", "--tpc", "only", a+"/tpc/in.bin", b+"/tpc/pulled")

	node := benchDataServerURL(t)
	if r := ecstore(t, nil, "cp", "--tpc", "only", a+"/tpc/in.bin", node+"/copy"); r.code == 0 || !strings.Contains(r.stderr, "not supported") {
		t.Errorf("cp --tpc only to a server without it: exit %d, %s", r.code, r.stderr)
	}
	r := ecstore(t, nil, "cp", "--tpc", "first", a+"/tpc/in.bin", node+"/copy")
	if r.code != 0 || !strings.Contains(r.stderr, "copying through this process") {
		t.Fatalf("cp --tpc first to a server without it: exit %d, %s", r.code, r.stderr)
	}
	mustRun(t, nil, "cp", "-f", node+"/copy", out)
	if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
		t.Fatal("the streamed copy differs")
	}
	if r := ecstore(t, nil, "cp", "--tpc", "sometimes", a+"/tpc/in.bin", b+"/x"); r.code != exitUsage {
		t.Errorf("cp --tpc sometimes: exit %d", r.code)
	}
}

// Regression (found by review): cp into a directory. xrdcp copies a file
// into a destination that is a directory, under the source's name; cp
// made the object /d2 of `cp f root://gw//d2/` (the slash was dropped),
// failed with 'is a directory' onto an existing remote directory, and
// refused a local directory as the destination of a download.
func TestCpIntoDirectory(t *testing.T) {
	url := gatewayURL(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "in.bin")
	os.WriteFile(src, []byte("some data"), 0o644)

	mustRun(t, nil, "cp", src, url+"/new/") // a trailing slash: a directory
	if got := mustRun(t, nil, "ls", url+"/new"); got != "in.bin\n" {
		t.Errorf("ls /new after cp into /new/: %q", got)
	}
	mustRun(t, nil, "mkdir", url+"/existing")
	mustRun(t, nil, "cp", src, url+"/existing") // an existing directory
	if got := mustRun(t, nil, "ls", url+"/existing"); got != "in.bin\n" {
		t.Errorf("ls /existing after cp into it: %q", got)
	}
	if r := ecstore(t, nil, "cp", src, url+"/existing"); r.code == 0 || !strings.Contains(r.stderr, "/existing/in.bin exists") {
		t.Errorf("cp into a directory over an existing file: exit %d, %s", r.code, r.stderr)
	}
	if r := ecstore(t, strings.NewReader("x"), "cp", "-", url+"/existing/"); r.code == 0 || !strings.Contains(r.stderr, "is a directory") {
		t.Errorf("cp of stdin into a directory: exit %d, %s", r.code, r.stderr)
	}

	out := t.TempDir()
	mustRun(t, nil, "cp", url+"/new/in.bin", out)
	if got, err := os.ReadFile(filepath.Join(out, "in.bin")); err != nil || string(got) != "some data" {
		t.Errorf("download into a local directory: %q, %v", got, err)
	}
	mustRun(t, nil, "cp", "--tpc", "only", url+"/new/in.bin", url+"/tpc/")
	if got := mustRun(t, nil, "ls", url+"/tpc"); got != "in.bin\n" {
		t.Errorf("ls /tpc after cp --tpc into /tpc/: %q", got)
	}
}

// Regression (found by review): a file downloaded by cp kept the 0600 of
// its temporary file, unreadable by the group and others (xrdcp and get
// create 0666 minus the umask); one replaced with -f keeps its mode.
func TestCpDownloadMode(t *testing.T) {
	url := gatewayURL(t)
	mustRun(t, strings.NewReader("events"), "cp", "-", url+"/a/run1.root")
	dir := t.TempDir()
	local := filepath.Join(dir, "run1.root")
	mustRun(t, nil, "cp", url+"/a/run1.root", local)
	fi, err := os.Stat(local)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o666&^umask() {
		t.Errorf("mode %v, want 0666 minus umask %v", fi.Mode().Perm(), umask())
	}
	os.Chmod(local, 0o640)
	mustRun(t, nil, "cp", "-f", url+"/a/run1.root", local)
	if fi, _ := os.Stat(local); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v after replacing a 0640 file", fi.Mode().Perm())
	}
}

// Regression (found by review): cp of a local directory created the
// destination, then failed reading the directory and blamed the
// destination ('root://…//d: read d: is a directory'); a plain data
// server (an ecstore node, xrootd) kept the empty file. It fails before
// touching the server now, as xrdcp does.
func TestCpOfADirectory(t *testing.T) {
	node := benchDataServerURL(t)
	dir := t.TempDir()
	r := ecstore(t, nil, "cp", dir, node+"/copy")
	if r.code != exitError || !strings.Contains(r.stderr, "ecstore: cp: "+dir+" is a directory") {
		t.Errorf("cp of a directory: exit %d, %s", r.code, r.stderr)
	}
	if r := ecstore(t, nil, "stat", node+"/copy"); r.code == 0 {
		t.Errorf("cp of a directory left a file on the server:\n%s", r.stdout)
	}
}

// shortFS serves files of a data server whose opens say they are 100
// bytes longer than the bytes that can be read: a file truncated while
// it is read, on a server that keeps no checksums.
type shortFS struct{ *dataserver.FS }

func (s shortFS) Open(ctx context.Context, name string, opts xrootd.OpenOptions) (xrootd.File, error) {
	f, err := s.FS.Open(ctx, name, opts)
	if err != nil || opts.Flags.Writable() {
		return f, err
	}
	return shortFile{f}, nil
}

type shortFile struct{ xrootd.File }

func (f shortFile) Stat(ctx context.Context) (xrootd.FileInfo, error) {
	fi, err := f.File.Stat(ctx)
	fi.Size += 100
	return fi, err
}

// Regression (found by review): a download that got fewer bytes than the
// source's size (a file truncated while read, on a server without
// checksums) renamed the short file into place, over the old one with
// -f, before failing on the size: the partial file stayed. The size is
// checked before the rename now.
func TestCpShortDownloadLeavesNoFile(t *testing.T) {
	root := t.TempDir()
	data := testcluster.Rand(rand.New(rand.NewPCG(8, 8)), 3<<20)
	os.WriteFile(filepath.Join(root, "f"), data, 0o644)
	fs, err := dataserver.New(root, dataserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Only the FileSystem methods: no checksums, no whole-file opens.
	url := serveRoot(t, struct{ xrootd.FileSystem }{shortFS{fs}}, fs.Close)

	dir := t.TempDir()
	local := filepath.Join(dir, "f")
	r := ecstore(t, nil, "cp", url+"/f", local)
	if r.code != exitError || !strings.Contains(r.stderr, "source has") {
		t.Errorf("short download: exit %d, %s", r.code, r.stderr)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("a failed download left %v", ents)
	}
	os.WriteFile(local, []byte("old"), 0o644)
	if r := ecstore(t, nil, "cp", "-f", url+"/f", local); r.code != exitError {
		t.Errorf("short download with -f: exit %d, %s", r.code, r.stderr)
	}
	if got, _ := os.ReadFile(local); string(got) != "old" {
		t.Errorf("a failed download with -f replaced the file with %d bytes", len(got))
	}
}
