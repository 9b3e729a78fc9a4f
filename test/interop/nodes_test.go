//go:build interop

package interop

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/testtool"
)

// backendObjects are the objects written through a gateway over remote
// nodes: empty, tiny, one byte into the second block, and several blocks.
var backendObjects = []struct {
	path string
	size int64
}{
	{"/run/empty", 0},
	{"/run/tiny", 1},
	{"/run/block", 8*mib + 1},
	{"/run/big", 24*mib + 7},
}

var nodeServingRE = regexp.MustCompile(`node serving .* on root://(\S+)`)

// TestGatewayEcstoreNodes runs the gateway over 12 "ecstore node"
// processes (8+2 with 2 spares): xrdcp round trips, then SIGKILL of two
// nodes that hold archives of the objects, after which every object must
// still read back bit-exact through the gateway and through the CLI, be
// listed with its true size, and new writes must go to the surviving
// nodes.
func TestGatewayEcstoreNodes(t *testing.T) {
	testtool.Need(t, "xrdcp")
	testtool.Need(t, "xrdfs")
	testtool.Need(t, "xrdadler32")
	work := t.TempDir()
	const n = 12
	procs := map[string]*proc{} // by node URL
	var urls []string
	start := time.Now()
	var nodes []*proc
	for i := range n {
		name := fmt.Sprintf("node%02d", i)
		dir := filepath.Join(work, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, startProc(t, work, name, ecstoreBin, "node", "--dir", dir, "--addr", "127.0.0.1:0", "--fsync=false"))
	}
	for _, p := range nodes {
		url := "root://" + p.waitLog(t, nodeServingRE, 20*time.Second)[1] + "//data"
		procs[url] = p
		urls = append(urls, url)
	}
	t.Logf("%d ecstore nodes up in %v", n, time.Since(start).Round(time.Millisecond))
	flags := []string{"--nodes", strings.Join(urls, ","), "--ec", "8+2", "--spares", "2", "--fsync=false"}
	gw := startGateway(t, work, true, flags...)
	testBackend(t, gw, work, procs, true)
}

// TestGatewayXrootdNodes runs the gateway over 10 real xrootd data
// servers (8+2, no spares), each with its own port and exported
// directory: xrdcp round trips, then SIGKILL of two servers, after which
// every object must still read back bit-exact and be listed with its true
// size. With only 8 servers left, a write cannot reach the write quorum
// (K+1 = 9) and must fail with nothing visible.
func TestGatewayXrootdNodes(t *testing.T) {
	testtool.Need(t, "xrdcp")
	testtool.Need(t, "xrdfs")
	testtool.Need(t, "xrdadler32")
	testtool.Need(t, "xrootd")
	t.Logf("xrootd -v: %s", toolVersion("xrootd", "-v"))
	work := t.TempDir()
	base := xrootdBase(t)
	const n = 10
	start := time.Now()
	servers := make([]*xrootdServer, n)
	for i := range servers {
		servers[i] = startXrootd(t, base, fmt.Sprintf("x%02d", i))
	}
	var wg sync.WaitGroup
	errs := make([]string, n)
	for i, s := range servers {
		wg.Go(func() {
			if err := s.waitUp(t, 30*time.Second); err != nil {
				errs[i] = err.Error()
			}
		})
	}
	wg.Wait()
	for _, e := range errs {
		if e != "" {
			t.Fatal(e)
		}
	}
	t.Logf("%d xrootd data servers up in %v", n, time.Since(start).Round(time.Millisecond))
	procs := map[string]*proc{}
	var urls []string
	for _, s := range servers {
		url := "root://" + s.addr + "//data"
		procs[url] = s.proc
		urls = append(urls, url)
	}
	flags := []string{"--nodes", strings.Join(urls, ","), "--ec", "8+2", "--spares", "0", "--fsync=false"}
	gw := startGateway(t, work, false, flags...)
	testBackend(t, gw, work, procs, false)

	// The archives are plain files on the real servers' disks, at the
	// objects' paths under the prefix.
	var archives int
	for _, s := range servers {
		if _, err := os.Stat(filepath.Join(s.data, "data", "run", "big")); err == nil {
			archives++
		}
	}
	if archives != n {
		t.Errorf("%d of the %d xrootd servers hold an archive of /run/big at data/run/big, want all", archives, n)
	}
}

// testBackend is the shared body of the remote-node tests. procs maps
// each node URL of the gateway's --nodes to its process. spares tells
// whether the cluster has room to write with two nodes down.
func testBackend(t *testing.T, gw *gateway, work string, procs map[string]*proc, spares bool) {
	files := &localFiles{t: t, dir: filepath.Join(work, "files"), seed: seed(t)}
	if err := os.Mkdir(files.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	locals := map[string]string{}
	want := map[string]int64{}
	for _, o := range backendObjects {
		local := files.make(filepath.Base(o.path), o.size)
		locals[o.path] = local
		want[o.path] = o.size
		out := must(t, "xrdcp", "--nopbar", "--cksum", "adler32:print", local, gw.obj(o.path))
		if got, w := xrdcpAdler32(t, out), adler32Local(t, local); got != w {
			t.Errorf("%s: xrdcp printed adler32 %08x, xrdadler32 says %08x", o.path, got, w)
		}
	}
	checkAll := func(t *testing.T, round string, cli bool) {
		checkLs(t, gw.url, "/run", want)
		for _, o := range backendObjects {
			back := fmt.Sprintf("%s.%s.xrdcp", locals[o.path], round)
			must(t, "xrdcp", "--nopbar", "--cksum", "adler32", gw.obj(o.path), back)
			sameFile(t, back, locals[o.path])
			if cli {
				back = fmt.Sprintf("%s.%s.get", locals[o.path], round)
				gw.cli(t, "get", o.path, back)
				sameFile(t, back, locals[o.path])
			}
		}
	}
	t.Run("healthy", func(t *testing.T) {
		checkAll(t, "healthy", false)
		gw.fsck(t)
	})
	if t.Failed() {
		return
	}

	// Kill two nodes that hold archives of /run/big: the first data slot
	// and the last parity slot of its placement.
	slots := statPlacement(t, gw, "/run/big")
	if len(slots) != 10 {
		t.Fatalf("placement of /run/big has %d slots, want 10: %v", len(slots), slots)
	}
	var killed []string
	for _, s := range []placementSlot{slots[0], slots[9]} {
		p := procs[s.url]
		if s.state != "ok" || p == nil {
			t.Fatalf("slot %+v: want an ok archive on one of our nodes", s)
		}
		p.kill()
		killed = append(killed, s.node)
		t.Logf("SIGKILLed node %s (%s, slot %s of /run/big)", s.node, s.url, s.slot)
	}

	t.Run("two nodes killed", func(t *testing.T) {
		checkAll(t, "degraded", true)
		after := statPlacement(t, gw, "/run/big")
		for _, s := range after {
			down := s.node == killed[0] || s.node == killed[1]
			if down == (s.state == "ok") {
				t.Errorf("after the kill, ecstore stat shows slot %s (node %s) as %q", s.slot, s.node, s.state)
			}
		}
		if gw.metrics != "" {
			if v := metricSum(scrape(t, gw.metrics), "ec_object_degraded_reads_total"); v <= 0 {
				t.Errorf("ec_object_degraded_reads_total is %v after degraded reads", v)
			}
		}
	})

	t.Run("write with two nodes down", func(t *testing.T) {
		local := files.make("late", 3*mib+3)
		if !spares {
			// 8 nodes left, write quorum 9: the write must fail cleanly.
			out := mustFail(t, "xrdcp", "--nopbar", local, gw.obj("/run/late"))
			t.Logf("xrdcp with too few nodes failed as it should:\n%s", strings.TrimSpace(out))
			checkLs(t, gw.url, "/run", want)
			return
		}
		must(t, "xrdcp", "--nopbar", local, gw.obj("/run/late"))
		back := local + ".back"
		must(t, "xrdcp", "--nopbar", gw.obj("/run/late"), back)
		sameFile(t, back, local)
		for _, s := range statPlacement(t, gw, "/run/late") {
			if s.state != "ok" {
				t.Errorf("/run/late written with two nodes down: slot %+v", s)
			}
		}
	})
	gw.checkAlive(t)
}

// placementSlot is one slot line of "ecstore stat".
type placementSlot struct {
	slot, node, state, url string
}

// statPlacement parses the placement of "ecstore stat path" on the
// gateway's cluster.
func statPlacement(t *testing.T, gw *gateway, path string) []placementSlot {
	t.Helper()
	out := gw.cli(t, "stat", path)
	_, list, ok := strings.Cut(out, "placement:\n")
	if !ok {
		t.Fatalf("ecstore stat %s: no placement:\n%s", path, out)
	}
	var slots []placementSlot
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		f := strings.Fields(line) // slot N node ID STATE... URL
		if len(f) < 6 || f[0] != "slot" || f[2] != "node" {
			break // the end of the slot lines
		}
		slots = append(slots, placementSlot{slot: f[1], node: f[3], state: strings.Join(f[4:len(f)-1], " "), url: f[len(f)-1]})
	}
	return slots
}
