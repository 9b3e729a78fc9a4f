//go:build slow

package test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/testport"
	"github.com/ecstore/ecstore/internal/testtool"
)

// servingGateway is an "ecstore serve" process.
type servingGateway struct {
	cmd  *exec.Cmd
	log  string
	done chan error
}

// startServe runs "ecstore serve" with args and waits for it to listen;
// t.Cleanup kills it.
func startServe(t *testing.T, env []string, args ...string) *servingGateway {
	t.Helper()
	g := &servingGateway{log: filepath.Join(t.TempDir(), "serve.log"), done: make(chan error, 1)}
	f, err := os.Create(g.log)
	if err != nil {
		t.Fatal(err)
	}
	g.cmd = exec.Command(bin, append([]string{"serve", "--root-addr", "127.0.0.1:0", "--metrics-addr="}, args...)...)
	g.cmd.Env = append(os.Environ(), env...)
	g.cmd.Stdout, g.cmd.Stderr = f, f
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	go func() { g.done <- g.cmd.Wait() }()
	t.Cleanup(func() {
		_ = g.cmd.Process.Kill()
		<-g.done
		if t.Failed() {
			b, _ := os.ReadFile(g.log)
			t.Logf("serve log:\n%s", b)
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(g.log)
		if strings.Contains(string(b), "ecstore: serving root://") {
			return g
		}
		select {
		case err := <-g.done:
			t.Fatalf("serve exited: %v\n%s", err, b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", b)
		}
	}
}

// peakRSS returns the process's peak resident set size (VmHWM).
func (g *servingGateway) peakRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", g.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no VmHWM in /proc/%d/status", g.cmd.Process.Pid)
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

// randomFile writes size seeded random bytes to path and returns their
// SHA-256.
func randomFile(t *testing.T, path string, size int64, seed uint64) [32]byte {
	t.Helper()
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	g := rand.NewChaCha8(key)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	w := bufio.NewWriterSize(io.MultiWriter(f, h), 4<<20)
	if _, err := io.CopyN(w, g, size); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}

func sha256File(t *testing.T, path string) [32]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}

// runTool runs an external command with a timeout and fails the test if
// it fails.
func runTool(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// A 1 GiB object goes up and back bit-exact through both HTTP frontends:
// a curl PUT (one stream: the gateway's peak memory stays far below the
// object's size) and GET, then aws s3 cp with its default multipart
// settings (8 MiB parts, 10 at a time) up and back.
func TestFrontendsGiB(t *testing.T) {
	const size = 1 << 30
	curl := testtool.Need(t, "curl")
	aws := testtool.Need(t, "aws")
	work := t.TempDir()
	const token = "slow-suite-token-0123456789"
	auth := filepath.Join(work, "auth.conf")
	if err := os.WriteFile(auth, []byte("access-key = slowkey:slow-secret\nhttp-token = "+token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	httpAddr, s3Addr := testport.Addr(t), testport.Addr(t)
	g := startServe(t, nil, "--data", filepath.Join(work, "data"), "--fsync=false",
		"--http-addr", httpAddr, "--s3-addr", s3Addr, "--auth-file", auth)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	up := filepath.Join(work, "up.bin")
	want := randomFile(t, up, size, seed)

	start := time.Now()
	runTool(t, nil, curl, "-sS", "--fail", "-H", "Authorization: Bearer "+token, "-T", up, "http://"+httpAddr+"/big/http.bin")
	putTook := time.Since(start)
	peak := g.peakRSS(t)
	t.Logf("curl PUT of 1 GiB: %v (%.0f MB/s); gateway peak RSS %.0f MiB", putTook.Round(time.Millisecond), size/putTook.Seconds()/1e6, float64(peak)/(1<<20))
	if peak > 256<<20 {
		t.Errorf("gateway peak RSS %d MiB after a 1 GiB PUT, want under 256 MiB: the object must stream", peak>>20)
	}
	down := filepath.Join(work, "down.bin")
	runTool(t, nil, curl, "-sS", "--fail", "-H", "Authorization: Bearer "+token, "-o", down, "http://"+httpAddr+"/big/http.bin")
	if sha256File(t, down) != want {
		t.Fatal("curl GET of the 1 GiB object differs")
	}
	os.Remove(down)

	env := []string{"AWS_ACCESS_KEY_ID=slowkey", "AWS_SECRET_ACCESS_KEY=slow-secret", "AWS_DEFAULT_REGION=us-east-1",
		"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=" + filepath.Join(work, "aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(work, "aws-credentials")}
	endpoint := "http://" + s3Addr
	start = time.Now()
	runTool(t, env, aws, "--endpoint-url", endpoint, "s3", "cp", "--only-show-errors", up, "s3://big/s3.bin")
	t.Logf("aws s3 cp up of 1 GiB: %v", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	runTool(t, env, aws, "--endpoint-url", endpoint, "s3", "cp", "--only-show-errors", "s3://big/s3.bin", down)
	t.Logf("aws s3 cp down of 1 GiB: %v; gateway peak RSS %.0f MiB", time.Since(start).Round(time.Millisecond), float64(g.peakRSS(t))/(1<<20))
	if sha256File(t, down) != want {
		t.Fatal("aws s3 cp of the 1 GiB object differs")
	}
	head := runTool(t, env, aws, "--endpoint-url", endpoint, "s3api", "head-object", "--bucket", "big", "--key", "s3.bin")
	if !strings.Contains(head, `-128\"`) || !strings.Contains(head, fmt.Sprint(size)) {
		t.Errorf("head-object of the 1 GiB upload (want 128 parts of 8 MiB):\n%s", head)
	}
	if out := runTool(t, env, aws, "--endpoint-url", endpoint, "s3api", "list-multipart-uploads", "--bucket", "big"); strings.Contains(out, "UploadId") {
		t.Errorf("uploads left after the copy:\n%s", out)
	}
}
