//go:build interop

package interop

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestThirdPartyCopyXrdcp moves files with the real xrdcp --tpc (XRootD's
// native third-party copy, the destination pulling from the source)
// between two gateways, from a gateway to a real xrootd and from a real
// xrootd to a gateway, each checked end to end with -C adler32. A copy
// onto an existing file needs -f; a copy whose source does not do
// third-party copies leaves nothing at the gateway destination, so that
// --tpc first falls back to a plain copy that succeeds (a real xrootd
// destination leaves an empty file there, on which that fallback fails).
func TestThirdPartyCopyXrdcp(t *testing.T) {
	xrdcp := needTool(t, "xrdcp")
	work := t.TempDir()
	var gws [2]*gateway
	for i := range gws {
		dir := filepath.Join(work, "gw"+string(rune('0'+i)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		gws[i] = startGateway(t, dir, false, "--data", filepath.Join(dir, "data"), "--fsync=false")
	}
	base := xrootdBase(t)
	xr := startXrootd(t, base, "tpc", "ofs.tpc pgm "+xrdcp+" --server")
	plain := startXrootd(t, base, "notpc")
	xr.wait(t, 30*time.Second)
	plain.wait(t, 30*time.Second)
	xrURL := func(p string) string { return "root://" + xr.addr + "//" + p }
	plainURL := func(p string) string { return "root://" + plain.addr + "//" + p }

	local := filepath.Join(work, "local")
	writeRandom(t, local, 7*mib+11, seed(t), 6)
	back := filepath.Join(work, "back")
	fetch := func(url string) {
		t.Helper()
		must(t, xrdcp, "-s", "-f", url, back)
		sameFile(t, back, local)
	}
	must(t, xrdcp, "-s", local, gws[0].obj("/tpc/src"))

	// Gateway to gateway.
	must(t, xrdcp, "-s", "--tpc", "only", "-C", "adler32", gws[0].obj("/tpc/src"), gws[1].obj("/tpc/pulled"))
	fetch(gws[1].obj("/tpc/pulled"))
	// Gateway to xrootd: the real xrootd pulls from the gateway.
	must(t, xrdcp, "-s", "--tpc", "only", "-C", "adler32", gws[0].obj("/tpc/src"), xrURL("fromgw"))
	sameFile(t, filepath.Join(xr.data, "fromgw"), local)
	// Xrootd to gateway: the gateway pulls from the real xrootd.
	must(t, xrdcp, "-s", local, xrURL("real"))
	must(t, xrdcp, "-s", "--tpc", "only", "-C", "adler32", xrURL("real"), gws[1].obj("/tpc/fromreal"))
	fetch(gws[1].obj("/tpc/fromreal"))
	// --tpc first, where both ends can.
	must(t, xrdcp, "-s", "--tpc", "first", gws[0].obj("/tpc/src"), gws[1].obj("/tpc/first"))
	fetch(gws[1].obj("/tpc/first"))

	// An existing destination: refused, unless -f.
	out := mustFail(t, xrdcp, "-s", "--tpc", "only", gws[0].obj("/tpc/src"), gws[1].obj("/tpc/pulled"))
	if !strings.Contains(out, "exists") {
		t.Errorf("copy onto an existing object: %s", out)
	}
	must(t, xrdcp, "-s", "-f", "--tpc", "only", "-C", "adler32", xrURL("real"), gws[1].obj("/tpc/pulled"))
	fetch(gws[1].obj("/tpc/pulled"))

	// A source without third-party copy.
	must(t, xrdcp, "-s", local, plainURL("notpc"))
	out = mustFail(t, xrdcp, "-s", "--tpc", "only", plainURL("notpc"), gws[1].obj("/tpc/notpc"))
	if !strings.Contains(out, "third-party") {
		t.Errorf("--tpc only from a source without it: %s", out)
	}
	if out, err := run(t, "xrdfs", gws[1].url, "stat", "/tpc/notpc"); err == nil {
		t.Errorf("a copy that never ran left an object at the destination:\n%s", out)
	}
	must(t, xrdcp, "-s", "--tpc", "first", plainURL("notpc"), gws[1].obj("/tpc/notpc"))
	fetch(gws[1].obj("/tpc/notpc"))

	// A missing source: the copy fails and stores nothing.
	mustFail(t, xrdcp, "-s", "--tpc", "only", gws[0].obj("/tpc/missing"), gws[1].obj("/tpc/missing"))
	if out, err := run(t, "xrdfs", gws[1].url, "stat", "/tpc/missing"); err == nil {
		t.Errorf("a failed copy left an object at the destination:\n%s", out)
	}

	for _, gw := range gws {
		gw.checkAlive(t)
		gw.fsck(t)
	}
}
