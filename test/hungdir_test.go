//go:build slow

package test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/testtool"
)

// fuseMount is a bindfs mount of a directory: a FUSE file system whose
// server (the bindfs process) can be stopped, which freezes every system
// call on the mount in the kernel until it is continued, as a network
// mount whose server is gone does.
type fuseMount struct {
	cmd *exec.Cmd
	dir string
}

// mountBindfs mounts src on dst with bindfs in the foreground; t.Cleanup
// continues the server and unmounts (before t.TempDir's removal, which
// would otherwise walk into a frozen mount).
func mountBindfs(t *testing.T, src, dst string) *fuseMount {
	t.Helper()
	bindfs := testtool.Need(t, "bindfs")
	if _, err := os.Stat("/dev/fuse"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no /dev/fuse (CI=true): %v", err)
		}
		t.Skipf("no /dev/fuse: %v", err)
	}
	m := &fuseMount{cmd: exec.Command(bindfs, "-f", "--no-allow-other", src, dst), dir: dst}
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.thaw()
		_ = exec.Command("umount", "-l", dst).Run()
		_ = m.cmd.Process.Kill()
		_ = m.cmd.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile("/proc/self/mounts"); strings.Contains(string(b), " "+dst+" fuse") {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("bindfs did not mount %s", dst)
		}
	}
}

func (m *fuseMount) freeze() { _ = m.cmd.Process.Signal(syscall.SIGSTOP) }
func (m *fuseMount) thaw()   { _ = m.cmd.Process.Signal(syscall.SIGCONT) }

// A node directory on a file system that stops answering does not stall
// the gateway: with the mount frozen, gets of objects with an archive
// there, stats, space queries, listings, puts and removals all finish
// within seconds,
// and the data is right; a gateway started while the mount is frozen
// starts and serves. Before node.Guard every one of these waited for as
// long as the mount stayed frozen.
func TestFrozenNodeDirectory(t *testing.T) {
	xrdcp := testtool.Need(t, "xrdcp")
	xrdfs := testtool.Need(t, "xrdfs")
	root := t.TempDir()
	var dirs []string
	for i := range 10 {
		d := filepath.Join(root, "n"+string(rune('0'+i)))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	real3 := filepath.Join(root, "real3")
	if err := os.MkdirAll(real3, 0o755); err != nil {
		t.Fatal(err)
	}
	mount := mountBindfs(t, real3, dirs[3])
	args := []string{"--nodes", strings.Join(dirs, ","), "--ec", "8+2", "--chunk-size", "1MiB", "--spares", "0", "--heal=false"}
	gw := startServe(t, nil, args...)
	url := gatewayURL(t, gw)

	big := filepath.Join(root, "big")
	bigSum := randomFile(t, big, 20<<20, 1)
	small := filepath.Join(root, "small")
	smallSum := randomFile(t, small, 27000, 2)
	// Small objects have 3 copies: write a few, so that some have one on
	// the frozen node.
	var smalls []string
	for i := range 6 {
		smalls = append(smalls, "/s"+string(rune('0'+i)))
	}
	runTool(t, nil, xrdcp, "-s", big, url+"//big")
	for _, s := range smalls {
		runTool(t, nil, xrdcp, "-s", small, url+"/"+s)
	}
	onFrozen := 0
	for _, s := range smalls {
		if _, err := os.Stat(filepath.Join(real3, s)); err == nil {
			onFrozen++
		}
	}
	if _, err := os.Stat(filepath.Join(real3, "big")); err != nil || onFrozen == 0 {
		t.Fatalf("the frozen node holds no archive of /big (%v) or of the small objects (%d): the test would prove nothing", err, onFrozen)
	}

	// A put whose node's mount freezes after it has sent its data: its
	// node's sync or rename hangs, and the close must not wait for it.
	midData, err := os.ReadFile(big)
	if err != nil {
		t.Fatal(err)
	}
	mid := exec.Command(xrdcp, "-s", "-", url+"//mid")
	stdin, err := mid.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var midOut strings.Builder
	mid.Stdout, mid.Stderr = &midOut, &midOut
	if err := mid.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := stdin.Write(midData[:5<<20]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	mount.freeze()
	start := time.Now()
	stdin.Close()
	midDone := make(chan error, 1)
	go func() { midDone <- mid.Wait() }()
	select {
	case err := <-midDone:
		if err != nil {
			t.Fatalf("xrdcp put of /mid with the mount frozen after its data: %v\n%s", err, midOut.String())
		}
	case <-time.After(20 * time.Second):
		_ = mid.Process.Kill()
		t.Fatalf("xrdcp put of /mid still closing 20 s after the mount froze")
	}
	t.Logf("put with the mount frozen after its data closed in %v", time.Since(start).Round(time.Millisecond))

	// bounded runs a client command that must succeed within limit.
	bounded := func(limit time.Duration, name string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		start := time.Now()
		out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s with a node's mount frozen: %v after %v\n%s", filepath.Base(name), strings.Join(args, " "), err, time.Since(start).Round(time.Millisecond), out)
		}
		return string(out)
	}
	const limit = 20 * time.Second // the engine's timeouts are 2-3 s; the old behaviour was forever
	got := filepath.Join(root, "got")
	bounded(limit, xrdcp, "-f", "-s", url+"//big", got)
	if sha256File(t, got) != bigSum {
		t.Fatal("/big read with a frozen node differs from what was written")
	}
	for _, s := range smalls {
		bounded(limit, xrdcp, "-f", "-s", url+"/"+s, got)
		if sha256File(t, got) != smallSum {
			t.Fatalf("%s read with a frozen node differs from what was written", s)
		}
	}
	addr := strings.TrimPrefix(url, "root://")
	bounded(limit, xrdfs, addr, "stat", "/big")
	bounded(limit, xrdfs, addr, "spaceinfo", "/")
	if out := bounded(limit, xrdfs, addr, "ls", "/"); !strings.Contains(out, "/big") {
		t.Fatalf("listing with a frozen node lacks /big:\n%s", out)
	}
	bounded(limit, xrdcp, "-s", big, url+"//big2")
	bounded(limit, xrdfs, addr, "rm", smalls[0])

	// A gateway that starts while the mount is frozen opens the other
	// directories and serves.
	start = time.Now()
	gw2 := startServe(t, nil, args...)
	if took := time.Since(start); took > limit {
		t.Fatalf("a gateway took %v to start with a node's mount frozen", took)
	}
	bounded(limit, xrdcp, "-f", "-s", gatewayURL(t, gw2)+"//big2", got)
	if sha256File(t, got) != bigSum {
		t.Fatal("/big2 read through a gateway started with a frozen node differs from what was written")
	}

	mount.thaw()
	// Thawed, the node is used again: a put writes its archive there.
	time.Sleep(11 * time.Second) // past the 10 s the gateway avoids a node that timed out
	bounded(limit, xrdcp, "-s", big, url+"//big3")
	if _, err := os.Stat(filepath.Join(real3, "big3")); err != nil {
		t.Fatalf("after the thaw the node did not get its archive of /big3: %v", err)
	}
}

// gatewayURL returns the root:// URL that gateway g logged it serves.
func gatewayURL(t *testing.T, g *servingGateway) string {
	t.Helper()
	b, err := os.ReadFile(g.log)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`serving (root://[0-9.:]+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no address in the serve log:\n%s", b)
	}
	return string(m[1])
}
