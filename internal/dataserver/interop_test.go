//go:build interop

package dataserver

// The real XRootD 5.5 clients against FS:
//
//	go test -tags interop ./internal/dataserver/
//
// A missing tool skips its test, except with CI=true, where it fails.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ecstore/ecstore/internal/testtool"
)

// logVersion logs the version of the XRootD client tools.
func logVersion(t *testing.T) {
	if out, err := exec.Command("xrdcp", "--version").CombinedOutput(); err == nil {
		t.Logf("XRootD clients %s", strings.TrimSpace(string(out)))
	}
}

// run runs a tool and returns its output; it fails the test when the
// exit status is not as wanted.
func run(t *testing.T, wantErr bool, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if (err != nil) != wantErr {
		t.Fatalf("%s %s: %v (want error: %v)\n%s", name, strings.Join(args, " "), err, wantErr, out)
	}
	return string(out)
}

func TestInteropXrdcp(t *testing.T) {
	xrdcp := testtool.Need(t, "xrdcp")
	logVersion(t)
	r := testRand(t)
	dir, addr := serve(t, Options{Fsync: true})
	local := t.TempDir()
	for _, size := range []int{0, 1, 4096, 9<<20 + 4097} {
		for _, pgrw := range []string{"1", "0"} {
			t.Run(fmt.Sprintf("size=%d/pgrw=%s", size, pgrw), func(t *testing.T) {
				t.Setenv("XRD_CPUSEPGWRTRD", pgrw)
				data := randomBytes(r, size)
				src := filepath.Join(local, fmt.Sprintf("src.%d.%s", size, pgrw))
				if err := os.WriteFile(src, data, 0o644); err != nil {
					t.Fatal(err)
				}
				// Into directories that do not exist yet.
				name := fmt.Sprintf("/up/%s/%d/f.bin", pgrw, size)
				url := "root://" + addr + "/" + name
				run(t, false, xrdcp, "--nopbar", src, url)
				if got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name))); err != nil || !bytes.Equal(got, data) {
					t.Fatalf("uploaded file: %d bytes, %v; want %d", len(got), err, size)
				}
				// Without -f an existing file is refused; with -f replaced.
				run(t, true, xrdcp, "--nopbar", src, url)
				run(t, false, xrdcp, "-f", "--nopbar", src, url)
				dst := filepath.Join(local, fmt.Sprintf("dst.%d.%s", size, pgrw))
				run(t, false, xrdcp, "-f", "--nopbar", url, dst)
				if got, err := os.ReadFile(dst); err != nil || !bytes.Equal(got, data) {
					t.Fatalf("downloaded file: %d bytes, %v; want %d", len(got), err, size)
				}
			})
		}
	}
	t.Run("missing source", func(t *testing.T) {
		out := run(t, true, xrdcp, "--nopbar", "root://"+addr+"//nope", filepath.Join(local, "nope"))
		if !strings.Contains(out, "3011") {
			t.Errorf("output lacks kXR_NotFound:\n%s", out)
		}
	})
}

func TestInteropXrdfs(t *testing.T) {
	xrdfs := testtool.Need(t, "xrdfs")
	logVersion(t)
	dir, addr := serve(t, Options{})
	url := "root://" + addr
	if err := os.MkdirAll(filepath.Join(dir, "data", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data", "a.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}

	out := run(t, false, xrdfs, url, "ls", "-l", "/data")
	if !strings.Contains(out, "-rw-r--r--") || !regexp.MustCompile(`(?m) 5 \S+ \S+ /data/a\.txt$`).MatchString(out) ||
		!strings.Contains(out, "drwxr-xr-x") || !strings.Contains(out, "/data/sub") {
		t.Errorf("ls -l /data:\n%s", out)
	}
	out = run(t, false, xrdfs, url, "stat", "/data/a.txt")
	if !strings.Contains(out, "Size:   5") || !strings.Contains(out, "IsReadable") {
		t.Errorf("stat:\n%s", out)
	}
	out = run(t, false, xrdfs, url, "stat", "/data/sub")
	if !strings.Contains(out, "IsDir") {
		t.Errorf("stat dir:\n%s", out)
	}
	out = run(t, true, xrdfs, url, "stat", "/missing")
	if !strings.Contains(out, "3011") {
		t.Errorf("stat missing:\n%s", out)
	}

	run(t, false, xrdfs, url, "mkdir", "-p", "/x/y/z")
	if fi, err := os.Stat(filepath.Join(dir, "x", "y", "z")); err != nil || !fi.IsDir() {
		t.Errorf("mkdir -p: %v", err)
	}
	run(t, false, xrdfs, url, "mv", "/data/a.txt", "/x/y/z/a.txt")
	if b, err := os.ReadFile(filepath.Join(dir, "x", "y", "z", "a.txt")); err != nil || string(b) != "hello" {
		t.Errorf("mv: %q, %v", b, err)
	}
	out = run(t, true, xrdfs, url, "rmdir", "/x/y/z")
	if !strings.Contains(out, "not empty") {
		t.Errorf("rmdir of a non-empty directory:\n%s", out)
	}
	run(t, false, xrdfs, url, "rm", "/x/y/z/a.txt")
	run(t, false, xrdfs, url, "rmdir", "/x/y/z")
	if _, err := os.Stat(filepath.Join(dir, "x", "y", "z")); !os.IsNotExist(err) {
		t.Errorf("rmdir: %v", err)
	}
	out = run(t, false, xrdfs, url, "ls", "/x")
	if strings.TrimSpace(out) != "/x/y" {
		t.Errorf("ls /x: %q", out)
	}
	out = run(t, false, xrdfs, url, "spaceinfo", "/")
	if !strings.Contains(out, "Total:") || !strings.Contains(out, "Free:") {
		t.Errorf("spaceinfo:\n%s", out)
	}
}

// xrdfs xattr against an ecstore node: an attribute set with xrdfs is got
// back by xrdfs and lies on disk where a plain xrootd keeps it.
func TestInteropXrdfsAttrs(t *testing.T) {
	xrdfs := testtool.Need(t, "xrdfs")
	dir, addr := serve(t, Options{Fsync: true})
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	url := "root://" + addr
	run(t, false, xrdfs, url, "xattr", "/f", "set", "user.ecstore=v=AAEC&s=27000")
	out := run(t, false, xrdfs, url, "xattr", "/f", "get", "user.ecstore")
	if !strings.Contains(out, `user.ecstore="v=AAEC&s=27000"`) {
		t.Errorf("xrdfs xattr get: %q", out)
	}
	buf := make([]byte, 100)
	if n, err := unix.Getxattr(filepath.Join(dir, "f"), "user.U.user.ecstore", buf); err != nil || string(buf[:n]) != "v=AAEC&s=27000" {
		t.Errorf("on disk: %q %v", buf[:max(n, 0)], err)
	}
	out = run(t, true, xrdfs, url, "xattr", "/f", "get", "user.missing")
	t.Logf("xrdfs xattr get of a missing attribute: %s", strings.TrimSpace(out))
}

// TestInteropXrdcpPOSC: an "xrdcp --posc" killed in the middle of an
// upload leaves nothing at its destination, and one that completes
// leaves the whole file. Regression: the server ignored kXR_posc and
// kept the partial file.
func TestInteropXrdcpPOSC(t *testing.T) {
	xrdcp := testtool.Need(t, "xrdcp")
	dir, addr := serve(t, Options{Fsync: true})
	url := "root://" + addr + "//posc/f.bin"
	dst := filepath.Join(dir, "posc", "f.bin")

	cmd := exec.Command(xrdcp, "--nopbar", "--posc", "-", url)
	pw, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	chunk := make([]byte, 1<<20)
	for deadline := time.Now().Add(time.Minute); ; {
		if _, err := pw.Write(chunk); err != nil {
			t.Fatalf("xrdcp stopped reading: %v", err)
		}
		if fi, err := os.Stat(dst); err == nil && fi.Size() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the upload never showed at its destination")
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(dst); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the partial file of a killed xrdcp --posc was kept")
		}
	}

	src := filepath.Join(t.TempDir(), "src")
	data := randomBytes(testRand(t), 5<<20+3)
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, false, xrdcp, "--nopbar", "--posc", src, url)
	if got, err := os.ReadFile(dst); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("uploaded file: %d bytes, %v; want %d", len(got), err, len(data))
	}
}
