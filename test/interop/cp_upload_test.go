//go:build interop

package interop

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCpUploadLeavesNothingUntilComplete: an upload by "ecstore cp" to a
// plain data server — a real xrootd, and an "ecstore node" — shows
// nothing at its destination until it is complete, and an upload that
// cp abandons (its source changed size, Ctrl-C) leaves nothing at all.
// Regression: both kept the partial file at the destination. Both
// announce persist-on-close (kXR_supposc): the temporary file of a cp
// killed with SIGKILL is removed by the server, by xrootd after its
// ofs.persist hold time (2 s here; 10 minutes by default), by an ecstore
// node as soon as it sees the connection end (regression: it kept the
// file).
func TestCpUploadLeavesNothingUntilComplete(t *testing.T) {
	t.Run("xrootd", func(t *testing.T) {
		s := startXrootd(t, xrootdBase(t), "x", "ofs.persist hold 2")
		s.wait(t, 20*time.Second)
		testCpUploads(t, "root://"+s.addr+"/", s.data)
	})
	t.Run("ecstore node", func(t *testing.T) {
		work := t.TempDir()
		dir := filepath.Join(work, "d")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		p := startProc(t, work, "node", ecstoreBin, "node", "--dir", dir, "--addr", "127.0.0.1:0", "--fsync=false")
		testCpUploads(t, "root://"+p.waitLog(t, nodeServingRE, 20*time.Second)[1]+"/", dir)
	})
}

func testCpUploads(t *testing.T, url, data string) {
	files := func() []string {
		var out []string
		filepath.WalkDir(data, func(p string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				rel, _ := filepath.Rel(data, p)
				out = append(out, rel)
			}
			return nil
		})
		return out
	}
	t.Run("source grew", func(t *testing.T) {
		out := mustFail(t, ecstoreBin, "cp", "/proc/self/status", url+"/up/grown")
		if !strings.Contains(out, "grew while it was read") {
			t.Errorf("cp: %s", out)
		}
		if f := files(); len(f) != 0 {
			t.Errorf("the abandoned upload left %v", f)
		}
	})
	// startUpload starts a cp from a pipe and waits until its temporary
	// file is on the server.
	startUpload := func(t *testing.T, name string) (*exec.Cmd, *os.File, *strings.Builder) {
		cmd := exec.Command(ecstoreBin, "cp", "-", url+"/up/"+name)
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stdin, cmd.Stderr = pr, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pr.Close()
		t.Cleanup(func() { cmd.Process.Kill(); pw.Close() })
		if _, err := pw.Write(make([]byte, 20<<20)); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
			f := files()
			if len(f) == 1 && strings.HasPrefix(filepath.Base(f[0]), "."+name+".") {
				break
			}
			if len(f) > 1 || len(f) == 1 && f[0] == filepath.Join("up", name) || time.Now().After(deadline) {
				t.Fatalf("during the upload: %v; stderr %q", f, stderr.String())
			}
		}
		return cmd, pw, &stderr
	}
	t.Run("interrupted", func(t *testing.T) {
		cmd, _, stderr := startUpload(t, "interrupted")
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
		if code := cmd.ProcessState.ExitCode(); code != 130 || stderr.String() != "ecstore: cp: interrupted\n" {
			t.Errorf("exit %d, stderr %q", code, stderr.String())
		}
		if f := files(); len(f) != 0 {
			t.Errorf("the interrupted upload left %v", f)
		}
	})
	t.Run("killed", func(t *testing.T) {
		cmd, _, _ := startUpload(t, "killed")
		cmd.Process.Kill()
		cmd.Wait()
		// The server may have removed the temporary file already;
		// nothing else may be there.
		if f := files(); len(f) > 1 || len(f) == 1 && !strings.HasPrefix(filepath.Base(f[0]), ".killed.") {
			t.Fatalf("after SIGKILL: %v, want at most the temporary file", f)
		}
		for deadline := time.Now().Add(30 * time.Second); len(files()) != 0; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the server kept the kXR_posc file of a killed upload: %v", files())
			}
		}
	})
	t.Run("complete", func(t *testing.T) {
		src := filepath.Join(t.TempDir(), "src")
		writeRandom(t, src, 3<<20+5, seed(t), 1)
		must(t, ecstoreBin, "cp", src, url+"/up/f")
		sameFile(t, filepath.Join(data, "up", "f"), src)
		if out := mustFail(t, ecstoreBin, "cp", "/etc/hostname", url+"/up/f"); !strings.Contains(out, "exists (use -f to replace it)") {
			t.Errorf("cp onto an existing file without -f: %s", out)
		}
		sameFile(t, filepath.Join(data, "up", "f"), src)
		must(t, ecstoreBin, "cp", "--force", "/etc/hostname", url+"/up/f")
		sameFile(t, filepath.Join(data, "up", "f"), "/etc/hostname")
		if f := files(); len(f) != 1 {
			t.Errorf("after the uploads: %v, want up/f alone", f)
		}
	})
}
