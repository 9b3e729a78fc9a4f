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
	is, check := issuerCheck(t)
	files := testtls.New(t, "localhost")
	pair, err := tlsfiles.Load(files.CertFile, files.KeyFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	fsys := NewFS(c.Store, nil, Hooks{}).RequireToken() // not ReadOnly: --root-anonymous-writes
	srv := &xrootd.Server{Handler: fsys, TLS: pair.Config(), Tokens: check, TokenRequired: true}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx, ln)
	defer srv.Shutdown(context.Background())
	cl, err := xrootd.Dial(ctx, "roots://"+ln.Addr().String(), &xrootd.DialOptions{TLS: files.ClientConfig(),
		Token: is.Token(t, is.Claims("mallory", "storage.read:/data"))})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
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
