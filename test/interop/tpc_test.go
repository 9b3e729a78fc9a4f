//go:build interop

package interop

import (
	"github.com/ecstore/ecstore/internal/testtls"
	"github.com/ecstore/ecstore/internal/testtool"
	"os"
	"path/filepath"
	"regexp"
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
	xrdcp := testtool.Need(t, "xrdcp")
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
	// The ecstore CLI drives the same copies.
	must(t, ecstoreBin, "cp", "--tpc", "only", xrURL("real"), gws[1].obj("/tpc/cli-fromreal"))
	fetch(gws[1].obj("/tpc/cli-fromreal"))
	must(t, ecstoreBin, "cp", "--tpc", "only", gws[0].obj("/tpc/src"), xrURL("cli-fromgw"))
	sameFile(t, filepath.Join(xr.data, "cli-fromgw"), local)
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

// TestThirdPartyCopyOverTLS: xrdcp --tpc between two gateways that take
// tokens under TLS (roots://): the client presents its token to both,
// and the destination pulls over TLS, trusting the source's certificate
// through X509_CERT_DIR, with no token of its own (the key lets it in).
func TestThirdPartyCopyOverTLS(t *testing.T) {
	xrdcp := testtool.Need(t, "xrdcp")
	work := t.TempDir()
	files := testtls.New(t, "localhost")
	clients := newTLSClients(t, files)
	auth := filepath.Join(work, "auth")
	if err := os.WriteFile(auth, []byte("token = "+interopToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("X509_CERT_DIR", files.Dir) // the destination gateway's trust
	var (
		urls [2]string
		gws  [2]*gateway
	)
	for i := range urls {
		dir := filepath.Join(work, "gw"+string(rune('0'+i)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		gw := startGateway(t, dir, false, "--data", filepath.Join(dir, "data"), "--fsync=false",
			"--tls-cert", files.CertFile, "--tls-key", files.KeyFile, "--auth-file", auth, "--log-level", "info")
		gws[i] = gw
		_, port, _ := strings.Cut(gw.addr, ":")
		urls[i] = "roots://localhost:" + port + "/"
	}
	token := []string{"BEARER_TOKEN=" + interopToken}
	local := filepath.Join(work, "local")
	writeRandom(t, local, 5*mib+3, seed(t), 7)
	clients.must(t, token, xrdcp, "-s", local, urls[0]+"/tls/src")
	clients.must(t, token, xrdcp, "-s", "--tpc", "only", "-C", "adler32", urls[0]+"/tls/src", urls[1]+"/tls/copy")
	back := filepath.Join(work, "back")
	clients.must(t, token, xrdcp, "-s", urls[1]+"/tls/copy", back)
	sameFile(t, back, local)
	gws[1].waitLog(t, regexp.MustCompile(`third-party copy started" obj=/tls/copy .* tls=true`), 5*time.Second)
	// Without a token the client may read the source but not write the
	// destination.
	clients.mustFail(t, nil, "anonymous clients may only read", xrdcp, "-s", "--tpc", "only", urls[0]+"/tls/src", urls[1]+"/tls/anon")
}
