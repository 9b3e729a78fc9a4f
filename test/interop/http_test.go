//go:build interop

package interop

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/testport"
	"github.com/ecstore/ecstore/internal/testtool"
)

// httpCreds are the credentials of the HTTP suite, given to the gateway
// in an --auth-file; the S3 key of the environment is an extra one.
const (
	httpKeyID     = "httpsuite"
	httpKeySecret = "httpsuite-secret/key+1"
	httpToken     = "httpsuite-token-0123456789abcdef"
	envKeyID      = "envkey"
	envKeySecret  = "envkey-secret"
)

// TestCrossProtocolHTTP drives one gateway over root://, S3 and
// HTTP/WebDAV at once: objects written with davix-put or curl read back
// bit-exact with xrdcp and aws s3 cp, and objects written with xrdcp or
// aws s3 cp read back with davix-get and curl. HTTP authentication is
// checked through the binary (401 without credentials, 403 with wrong
// ones), the S3 frontend takes both the configured key and the one from
// the environment, and an S3 multipart upload left incomplete expires
// with its parts.
func TestCrossProtocolHTTP(t *testing.T) {
	for _, tool := range []string{"xrdcp", "xrdfs", "xrdadler32", "curl", "davix-put", "davix-get", "davix-ls"} {
		testtool.Need(t, tool)
	}
	aws := testtool.Need(t, "aws")
	work := t.TempDir()
	auth := filepath.Join(work, "auth.conf")
	if err := os.WriteFile(auth, []byte(fmt.Sprintf("# HTTP suite\naccess-key = %s:%s\nhttp-token = %s\n", httpKeyID, httpKeySecret, httpToken)), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ECSTORE_ACCESS_KEY", envKeyID)
	t.Setenv("ECSTORE_SECRET_KEY", envKeySecret)
	awsEnv(t, work, httpKeyID, httpKeySecret)
	s3addr := testport.Addr(t)
	httpAddr := testport.Addr(t)
	cluster := []string{"--data", filepath.Join(work, "data"), "--fsync=false"}
	// Uploads expire 30 s after they began, for the subtest that waits for
	// it: long enough for the other multipart subtests under CI's load
	// (at 8 s, "complete sent again", four aws cli calls that took 14 s,
	// found its upload expired: NoSuchUpload).
	gw := startGateway(t, work, true, append(cluster, "--s3-addr", s3addr, "--http-addr", httpAddr,
		"--auth-file", auth, "--s3-upload-expiry", "30s")...)
	gw.flags = cluster
	s3url, web := "http://"+s3addr, "http://"+httpAddr
	bearer := "Authorization: Bearer " + httpToken
	davix := func(tool string, args ...string) string {
		t.Helper()
		return must(t, tool, append([]string{"--retry", "0", "-H", bearer}, args...)...)
	}
	curl := func(args ...string) string {
		t.Helper()
		return must(t, "curl", append([]string{"-sS", "--fail", "-H", bearer}, args...)...)
	}
	status := func(args ...string) string {
		t.Helper()
		return must(t, "curl", append([]string{"-sS", "-o", os.DevNull, "-w", "%{http_code}"}, args...)...)
	}
	s := seed(t)
	file := func(name string, size int64, stream uint64) string {
		p := filepath.Join(work, name)
		writeRandom(t, p, size, s, stream)
		return p
	}
	must(t, aws, "--endpoint-url", s3url, "s3", "mb", "s3://xbk")

	t.Run("davix-put to xrdcp and aws", func(t *testing.T) {
		up := file("davix.bin", 9*mib+77, 1)
		davix("davix-put", up, web+"/xbk/from-davix")
		back := up + ".xrdcp"
		must(t, "xrdcp", "--nopbar", "--cksum", "adler32", gw.obj("/xbk/from-davix"), back)
		sameFile(t, back, up)
		back = up + ".aws"
		must(t, aws, "--endpoint-url", s3url, "s3", "cp", "--only-show-errors", "s3://xbk/from-davix", back)
		sameFile(t, back, up)
	})
	t.Run("curl to xrdcp and aws", func(t *testing.T) {
		up := file("curl.bin", 2*mib+3, 2)
		curl("-T", up, web+"/xbk/dir/from-curl")
		back := up + ".xrdcp"
		must(t, "xrdcp", "--nopbar", gw.obj("/xbk/dir/from-curl"), back)
		sameFile(t, back, up)
		back = up + ".aws"
		must(t, aws, "--endpoint-url", s3url, "s3", "cp", "--only-show-errors", "s3://xbk/dir/from-curl", back)
		sameFile(t, back, up)
	})
	t.Run("xrdcp to davix-get and curl", func(t *testing.T) {
		up := file("xrdcp.bin", 17*mib+1, 3)
		must(t, "xrdcp", "--nopbar", up, gw.obj("/xbk/from-xrdcp"))
		back := up + ".davix"
		davix("davix-get", web+"/xbk/from-xrdcp", back)
		sameFile(t, back, up)
		back = up + ".curl"
		hdr := curl("-o", back, "-D", "-", "-H", "Want-Digest: adler32", web+"/xbk/from-xrdcp")
		sameFile(t, back, up)
		if want := fmt.Sprintf("Digest: adler32=%08x", adler32Local(t, up)); !strings.Contains(hdr, want) {
			t.Errorf("GET headers lack %q:\n%s", want, hdr)
		}
	})
	t.Run("aws to davix-get and curl", func(t *testing.T) {
		up := file("aws.bin", 9*mib+5, 4) // multipart with the default 8 MiB parts
		must(t, aws, "--endpoint-url", s3url, "s3", "cp", "--only-show-errors", up, "s3://xbk/from-aws")
		back := up + ".davix"
		davix("davix-get", web+"/xbk/from-aws", back)
		sameFile(t, back, up)
		back = up + ".curl"
		curl("-o", back, web+"/xbk/from-aws")
		sameFile(t, back, up)
		// The key from the environment works too.
		out := must(t, "env", "AWS_ACCESS_KEY_ID="+envKeyID, "AWS_SECRET_ACCESS_KEY="+envKeySecret,
			aws, "--endpoint-url", s3url, "s3", "ls", "s3://xbk/")
		if !strings.Contains(out, "from-aws") {
			t.Errorf("aws s3 ls with the environment's key:\n%s", out)
		}
	})
	t.Run("listings agree", func(t *testing.T) {
		ls := davix("davix-ls", "-l", web+"/xbk/")
		for _, want := range []string{"9437261 ", "from-davix", "from-xrdcp", "from-aws", "dir"} {
			if !strings.Contains(ls, want) {
				t.Errorf("davix-ls -l lacks %q:\n%s", want, ls)
			}
		}
		checkLs(t, gw.url, "/xbk", map[string]int64{"/xbk/from-davix": 9*mib + 77, "/xbk/dir": -1,
			"/xbk/from-xrdcp": 17*mib + 1, "/xbk/from-aws": 9*mib + 5})
	})
	t.Run("authentication", func(t *testing.T) {
		small := file("small.bin", 1000, 5)
		for _, c := range []struct {
			name string
			args []string
			want string
		}{
			{"no credentials GET", []string{web + "/xbk/from-aws"}, "401"},
			{"no credentials PUT", []string{"-T", small, web + "/xbk/anon"}, "401"},
			{"wrong token", []string{"-H", "Authorization: Bearer wrong-token-0123456789", "-T", small, web + "/xbk/anon"}, "403"},
			{"wrong secret", []string{"-u", httpKeyID + ":nope", web + "/xbk/from-aws"}, "403"},
			{"basic with the access key", []string{"-u", httpKeyID + ":" + httpKeySecret, "-r", "0-9", web + "/xbk/from-aws"}, "206"},
			{"basic with the environment's key", []string{"-u", envKeyID + ":" + envKeySecret, "-I", web + "/xbk/from-aws"}, "200"},
		} {
			if got := status(c.args...); got != c.want {
				t.Errorf("%s: status %s, want %s", c.name, got, c.want)
			}
		}
		if out, err := run(t, "xrdfs", gw.url, "stat", "/xbk/anon"); err == nil {
			t.Errorf("a refused PUT stored /xbk/anon:\n%s", out)
		}
		// Anonymous writes are never taken beyond loopback.
		out, err := run(t, ecstoreBin, "serve", "--data", filepath.Join(work, "other"), "--root-addr", "127.0.0.1:0",
			"--metrics-addr=", "--http-addr", "0.0.0.0:0", "--http-anonymous-writes")
		if err == nil || !strings.Contains(out, "loopback") {
			t.Errorf("serve with anonymous writes on 0.0.0.0: %v\n%s", err, out)
		}
	})
	t.Run("complete sent again", func(t *testing.T) {
		// aws cli (botocore) retries a CompleteMultipartUpload whose
		// answer was lost: the repeat is answered as the first was.
		part := file("again.bin", 1*mib, 7)
		var created struct{ UploadId string }
		out := must(t, aws, "--endpoint-url", s3url, "s3api", "create-multipart-upload", "--bucket", "xbk", "--key", "again")
		if err := json.Unmarshal([]byte(out), &created); err != nil {
			t.Fatalf("create-multipart-upload: %v\n%s", err, out)
		}
		var uploaded struct{ ETag string }
		out = must(t, aws, "--endpoint-url", s3url, "s3api", "upload-part", "--bucket", "xbk", "--key", "again",
			"--upload-id", created.UploadId, "--part-number", "1", "--body", part)
		if err := json.Unmarshal([]byte(out), &uploaded); err != nil {
			t.Fatalf("upload-part: %v\n%s", err, out)
		}
		parts := `{"Parts":[{"ETag":` + strconv.Quote(uploaded.ETag) + `,"PartNumber":1}]}`
		var first, again struct{ ETag, Key string }
		for _, into := range []*struct{ ETag, Key string }{&first, &again} {
			out := must(t, aws, "--endpoint-url", s3url, "s3api", "complete-multipart-upload", "--bucket", "xbk", "--key", "again",
				"--upload-id", created.UploadId, "--multipart-upload", parts)
			if err := json.Unmarshal([]byte(out), into); err != nil {
				t.Fatalf("complete-multipart-upload: %v\n%s", err, out)
			}
		}
		if first.ETag == "" || first != again {
			t.Errorf("complete sent again answered %+v, the first %+v", again, first)
		}
	})
	t.Run("abandoned multipart upload expires", func(t *testing.T) {
		part := file("part.bin", 5*mib, 6)
		var created struct{ UploadId string }
		out := must(t, aws, "--endpoint-url", s3url, "s3api", "create-multipart-upload", "--bucket", "xbk", "--key", "abandoned")
		if err := json.Unmarshal([]byte(out), &created); err != nil {
			t.Fatalf("create-multipart-upload: %v\n%s", err, out)
		}
		must(t, aws, "--endpoint-url", s3url, "s3api", "upload-part", "--bucket", "xbk", "--key", "abandoned",
			"--upload-id", created.UploadId, "--part-number", "1", "--body", part)
		if !strings.Contains(gw.cli(t, "ls", "/.ecstore-uploads/xbk"), created.UploadId) {
			t.Fatal("the upload's parts are not where expected")
		}
		deadline := time.Now().Add(90 * time.Second)
		for {
			out := must(t, aws, "--endpoint-url", s3url, "s3api", "list-multipart-uploads", "--bucket", "xbk")
			if !strings.Contains(out, created.UploadId) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("upload not expired after 90s:\n%s", out)
			}
			time.Sleep(time.Second)
		}
		if out, err := run(t, ecstoreBin, append([]string{"ls", "-l", "/.ecstore-uploads/xbk/" + created.UploadId}, cluster...)...); err == nil {
			t.Errorf("parts left after expiry:\n%s", out)
		}
		if st := status("-H", bearer, "-I", web+"/xbk/abandoned"); st != "404" {
			t.Errorf("expired upload visible over HTTP: %s", st)
		}
	})
	page := scrape(t, gw.metrics)
	for _, op := range []string{"http_put", "http_get", "http_propfind", "http_head"} {
		if metricSum(page, `ec_gateway_requests_total{op="`+op+`",status="ok"}`) == 0 {
			t.Errorf("metrics count no %s:\n%s", op, grep(page, "http_"))
		}
	}
	gw.checkAlive(t)
	gw.fsck(t)
}

// TestThirdPartyCopyDavix moves a file between two gateways with the
// real davix-cp, in pull mode (the destination gateway fetches it) and
// push mode (the source gateway sends it), each side with its own token
// (the other side's passed as TransferHeaderAuthorization), as FTS does.
func TestThirdPartyCopyDavix(t *testing.T) {
	davix := testtool.Need(t, "davix-cp")
	testtool.Need(t, "curl")
	work := t.TempDir()
	gws := make([]string, 2)
	tokens := []string{"source-gateway-token-0123", "destination-gateway-token-0123"}
	for i := range gws {
		dir := filepath.Join(work, fmt.Sprint("gw", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		auth := filepath.Join(dir, "auth")
		if err := os.WriteFile(auth, []byte("token = "+tokens[i]+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		gws[i] = testport.Addr(t)
		startGateway(t, dir, false, "--data", filepath.Join(dir, "data"), "--fsync=false", "--auth-file", auth, "--http-addr", gws[i])
	}
	local := filepath.Join(work, "local")
	writeRandom(t, local, 7*mib+11, seed(t), 5)
	bearer := func(i int) string { return "Authorization: Bearer " + tokens[i] }
	transfer := func(i int) string { return "TransferHeaderAuthorization: Bearer " + tokens[i] }
	must(t, "curl", "-sS", "--fail", "-H", bearer(0), "-T", local, "http://"+gws[0]+"/tpc/src")

	out := must(t, davix, "--copy-mode", "pull", "-H", bearer(1), "-H", transfer(0),
		"http://"+gws[0]+"/tpc/src", "http://"+gws[1]+"/tpc/pulled")
	t.Logf("davix-cp pull: %s", strings.TrimSpace(out))
	back := filepath.Join(work, "back")
	must(t, "curl", "-sS", "--fail", "-H", bearer(1), "-o", back, "http://"+gws[1]+"/tpc/pulled")
	sameFile(t, back, local)

	out = must(t, davix, "--copy-mode", "push", "-H", bearer(0), "-H", transfer(1),
		"http://"+gws[0]+"/tpc/src", "http://"+gws[1]+"/tpc/pushed")
	t.Logf("davix-cp push: %s", strings.TrimSpace(out))
	must(t, "curl", "-sS", "--fail", "-H", bearer(1), "-o", back, "http://"+gws[1]+"/tpc/pushed")
	sameFile(t, back, local)

	// Without the source's credentials the pull fails, and says why.
	if out, err := run(t, davix, "--copy-mode", "pull", "-H", bearer(1), "http://"+gws[0]+"/tpc/src", "http://"+gws[1]+"/tpc/denied"); err == nil {
		t.Errorf("davix-cp pull without the source's token succeeded:\n%s", out)
	}
}

// TestCredentialsReloadOnHangup: a gateway re-reads its credentials on
// SIGHUP: a token added to the --auth-file works and a removed access key
// stops working, without a restart; a file that does not parse keeps the
// current credentials (and says so in the log).
func TestCredentialsReloadOnHangup(t *testing.T) {
	testtool.Need(t, "curl")
	work := t.TempDir()
	auth := filepath.Join(work, "auth")
	write := func(text string) {
		if err := os.WriteFile(auth, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("access-key = alpha:alpha-secret-0123\n")
	httpAddr := testport.Addr(t)
	gw := startGateway(t, work, false, "--data", filepath.Join(work, "data"), "--fsync=false", "--auth-file", auth,
		"--http-addr", httpAddr, "--log-level", "info")
	url := "http://" + httpAddr + "/reload/obj"
	status := func(cred ...string) string {
		out, _ := run(t, "curl", append([]string{"-s", "-o", "/dev/null", "-w", "%{http_code}", "-T", "/dev/null"}, append(cred, url)...)...)
		return out
	}
	alpha := []string{"-u", "alpha:alpha-secret-0123"}
	beta := []string{"-H", "Authorization: Bearer beta-token-0123456789"}
	if got := status(alpha...); got != "201" && got != "204" {
		t.Fatalf("PUT with the configured key: %s", got)
	}
	if got := status(beta...); got != "403" {
		t.Fatalf("PUT with a token not configured yet: %s", got)
	}
	write("token = beta-token-0123456789\n")
	if err := gw.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for status(beta...) != "204" {
		if time.Now().After(deadline) {
			t.Fatalf("the token added before SIGHUP is still refused:\n%s", gw.tail(2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := status(alpha...); got != "401" && got != "403" {
		t.Errorf("PUT with the key removed before SIGHUP: %s", got)
	}
	write("token = short\n") // does not parse: too short
	if err := gw.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	gw.waitLog(t, regexp.MustCompile(`credentials not reloaded`), 10*time.Second)
	if got := status(beta...); got != "204" {
		t.Errorf("PUT with the current token after a failed reload: %s", got)
	}
}

// vectorReadScript opens an http:// URL with the Python XRootD bindings,
// whose XrdClHttp plug-in reads through davix as ROOT's TDavixFile does,
// and checks a vector read of the ranges against the local file.
const vectorReadScript = `
import json, sys
from XRootD import client
a = json.loads(sys.argv[1])
f = client.File()
st, _ = f.open(a["url"])
assert st.ok, "open: %s" % st.message
st, res = f.vector_read([(o, n) for o, n in a["ranges"]])
assert st.ok, "vector_read: %s" % st.message
data = open(a["local"], "rb").read()
for c in res.chunks:
    assert c.buffer == data[c.offset:c.offset + c.length], "chunk at %d: wrong bytes" % c.offset
assert len(res.chunks) == len(a["ranges"]), "%d chunks" % len(res.chunks)
f.close()
print("VECTOR-OK")
`

// TestHTTPVectorRead reads a file through the gateway's HTTP frontend as
// ROOT over HTTP does: XRootD's HTTP client plug-in (davix) sends a vector
// read as one GET with many ranges, and parses the multipart/byteranges
// answer. The metrics show that it took one GET, where a server that
// answers such a request with the whole object makes davix give up on it
// and send a GET per range.
func TestHTTPVectorRead(t *testing.T) {
	py, _ := needPython(t)
	testtool.Need(t, "xrdcp")
	if _, err := os.Stat("/etc/xrootd/client.plugins.d/xrdcl-http-plugin.conf"); err != nil {
		missing(t, "XRootD's HTTP client plug-in (xrootd-client-http-plugins): %v", err)
	}
	work := t.TempDir()
	httpAddr := testport.Addr(t)
	gw := startGateway(t, work, true, "--data", filepath.Join(work, "data"), "--fsync=false",
		"--http-addr", httpAddr, "--http-anonymous-read")
	local := filepath.Join(work, "run.root")
	size := int64(9*mib + 123)
	writeRandom(t, local, size, seed(t), 1)
	must(t, "xrdcp", "--nopbar", local, gw.obj("/data/run.root"))

	var ranges [][2]int64 // baskets of a few KB at scattered offsets, the last byte, one across blocks
	for i := int64(0); i < 40; i++ {
		ranges = append(ranges, [2]int64{i*size/41 + 17*i, 3000 + 7*i})
	}
	ranges = append(ranges, [2]int64{size - 1, 1}, [2]int64{8*mib - 100, 300})
	args, err := json.Marshal(map[string]any{"url": "http://" + httpAddr + "/data/run.root", "ranges": ranges, "local": local})
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(work, "vector.py")
	if err := os.WriteFile(script, []byte(vectorReadScript), 0o644); err != nil {
		t.Fatal(err)
	}
	gets := func() float64 {
		return metricSum(grep(scrape(t, gw.metrics), `op="http_get"`), "ec_gateway_requests_total")
	}
	before := gets()
	if out := must(t, py, script, string(args)); !strings.Contains(out, "VECTOR-OK") {
		t.Fatalf("python script output:\n%s", out)
	}
	if n := gets() - before; n != 1 {
		t.Errorf("a vector read of %d ranges took %v GETs, want 1", len(ranges), n)
	}
}

// awsEnv points the aws cli (and boto3) run by the test at the key
// id:secret, in us-east-1, with its config and credentials files in work
// (none there: nothing of the user's) and no instance metadata lookup.
func awsEnv(t *testing.T, work, id, secret string) {
	t.Setenv("AWS_ACCESS_KEY_ID", id)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_DEFAULT_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(work, "aws-config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(work, "aws-credentials"))
}
