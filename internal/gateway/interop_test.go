//go:build interop

package gateway

// The real XRootD 5.5 clients against FS, served in process:
//
//	go test -tags interop ./internal/gateway/
//
// A missing tool skips its test, except with CI=true, where it fails.

import (
	"context"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/testcluster"
	"github.com/ecstore/ecstore/internal/testtool"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// run runs a tool and returns its combined output, failing the test when
// the tool's failure is not wantErr.
func run(t *testing.T, wantErr bool, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if (err != nil) != wantErr {
		t.Fatalf("%s %s: err=%v, want error %v\n%s", name, strings.Join(args, " "), err, wantErr, out)
	}
	return string(out)
}

// xrdfs ls -C lists every object with the checksum that xrdfs query
// checksum gives for it, and a directory with none (TestListChecksums).
func TestInteropListChecksums(t *testing.T) {
	xrdfs := testtool.Need(t, "xrdfs")
	_, cl := serve(t)
	url := "root://" + cl.Addr()
	r := rand.New(rand.NewPCG(5, 6))
	upload(t, cl, "/ls/big", testcluster.Rand(r, 700<<10+3))
	upload(t, cl, "/ls/small", []byte("hello"))
	if err := cl.Mkdir(context.Background(), "/ls/sub", 0o755, false); err != nil {
		t.Fatal(err)
	}
	for _, alg := range []string{"adler32", "crc32c"} {
		dir := "/ls"
		if alg != "adler32" {
			dir += "?cks.type=" + alg
		}
		out := run(t, false, xrdfs, url, "ls", "-l", "-C", dir)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 {
			t.Fatalf("ls -l -C %s: %d lines:\n%s", dir, len(lines), out)
		}
		for _, l := range lines {
			f := strings.Fields(l)
			name := f[len(f)-1]
			want := alg + ":none"
			if name != "/ls/sub" {
				q := strings.Fields(run(t, false, xrdfs, url, "query", "checksum", name+"?cks.type="+alg))
				if len(q) != 2 || q[0] != alg {
					t.Fatalf("query checksum %s: %q", name, q)
				}
				want = alg + ":" + q[1]
			}
			if !slices.Contains(f, want) {
				t.Errorf("ls -l -C %s: %q, want %s in it", dir, l, want)
			}
		}
	}
}

// xrdfs locate says a read-only listener is read-only
// (TestLocateSaysWhoMayWrite), as it says of an xrootd that exports its
// path r/o, and xrdfs ls, which locates first, still lists there.
func TestInteropLocateReadOnly(t *testing.T) {
	xrdfs := testtool.Need(t, "xrdfs")
	c, cl := serve(t)
	upload(t, cl, "/ro/x", []byte("x"))
	roAddr, _ := serveFS(t, &xrootd.Server{Handler: NewFS(c.Store, nil, Hooks{}).ReadOnly()})
	for _, tc := range []struct{ addr, want string }{{cl.Addr(), "Server ReadWrite"}, {roAddr, "Server Read"}} {
		out := strings.TrimSpace(run(t, false, xrdfs, "root://"+tc.addr, "locate", "/ro/x"))
		if !strings.HasSuffix(out, tc.want) {
			t.Errorf("locate on %s: %q, want %q", tc.addr, out, tc.want)
		}
		if out := run(t, false, xrdfs, "root://"+tc.addr, "ls", "-l", "/ro"); !strings.Contains(out, " /ro/x") {
			t.Errorf("ls -l on %s: %q", tc.addr, out)
		}
	}
}
