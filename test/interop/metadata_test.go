//go:build interop

package interop

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ecstore/ecstore/internal/testport"
	"github.com/ecstore/ecstore/internal/testtool"
)

// TestAttributesAcrossFrontends: the extended attributes xrdcp --xattr
// gives an object stay with it through the other frontends' copies and
// renames (aws s3 cp and copy-object with either metadata directive, a
// WebDAV COPY and MOVE, xrdfs mv), and S3 does not show them as
// x-amz-meta-* (aws s3api head-object). And the headers S3 keeps are
// bounded.
func TestAttributesAcrossFrontends(t *testing.T) {
	for _, tool := range []string{"xrdcp", "xrdfs", "setfattr", "curl"} {
		testtool.Need(t, tool)
	}
	aws := testtool.Need(t, "aws")
	work := t.TempDir()
	auth := filepath.Join(work, "auth.conf")
	if err := os.WriteFile(auth, []byte(fmt.Sprintf("access-key = %s:%s\nhttp-token = %s\n", httpKeyID, httpKeySecret, httpToken)), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", httpKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", httpKeySecret)
	t.Setenv("AWS_DEFAULT_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(work, "aws-config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(work, "aws-credentials"))
	s3addr, httpAddr := testport.Addr(t), testport.Addr(t)
	gw := startGateway(t, work, false, "--data", filepath.Join(work, "data"), "--fsync=false",
		"--s3-addr", s3addr, "--http-addr", httpAddr, "--auth-file", auth)
	s3 := func(args ...string) string {
		t.Helper()
		return must(t, aws, append([]string{"--endpoint-url", "http://" + s3addr}, args...)...)
	}
	web := "http://" + httpAddr
	dav := func(method, from, to string) {
		t.Helper()
		must(t, "curl", "-sS", "--fail", "-X", method, "-H", "Authorization: Bearer "+httpToken,
			"-H", "Destination: "+web+to, web+from)
	}
	attrs := func(path string) {
		t.Helper()
		out := must(t, "xrdfs", gw.url, "xattr", path, "list")
		if !strings.Contains(out, `foo="bar"`) || !strings.Contains(out, `baz="qux"`) {
			t.Errorf("xattr list %s: %q, want foo and baz", path, out)
		}
	}

	s3("s3", "mb", "s3://xbk")
	src := filepath.Join(work, "src")
	if err := os.WriteFile(src, []byte("attributed data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, "setfattr", "-n", "user.foo", "-v", "bar", src)
	must(t, "setfattr", "-n", "user.baz", "-v", "qux", src)
	must(t, "xrdcp", "--nopbar", "--xattr", src, gw.obj("/xbk/a"))
	attrs("/xbk/a")
	if out := s3("s3api", "head-object", "--bucket", "xbk", "--key", "a"); strings.Contains(out, "foo") || strings.Contains(out, "xrootd") {
		t.Errorf("head-object shows the attributes:\n%s", out)
	}

	s3("s3", "cp", "--only-show-errors", "s3://xbk/a", "s3://xbk/s3copy")
	attrs("/xbk/s3copy")
	s3("s3api", "copy-object", "--bucket", "xbk", "--key", "a", "--copy-source", "xbk/a",
		"--metadata-directive", "REPLACE", "--content-type", "text/plain", "--metadata", "k=v")
	attrs("/xbk/a")
	if out := s3("s3api", "head-object", "--bucket", "xbk", "--key", "a"); !strings.Contains(out, "text/plain") || !strings.Contains(out, `"k": "v"`) {
		t.Errorf("head-object after copy-object REPLACE:\n%s", out)
	}
	dav("COPY", "/xbk/a", "/xbk/davcopy")
	attrs("/xbk/davcopy")
	dav("MOVE", "/xbk/davcopy", "/xbk/davmoved")
	attrs("/xbk/davmoved")
	must(t, "xrdfs", gw.url, "mv", "/xbk/davmoved", "/xbk/mv")
	attrs("/xbk/mv")

	// The headers S3 keeps hold 8 KiB at most (AWS's limit on a PUT's
	// headers): aws s3api put-object with a longer Content-Disposition
	// is refused, so no object sends back a header line longer than
	// clients read (Python's http.client, under the aws cli: 64 KiB).
	long := "attachment; filename=" + strings.Repeat("n", 9000)
	out := mustFail(t, aws, "--endpoint-url", "http://"+s3addr, "s3api", "put-object", "--bucket", "xbk", "--key", "long",
		"--body", src, "--content-disposition", long)
	if !strings.Contains(out, "MetadataTooLarge") {
		t.Errorf("put-object with a Content-Disposition of %d bytes: %s, want MetadataTooLarge", len(long), out)
	}
	s3("s3api", "put-object", "--bucket", "xbk", "--key", "long", "--body", src, "--content-disposition", long[:8000])
	if out := s3("s3api", "head-object", "--bucket", "xbk", "--key", "long"); !strings.Contains(out, long[:8000]) {
		t.Errorf("head-object of a Content-Disposition of 8000 bytes: %.200s...", out)
	}
}
