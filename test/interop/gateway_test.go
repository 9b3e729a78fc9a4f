//go:build interop

package interop

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/testtool"
)

// TestGatewayEmbedded runs the real XRootD clients against "ecstore serve"
// on an embedded cluster (8+2, 1 MiB chunks, 2 spares; --fsync=false):
// xrdcp transfers at the sizes around the chunk and block boundaries,
// overwrite semantics, checksums, streams and parallel copies, the xrdfs
// namespace commands and the Python bindings, cross-checked with the
// ecstore CLI on the same cluster.
func TestGatewayEmbedded(t *testing.T) {
	testtool.Need(t, "xrdcp")
	testtool.Need(t, "xrdfs")
	testtool.Need(t, "xrdadler32")
	work := t.TempDir()
	gw := startGateway(t, work, true, "--data", filepath.Join(work, "data"), "--fsync=false")
	seed := seed(t)
	t.Logf("gateway %s, xrdcp %s", gw.url, toolVersion("xrdcp", "--version"))
	files := &localFiles{t: t, dir: filepath.Join(work, "files"), seed: seed}
	if err := os.Mkdir(files.dir, 0o755); err != nil {
		t.Fatal(err)
	}

	t.Run("xrdcp", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			size int64
		}{
			{"0B", 0},
			{"1B", 1},
			{"1MiB+1", mib + 1},
			{"8MiB+1", 8*mib + 1}, // one byte into the second 8+2 block
			{"100MiB+12345", 100*mib + 12345},
		} {
			t.Run(tc.name, func(t *testing.T) {
				local := files.make(tc.name, tc.size)
				path := "/up/" + tc.name
				want := adler32Local(t, local)

				out := must(t, "xrdcp", "--nopbar", "--cksum", "adler32:print", local, gw.obj(path))
				if got := xrdcpAdler32(t, out); got != want {
					t.Errorf("xrdcp --cksum adler32:print printed %08x, xrdadler32 says %08x", got, want)
				}
				out = must(t, "xrdfs", gw.url, "query", "checksum", path)
				if w := fmt.Sprintf("adler32 %08x", want); strings.TrimRight(strings.TrimSpace(out), "\x00") != w {
					t.Errorf("xrdfs query checksum: %q, want %q", out, w)
				}
				checkLsEntry(t, gw.url, "/up", path, tc.size)

				// Download, with xrdcp verifying the gateway's adler32
				// against the bytes it received.
				back := local + ".xrdcp"
				must(t, "xrdcp", "--nopbar", "--cksum", "adler32", gw.obj(path), back)
				sameFile(t, back, local)
				back = local + ".get"
				gw.cli(t, "get", path, back)
				sameFile(t, back, local)
				// ecstore cp over root://, as a user on another host would.
				back = local + ".cp"
				must(t, ecstoreBin, "cp", gw.obj(path), back)
				sameFile(t, back, local)
			})
		}
	})

	t.Run("missing object", func(t *testing.T) {
		out := mustFail(t, "xrdcp", "--nopbar", gw.obj("/up/none"), filepath.Join(work, "none"))
		if !strings.Contains(out, "3011") {
			t.Errorf("xrdcp of a missing object: want kXR_NotFound (3011) in\n%s", out)
		}
		if _, err := os.Stat(filepath.Join(work, "none")); err == nil {
			t.Error("xrdcp of a missing object left a local file")
		}
	})

	t.Run("overwrite", func(t *testing.T) {
		old, repl := files.make("old", 3*mib+3), files.make("new", mib+1)
		path := "/ow/obj"
		must(t, "xrdcp", "--nopbar", old, gw.obj(path))
		must(t, "xrdcp", "--nopbar", "-f", repl, gw.obj(path))
		back := filepath.Join(work, "ow.back")
		must(t, "xrdcp", "--nopbar", "-f", gw.obj(path), back)
		sameFile(t, back, repl) // exactly the new bytes: no tail of the old
		checkLs(t, gw.url, "/ow", map[string]int64{path: mib + 1})

		out := mustFail(t, "xrdcp", "--nopbar", old, gw.obj(path))
		if !strings.Contains(strings.ToLower(out), "exist") {
			t.Errorf("xrdcp onto an existing object without -f: want an 'exists' error, got\n%s", out)
		}
		must(t, "xrdcp", "--nopbar", "-f", gw.obj(path), back)
		sameFile(t, back, repl)
		checkLs(t, gw.url, "/ow", map[string]int64{path: mib + 1})
	})

	t.Run("streams", func(t *testing.T) {
		help, _ := run(t, "xrdcp", "--help")
		if !strings.Contains(help, "--streams") {
			t.Skip("this xrdcp has no --streams")
		}
		// The gateway does not implement kXR_bind: xrdcp must fall back
		// to one stream and still copy correctly.
		local := files.make("streams", 24*mib+5)
		must(t, "xrdcp", "--nopbar", "-S", "2", local, gw.obj("/streams/obj"))
		back := local + ".back"
		must(t, "xrdcp", "--nopbar", "-S", "2", gw.obj("/streams/obj"), back)
		sameFile(t, back, local)
	})

	t.Run("parallel", func(t *testing.T) {
		help, _ := run(t, "xrdcp", "--help")
		if !strings.Contains(help, "--parallel") {
			t.Skip("this xrdcp has no --parallel")
		}
		sizes := map[string]int64{"p0": 1, "p1": mib + 1, "p2": 8*mib + 1, "p3": 9 * mib}
		var locals, remotes []string
		want := map[string]int64{}
		for name, size := range sizes {
			locals = append(locals, files.make(name, size))
			remotes = append(remotes, gw.obj("/par/"+name))
			want["/par/"+name] = size
		}
		must(t, "xrdfs", gw.url, "mkdir", "-p", "/par")
		must(t, "xrdcp", append(append([]string{"--nopbar", "--parallel", "4"}, locals...), gw.url+"//par/")...)
		checkLs(t, gw.url, "/par", want)
		down := filepath.Join(work, "par.back")
		if err := os.Mkdir(down, 0o755); err != nil {
			t.Fatal(err)
		}
		must(t, "xrdcp", append(append([]string{"--nopbar", "--parallel", "4"}, remotes...), down+"/")...)
		for name := range sizes {
			sameFile(t, filepath.Join(down, name), filepath.Join(files.dir, name))
		}
	})

	t.Run("cli and xrdcp", func(t *testing.T) {
		// Objects written by "ecstore put" are read by xrdcp (the other
		// direction is covered by the xrdcp subtests' ecstore get).
		local := files.make("cli", 8*mib+1)
		gw.cli(t, "put", local, "/cli/obj")
		back := local + ".back"
		must(t, "xrdcp", "--nopbar", "--cksum", "adler32", gw.obj("/cli/obj"), back)
		sameFile(t, back, local)
		checkLs(t, gw.url, "/cli", map[string]int64{"/cli/obj": 8*mib + 1})
	})

	t.Run("xrdfs", func(t *testing.T) {
		testXrdfs(t, gw, files)
	})

	t.Run("python", func(t *testing.T) {
		testPython(t, gw, files)
	})

	t.Run("metrics", func(t *testing.T) {
		body := scrape(t, gw.metrics)
		for _, name := range []string{"ec_gateway_requests_total", "ec_gateway_bytes_total"} {
			if metricSum(body, name) <= 0 {
				t.Errorf("/metrics: %s is not positive after the transfers:\n%s", name, grep(body, name))
			}
		}
	})
	t.Run("fsck", func(t *testing.T) { gw.fsck(t) })
	gw.checkAlive(t)
}

// localFiles makes seeded local test files.
type localFiles struct {
	t    *testing.T
	dir  string
	seed uint64
	n    uint64
}

// make writes a new file of size random bytes and returns its path.
func (f *localFiles) make(name string, size int64) string {
	f.t.Helper()
	f.n++
	p := filepath.Join(f.dir, name)
	writeRandom(f.t, p, size, f.seed, 1000+f.n)
	return p
}

// testXrdfs checks xrdfs's namespace commands through the gateway.
func testXrdfs(t *testing.T, gw *gateway, files *localFiles) {
	a, b := files.make("ns-a", 1), files.make("ns-b", mib+1)
	c := files.make("ns-c", 0)
	must(t, "xrdcp", "--nopbar", a, gw.obj("/ns/a"))
	must(t, "xrdcp", "--nopbar", b, gw.obj("/ns/b"))
	must(t, "xrdcp", "--nopbar", c, gw.obj("/ns/sub/c"))
	url := gw.url

	t.Run("ls", func(t *testing.T) {
		checkLs(t, url, "/ns", map[string]int64{"/ns/a": 1, "/ns/b": mib + 1, "/ns/sub": -1})
		checkLs(t, url, "/ns/sub", map[string]int64{"/ns/sub/c": 0})
		out := must(t, "xrdfs", url, "ls", "/ns")
		got := strings.Fields(out)
		slices.Sort(got)
		if strings.Join(got, " ") != "/ns/a /ns/b /ns/sub" {
			t.Errorf("xrdfs ls /ns: %q", out)
		}
	})
	t.Run("stat", func(t *testing.T) {
		st := xrdfsStat(t, url, "/ns/b")
		if st["Size"] != strconv.Itoa(mib+1) || strings.Contains(st["Flags"], "IsDir") || !strings.Contains(st["Flags"], "IsReadable") {
			t.Errorf("xrdfs stat /ns/b: %v", st)
		}
		if st := xrdfsStat(t, url, "/ns/sub/c"); st["Size"] != "0" {
			t.Errorf("xrdfs stat /ns/sub/c: %v", st)
		}
		if st := xrdfsStat(t, url, "/ns/sub"); !strings.Contains(st["Flags"], "IsDir") {
			t.Errorf("xrdfs stat /ns/sub: %v", st)
		}
		out := mustFail(t, "xrdfs", url, "stat", "/ns/missing")
		if !strings.Contains(out, "[3011]") {
			t.Errorf("xrdfs stat of a missing path: want [3011] in %q", out)
		}
	})
	t.Run("query checksum", func(t *testing.T) {
		out := must(t, "xrdfs", url, "query", "checksum", "/ns/b")
		if w := fmt.Sprintf("adler32 %08x", adler32Local(t, b)); strings.TrimRight(strings.TrimSpace(out), "\x00") != w {
			t.Errorf("xrdfs query checksum: %q, want %q", out, w)
		}
	})
	t.Run("locate", func(t *testing.T) {
		out := must(t, "xrdfs", url, "locate", "/ns/b")
		_, port, _ := strings.Cut(gw.addr, ":")
		if !strings.Contains(out, "127.0.0.1]:"+port) || !strings.Contains(out, "Server") {
			t.Errorf("xrdfs locate /ns/b: %q, want the gateway %s as a server", out, gw.addr)
		}
	})
	t.Run("spaceinfo", func(t *testing.T) {
		out := must(t, "xrdfs", url, "spaceinfo", "/")
		total := regexp.MustCompile(`Total:\s+(\d+)`).FindStringSubmatch(out)
		free := regexp.MustCompile(`Free:\s+(\d+)`).FindStringSubmatch(out)
		if total == nil || free == nil {
			t.Fatalf("xrdfs spaceinfo /: %q", out)
		}
		tot, _ := strconv.ParseInt(total[1], 10, 64)
		fr, _ := strconv.ParseInt(free[1], 10, 64)
		if tot <= 0 || fr <= 0 || fr > tot {
			t.Errorf("xrdfs spaceinfo /: total %d free %d:\n%s", tot, fr, out)
		}
	})
	t.Run("mkdir -p", func(t *testing.T) {
		must(t, "xrdfs", url, "mkdir", "-p", "/ns/d1/d2/d3")
		if st := xrdfsStat(t, url, "/ns/d1/d2/d3"); !strings.Contains(st["Flags"], "IsDir") {
			t.Errorf("xrdfs stat after mkdir -p: %v", st)
		}
		checkLs(t, url, "/ns/d1/d2", map[string]int64{"/ns/d1/d2/d3": -1})
		checkLs(t, url, "/ns/d1/d2/d3", map[string]int64{})
		must(t, "xrdfs", url, "mkdir", "-p", "/ns/d1/d2/d3") // exists: fine with -p
	})
	t.Run("mv", func(t *testing.T) {
		must(t, "xrdfs", url, "mv", "/ns/a", "/ns/d1/a2")
		if out := mustFail(t, "xrdfs", url, "stat", "/ns/a"); !strings.Contains(out, "[3011]") {
			t.Errorf("stat of a moved object: %q", out)
		}
		back := a + ".mv"
		must(t, "xrdcp", "--nopbar", gw.obj("/ns/d1/a2"), back)
		sameFile(t, back, a)
		checkLs(t, url, "/ns/d1", map[string]int64{"/ns/d1/a2": 1, "/ns/d1/d2": -1})
		// A directory, with the object inside it.
		must(t, "xrdfs", url, "mv", "/ns/sub", "/ns/sub2")
		checkLs(t, url, "/ns/sub2", map[string]int64{"/ns/sub2/c": 0})
		if out := mustFail(t, "xrdfs", url, "stat", "/ns/sub"); !strings.Contains(out, "[3011]") {
			t.Errorf("stat of a moved directory: %q", out)
		}
	})
	t.Run("rm", func(t *testing.T) {
		must(t, "xrdfs", url, "rm", "/ns/d1/a2")
		if out := mustFail(t, "xrdfs", url, "stat", "/ns/d1/a2"); !strings.Contains(out, "[3011]") {
			t.Errorf("stat of a removed object: %q", out)
		}
		checkLs(t, url, "/ns/d1", map[string]int64{"/ns/d1/d2": -1})
		mustFail(t, "xrdcp", "--nopbar", "-f", gw.obj("/ns/d1/a2"), a+".rm")
		mustFail(t, "xrdfs", url, "rm", "/ns/d1/a2")
	})
	t.Run("rmdir", func(t *testing.T) {
		mustFail(t, "xrdfs", url, "rmdir", "/ns/d1/d2") // not empty
		must(t, "xrdfs", url, "rmdir", "/ns/d1/d2/d3")
		must(t, "xrdfs", url, "rmdir", "/ns/d1/d2")
		must(t, "xrdfs", url, "rmdir", "/ns/d1")
		if out := mustFail(t, "xrdfs", url, "stat", "/ns/d1"); !strings.Contains(out, "[3011]") {
			t.Errorf("stat of a removed directory: %q", out)
		}
		checkLs(t, url, "/ns", map[string]int64{"/ns/b": mib + 1, "/ns/sub2": -1})
	})
}

// xrdfsStat runs xrdfs stat and returns its "Key: value" lines.
func xrdfsStat(t *testing.T, url, path string) map[string]string {
	t.Helper()
	out := must(t, "xrdfs", url, "stat", path)
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return m
}

// pythonScript exercises XRootD.client.File and FileSystem. Its argument
// is a JSON object (see testPython); it prints PYTHON-OK on success.
const pythonScript = `
import sys, json
from XRootD import client
from XRootD.client.flags import OpenFlags, DirListFlags, StatInfoFlags

a = json.loads(sys.argv[1])
url = a["url"]

def check(st, what):
    if not st.ok:
        raise SystemExit("%s failed: %s" % (what, st))

want = open(a["local"], "rb").read()
n = len(want)
f = client.File()
check(f.open(url + "/" + a["obj"], OpenFlags.READ)[0], "open for read")
st, info = f.stat()
check(st, "File.stat")
assert info.size == n, ("File.stat size", info.size, n)
st, data = f.read()
check(st, "read whole")
assert data == want, "whole read differs (%d of %d bytes)" % (len(data), n)
for off, size in a["reads"]:
    st, data = f.read(offset=off, size=size)
    check(st, "read %d+%d" % (off, size))
    assert data == want[off:off + size], "read %d+%d differs (%d bytes)" % (off, size, len(data))
chunks = [tuple(c) for c in a["readv"]]
st, vr = f.vector_read(chunks=chunks)
check(st, "vector_read")
assert len(vr.chunks) == len(chunks), ("readv chunks", len(vr.chunks))
for (off, size), c in zip(chunks, vr.chunks):
    assert c.offset == off and c.length == size, ("readv chunk", c.offset, c.length)
    assert c.buffer == want[off:off + size], "readv %d+%d differs" % (off, size)
check(f.close()[0], "close read")

new = open(a["newlocal"], "rb").read()
f = client.File()
check(f.open(url + "/" + a["newobj"], OpenFlags.NEW | OpenFlags.MAKEPATH)[0], "open new")
off = 0
for size in a["writes"]:
    check(f.write(new[off:off + size], offset=off)[0], "write %d+%d" % (off, size))
    off += size
assert off == len(new), (off, len(new))
check(f.close()[0], "close written")

f = client.File()
check(f.open(url + "/" + a["newobj"], OpenFlags.READ)[0], "reopen written")
st, info = f.stat()
check(st, "File.stat written")
assert info.size == len(new), ("written size", info.size, len(new))
st, data = f.read()
check(st, "read written")
assert data == new, "written object reads back differently"
st, data = f.read(offset=len(new) - 3, size=100)
check(st, "read written tail")
assert data == new[-3:], "read of the written tail differs"
check(f.close()[0], "close reopened")

st, _ = client.File().open(url + "/" + a["newobj"], OpenFlags.NEW)
assert not st.ok, "open NEW of an existing object succeeded"

fs = client.FileSystem(url)
st, info = fs.stat(a["newobj"])
check(st, "FileSystem.stat")
assert info.size == len(new), ("FileSystem.stat size", info.size)
st, info = fs.stat(a["dir"])
check(st, "FileSystem.stat dir")
assert info.flags & StatInfoFlags.IS_DIR, ("dir flags", info.flags)
st, listing = fs.dirlist(a["dir"], DirListFlags.STAT)
check(st, "dirlist")
got = {e.name: (-1 if e.statinfo.flags & StatInfoFlags.IS_DIR else e.statinfo.size) for e in listing}
assert got == a["list"], ("dirlist", got, a["list"])
print("PYTHON-OK")
`

// testPython runs pythonScript against the gateway: reads of an object
// written by xrdcp, and an object written by Python read back by Python,
// xrdcp and the ecstore CLI.
func testPython(t *testing.T, gw *gateway, files *localFiles) {
	py, version := needPython(t)
	t.Logf("%s bindings: %s", py, version)
	size := int64(8*mib + 1)
	local := files.make("py-read", size)
	must(t, "xrdcp", "--nopbar", local, gw.obj("/py/read.bin"))
	must(t, "xrdfs", gw.url, "mkdir", "-p", "/py/sub")
	newSize := int64(5*mib + 5)
	newLocal := files.make("py-new", newSize)
	args := map[string]any{
		"url":   gw.url,
		"obj":   "/py/read.bin",
		"local": local,
		"reads": [][2]int64{{0, 1}, {1, 4096}, {mib - 3, 7}, {8*mib - 5, 10}, {size - 10, 100}, {3*mib + 17, 2 * mib}, {size, 10}},
		"readv": [][2]int64{{0, 10}, {mib - 5, 10}, {4 * mib, 4096}, {8*mib - 2, 3}, {size - 1, 1}},
		// Sequential writes that do not line up with chunks or blocks.
		"newobj":   "/py/new.bin",
		"newlocal": newLocal,
		"writes":   []int64{mib, 3*mib + 3, 2, newSize - 4*mib - 5},
		"dir":      "/py",
		"list":     map[string]int64{"read.bin": size, "new.bin": newSize, "sub": -1},
	}
	js, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(files.dir, "interop.py")
	if err := os.WriteFile(script, []byte(pythonScript), 0o644); err != nil {
		t.Fatal(err)
	}
	out := must(t, py, script, string(js))
	if !strings.Contains(out, "PYTHON-OK") {
		t.Fatalf("python script output:\n%s", out)
	}
	back := newLocal + ".xrdcp"
	must(t, "xrdcp", "--nopbar", "--cksum", "adler32", gw.obj("/py/new.bin"), back)
	sameFile(t, back, newLocal)
	back = newLocal + ".get"
	gw.cli(t, "get", "/py/new.bin", back)
	sameFile(t, back, newLocal)
}

// scrape fetches /metrics.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s %v\n%s", resp.Status, err, b)
	}
	return string(b)
}

// metricSum adds up the samples of a metric in a Prometheus text page.
func metricSum(page, name string) float64 {
	var sum float64
	for _, line := range strings.Split(page, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// grep returns the lines of page that contain s.
func grep(page, s string) string {
	var out []string
	for _, line := range strings.Split(page, "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestPageChecksums checks with xrdcp's own debug log which requests it
// sends: plain kXR_read and kXR_write to a default gateway (it offers no
// page checksums, so that xrdcp computes no CRC32C per page), kXR_pgread
// and kXR_pgwrite to one run with --page-checksums. The bytes arrive
// intact either way.
func TestPageChecksums(t *testing.T) {
	testtool.Need(t, "xrdcp")
	for _, tc := range []struct {
		flags       []string
		write, read string
	}{
		{nil, "write", "read"},
		{[]string{"--page-checksums"}, "pgwrite", "pgread"},
	} {
		t.Run(fmt.Sprintf("flags=%v", tc.flags), func(t *testing.T) {
			work := t.TempDir()
			flags := append([]string{"--data", filepath.Join(work, "data"), "--fsync=false"}, tc.flags...)
			gw := startGateway(t, work, false, flags...)
			local := filepath.Join(work, "in")
			writeRandom(t, local, 3*mib+5, seed(t), 40)
			sent := func(args ...string) map[string]int {
				cmd := exec.Command("xrdcp", append([]string{"--nopbar", "-f"}, args...)...)
				cmd.Env = append(os.Environ(), append(xrdEnv, "XRD_LOGLEVEL=Debug")...)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("xrdcp %v: %v\n%s", args, err, lastLines(string(out), 20))
				}
				// Only requests to the gateway, not to the local file.
				n := map[string]int{}
				for _, m := range sentRE.FindAllStringSubmatch(string(out), -1) {
					n[m[1]]++
				}
				return n
			}
			put := sent(local, gw.obj("/pc/f"))
			back := filepath.Join(work, "back")
			get := sent(gw.obj("/pc/f"), back)
			sameFile(t, back, local)
			other := map[string]string{"write": "pgwrite", "pgwrite": "write", "read": "pgread", "pgread": "read"}
			if put[tc.write] == 0 || put[other[tc.write]] != 0 {
				t.Errorf("the put sent %v; want %s requests and no %s", put, tc.write, other[tc.write])
			}
			if get[tc.read] == 0 || get[other[tc.read]] != 0 {
				t.Errorf("the get sent %v; want %s requests and no %s", get, tc.read, other[tc.read])
			}
		})
	}
}

// sentRE matches XrdCl's debug line for a request sent for a file open on
// a root:// server.
var sentRE = regexp.MustCompile(`@root://[^\]]*\] Sending a ([a-z]+) command for handle`)

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
