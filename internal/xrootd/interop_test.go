//go:build interop

package xrootd

// Interoperability with the real XRootD 5.5 tools: xrdfs, xrdcp and the
// Python bindings against Server, and Client against a real xrootd data
// server. Run with
//
//	go test -tags interop ./internal/xrootd/
//
// A missing tool skips its test, except when CI=true, where it fails.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/adler32"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/testtool"
)

// logVersion logs the version a tool reports.
func logVersion(t *testing.T, tool string, args ...string) {
	out, err := exec.Command(tool, args...).CombinedOutput()
	t.Logf("%s %s: %s (err %v)", tool, strings.Join(args, " "), strings.TrimSpace(string(out)), err)
}

// runTool runs a tool and returns its combined output; it fails the test
// when the tool fails, unless wantErr.
func runTool(t *testing.T, wantErr bool, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if (err != nil) != wantErr {
		t.Fatalf("%s %s: err=%v, want error %v\n%s", name, strings.Join(args, " "), err, wantErr, out)
	}
	return string(out)
}

func TestInteropXrdfs(t *testing.T) {
	xrdfs := testtool.Need(t, "xrdfs")
	logVersion(t, "xrdcp", "--version")
	m := newMemFS()
	m.put("/data/a.txt", []byte("hello"))
	sum := []byte("checksum this content")
	m.put("/data/b.bin", sum)
	const many = 3000
	for i := range many {
		m.put(fmt.Sprintf("/many/file_with_a_fairly_long_name_number_%05d.dat", i), nil)
	}
	addr, _ := startServer(t, m, Limits{ResponseChunk: 8 << 10})
	url := "root://" + addr

	out := runTool(t, false, nil, xrdfs, url, "ls", "-l", "/")
	if !strings.Contains(out, "drwxr-xr-x test test") || !strings.Contains(out, " /data\n") || !strings.Contains(out, " /many\n") {
		t.Errorf("ls -l /:\n%s", out)
	}
	out = runTool(t, false, nil, xrdfs, url, "ls", "-l", "/data")
	if !strings.Contains(out, "/data/a.txt") || !strings.Contains(out, "/data/b.bin") || !strings.Contains(out, "-rw-r--r-- test test") {
		t.Errorf("ls -l:\n%s", out)
	}
	out = runTool(t, false, nil, xrdfs, url, "stat", "/data/a.txt")
	if !strings.Contains(out, "Size:   5") || !strings.Contains(out, "IsReadable") {
		t.Errorf("stat:\n%s", out)
	}
	out = runTool(t, true, nil, xrdfs, url, "stat", "/missing")
	if !strings.Contains(out, "[3011]") {
		t.Errorf("stat missing:\n%s", out)
	}

	runTool(t, false, nil, xrdfs, url, "mkdir", "-p", "/x/y/z")
	if fi, err := m.Stat(context.Background(), "/x/y/z"); err != nil || !fi.IsDir() {
		t.Errorf("mkdir -p: %+v %v", fi, err)
	}
	runTool(t, false, nil, xrdfs, url, "mv", "/data/a.txt", "/x/y/z/a.txt")
	if _, ok := m.get("/x/y/z/a.txt"); !ok {
		t.Error("mv did not move the file")
	}
	runTool(t, false, nil, xrdfs, url, "rm", "/x/y/z/a.txt")
	runTool(t, false, nil, xrdfs, url, "rmdir", "/x/y/z")
	if _, err := m.Stat(context.Background(), "/x/y/z"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("rmdir: %v", err)
	}

	out = runTool(t, false, nil, xrdfs, url, "query", "checksum", "/data/b.bin")
	if want := fmt.Sprintf("adler32 %08x", adler32.Checksum(sum)); !strings.Contains(out, want) {
		t.Errorf("query checksum: %q, want %q", out, want)
	}
	out = runTool(t, false, nil, xrdfs, url, "query", "config", "readv_iov_max")
	if strings.TrimSpace(out) != "1024" {
		t.Errorf("query config: %q", out)
	}
	out = runTool(t, false, nil, xrdfs, url, "spaceinfo", "/")
	if !strings.Contains(out, "Total:              1099511627776") {
		t.Errorf("spaceinfo:\n%s", out)
	}

	for _, long := range []bool{false, true} {
		args := []string{url, "ls", "/many"}
		if long {
			args = []string{url, "ls", "-l", "/many"}
		}
		lines := strings.Split(strings.TrimSpace(runTool(t, false, nil, xrdfs, args...)), "\n")
		if len(lines) != many || !strings.HasSuffix(lines[many-1], fmt.Sprintf("number_%05d.dat", many-1)) {
			t.Errorf("ls (long=%v) of %d entries gave %d lines, last %q", long, many, len(lines), lines[len(lines)-1])
		}
	}
}

func TestInteropXrdcp(t *testing.T) {
	xrdcp := testtool.Need(t, "xrdcp")
	logVersion(t, "xrdcp", "--version")
	r := rand.New(rand.NewPCG(testSeed(t), 10))
	m := newMemFS()
	addr, _ := startServer(t, m, Limits{})
	dir := t.TempDir()

	sizes := []int{0, 1, 1<<20 + 1, 64<<20 + 12345}
	for _, size := range sizes {
		for _, pages := range []bool{true, false} {
			if !pages && size > 2<<20 {
				continue
			}
			t.Run(fmt.Sprintf("size=%d/pgrw=%v", size, pages), func(t *testing.T) {
				var env []string
				if !pages {
					// Make xrdcp use kXR_read and kXR_write.
					env = []string{"XRD_CPUSEPGWRTRD=0"}
				}
				data := randomBytes(r, size)
				local := filepath.Join(dir, fmt.Sprintf("in.%d.%v", size, pages))
				if err := os.WriteFile(local, data, 0o644); err != nil {
					t.Fatal(err)
				}
				name := fmt.Sprintf("/up/%d.%v.bin", size, pages)
				remote := "root://" + addr + "/" + name
				// xrdcp prints adler32 without leading zeros, whatever the
				// server sent.
				want := fmt.Sprintf("%x", adler32.Checksum(data))

				out := runTool(t, false, env, xrdcp, "-f", "--nopbar", "--cksum", "adler32:print", local, remote)
				if !strings.Contains(out, "adler32: "+want) {
					t.Errorf("upload checksum output %q, want adler32 %s", out, want)
				}
				if got, ok := m.get(name); !ok || !bytes.Equal(got, data) {
					t.Fatalf("uploaded %d bytes differ from the %d sent", len(got), size)
				}

				back := filepath.Join(dir, fmt.Sprintf("out.%d.%v", size, pages))
				runTool(t, false, env, xrdcp, "-f", "--nopbar", "--cksum", "adler32", remote, back)
				got, err := os.ReadFile(back)
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("downloaded %d bytes differ from the %d stored (%v)", len(got), size, err)
				}
			})
		}
	}
	t.Run("missing source", func(t *testing.T) {
		out := runTool(t, true, nil, xrdcp, "-f", "--nopbar", "root://"+addr+"//nope", filepath.Join(dir, "nope"))
		if !strings.Contains(out, "3011") {
			t.Errorf("output %q lacks kXR_NotFound", out)
		}
	})
}

const pythonScript = `
import sys, zlib
from XRootD import client
from XRootD.client.flags import OpenFlags, DirListFlags, QueryCode

url = sys.argv[1]
def check(st, what):
    if not st.ok:
        raise SystemExit("%s failed: %s" % (what, st))

data = bytes(range(256)) * 4096 + b"tail"
f = client.File()
check(f.open(url + "//py/data.bin", OpenFlags.NEW | OpenFlags.MAKEPATH)[0], "open new")
check(f.write(data[:1 << 20], offset=0)[0], "write")
check(f.write(data[1 << 20:], offset=1 << 20)[0], "write tail")
check(f.sync()[0], "sync")
st, info = f.stat(force=True)
check(st, "stat by handle")
assert info.size == len(data), info.size
check(f.close()[0], "close")

f = client.File()
check(f.open(url + "//py/data.bin", OpenFlags.READ)[0], "open read")
st, got = f.read(offset=4095, size=10000)
check(st, "read")
assert got == data[4095:14095], "read data differs"
st, whole = f.read()
check(st, "read all")
assert whole == data, "whole read differs (%d bytes)" % len(whole)
st, vr = f.vector_read(chunks=[(0, 10), (1000000, 20), (len(data) - 4, 4)])
check(st, "vector_read")
bufs = [c.buffer for c in vr.chunks]
assert bufs == [data[0:10], data[1000000:1000020], b"tail"], bufs
check(f.close()[0], "close read")

fs = client.FileSystem(url)
st, listing = fs.dirlist("/py", DirListFlags.STAT)
check(st, "dirlist")
entries = {e.name: e.statinfo.size for e in listing}
assert entries == {"data.bin": len(data)}, entries
st, resp = fs.query(QueryCode.CHECKSUM, "/py/data.bin")
check(st, "query checksum")
want = "adler32 %08x" % (zlib.adler32(data) & 0xffffffff)
assert resp.decode().strip("\x00").strip() == want, (resp, want)
st, info = fs.stat("/py/data.bin")
check(st, "stat")
assert info.size == len(data)
check(fs.mv("/py/data.bin", "/py/moved.bin")[0], "mv")
check(fs.rm("/py/moved.bin")[0], "rm")
st, _ = fs.stat("/py/moved.bin")
assert not st.ok and st.errno == 3011, st
print("PYTHON-OK")
`

func TestInteropPython(t *testing.T) {
	py := testtool.Need(t, "/usr/bin/python3")
	if out, err := exec.Command(py, "-c", "import XRootD.client, importlib.metadata as m, sys; print(sys.version.split()[0], m.version('xrootd'))").CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("python3-xrootd is required in CI: %v\n%s", err, out)
		}
		t.Skipf("python3-xrootd not available: %v\n%s", err, out)
	} else {
		t.Logf("python, XRootD bindings: %s", strings.TrimSpace(string(out)))
	}
	m := newMemFS()
	addr, _ := startServer(t, m, Limits{ResponseChunk: 256 << 10})
	script := filepath.Join(t.TempDir(), "interop.py")
	if err := os.WriteFile(script, []byte(pythonScript), 0o644); err != nil {
		t.Fatal(err)
	}
	out := runTool(t, false, nil, py, script, "root://"+addr)
	if !strings.Contains(out, "PYTHON-OK") {
		t.Fatalf("python script output:\n%s", out)
	}
}

// startXrootd runs a real xrootd data server on a free port, exporting a
// fresh directory, and returns its address.
func startXrootd(t *testing.T) string {
	bin := testtool.Need(t, "xrootd")
	logVersion(t, bin, "-v")
	base, err := os.MkdirTemp("", "ecstore-xrootd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	data, admin := filepath.Join(base, "data"), filepath.Join(base, "admin")
	for _, d := range []string{data, admin} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cfg := filepath.Join(base, "xrootd.cfg")
	conf := fmt.Sprintf("xrd.port %d\nall.export /\noss.localroot %s\nall.adminpath %s\nall.pidpath %s\nxrootd.chksum adler32\n", port, data, admin, admin)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(admin, "xrootd.log")
	args := []string{"-c", cfg, "-l", logFile}
	if os.Geteuid() == 0 {
		// xrootd refuses to run as root: drop to the xrootd (or nobody) user.
		name := "xrootd"
		u, err := user.Lookup(name)
		if err != nil {
			name = "nobody"
			if u, err = user.Lookup(name); err != nil {
				t.Skipf("no unprivileged user to run xrootd: %v", err)
			}
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, d := range []string{data, admin} {
			if err := os.Chown(d, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
		args = append(args, "-R", name)
	}
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start xrootd: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			if b, err := os.ReadFile(logFile); err == nil {
				t.Logf("xrootd log:\n%s", b)
			}
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case err := <-exited:
			b, _ := os.ReadFile(logFile)
			t.Fatalf("xrootd exited: %v\n%s\n%s", err, stderr.String(), b)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := Dial(ctx, addr, nil)
		cancel()
		if err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("xrootd did not come up on %s: %v\n%s", addr, err, stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// xrdfs ls -C (kXR_dirlist with kXR_dcksm) prints each file's checksum
// as xrdfs query checksum gives it, "none" for a directory, and the
// algorithm asked for with cks.type.
func TestInteropXrdfsListChecksums(t *testing.T) {
	xrdfs := testtool.Need(t, "xrdfs")
	m := newMemFS()
	m.put("/data/a.txt", []byte("hello"))
	m.put("/data/b.bin", []byte("checksum this content"))
	m.mkdirAll("/data/sub")
	addr, _ := startServer(t, m, Limits{})
	url := "root://" + addr

	for _, args := range [][]string{{"ls", "-l", "-C", "/data"}, {"ls", "-C", "/data"}} {
		out := runTool(t, false, nil, xrdfs, append([]string{url}, args...)...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 {
			t.Fatalf("%s: %d lines:\n%s", args, len(lines), out)
		}
		for _, l := range lines {
			f := strings.Fields(l)
			name := f[len(f)-1]
			want := "adler32:none"
			if name != "/data/sub" {
				q := strings.Fields(runTool(t, false, nil, xrdfs, url, "query", "checksum", name))
				if len(q) != 2 || q[0] != "adler32" {
					t.Fatalf("query checksum %s: %q", name, q)
				}
				want = "adler32:" + q[1]
			}
			if !slices.Contains(f, want) {
				t.Errorf("%s: %q, want %s in it", args, l, want)
			}
		}
	}
	out := runTool(t, false, nil, xrdfs, url, "ls", "-C", "/data?cks.type=crc32c")
	if sum, _ := m.Checksum(context.Background(), "/data/a.txt", "crc32c"); !strings.Contains(out, "crc32c:"+sum+" ") {
		t.Errorf("ls -C with cks.type=crc32c:\n%s", out)
	}
	out = runTool(t, true, nil, xrdfs, url, "ls", "-C", "/data?cks.type=md5")
	if !strings.Contains(out, "[3012] md5 checksum not supported.") {
		t.Errorf("ls -C with cks.type=md5: %s", out)
	}
}

func TestInteropClientWithXrootd(t *testing.T) {
	addr := startXrootd(t)
	r := rand.New(rand.NewPCG(testSeed(t), 11))
	c := dial(t, addr, &DialOptions{WriteChunk: 1 << 20, ReadChunk: 1 << 20})
	ctx := testCtx(t)
	t.Logf("xrootd protocol %#x flags %#x", c.Protocol().Version, c.Protocol().Flags)

	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Mkdir(ctx, "/ec/dir", 0o755, true); err != nil {
		t.Fatal(err)
	}
	data := randomBytes(r, 3<<20+5)
	more := randomBytes(r, 2<<20+4097)
	f, err := c.Open(ctx, "/ec/dir/obj", OpenNew|OpenMkpath, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := f.WriteAt(ctx, data, 0); err != nil || n != len(data) {
		t.Fatalf("write: %d %v", n, err)
	}
	if n, err := f.PgWriteAt(ctx, more, int64(len(data))); err != nil || n != len(more) {
		t.Fatalf("pgwrite: %d %v", n, err)
	}
	all := append(bytes.Clone(data), more...)
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if fi, err := f.Stat(ctx); err != nil || fi.Size != int64(len(all)) {
		t.Fatalf("stat by handle: %+v %v", fi, err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}

	fi, err := c.Stat(ctx, "/ec/dir/obj")
	if err != nil || fi.Size != int64(len(all)) || fi.IsDir() || fi.Mode.Perm() != 0o644 {
		t.Fatalf("stat: %+v %v", fi, err)
	}
	f, err = c.Open(ctx, "/ec/dir/obj", OpenRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	if f.OpenInfo().Size != int64(len(all)) {
		t.Errorf("open info size %d", f.OpenInfo().Size)
	}
	buf := make([]byte, len(all)+100)
	if n, err := f.ReadAt(ctx, buf, 0); err != io.EOF || !bytes.Equal(buf[:n], all) {
		t.Fatalf("read: %d %v", n, err)
	}
	buf = make([]byte, 1<<20+3)
	if n, err := f.PgReadAt(ctx, buf, 4095); err != nil || !bytes.Equal(buf[:n], all[4095:4095+len(buf)]) {
		t.Fatalf("pgread: %d %v", n, err)
	}
	segs := []ReadSegment{{Offset: 0, Length: 100}, {Offset: 1 << 20, Length: 4096}, {Offset: int64(len(all) - 10), Length: 10}}
	vec, err := f.ReadV(ctx, segs)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range segs {
		if !bytes.Equal(vec[i], all[s.Offset:s.Offset+int64(s.Length)]) {
			t.Errorf("readv element %d differs", i)
		}
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}

	list, err := c.Dirlist(ctx, "/ec/dir", true)
	if err != nil || len(list) != 1 || list[0].Name != "obj" || list[0].Size != int64(len(all)) {
		t.Fatalf("dirlist: %+v %v", list, err)
	}
	// xrootd answers checksum queries asynchronously (kXR_waitresp, then
	// kXR_attn kXR_asynresp).
	alg, sum, err := c.Checksum(ctx, "/ec/dir/obj", "adler32")
	if want := fmt.Sprintf("%08x", adler32.Checksum(all)); err != nil || alg != "adler32" || sum != want {
		t.Errorf("checksum: %q %q %v, want %s", alg, sum, err, want)
	}
	// The checksum xrootd computed is kept, and kXR_dcksm lists it.
	if list, alg, err := c.DirlistChecksums(ctx, "/ec/dir", ""); err != nil || alg != "adler32" || len(list) != 1 || list[0].Checksum != sum || list[0].Size != int64(len(all)) {
		t.Errorf("dirlist with checksums: %+v %q %v, want %s", list, alg, err, sum)
	}
	if _, _, err := c.DirlistChecksums(ctx, "/ec/dir", "md5"); !isCode(err, ErrServerError) {
		t.Errorf("dirlist with md5 checksums: %v, want kXR_ServerError", err)
	}
	if loc, err := c.Locate(ctx, "/ec/dir/obj"); err != nil || !strings.HasPrefix(loc, "Sw") {
		t.Errorf("locate on a writable xrootd: %q %v", loc, err)
	}
	// A file is no directory to list: kXR_FSError, "not a directory".
	if _, err := c.Dirlist(ctx, "/ec/dir/obj", false); !isCode(err, ErrFSError) || !strings.HasSuffix(err.Error(), "not a directory") {
		t.Errorf("dirlist of a file: %v", err)
	}
	if vals, err := c.QueryConfig(ctx, "readv_iov_max", "chksum"); err != nil || vals[0] != "1024" {
		t.Errorf("query config: %q %v", vals, err)
	}
	if sp, err := c.Space(ctx, "/"); err != nil || sp.Total <= 0 {
		t.Errorf("space: %+v %v", sp, err)
	}

	if err := c.Mv(ctx, "/ec/dir/obj", "/ec/dir/obj2"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat(ctx, "/ec/dir/obj"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat after mv: %v", err)
	}
	if _, err := c.Open(ctx, "/ec/dir/obj", OpenRead, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("open after mv: %v", err)
	}
	if _, err := c.Open(ctx, "/ec/dir/obj2", OpenNew, 0o644); !errors.Is(err, fs.ErrExist) {
		t.Errorf("open new on existing file: %v", err)
	}
	if err := c.Rm(ctx, "/ec/dir/obj2"); err != nil {
		t.Fatal(err)
	}
	if err := c.Rmdir(ctx, "/ec/dir"); err != nil {
		t.Fatal(err)
	}
	if list, err := c.Dirlist(ctx, "/ec", true); err != nil || len(list) != 0 {
		t.Errorf("dirlist after rmdir: %+v %v", list, err)
	}
}

// Client's kXR_fattr against a real xrootd: attributes set, got, kept
// when set again with onlyNew, missing ones reported per attribute,
// deleted; on disk under xrootd's U. namespace.
func TestInteropClientAttrsWithXrootd(t *testing.T) {
	addr := startXrootd(t)
	c := dial(t, addr, nil)
	ctx := testCtx(t)
	f, err := c.Open(ctx, "/attrs/f", OpenNew|OpenUpdate|OpenMkpath, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	// On the handle of a file being written, then read back by handle.
	if set, err := f.SetAttrs(ctx, []Attr{{Name: "user.h", Value: []byte("by handle")}}, false); err != nil || AttrErr(set) != nil {
		t.Fatalf("set by handle: %v %v", err, AttrErr(set))
	}
	if got, err := f.GetAttrs(ctx, "user.h"); err != nil || string(got[0].Value) != "by handle" {
		t.Fatalf("get by handle: %v", err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	summary := []byte("v=AAECAwQFBgcICQoLDA0ODw&s=27000&e=1%2B2&c=1MiB&n=0")
	set, err := c.SetAttrs(ctx, "/attrs/f", []Attr{{Name: "user.ecstore", Value: summary}, {Name: "user.empty", Value: []byte{}}}, false)
	if err != nil || AttrErr(set) != nil {
		t.Fatalf("set: %v %v", err, AttrErr(set))
	}
	got, err := c.GetAttrs(ctx, "/attrs/f", "user.ecstore", "user.missing", "user.empty")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[0].Value, summary) || got[0].Err != nil {
		t.Errorf("user.ecstore: %q %v", got[0].Value, got[0].Err)
	}
	var xe *Error
	if !errors.As(got[1].Err, &xe) || xe.Code != ErrAttrNotFound || got[1].Value != nil {
		t.Errorf("user.missing: %q %v, want AttrNotFound", got[1].Value, got[1].Err)
	}
	if got[2].Err != nil || len(got[2].Value) != 0 {
		t.Errorf("user.empty: %q %v", got[2].Value, got[2].Err)
	}
	if again, err := c.SetAttrs(ctx, "/attrs/f", []Attr{{Name: "user.ecstore", Value: []byte("other")}}, true); err != nil || again[0].Err == nil {
		t.Errorf("set of an existing attribute with onlyNew: %v, want the attribute's error", err)
	}
	if got, err := c.GetAttrs(ctx, "/attrs/f", "user.ecstore"); err != nil || !bytes.Equal(got[0].Value, summary) {
		t.Errorf("after the refused set: %v", err)
	}
	del, err := c.DelAttrs(ctx, "/attrs/f", "user.ecstore")
	if err != nil || AttrErr(del) != nil {
		t.Fatalf("del: %v %v", err, AttrErr(del))
	}
	if got, err := c.GetAttrs(ctx, "/attrs/f", "user.ecstore"); err != nil || got[0].Err == nil {
		t.Errorf("after del: %v, want the attribute's error", err)
	}
	// A missing file is reported per attribute, not for the request.
	if got, err := c.GetAttrs(ctx, "/attrs/nofile", "user.ecstore"); err != nil {
		t.Errorf("get on a missing file: %v", err)
	} else if !errors.As(got[0].Err, &xe) || xe.Code != ErrNotFound {
		t.Errorf("get on a missing file: attribute %v, want NotFound", got[0].Err)
	}
	if _, err := c.GetAttrs(ctx, "/attrs/f"); err == nil {
		t.Errorf("get of no attribute was sent")
	}
}
