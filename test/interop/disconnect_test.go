//go:build interop

package interop

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"os/exec"
	"path/filepath"
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
			cmd := exec.Command(py, "-c", dropScript, "root://"+px.addr+"/"+obj, local, strconv.Itoa(announced), strconv.Itoa(tc.written))
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
			if !lines.Scan() || lines.Text() != "WRITTEN" {
				cmd.Wait()
				t.Fatalf("python: %q before the cut; stderr:\n%s", lines.Text(), stderr.String())
			}
			px.cut()
			io.WriteString(stdin, "go on\n")
			var rest []string
			for lines.Scan() {
				rest = append(rest, lines.Text())
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("python: %v\n%s\n%s", err, strings.Join(rest, "\n"), stderr.String())
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
						t.Fatalf("the whole upload is still absent 15 s after its connection dropped:\n%s\ngateway log:\n%s", out, gw.tail(20))
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
