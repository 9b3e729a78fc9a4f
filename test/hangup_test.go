//go:build slow

package test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Regression (found by review): a SIGHUP (a reload, logrotate) that
// reached the gateway while it was still opening its cluster killed it,
// silently (the signal's default action): the handler was installed only
// once the cluster was open, which a node that accepts connections but
// never answers makes take seconds. The gateway now takes SIGHUP from its
// start and comes up.
func TestHangupWhileStarting(t *testing.T) {
	hung, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	dir := t.TempDir()
	var nodes []string
	for i := range 11 {
		d := filepath.Join(dir, "d"+string(rune('a'+i)))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, d)
	}
	nodes = append(nodes, "root://"+hung.Addr().String()+"//x")
	logFile := filepath.Join(dir, "serve.log")
	f, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--nodes", strings.Join(nodes, ","), "--root-addr", "127.0.0.1:0", "--metrics-addr=")
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-done
	}()
	time.Sleep(300 * time.Millisecond)
	if b, _ := os.ReadFile(logFile); strings.Contains(string(b), "serving root://") {
		t.Log("the gateway was up before the SIGHUP: the test proves less")
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(logFile)
		if strings.Contains(string(b), "serving root://") {
			break
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("the gateway exited after a SIGHUP while starting: %v\n%s", err, b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway did not start:\n%s", b)
		}
	}
}
