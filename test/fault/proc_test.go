//go:build fault

package fault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// xrdEnv makes the XRootD clients fail fast instead of retrying a refused
// connection for minutes; the suite bounds every command itself.
var xrdEnv = []string{"XRD_CONNECTIONWINDOW=3", "XRD_CONNECTIONRETRY=1", "XRD_REQUESTTIMEOUT=300", "XRD_STREAMTIMEOUT=300"}

// result is the outcome of one external command.
type result struct {
	cmd      string
	out      string // stdout and stderr
	code     int    // exit code; -1 when killed or not started
	err      error
	elapsed  time.Duration
	timedOut bool // killed at its deadline
}

func (r result) ok() bool { return r.err == nil && !r.timedOut }

func (r result) String() string {
	state := "ok"
	switch {
	case r.timedOut:
		state = fmt.Sprintf("KILLED after %v", r.elapsed.Round(time.Millisecond))
	case r.err != nil:
		state = fmt.Sprintf("exit %d (%v)", r.code, r.err)
	}
	return fmt.Sprintf("%s: %s in %v: %s", r.cmd, state, r.elapsed.Round(time.Millisecond), strings.TrimSpace(r.out))
}

// run runs name with args (and xrdEnv) in its own process group and kills
// the group after timeout.
func run(timeout time.Duration, name string, args ...string) result {
	return runIn(timeout, nil, name, args...)
}

// runIn is run with extra environment variables.
func runIn(timeout time.Duration, env []string, name string, args ...string) result {
	r := result{cmd: filepath.Base(name) + " " + strings.Join(args, " "), code: -1}
	cmd := exec.Command(name, args...)
	cmd.Env = append(append(os.Environ(), xrdEnv...), env...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		r.err = err
		return r
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case r.err = <-done:
	case <-timer.C:
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		r.err = <-done
		r.timedOut = true
	}
	r.elapsed = time.Since(start)
	r.out = buf.String()
	if r.err == nil {
		r.code = 0
	} else if ee, ok := r.err.(*exec.ExitError); ok && !r.timedOut {
		r.code = ee.ExitCode()
	}
	return r
}

// mustRun runs a command and fails the test unless it succeeds.
func mustRun(t testing.TB, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	r := run(timeout, name, args...)
	if !r.ok() {
		t.Fatalf("%v", r)
	}
	return r.out
}

// proc is a long-running process started by a test (a node or a
// gateway). Its process group is killed in t.Cleanup.
type proc struct {
	name string
	args []string
	wrap []string // a command that runs ecstore (ip netns exec NS), or none
	cmd  *exec.Cmd
	log  string // stdout and stderr, appended over restarts
	done chan struct{}
	err  error // Wait's result, once done is closed

	mu      sync.Mutex
	stopped bool // SIGSTOPped and not yet continued
}

// startProc starts the ecstore binary with args in its own process group,
// its output appended to dir/name.log. The process group is killed in
// t.Cleanup (and by the kernel if the test binary dies: Pdeathsig), and
// the log's tail is printed if the test failed.
func startProc(t testing.TB, dir, name string, args ...string) *proc {
	t.Helper()
	return startProcIn(t, dir, name, nil, args...)
}

// startProcIn is startProc with the ecstore binary run by the command
// wrap (which must exec it, keeping its process), such as netLab.exec.
func startProcIn(t testing.TB, dir, name string, wrap []string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, args: args, wrap: wrap, log: filepath.Join(dir, name+".log")}
	if err := p.start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		p.kill()
		if tail := p.tail(2500); t.Failed() && eventful(tail) {
			t.Logf("%s (ecstore %s) log tail:\n%s", name, strings.Join(args, " "), tail)
		}
	})
	return p
}

// eventful reports whether a log has more than start-up lines.
func eventful(log string) bool {
	for _, line := range strings.Split(log, "\n") {
		if line != "" && !strings.HasPrefix(line, "=== ") && !strings.Contains(line, " serving ") {
			return true
		}
	}
	return false
}

func (p *proc) start() error {
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "=== %s start: ecstore %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(p.args, " "))
	cmd := exec.Command(ecstoreBin, p.args...)
	if len(p.wrap) > 0 {
		cmd = exec.Command(p.wrap[0], append(append(p.wrap[1:len(p.wrap):len(p.wrap)], ecstoreBin), p.args...)...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done, p.stopped = cmd, done, false
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// restart starts the process again with the same arguments; it must have
// been killed.
func (p *proc) restart() error {
	if p.alive() {
		return fmt.Errorf("%s is still running", p.name)
	}
	return p.start()
}

// kill sends SIGKILL to the process group (continuing it first, so that
// a stopped process dies at once) and waits for the process.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.stopped = false
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT)
	<-done
}

// stop sends SIGSTOP to the process group: the process hangs, its
// connections stay open.
func (p *proc) stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("SIGSTOP %s: %w", p.name, err)
	}
	p.stopped = true
	return nil
}

// cont sends SIGCONT to the process group.
func (p *proc) cont() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		return fmt.Errorf("SIGCONT %s: %w", p.name, err)
	}
	p.stopped = false
	return nil
}

// alive reports whether the process is running (or stopped).
func (p *proc) alive() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// tail returns the last n bytes of the process's log.
func (p *proc) tail(n int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// waitLog waits until the log, from byte offset from on, matches re and
// returns the submatches.
func (p *proc) waitLog(from int64, re *regexp.Regexp, timeout time.Duration) ([]string, error) {
	deadline := time.Now().Add(timeout)
	for {
		b, _ := os.ReadFile(p.log)
		if int64(len(b)) >= from {
			if m := re.FindSubmatch(b[from:]); m != nil {
				out := make([]string, len(m))
				for i := range m {
					out[i] = string(m[i])
				}
				return out, nil
			}
		}
		if !p.alive() {
			return nil, fmt.Errorf("%s exited (%v) before logging %q:\n%s", p.name, p.err, re, p.tail(2000))
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s did not log %q within %v:\n%s", p.name, re, timeout, p.tail(2000))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logSize returns the current size of the log (for waitLog after a
// restart).
func (p *proc) logSize() int64 {
	fi, err := os.Stat(p.log)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// mountTmpfs mounts a tmpfs of size bytes on dir and detaches it in
// t.Cleanup (registered now, so it runs after the processes registered
// later have been killed). It reports false when mounting is not
// possible (not root), in which case dir stays a plain directory.
func mountTmpfs(t testing.TB, dir string, size int64) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		return false
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		t.Logf("cannot mount a tmpfs on %s (%v): the disk-full fault is skipped", dir, err)
		return false
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
				t.Errorf("unmount %s: %v", dir, err)
			}
		}
	})
	return true
}

// freeBytes returns the free space of the file system holding dir.
func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// sleepCtx sleeps for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
