//go:build interop

package interop

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/testport"
	"github.com/ecstore/ecstore/internal/testtool"
)

// startXrootdCluster runs a real XRootD cluster as at WLCG sites: a
// manager (xrootd + cmsd, all.role manager) and one data server (xrootd +
// cmsd, all.role server) that subscribes to it. It returns the
// manager's host:port and the data server's, and the directory the data
// server exports, once the manager locates files there. As root, every
// daemon runs with -R as user xrootd (else nobody), as startXrootd does.
func startXrootdCluster(t *testing.T) (manager, server, data string) {
	t.Helper()
	xrootdBin, cmsdBin := testtool.Need(t, "xrootd"), testtool.Need(t, "cmsd")
	xrdfs := testtool.Need(t, "xrdfs")
	base := xrootdBase(t)
	cmsPort := testport.Free(t)
	var runAs []string
	name, uid, gid := xrootdUser(t)
	if name != "" {
		runAs = []string{"-R", name}
	}
	start := func(role string, lines ...string) string {
		dir := filepath.Join(base, role)
		admin := filepath.Join(dir, "admin")
		for _, d := range []string{dir, admin} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		port := testport.Free(t)
		conf := fmt.Sprintf("all.role %s\nall.manager 127.0.0.1:%d\nall.export /\nall.adminpath %s\nall.pidpath %s\nxrd.port %d if exec xrootd\n",
			role, cmsPort, admin, admin, port)
		conf += strings.Join(lines, "\n") + "\n"
		cfg := filepath.Join(dir, "xrootd.cf")
		if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{dir, admin} {
			if err := os.Chown(d, uid, gid); uid >= 0 && err != nil {
				t.Fatal(err)
			}
		}
		for _, exe := range []struct{ name, bin string }{{"xrootd", xrootdBin}, {"cmsd", cmsdBin}} {
			args := append([]string{"-c", cfg, "-l", filepath.Join(admin, exe.name+".log")}, runAs...)
			startProc(t, dir, role+"-"+exe.name, exe.bin, args...)
		}
		t.Cleanup(func() {
			if t.Failed() {
				for _, exe := range []string{"xrootd", "cmsd"} {
					if b, err := os.ReadFile(filepath.Join(admin, exe+".log")); err == nil {
						t.Logf("%s %s log file tail:\n%s", role, exe, lastLines(string(b), 30))
					}
				}
			}
		})
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	// A new file's open waits cms.delay lookup (default 5 s) for a data
	// server to say it has the file already.
	manager = start("manager", fmt.Sprintf("xrd.port %d if exec cmsd", cmsPort), "cms.delay startup 1 lookup 1")
	data = filepath.Join(base, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(data, uid, gid); uid >= 0 && err != nil {
		t.Fatal(err)
	}
	server = start("server", "xrd.port "+strconv.Itoa(testport.Free(t))+" if exec cmsd", "oss.localroot "+data,
		"xrootd.chksum adler32", "cms.space min 1m 2m")
	// The manager answers kXR_wait until the server has subscribed.
	_, port, _ := net.SplitHostPort(server)
	for deadline := time.Now().Add(60 * time.Second); ; {
		out, _ := run(t, xrdfs, manager, "locate", "/")
		if strings.Contains(out, ":"+port) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the data server %s did not subscribe to the manager %s: %s", server, manager, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return manager, server, data
}

// TestRedirector points the command line (cp both ways, ls, stat, mkdir,
// mv, rm, rmdir), ecstore bench and a gateway's node at a real XRootD
// manager: kXR_redirect was returned as an error and never followed, so
// every command failed where xrdcp works. The commands follow the
// redirects to the data server; a node refuses the manager with an
// error that says to configure the data server instead.
func TestRedirector(t *testing.T) {
	manager, server, data := startXrootdCluster(t)
	url := "root://" + manager + "/"
	work := t.TempDir()
	src := filepath.Join(work, "in.bin")
	writeRandom(t, src, 3<<20+11, seed(t), 1)

	must(t, ecstoreBin, "cp", src, url+"/run/in.bin")
	sameFile(t, filepath.Join(data, "run", "in.bin"), src)
	out := filepath.Join(work, "out.bin")
	must(t, ecstoreBin, "cp", url+"/run/in.bin", out)
	sameFile(t, out, src)
	if ls := must(t, ecstoreBin, "ls", "-l", url+"/run"); !regexp.MustCompile(`(?m)^ *- +3145739 .* in\.bin$`).MatchString(ls) {
		t.Errorf("ls -l through the manager:\n%s", ls)
	}
	if st := must(t, ecstoreBin, "stat", url+"/run/in.bin"); !regexp.MustCompile(`size: +3145739`).MatchString(st) {
		t.Errorf("stat through the manager:\n%s", st)
	}
	must(t, ecstoreBin, "mkdir", url+"/a/b")
	must(t, ecstoreBin, "mv", url+"/run/in.bin", url+"/a/b/f")
	must(t, ecstoreBin, "rm", url+"/a/b/f")
	must(t, ecstoreBin, "rmdir", url+"/a/b")
	if _, err := os.Stat(filepath.Join(data, "a", "b")); !os.IsNotExist(err) {
		t.Errorf("after mv, rm and rmdir through the manager: %v", err)
	}
	bench := must(t, ecstoreBin, "bench", "--mode", "small", "--ops", "8", url+"/bench")
	if !strings.Contains(bench, " rm ") {
		t.Errorf("bench through the manager:\n%s", bench)
	}

	// A node is a data server: the manager is refused, the server taken.
	nodeOut := mustFail(t, ecstoreBin, "ls", "--ec", "1+0", "--spares", "0", "--nodes", url+"/ec", "/")
	if !strings.Contains(nodeOut, "is a redirector") || !strings.Contains(nodeOut, "configure the data server") {
		t.Errorf("a node at the manager's address:\n%s", nodeOut)
	}
	must(t, ecstoreBin, "ls", "--ec", "1+0", "--spares", "0", "--nodes", "root://"+server+"//ec", "/")
}
