//go:build interop

package interop

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// XrdCl (5.5) reports a Close as done, without sending it, when it finds
// its connection already gone: it takes the server to have closed the
// file at the disconnect, as a plain xrootd does. The Python bindings
// write an object through a proxy that is cut after the writes are
// answered, then close it, and are told the close succeeded: the gateway
// must then hold the object, whole, when it was written to the size its
// client announced (oss.asize, as xrdcp sends), and must not when the
// upload stopped short of it.
func TestUploadWholeWhenConnectionDropsBeforeClose(t *testing.T) {
	py, _ := needPython(t)
	work := t.TempDir()
	gw := startGateway(t, work, false, "--data", filepath.Join(work, "data"), "--fsync=false")
	for _, tc := range []struct {
		name    string
		written int // of 3 MiB + 5 announced
		kept    bool
	}{
		{"whole", 3*mib + 5, true},
		{"cut", 2 * mib, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const announced = 3*mib + 5
			local := filepath.Join(work, tc.name+".bin")
			writeRandom(t, local, announced, seed(t), 11)
			px := startProxy(t, gw.addr)
			obj := "/drop/" + tc.name
			rest, stderr, err := cutPython(t, px, nil, "WRITTEN", py, "-c", dropScript,
				"root://"+px.addr+"/"+obj, local, strconv.Itoa(announced), strconv.Itoa(tc.written))
			if err != nil {
				t.Fatalf("python: %v\n%s\n%s", err, strings.Join(rest, "\n"), stderr)
			}
			if len(rest) != 1 || rest[0] != "CLOSE True" {
				t.Fatalf("python after the cut: %q, want XrdCl's close to report success (the behaviour this test is about)", rest)
			}
			got := filepath.Join(work, tc.name+".got")
			// The gateway commits or discards the upload once it sees the
			// connection gone: a cut one is looked for 2 s.
			deadline := time.Now().Add(15 * time.Second)
			if !tc.kept {
				deadline = time.Now().Add(2 * time.Second)
			}
			for {
				out, err := run(t, "xrdcp", "--nopbar", "-f", gw.obj(obj), got)
				switch {
				case tc.kept && err == nil:
					sameFile(t, got, local)
					return
				case !tc.kept && err == nil:
					t.Fatalf("an upload cut short at %d of %d bytes is visible after its connection dropped", tc.written, announced)
				case !strings.Contains(out, "does not exist"):
					t.Fatalf("xrdcp %s: %v\n%s", obj, err, out)
				case time.Now().After(deadline):
					if tc.kept {
						t.Fatalf("the whole upload is still absent 15 s after its connection dropped:\n%s\ngateway log:\n%s", out, gw.tail(2000))
					}
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
}

// dropScript writes the first WRITTEN bytes of LOCAL to URL opened with
// oss.asize=ANNOUNCED, waits for a line on stdin (the test cuts the
// connection meanwhile), then closes the file and prints what the close
// said.
const dropScript = `
import sys, time
from XRootD import client
from XRootD.client.flags import OpenFlags
url, local, announced, written = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
data = open(local, "rb").read()[:written]
f = client.File()
st, _ = f.open(url + "?oss.asize=%d" % announced, OpenFlags.NEW | OpenFlags.MAKEPATH)
if not st.ok:
    sys.exit("open: " + st.message)
off = 0
while off < len(data):
    n = min(1 << 20, len(data) - off)
    st, _ = f.write(data[off:off + n], off)
    if not st.ok:
        sys.exit("write: " + st.message)
    off += n
print("WRITTEN", flush=True)
sys.stdin.readline()
time.sleep(0.5)  # for the client to see the connection gone
st, _ = f.close()
print("CLOSE", st.ok, flush=True)
`

// cutPython runs the Python script of args (with env added), waits for
// its first line, which must be ready, cuts px's connections, tells the
// script to go on (a line on its stdin) and returns the lines it printed
// then, its stderr and how it exited.
func cutPython(t testing.TB, px *proxy, env []string, ready string, args ...string) ([]string, string, error) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != ready {
		cmd.Wait()
		t.Fatalf("python: %q before the cut, want %q; stderr:\n%s", lines.Text(), ready, stderr.String())
	}
	px.cut()
	io.WriteString(stdin, "go on\n")
	var rest []string
	for lines.Scan() {
		rest = append(rest, lines.Text())
	}
	err = cmd.Wait()
	return rest, stderr.String(), err
}

// proxy forwards TCP connections to a server until cut closes them all.
type proxy struct {
	addr  string
	mu    sync.Mutex
	conns []net.Conn
}

func startProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{addr: ln.Addr().String()}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(c, s); c.Close() }()
		}
	}()
	return p
}

// cut closes every connection the proxy carries.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// XrdCl's write recovery through the gateway: the connection of an
// upload breaks half way (the proxy between them is cut), and the
// client goes on: it logs in again, ends its broken session
// (kXR_endsess), opens the file again with kXR_open_updt and sends the
// rest. The object must be whole, as it is against a plain xrootd.
func TestUploadGoesOnAfterItsConnectionBreaks(t *testing.T) {
	py, _ := needPython(t)
	work := t.TempDir()
	gw := startGateway(t, work, false, "--data", filepath.Join(work, "data"), "--fsync=false", "--log-level", "info")
	const size = 20*mib + 3
	local := filepath.Join(work, "src.bin")
	writeRandom(t, local, size, seed(t), 12)
	px := startProxy(t, gw.addr)
	env := []string{"XRD_LOGLEVEL=Debug", "XRD_LOGFILE=" + filepath.Join(work, "xrdcl.log")}
	rest, stderr, err := cutPython(t, px, env, "HALF", py, "-c", resumeScript, "root://"+px.addr+"//resume/obj", local)
	if err != nil || len(rest) != 1 || rest[0] != "DONE" {
		log, _ := os.ReadFile(filepath.Join(work, "xrdcl.log"))
		t.Fatalf("python after the cut: %v %q\n%s\nXrdCl's log ends:\n%s\ngateway log:\n%s", err, rest, stderr,
			lastLines(string(log), 30), gw.tail(2000))
	}
	gw.waitLog(t, regexp.MustCompile(`taken up again.* path=/resume/obj `), 5*time.Second)
	got := filepath.Join(work, "got.bin")
	must(t, "xrdcp", "--nopbar", "-f", gw.obj("/resume/obj"), got)
	sameFile(t, got, local)
}

// resumeScript writes LOCAL to URL, opened as xrdcp opens (kXR_new and
// kXR_open_updt, the size announced), in 1 MiB writes; half way it
// prints HALF and waits for a line on stdin (the test cuts the
// connection meanwhile), then writes the rest, closes and prints DONE.
const resumeScript = `
import sys, time
from XRootD import client
from XRootD.client.flags import OpenFlags
url, local = sys.argv[1], sys.argv[2]
data = open(local, "rb").read()
f = client.File()
st, _ = f.open(url + "?oss.asize=%d" % len(data), OpenFlags.NEW | OpenFlags.UPDATE | OpenFlags.MAKEPATH)
if not st.ok:
    sys.exit("open: " + st.message)
off, half = 0, len(data) // 2
while off < len(data):
    if off >= half and half >= 0:
        print("HALF", flush=True)
        sys.stdin.readline()
        time.sleep(0.3)  # for the client to see the connection gone
        half = -1
    n = min(1 << 20, len(data) - off)
    st, _ = f.write(data[off:off + n], off)
    if not st.ok:
        sys.exit("write at %d: %s" % (off, st.message))
    off += n
st, _ = f.close()
if not st.ok:
    sys.exit("close: " + st.message)
print("DONE", flush=True)
`

// The same with xrdcp itself, its writes in flight (four of 8 MiB, rate
// limited) when the connection breaks: some are cut inside their
// payload, some taken and not answered, and xrdcp sends them all again.
func TestXrdcpGoesOnAfterItsConnectionBreaks(t *testing.T) {
	work := t.TempDir()
	gw := startGateway(t, work, false, "--data", filepath.Join(work, "data"), "--fsync=false", "--log-level", "info")
	const size = 96*mib + 5
	local := filepath.Join(work, "src.bin")
	writeRandom(t, local, size, seed(t), 13)
	for _, cutAfter := range []time.Duration{700 * time.Millisecond, 1900 * time.Millisecond} {
		px := startProxy(t, gw.addr)
		obj := fmt.Sprintf("/resume/xrdcp-%v", cutAfter)
		cmd := exec.Command("xrdcp", "--nopbar", "--xrate", "40M", local, "root://"+px.addr+"/"+obj)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(cutAfter)
		px.cut()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("xrdcp, its connection cut after %v: %v\n%s\ngateway log:\n%s", cutAfter, err, out.String(), gw.tail(2000))
		}
		// The cut came while xrdcp wrote: its upload was taken up again.
		gw.waitLog(t, regexp.MustCompile(`taken up again.* path=`+regexp.QuoteMeta(obj)+` `), 5*time.Second)
		got := filepath.Join(work, "got.bin")
		must(t, "xrdcp", "--nopbar", "-f", gw.obj(obj), got)
		sameFile(t, got, local)
	}
}
