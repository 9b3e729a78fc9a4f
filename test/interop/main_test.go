//go:build interop

// Package interop is the cross-process interoperability suite of issue 3:
// the ecstore binary (gateway, storage nodes, CLI) driven by the real
// XRootD 5.5 software from Debian — xrdcp, xrdfs, xrdadler32, the xrootd
// data server and the Python bindings (python3-xrootd, for /usr/bin/python3)
// — as separate processes on loopback.
//
// Run with
//
//	go test -tags interop -count=1 -v ./test/interop/
//
// TestMain builds the ecstore binary once. A missing external tool skips
// the test that needs it, except when CI=true, where it fails the test.
// Test data comes from a seeded generator: -seed N reproduces a run (the
// seed is always logged). -short skips the 1 GiB throughput measurement.
//
// Every process a test starts is killed (SIGKILL to its process group) in
// t.Cleanup, also when the test fails; its log is printed on failure.
package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/testport"
	"github.com/ecstore/ecstore/internal/testtool"
)

// ecstoreBin is the ecstore binary built by TestMain.
var ecstoreBin string

var seedFlag = flag.Uint64("seed", 0, "seed of the generated test data (0: from the clock; always logged)")

const (
	kib = 1 << 10
	mib = 1 << 20
	gib = 1 << 30
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		fmt.Fprintf(os.Stderr, "interop: cannot find the module root (go env GOMOD = %q): %v\n", gomod, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "ecstore-interop-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "interop:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	ecstoreBin = filepath.Join(dir, "ecstore")
	build := exec.Command("go", "build", "-o", ecstoreBin, "./cmd/ecstore")
	build.Dir = filepath.Dir(gomod)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "interop: building ecstore:", err)
		return 1
	}
	return m.Run()
}

// pythonBin is the interpreter that has the Debian python3-xrootd
// bindings (not whatever python3 comes first on PATH).
const pythonBin = "/usr/bin/python3"

// missing skips the test, or fails it when CI=true.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("required tool missing (CI=true): %s", msg)
	}
	t.Skipf("tool missing (install with scripts/install-deps.sh): %s", msg)
}

// needPython returns the interpreter with the XRootD bindings and their
// version, skipping (failing when CI=true) when they are not installed.
func needPython(t testing.TB) (bin, version string) {
	t.Helper()
	if _, err := os.Stat(pythonBin); err != nil {
		missing(t, "%s: %v", pythonBin, err)
	}
	out, err := exec.Command(pythonBin, "-c",
		"import sys, XRootD.client, importlib.metadata as m; print('python', sys.version.split()[0], 'xrootd', m.version('xrootd'))").CombinedOutput()
	if err != nil {
		missing(t, "python3-xrootd for %s: %v\n%s", pythonBin, err, out)
	}
	return pythonBin, strings.TrimSpace(string(out))
}

// toolVersion returns what a tool says its version is.
func toolVersion(name string, args ...string) string {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("unknown (%v: %s)", err, bytes.TrimSpace(out))
	}
	return strings.TrimSpace(string(out))
}

// TestToolVersions logs the version of every external tool the suite
// uses; with CI=true it fails when one is missing.
func TestToolVersions(t *testing.T) {
	for _, tool := range []string{"xrdcp", "xrdfs", "xrdadler32", "xrootd"} {
		testtool.Need(t, tool)
	}
	t.Logf("xrdcp --version: %s", toolVersion("xrdcp", "--version"))
	t.Logf("xrootd -v: %s", toolVersion("xrootd", "-v"))
	_, pv := needPython(t)
	t.Logf("%s bindings: %s", pythonBin, pv)
	t.Logf("ecstore version: %s", toolVersion(ecstoreBin, "version"))
}

// seed returns the suite's seed, logging it on each test that uses it.
func seed(t testing.TB) uint64 {
	t.Helper()
	seedOnce.Do(func() {
		seedValue = *seedFlag
		if seedValue == 0 {
			seedValue = uint64(time.Now().UnixNano())
		}
	})
	t.Logf("seed %d (rerun with -seed %d)", seedValue, seedValue)
	return seedValue
}

var (
	seedOnce  sync.Once
	seedValue uint64
)

// writeRandom writes size bytes of the seeded stream (seed, stream) to a
// new file: ChaCha8, several GB/s, so a 1 GiB file takes well under a
// second of CPU.
func writeRandom(t testing.TB, path string, size int64, seed, stream uint64) {
	t.Helper()
	var key [32]byte
	binary.LittleEndian.PutUint64(key[0:], seed)
	binary.LittleEndian.PutUint64(key[8:], stream)
	binary.LittleEndian.PutUint64(key[16:], uint64(size))
	g := rand.NewChaCha8(key)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4*mib)
	for left := size; left > 0; {
		n := min(left, int64(len(buf)))
		_, _ = g.Read(buf[:n])
		if _, err := f.Write(buf[:n]); err != nil {
			f.Close()
			t.Fatal(err)
		}
		left -= n
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// sameFile fails the test unless the files got and want have the same
// bytes; it reports the first differing offset.
func sameFile(t testing.TB, got, want string) {
	t.Helper()
	if off, err := firstDiff(got, want); err != nil {
		t.Fatalf("compare %s with %s: %v", got, want, err)
	} else if off >= 0 {
		t.Fatalf("%s differs from %s at byte %d", got, want, off)
	}
}

// firstDiff returns the first offset where a and b differ (a shorter file
// differs at its end), or -1.
func firstDiff(a, b string) (int64, error) {
	fa, err := os.Open(a)
	if err != nil {
		return 0, err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return 0, err
	}
	defer fb.Close()
	ba, bb := make([]byte, 4*mib), make([]byte, 4*mib)
	var off int64
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if ea != nil && ea != io.EOF && ea != io.ErrUnexpectedEOF {
			return 0, ea
		}
		if eb != nil && eb != io.EOF && eb != io.ErrUnexpectedEOF {
			return 0, eb
		}
		if !bytes.Equal(ba[:na], bb[:nb]) {
			n := min(na, nb)
			for i := range n {
				if ba[i] != bb[i] {
					return off + int64(i), nil
				}
			}
			return off + int64(n), nil
		}
		if na < len(ba) {
			return -1, nil
		}
		off += int64(na)
	}
}

// xrdEnv makes the XRootD client fail fast instead of retrying a refused
// connection for its default two-minute window.
var xrdEnv = []string{"XRD_CONNECTIONWINDOW=5", "XRD_CONNECTIONRETRY=2", "XRD_REQUESTTIMEOUT=120", "XRD_STREAMTIMEOUT=120"}

// toolTimeout bounds every external command.
const toolTimeout = 3 * time.Minute

// run runs an external command (with xrdEnv) and returns its combined
// output.
func run(t testing.TB, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), xrdEnv...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %v: %w", toolTimeout, err)
	}
	return string(out), err
}

// must runs an external command and fails the test if it fails.
func must(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := run(t, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// mustFail runs an external command and fails the test if it succeeds.
func mustFail(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := run(t, name, args...)
	if err == nil {
		t.Fatalf("%s %s succeeded, want failure\n%s", name, strings.Join(args, " "), out)
	}
	return out
}

// adler32Local returns xrdadler32's checksum of a local file.
func adler32Local(t testing.TB, path string) uint32 {
	t.Helper()
	out := must(t, "xrdadler32", path)
	f := strings.Fields(out)
	if len(f) != 2 || len(f[0]) != 8 {
		t.Fatalf("xrdadler32 %s: unexpected output %q", path, out)
	}
	v, err := strconv.ParseUint(f[0], 16, 32)
	if err != nil {
		t.Fatalf("xrdadler32 %s: %q: %v", path, out, err)
	}
	return uint32(v)
}

// xrdcpAdler32 parses the "adler32: HEX URL SIZE" line that
// xrdcp --cksum adler32:print prints; xrdcp drops leading zeros, so the
// value is compared as a number.
func xrdcpAdler32(t testing.TB, out string) uint32 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^adler32: ([0-9a-fA-F]{1,8})\b`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no adler32 in xrdcp output:\n%s", out)
	}
	v, _ := strconv.ParseUint(m[1], 16, 32)
	return uint32(v)
}

// proc is a process started by a test; t.Cleanup kills it.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string // its stdout and stderr
	done chan struct{}
	err  error // Wait's result, once done is closed
}

// startProc starts bin in its own process group with stdout and stderr
// going to dir/name.log. The process group is killed in t.Cleanup (and
// by the kernel if the test binary dies first), and the log's tail is
// printed if the test failed.
func startProc(t testing.TB, dir, name, bin string, args ...string) *proc {
	t.Helper()
	p, err := tryStartProc(t, dir, name, bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tryStartProc is startProc returning an error instead of failing t, for
// callers on goroutines other than the test's.
func tryStartProc(t testing.TB, dir, name, bin string, args ...string) (*proc, error) {
	p := &proc{name: name, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	logf, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = p.cmd.Start()
	logf.Close()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("%s (%s %s) log tail:\n%s", name, filepath.Base(bin), strings.Join(args, " "), p.tail(3000))
		}
	})
	return p, nil
}

// kill sends SIGKILL to the process group and waits for the process.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// alive reports whether the process is still running.
func (p *proc) alive() bool {
	select {
	case <-p.done:
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

// waitLog waits until the process's log matches re and returns the
// submatches; it fails the test when the process exits first or after
// timeout.
func (p *proc) waitLog(t testing.TB, re *regexp.Regexp, timeout time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		b, _ := os.ReadFile(p.log)
		if m := re.FindStringSubmatch(string(b)); m != nil {
			return m
		}
		if !p.alive() {
			t.Fatalf("%s exited (%v) before logging %q:\n%s", p.name, p.err, re, b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not log %q within %v:\n%s", p.name, re, timeout, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gateway is a running "ecstore serve".
type gateway struct {
	*proc
	addr    string   // host:port of its root:// listener
	url     string   // root://host:port
	metrics string   // host:port of /metrics, or ""
	flags   []string // the cluster flags, for ecstore CLI commands
}

var servingRE = regexp.MustCompile(`ecstore: serving root://(\S+) \(`)

// startGateway runs "ecstore serve" on a free loopback port over the
// cluster named by flags, with /metrics on a free port if withMetrics.
func startGateway(t testing.TB, dir string, withMetrics bool, flags ...string) *gateway {
	t.Helper()
	g := &gateway{flags: flags}
	if withMetrics {
		g.metrics = testport.Addr(t)
	}
	args := append([]string{"serve", "--root-addr", "127.0.0.1:0", "--metrics-addr=" + g.metrics}, flags...)
	g.proc = startProc(t, dir, "gateway", ecstoreBin, args...)
	g.addr = g.waitLog(t, servingRE, 30*time.Second)[1]
	g.url = "root://" + g.addr
	return g
}

// obj returns the root:// URL of an object on the gateway.
func (g *gateway) obj(path string) string { return g.url + "/" + path }

// cli runs an ecstore subcommand on the gateway's cluster.
func (g *gateway) cli(t testing.TB, name string, args ...string) string {
	t.Helper()
	return must(t, ecstoreBin, append(append([]string{name}, g.flags...), args...)...)
}

// fsck runs "ecstore fsck --deep" on the gateway's cluster, which reads
// and verifies every chunk, and fails the test unless every object is
// healthy and there is no debris.
func (g *gateway) fsck(t testing.TB) {
	t.Helper()
	t.Logf("ecstore fsck --deep: %s", strings.TrimSpace(g.cli(t, "fsck", "--deep")))
}

// checkAlive fails the test if the gateway has exited.
func (g *gateway) checkAlive(t testing.TB) {
	t.Helper()
	if !g.alive() {
		t.Fatalf("the gateway exited: %v\n%s", g.err, g.tail(3000))
	}
}

// lsEntry is one line of xrdfs ls -l.
type lsEntry struct {
	dir  bool
	size int64
}

// xrdfsLs runs xrdfs ls -l on dir and returns its entries by path.
func xrdfsLs(t testing.TB, url, dir string) map[string]lsEntry {
	t.Helper()
	out := must(t, "xrdfs", url, "ls", "-l", dir)
	ents := map[string]lsEntry{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		// -rw-r--r-- owner group SIZE DATE TIME PATH
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 7 {
			t.Fatalf("xrdfs ls -l %s: bad line %q in\n%s", dir, sc.Text(), out)
		}
		size, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			t.Fatalf("xrdfs ls -l %s: bad size in %q", dir, sc.Text())
		}
		path := f[len(f)-1]
		if _, dup := ents[path]; dup {
			t.Errorf("xrdfs ls -l %s lists %s twice:\n%s", dir, path, out)
		}
		ents[path] = lsEntry{dir: strings.HasPrefix(f[0], "d"), size: size}
	}
	return ents
}

// checkLs checks that xrdfs ls -l dir lists exactly the objects of want
// (path → size; -1 for a directory) with their true sizes.
func checkLs(t testing.TB, url, dir string, want map[string]int64) {
	t.Helper()
	got := xrdfsLs(t, url, dir)
	for p, size := range want {
		e, ok := got[p]
		switch {
		case !ok:
			t.Errorf("xrdfs ls -l %s: %s missing (got %v)", dir, p, got)
		case size < 0 && !e.dir:
			t.Errorf("xrdfs ls -l %s: %s is not shown as a directory", dir, p)
		case size >= 0 && (e.dir || e.size != size):
			t.Errorf("xrdfs ls -l %s: %s has size %d (dir %v), want %d", dir, p, e.size, e.dir, size)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("xrdfs ls -l %s: unexpected entry %s", dir, p)
		}
	}
}

// checkLsEntry checks that xrdfs ls -l dir lists path once, as an
// object of the given size.
func checkLsEntry(t testing.TB, url, dir, path string, size int64) {
	t.Helper()
	e, ok := xrdfsLs(t, url, dir)[path]
	if !ok || e.dir || e.size != size {
		t.Errorf("xrdfs ls -l %s: %s is %+v (listed %v), want an object of %d bytes", dir, path, e, ok, size)
	}
}

// xrootdServer is a real xrootd data server.
type xrootdServer struct {
	*proc
	addr string
	data string // oss.localroot
	// restart starts the server again, as startXrootd did.
	restart func() (*proc, error)
}

// xrootdBase makes a directory for real xrootd servers, removed in
// t.Cleanup. t.TempDir is not used: its parents are mode 0700, and
// xrootd runs as an unprivileged user when the test runs as root.
func xrootdBase(t testing.TB) string {
	t.Helper()
	base, err := os.MkdirTemp("", "ecstore-interop-xrootd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	return base
}

// startXrootd starts (without waiting for it) a real xrootd exporting a
// fresh directory under base on a free port, its configuration ending
// with the extra lines. As root, xrootd refuses to run, so it runs with
// -R as user xrootd (else nobody), which owns its directories.
func startXrootd(t testing.TB, base, name string, extra ...string) *xrootdServer {
	t.Helper()
	bin := testtool.Need(t, "xrootd")
	dir := filepath.Join(base, name)
	s := &xrootdServer{data: filepath.Join(dir, "data")}
	admin := filepath.Join(dir, "admin")
	for _, d := range []string{dir, s.data, admin} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	port := testport.Free(t)
	s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cfg := filepath.Join(dir, "xrootd.cf")
	conf := fmt.Sprintf("xrd.port %d\nall.export /\noss.localroot %s\nall.adminpath %s\nall.pidpath %s\nxrootd.chksum adler32\n",
		port, s.data, admin, admin)
	for _, line := range extra {
		conf += line + "\n"
	}
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-c", cfg, "-l", filepath.Join(admin, "xrootd.log")}
	if name, uid, gid := xrootdUser(t); name != "" {
		for _, d := range []string{s.data, admin} {
			if err := os.Chown(d, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
		args = append(args, "-R", name)
	}
	s.proc = startProc(t, dir, "xrootd-"+name, bin, args...)
	s.restart = func() (*proc, error) { return tryStartProc(t, dir, "xrootd-"+name, bin, args...) }
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(admin, "xrootd.log")); err == nil {
				if len(b) > 3000 {
					b = b[len(b)-3000:]
				}
				t.Logf("xrootd %s log file tail:\n%s", name, b)
			}
		}
	})
	return s
}

// wait waits until the server answers the protocol handshake.
func (s *xrootdServer) wait(t testing.TB, timeout time.Duration) {
	t.Helper()
	if err := s.waitUp(t, timeout); err != nil {
		t.Fatal(err)
	}
}

// waitUp waits until the server answers the protocol handshake. Debian's
// xrootd 5.5.3 has been seen to die of SIGSEGV at start, before its first
// log line (a CI run's TestThroughput1GiB, 2026-11-25): that is its fault,
// not the test's, so a server killed by a signal before it answered is
// started again, twice at most. It returns an error rather than failing
// t, so that servers may be waited for on goroutines.
func (s *xrootdServer) waitUp(t testing.TB, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for restarts := 0; ; {
		err := probeHandshake(s.addr)
		if err == nil {
			return nil
		}
		if !s.alive() {
			if restarts < 2 && killedBySignal(s.err) {
				restarts++
				t.Logf("%s crashed at start (%v); starting it again", s.name, s.err)
				p, err := s.restart()
				if err != nil {
					return err
				}
				s.proc = p
				continue
			}
			return fmt.Errorf("%s exited (%v) at start:\n%s", s.name, s.err, s.tail(3000))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not come up on %s within %v: %v\n%s", s.name, s.addr, timeout, err, s.tail(3000))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killedBySignal reports whether err is the exit of a process killed by a
// signal.
func killedBySignal(err error) bool {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled()
}

// probeHandshake connects to addr and checks the XRootD handshake
// answer.
func probeHandshake(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write(handshake()); err != nil {
		return err
	}
	var resp [16]byte
	if _, err := io.ReadFull(c, resp[:]); err != nil {
		return err
	}
	if binary.BigEndian.Uint16(resp[2:]) != statusOK || binary.BigEndian.Uint32(resp[4:]) != 8 {
		return fmt.Errorf("handshake answer % x", resp)
	}
	return nil
}

// xrootdUser is the user a test runs xrootd (and cmsd) as when it runs as
// root, which xrootd refuses to be: xrootd, or else nobody. It returns
// "" (and uid, gid -1) when the test is not root.
func xrootdUser(t testing.TB) (name string, uid, gid int) {
	t.Helper()
	if os.Geteuid() != 0 {
		return "", -1, -1
	}
	var u *user.User
	var err error
	for _, n := range []string{"xrootd", "nobody"} {
		if u, err = user.Lookup(n); err == nil {
			break
		}
	}
	if u == nil {
		missing(t, "running as root and no user xrootd or nobody to run xrootd as: %v", err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return u.Username, uid, gid
}
