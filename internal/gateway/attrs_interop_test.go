//go:build interop

package gateway

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ecstore/ecstore/internal/testtool"
)

// pythonAttrs lists the attributes of the object at argv[1] (a root://
// URL) with the python bindings: File.list_xattr on a handle open for
// reading, FileSystem.list_xattr by path. (Their get_xattr and set_xattr
// fail in the bindings themselves, before any request, in Debian's 5.5.3,
// against a plain xrootd too: "returned NULL without setting an
// exception".)
const pythonAttrs = `
import sys
from XRootD import client
from XRootD.client.flags import OpenFlags
url = sys.argv[1]
f = client.File()
st, _ = f.open(url, OpenFlags.READ)
assert st.ok, st
st, got = f.list_xattr()
assert st.ok, st
print("file", sorted((n, v) for n, v, s in got))
f.close()
host, path = url[len("root://"):].split("/", 1)
fs = client.FileSystem("root://" + host)
st, got = fs.list_xattr("/" + path)
assert st.ok, st
print("path", sorted((n, v) for n, v, s in got))
`

// xrdcp --xattr copies a local file's user.* attributes to the gateway,
// which keeps them with the object: xrdfs xattr get and list and the
// python bindings' list_xattr read them back (by their names on the wire, foo for a
// local user.foo, as from a plain xrootd); xrdfs xattr set and del on
// the committed object are refused, saying that objects are immutable;
// and xrdcp --xattr from the gateway copies them back to a local file.
func TestInteropXattr(t *testing.T) {
	xrdcp := testtool.Need(t, "xrdcp")
	xrdfs := testtool.Need(t, "xrdfs")
	setfattr := testtool.Need(t, "setfattr")
	getfattr := testtool.Need(t, "getfattr")
	_, cl := serve(t)
	url := "root://" + cl.Addr()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, []byte("attributed data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, false, setfattr, "-n", "user.foo", "-v", "bar", src)
	run(t, false, setfattr, "-n", "user.baz", "-v", "qux", src)

	run(t, false, xrdcp, "--xattr", src, url+"//x/dst")
	if out := run(t, false, xrdfs, url, "xattr", "/x/dst", "get", "foo"); !strings.Contains(out, `foo="bar"`) {
		t.Errorf("xattr get foo: %q", out)
	}
	out := run(t, false, xrdfs, url, "xattr", "/x/dst", "list")
	if !strings.Contains(out, `foo="bar"`) || !strings.Contains(out, `baz="qux"`) {
		t.Errorf("xattr list: %q", out)
	}
	for _, args := range [][]string{{"set", "foo=new"}, {"set", "other=1"}, {"del", "foo"}} {
		out := run(t, true, xrdfs, append([]string{url, "xattr", "/x/dst"}, args...)...)
		if !strings.Contains(out, "[3013]") || !strings.Contains(out, "immutable") {
			t.Errorf("xattr %s on a committed object: %q, want kXR_Unsupported saying immutable", args, out)
		}
	}
	if out := run(t, false, xrdfs, url, "xattr", "/x/dst", "get", "foo"); !strings.Contains(out, `foo="bar"`) {
		t.Errorf("xattr get foo after the refused changes: %q", out)
	}

	back := filepath.Join(dir, "back")
	run(t, false, xrdcp, "--xattr", url+"//x/dst", back)
	if out := run(t, false, getfattr, "-d", back); !strings.Contains(out, `user.foo="bar"`) || !strings.Contains(out, `user.baz="qux"`) {
		t.Errorf("getfattr -d of the copy back: %q", out)
	}

	py := testtool.Need(t, "/usr/bin/python3")
	if out, err := exec.Command(py, "-c", "import XRootD.client").CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("python3-xrootd is required in CI: %v\n%s", err, out)
		}
		t.Skipf("python3-xrootd not available: %v\n%s", err, out)
	}
	script := filepath.Join(dir, "attrs.py")
	if err := os.WriteFile(script, []byte(pythonAttrs), 0o644); err != nil {
		t.Fatal(err)
	}
	out = run(t, false, py, script, url+"//x/dst")
	for _, by := range []string{"file", "path"} {
		if want := by + " [('baz', 'qux'), ('foo', 'bar')]"; !strings.Contains(out, want) {
			t.Errorf("python list_xattr: %q, want %q", out, want)
		}
	}
}
