//go:build interop

package interop

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/testissuer"
	"github.com/ecstore/ecstore/internal/testport"
	"github.com/ecstore/ecstore/internal/testtls"
	"github.com/ecstore/ecstore/internal/testtool"
)

const interopToken = "interop-token-0123456789abcdef"

// tlsClients is the environment of XRootD clients of a TLS gateway: the
// test CA as the trusted directory (X509_CERT_DIR, OpenSSL hashed names)
// and no token unless one is added.
type tlsClients struct {
	env []string
}

func newTLSClients(t *testing.T, files *testtls.Files) *tlsClients {
	t.Helper()
	testtool.Need(t, "openssl")
	dir := filepath.Join(files.Dir, "cadir")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(files.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, "openssl", "rehash", dir)
	// The XRootD client refuses a CA directory others may write to.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &tlsClients{env: []string{"X509_CERT_DIR=" + dir, "BEARER_TOKEN=", "BEARER_TOKEN_FILE=",
		"XDG_RUNTIME_DIR=" + t.TempDir()}}
}

// run runs a client tool with the environment and extra variables.
func (c *tlsClients) run(t *testing.T, extra []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(append(append(os.Environ(), xrdEnv...), c.env...), extra...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c *tlsClients) must(t *testing.T, extra []string, name string, args ...string) string {
	t.Helper()
	out, err := c.run(t, extra, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func (c *tlsClients) mustFail(t *testing.T, extra []string, want, name string, args ...string) {
	t.Helper()
	out, err := c.run(t, extra, name, args...)
	if err == nil || !strings.Contains(out, want) {
		t.Fatalf("%s %s: %v, want a failure saying %q\n%s", name, strings.Join(args, " "), err, want, out)
	}
}

// TestTLSAndTokens drives a gateway with a TLS certificate and a token
// with the real clients: xrdcp and xrdfs over roots:// (and root://,
// which the gateway moves to TLS for the token), the Python bindings,
// the ecstore CLI, curl over https. Clients without a token read and
// are refused writes; a wrong token is refused and said so; with
// --root-token-required clients without a token are turned away.
func TestTLSAndTokens(t *testing.T) {
	testtool.Need(t, "xrdcp")
	testtool.Need(t, "xrdfs")
	testtool.Need(t, "curl")
	py, _ := needPython(t)
	work := t.TempDir()
	files := testtls.New(t, "localhost")
	clients := newTLSClients(t, files)
	issuer := testissuer.New(t)
	auth := filepath.Join(work, "auth")
	if err := os.WriteFile(auth, []byte("token = "+interopToken+"\ntoken-issuer = "+issuer.URL+" /jwt\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	httpAddr := testport.Addr(t)
	gw := startGateway(t, work, false, "--data", filepath.Join(work, "data"), "--fsync=false",
		"--tls-cert", files.CertFile, "--tls-key", files.KeyFile, "--auth-file", auth, "--http-addr", httpAddr)
	secure := "roots://" + gw.addr
	token := []string{"BEARER_TOKEN=" + interopToken}
	local := filepath.Join(work, "local")
	writeRandom(t, local, 3*mib+5, seed(t), 1)

	clients.mustFail(t, nil, "anonymous clients may only read", "xrdcp", "--nopbar", local, secure+"//tls/anon")
	clients.mustFail(t, []string{"BEARER_TOKEN=not-the-token-0123456789"}, "token was not accepted",
		"xrdcp", "--nopbar", local, secure+"//tls/wrong")
	clients.must(t, token, "xrdcp", "--nopbar", local, secure+"//tls/a")
	// A root:// URL with a token: the gateway moves the client to TLS.
	clients.must(t, token, "xrdcp", "--nopbar", local, gw.url+"//tls/b")
	tokenFile := filepath.Join(work, "token")
	if err := os.WriteFile(tokenFile, []byte(interopToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clients.must(t, []string{"BEARER_TOKEN_FILE=" + tokenFile}, "xrdcp", "--nopbar", local, secure+"//tls/c")
	for _, url := range []string{secure + "//tls/a", gw.url + "//tls/b", secure + "//tls/c"} {
		back := filepath.Join(work, "back")
		clients.must(t, nil, "xrdcp", "--nopbar", "-f", url, back) // anonymous reads
		sameFile(t, back, local)
	}
	ls := clients.must(t, token, "xrdfs", secure, "ls", "-l", "/tls")
	if !strings.Contains(ls, fmt.Sprint(3*mib+5)) || strings.Count(ls, "/tls/") != 3 {
		t.Errorf("xrdfs ls -l /tls:\n%s", ls)
	}
	clients.mustFail(t, nil, "anonymous clients may only read", "xrdfs", secure, "rm", "/tls/c")
	clients.must(t, token, "xrdfs", secure, "rm", "/tls/c")

	script := filepath.Join(work, "tls.py")
	if err := os.WriteFile(script, []byte(`import sys
from XRootD import client
from XRootD.client.flags import OpenFlags
url = sys.argv[1]
f = client.File()
st, _ = f.open(url + "//tls/py", OpenFlags.NEW)
assert st.ok, st.message
assert f.write(b"written by python over TLS")[0].ok
assert f.close()[0].ok
f = client.File()
st, _ = f.open(url + "//tls/py")
assert st.ok, st.message
st, data = f.read()
assert data == b"written by python over TLS", data
print("PYTHON-TLS-OK")
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := clients.must(t, token, py, script, secure); !strings.Contains(out, "PYTHON-TLS-OK") {
		t.Errorf("python over TLS:\n%s", out)
	}

	// A JSON Web Token of the configured issuer, held to its scopes
	// (under the issuer's base, /jwt).
	jwt := []string{"BEARER_TOKEN=" + issuer.Token(t, issuer.Claims("alice", "storage.read:/ storage.create:/in"))}
	clients.must(t, jwt, "xrdcp", "--nopbar", local, secure+"//jwt/in/x")
	clients.mustFail(t, jwt, "does not allow", "xrdcp", "--nopbar", "-f", local, secure+"//jwt/in/x")
	clients.mustFail(t, jwt, "does not allow", "xrdcp", "--nopbar", local, secure+"//jwt/out/x")
	clients.mustFail(t, jwt, "does not allow", "xrdfs", secure, "rm", "/jwt/in/x")
	clients.must(t, jwt, "xrdcp", "--nopbar", "-f", secure+"//jwt/in/x", filepath.Join(work, "back-jwt"))
	sameFile(t, filepath.Join(work, "back-jwt"), local)

	clients.must(t, token, ecstoreBin, "cp", local, secure+"//tls/cli")
	back := filepath.Join(work, "back-cli")
	clients.must(t, nil, ecstoreBin, "cp", secure+"//tls/cli", back)
	sameFile(t, back, local)

	clients.must(t, nil, "curl", "-sS", "--fail", "--cacert", files.CAFile, "-H", "Authorization: Bearer "+interopToken,
		"-o", back, "https://"+httpAddr+"/tls/a")
	sameFile(t, back, local)
	// The JWT over https: its read scope reads, and its create scope
	// does not replace what root:// wrote.
	jwtHeader := "Authorization: Bearer " + strings.TrimPrefix(jwt[0], "BEARER_TOKEN=")
	clients.must(t, nil, "curl", "-sS", "--fail", "--cacert", files.CAFile, "-H", jwtHeader, "-o", back, "https://"+httpAddr+"/jwt/in/x")
	sameFile(t, back, local)
	if out, err := clients.run(t, nil, "curl", "-sS", "--fail", "--cacert", files.CAFile, "-H", jwtHeader, "-T", local, "https://"+httpAddr+"/jwt/in/x"); err == nil {
		t.Errorf("curl PUT over an object with a create scope succeeded:\n%s", out)
	}

	// Token holders only.
	work2 := t.TempDir()
	gw2 := startGateway(t, work2, false, "--data", filepath.Join(work, "data"), "--fsync=false",
		"--tls-cert", files.CertFile, "--tls-key", files.KeyFile, "--auth-file", auth, "--root-token-required")
	clients.mustFail(t, nil, "Auth failed", "xrdcp", "--nopbar", "-f", "roots://"+gw2.addr+"//tls/a", back)
	clients.must(t, token, "xrdcp", "--nopbar", "-f", "roots://"+gw2.addr+"//tls/a", back)
	sameFile(t, back, local)
	gw.checkAlive(t)
	gw2.checkAlive(t)
}

var tlsNodeServingRE = regexp.MustCompile(`node serving \S+ on roots://(\S+)`)

// TestGatewayOverTLSNodes runs the gateway over ecstore nodes that serve
// token holders only, under TLS (roots:// node URLs, the node token from
// ECSTORE_NODE_TOKEN): objects written with xrdcp read back bit-exact
// and fsck is clean, while xrdfs without the token is turned away from a
// node and with it lists the node's archives.
func TestGatewayOverTLSNodes(t *testing.T) {
	testtool.Need(t, "xrdcp")
	testtool.Need(t, "xrdfs")
	work := t.TempDir()
	files := testtls.New(t, "localhost")
	clients := newTLSClients(t, files)
	const nodeToken = "node-token-interop-0123456789"
	tokens := filepath.Join(work, "node-tokens")
	if err := os.WriteFile(tokens, []byte("# the gateway's\n"+nodeToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var urls []string
	for i := range 4 {
		dir := filepath.Join(work, fmt.Sprintf("node%d", i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		p := startProc(t, work, fmt.Sprintf("node%d", i), ecstoreBin, "node", "--dir", dir, "--addr", "127.0.0.1:0", "--fsync=false",
			"--tls-cert", files.CertFile, "--tls-key", files.KeyFile, "--token-file", tokens)
		urls = append(urls, "roots://"+p.waitLog(t, tlsNodeServingRE, 20*time.Second)[1]+"//data")
	}
	// The gateway and the CLI find the CA and the node token in their
	// environment.
	t.Setenv("X509_CERT_DIR", files.Dir)
	t.Setenv("ECSTORE_NODE_TOKEN", nodeToken)
	flags := []string{"--nodes", strings.Join(urls, ","), "--ec", "2+1", "--spares", "1", "--fsync=false"}
	gw := startGateway(t, work, false, flags...)
	local := filepath.Join(work, "local")
	writeRandom(t, local, 5*mib+3, seed(t), 2)
	must(t, "xrdcp", "--nopbar", local, gw.obj("/tlsnodes/f"))
	back := filepath.Join(work, "back")
	must(t, "xrdcp", "--nopbar", gw.obj("/tlsnodes/f"), back)
	sameFile(t, back, local)
	gw.fsck(t)

	node := strings.TrimSuffix(urls[0], "//data")
	clients.mustFail(t, nil, "Auth failed", "xrdfs", node, "ls", "/data")
	if out := clients.must(t, []string{"BEARER_TOKEN=" + nodeToken}, "xrdfs", node, "ls", "/data/tlsnodes"); !strings.Contains(out, "/data/tlsnodes/f") {
		t.Errorf("xrdfs ls of a node with its token:\n%s", out)
	}
	gw.checkAlive(t)
}

// TestS3KeyScopesOverHTTPS drives S3 over https with the real aws cli:
// a key limited to storage scopes writes where they allow and is denied
// elsewhere, and lists only the buckets it reaches; an unlimited key
// sees everything.
func TestS3KeyScopesOverHTTPS(t *testing.T) {
	aws := testtool.Need(t, "aws")
	work := t.TempDir()
	files := testtls.New(t, "localhost")
	auth := filepath.Join(work, "auth")
	if err := os.WriteFile(auth, []byte("access-key = admin:admin-secret-0123\n"+
		"access-key = atlas:atlas-secret-0123 storage.read:/atlas storage.modify:/atlas/scratch\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s3addr := testport.Addr(t)
	startGateway(t, work, false, "--data", filepath.Join(work, "data"), "--fsync=false",
		"--tls-cert", files.CertFile, "--tls-key", files.KeyFile, "--auth-file", auth, "--s3-addr", s3addr)
	endpoint := "https://localhost:" + strings.Split(s3addr, ":")[1]
	env := func(ak, sk string) []string {
		return []string{"AWS_ACCESS_KEY_ID=" + ak, "AWS_SECRET_ACCESS_KEY=" + sk, "AWS_DEFAULT_REGION=us-east-1",
			"AWS_EC2_METADATA_DISABLED=true", "AWS_CA_BUNDLE=" + files.CAFile}
	}
	admin, atlas := env("admin", "admin-secret-0123"), env("atlas", "atlas-secret-0123")
	clients := &tlsClients{}
	s3 := func(e []string, args ...string) (string, error) {
		return clients.run(t, e, aws, append([]string{"--endpoint-url", endpoint}, args...)...)
	}
	local := filepath.Join(work, "f")
	writeRandom(t, local, 1*mib+7, seed(t), 3)
	for _, b := range []string{"s3://atlas", "s3://cms"} {
		if out, err := s3(admin, "s3", "mb", b); err != nil {
			t.Fatalf("aws s3 mb %s: %v\n%s", b, err, out)
		}
	}
	if out, err := s3(atlas, "s3", "cp", "--only-show-errors", local, "s3://atlas/scratch/f"); err != nil {
		t.Fatalf("limited key, in its scope: %v\n%s", err, out)
	}
	for _, dst := range []string{"s3://atlas/data/f", "s3://cms/f"} {
		if out, err := s3(atlas, "s3", "cp", "--only-show-errors", local, dst); err == nil || !strings.Contains(out, "AccessDenied") {
			t.Errorf("limited key to %s: %v, want AccessDenied\n%s", dst, err, out)
		}
	}
	back := filepath.Join(work, "back")
	if out, err := s3(atlas, "s3", "cp", "--only-show-errors", "s3://atlas/scratch/f", back); err != nil {
		t.Fatalf("limited key reading back: %v\n%s", err, out)
	}
	sameFile(t, back, local)
	if out, _ := s3(atlas, "s3", "ls"); !strings.Contains(out, "atlas") || strings.Contains(out, "cms") {
		t.Errorf("buckets the limited key lists:\n%s", out)
	}
	if out, _ := s3(admin, "s3", "ls"); !strings.Contains(out, "atlas") || !strings.Contains(out, "cms") {
		t.Errorf("buckets the admin key lists:\n%s", out)
	}
}
