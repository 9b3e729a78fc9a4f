package gateway

import (
	"context"
	"net"
	"testing"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/testcluster"
	"github.com/ecstore/ecstore/internal/testtls"
	"github.com/ecstore/ecstore/internal/tlsfiles"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// Regression (found by review): with --root-token-required and
// --root-anonymous-writes, a token's holder got the anonymous clients'
// rights beyond its scopes, writes included: a token for storage.read on
// one directory could remove any object. Where every client must bring a
// token, a token's scopes are all it allows.
func TestTokenRequiredLeavesNoAnonymousRights(t *testing.T) {
	c := testcluster.New(t, 6, layout.Geometry{K: 3, M: 2, ChunkSize: 1024})
	c.Put(t, "/cms/precious", []byte("cms data"))
	ctx := context.Background()
	fsys := NewFS(c.Store, nil, Hooks{}).RequireToken() // not ReadOnly: --root-anonymous-writes
	cl := tokenClient(t, fsys, "mallory", "storage.read:/data")
	if _, err := cl.Stat(ctx, "/cms/precious"); !hasCode(err, xrootd.ErrNotAuthorized) {
		t.Errorf("stat outside the read scope: %v", err)
	}
	if err := cl.Rm(ctx, "/cms/precious"); !hasCode(err, xrootd.ErrNotAuthorized) {
		t.Errorf("rm outside the token's scopes: %v", err)
	}
	if err := cl.Mkdir(ctx, "/cms/new", 0o755, true); !hasCode(err, xrootd.ErrNotAuthorized) {
		t.Errorf("mkdir outside the token's scopes: %v", err)
	}
	if got, err := c.Get("/cms/precious"); err != nil || string(got) != "cms data" {
		t.Errorf("/cms/precious: %q, %v", got, err)
	}
}

// tokenClient serves fsys over roots:// with tokens required, from a test
// issuer (issuerCheck), and returns a client logged in with a token for
// sub with scope; both end with the test.
func tokenClient(t *testing.T, fsys *FS, sub, scope string) *xrootd.Client {
	t.Helper()
	is, check := issuerCheck(t)
	files := testtls.New(t, "localhost")
	pair, err := tlsfiles.Load(files.CertFile, files.KeyFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := &xrootd.Server{Handler: fsys, TLS: pair.Config(), Tokens: check, TokenRequired: true}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go srv.Serve(ctx, ln)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	cl, err := xrootd.Dial(ctx, "roots://"+ln.Addr().String(), &xrootd.DialOptions{TLS: files.ClientConfig(),
		Token: is.Token(t, is.Claims(sub, scope))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}
