package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/erasure"
	"github.com/ecstore/ecstore/internal/jwtauth"
	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/testcluster"
	"github.com/ecstore/ecstore/internal/testissuer"
	"github.com/ecstore/ecstore/internal/testtls"
	"github.com/ecstore/ecstore/internal/tlsfiles"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// serve starts a protocol server over a fresh test cluster and returns a
// connected client.
func serve(t *testing.T) (*testcluster.Cluster, *xrootd.Client) {
	t.Helper()
	c := testcluster.New(t, 7, layout.Geometry{K: 4, M: 2, ChunkSize: 64 << 10})
	_, cl := serveFS(t, &xrootd.Server{Handler: NewFS(c.Store, nil, Hooks{})})
	return c, cl
}

// serveFS runs srv on a loopback port until the test ends and returns
// its address and a connected client.
func serveFS(t *testing.T, srv *xrootd.Server) (string, *xrootd.Client) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go srv.Serve(ctx, ln)
	t.Cleanup(func() { cancel(); srv.Shutdown(context.Background()) })
	cl, err := xrootd.Dial(ctx, ln.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return ln.Addr().String(), cl
}

func upload(t *testing.T, cl *xrootd.Client, path string, data []byte) {
	t.Helper()
	ctx := context.Background()
	f, err := cl.Open(ctx, path, xrootd.OpenNew|xrootd.OpenMkpath|xrootd.OpenUpdate, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(data); {
		n := min(len(data)-off, 1<<20)
		if _, err := f.WriteAt(ctx, data[off:off+n], int64(off)); err != nil {
			t.Fatal(err)
		}
		off += n
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func download(t *testing.T, cl *xrootd.Client, path string) []byte {
	t.Helper()
	ctx := context.Background()
	f, err := cl.Open(ctx, path, xrootd.OpenRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(ctx)
	var out bytes.Buffer
	buf := make([]byte, 3<<20)
	for off := int64(0); ; {
		n, err := f.ReadAt(ctx, buf, off)
		out.Write(buf[:n])
		off += int64(n)
		if errors.Is(err, io.EOF) || n == 0 {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

func TestRoundTripThroughProtocol(t *testing.T) {
	c, cl := serve(t)
	ctx := context.Background()
	data := testcluster.Rand(rand.New(rand.NewPCG(1, 1)), 5<<20+12345)
	upload(t, cl, "/run1/f.root", data)
	if got := download(t, cl, "/run1/f.root"); !bytes.Equal(got, data) {
		t.Fatalf("downloaded %d bytes, differ from %d uploaded", len(got), len(data))
	}
	// The same object through the engine directly.
	if got, err := c.Get("/run1/f.root"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("engine read: %v", err)
	}
	st, err := cl.Stat(ctx, "/run1/f.root")
	if err != nil || st.Size != int64(len(data)) {
		t.Fatalf("stat: %+v %v", st, err)
	}
	sums := erasure.NewObjectSums()
	sums.Write(data)
	if _, v, err := cl.Checksum(ctx, "/run1/f.root", "adler32"); err != nil || v != erasure.FormatSum(sums.Adler32()) {
		t.Fatalf("adler32 %q %v", v, err)
	}
	ents, err := cl.Dirlist(ctx, "/run1", true)
	if err != nil || len(ents) != 1 || ents[0].Name != "f.root" || ents[0].Size != int64(len(data)) {
		t.Fatalf("dirlist: %+v %v", ents, err)
	}
	if err := cl.Mv(ctx, "/run1/f.root", "/run2/g.root"); err != nil {
		t.Fatal(err)
	}
	if err := cl.Rm(ctx, "/run2/g.root"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Stat(ctx, "/run2/g.root"); !hasCode(err, xrootd.ErrNotFound) {
		t.Fatalf("stat after rm: %v", err)
	}
}

func TestWriteRulesOverProtocol(t *testing.T) {
	_, cl := serve(t)
	ctx := context.Background()
	upload(t, cl, "/x", []byte("one"))
	// kXR_new on an existing object fails; kXR_delete replaces it.
	if _, err := cl.Open(ctx, "/x", xrootd.OpenNew|xrootd.OpenUpdate, 0o644); !hasCode(err, xrootd.ErrItExists) {
		t.Fatalf("kXR_new over existing: %v", err)
	}
	f, err := cl.Open(ctx, "/x", xrootd.OpenDelete|xrootd.OpenUpdate, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ctx, []byte("two"), 5); !hasCode(err, xrootd.ErrUnsupported) {
		t.Fatalf("write with a hole: %v", err)
	}
	if _, err := f.WriteAt(ctx, []byte("two"), 0); err != nil {
		t.Fatal(err)
	}
	// Not visible before close.
	if got := download(t, cl, "/x"); string(got) != "one" {
		t.Fatalf("before close: %q", got)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := download(t, cl, "/x"); string(got) != "two" {
		t.Fatalf("after close: %q", got)
	}
	// Updating in place is refused clearly.
	if _, err := cl.Open(ctx, "/x", xrootd.OpenUpdate, 0); !hasCode(err, xrootd.ErrUnsupported) {
		t.Fatalf("open for update: %v", err)
	}
}

func hasCode(err error, code xrootd.ErrorCode) bool {
	var xe *xrootd.Error
	return errors.As(err, &xe) && xe.Code == code
}

func TestReadOnlyListener(t *testing.T) {
	c := testcluster.New(t, 6, layout.Geometry{K: 3, M: 2, ChunkSize: 1024})
	c.Put(t, "/ro/x", []byte("readable"))
	srv := &xrootd.Server{Handler: NewFS(c.Store, nil, Hooks{}).ReadOnly()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx, ln)
	defer srv.Shutdown(context.Background())
	cl, err := xrootd.Dial(ctx, ln.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if got := download(t, cl, "/ro/x"); string(got) != "readable" {
		t.Fatalf("read: %q", got)
	}
	if _, err := cl.Open(ctx, "/ro/y", xrootd.OpenNew, 0o644); !hasCode(err, xrootd.ErrNotAuthorized) {
		t.Fatalf("write on a read-only listener: %v", err)
	}
	for name, err := range map[string]error{
		"rm":    cl.Rm(ctx, "/ro/x"),
		"mv":    cl.Mv(ctx, "/ro/x", "/ro/z"),
		"mkdir": cl.Mkdir(ctx, "/ro/d", 0o755, true),
		"rmdir": cl.Rmdir(ctx, "/ro"),
	} {
		if !hasCode(err, xrootd.ErrNotAuthorized) {
			t.Errorf("%s on a read-only listener: %v", name, err)
		}
	}
	if got, err := c.Get("/ro/x"); err != nil || string(got) != "readable" {
		t.Fatalf("object changed: %q %v", got, err)
	}
}

// A listing whose consumer stops taking entries ends there, and is not
// counted as a failed request.
func TestListStoppedByItsConsumer(t *testing.T) {
	c := testcluster.New(t, 6, layout.Geometry{K: 4, M: 2, ChunkSize: 1024})
	ctx := context.Background()
	for _, name := range []string{"/d/a", "/d/b", "/d/c"} {
		c.Put(t, name, []byte(name))
	}
	var lists []error
	fs := NewFS(c.Store, nil, Hooks{Request: func(op string, _ time.Duration, err error) {
		if op == "list" {
			lists = append(lists, err)
		}
	}})
	var names []string
	for fi, err := range fs.List(ctx, "/d") {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, fi.Name)
		if len(names) == 2 {
			break
		}
	}
	if fmt.Sprint(names) != "[a b]" || len(lists) != 1 || lists[0] != nil {
		t.Errorf("took %v; list requests recorded %v; want a and b, and one request without error", names, lists)
	}
}

// tokenGateway serves c's store read-only to anonymous clients, with
// TLS and the token check given; it returns a dial of a roots:// client
// presenting a token.
func tokenGateway(t *testing.T, c *testcluster.Cluster, check func(context.Context, string) (string, any, error), required bool, hooks ...Hooks) func(tok string) *xrootd.Client {
	t.Helper()
	files := testtls.New(t, "localhost")
	pair, err := tlsfiles.Load(files.CertFile, files.KeyFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	var h Hooks
	if len(hooks) > 0 {
		h = hooks[0]
	}
	fsys := NewFS(c.Store, nil, h).ReadOnly()
	if required {
		fsys.RequireToken()
	}
	srv := &xrootd.Server{Handler: fsys, TLS: pair.Config(), Tokens: check, TokenRequired: required,
		AuthFailed: func() { h.AuthFailed("root", "credentials") }}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go srv.Serve(ctx, ln)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return func(tok string) *xrootd.Client {
		cl, err := xrootd.Dial(ctx, "roots://"+ln.Addr().String(), &xrootd.DialOptions{TLS: files.ClientConfig(), Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
}

// TestReadOnlyListenerTakesTokens: on a read-only listener with TLS and
// tokens, a client that presents a valid token writes, removes and
// renames; one whose token is refused is told so and only reads.
func TestReadOnlyListenerTakesTokens(t *testing.T) {
	c := testcluster.New(t, 6, layout.Geometry{K: 3, M: 2, ChunkSize: 1024})
	const token = "gateway-token-0123456789"
	var mu sync.Mutex
	failures := map[string]int{}
	dial := tokenGateway(t, c, func(_ context.Context, tok string) (string, any, error) {
		if tok != token {
			return "", nil, errors.New("unknown token")
		}
		return "token 1", nil, nil
	}, false, Hooks{AuthFailure: func(frontend, reason string) {
		mu.Lock()
		failures[frontend+" "+reason]++
		mu.Unlock()
	}})
	ctx := context.Background()
	holder := dial(token)
	upload(t, holder, "/tok/x", []byte("written with a token"))
	if err := holder.Mv(ctx, "/tok/x", "/tok/y"); err != nil {
		t.Fatalf("mv with a token: %v", err)
	}
	if got, err := c.Get("/tok/y"); err != nil || string(got) != "written with a token" {
		t.Fatalf("object written with a token: %q %v", got, err)
	}
	other := dial("a-wrong-token-0123456789")
	if got := download(t, other, "/tok/y"); string(got) != "written with a token" {
		t.Fatalf("read with a refused token: %q", got)
	}
	_, err := other.Open(ctx, "/tok/z", xrootd.OpenNew, 0o644)
	if !hasCode(err, xrootd.ErrNotAuthorized) || !strings.Contains(err.Error(), "token was not accepted") {
		t.Fatalf("write with a refused token: %v", err)
	}
	if err := holder.Rm(ctx, "/tok/y"); err != nil {
		t.Fatalf("rm with a token: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if failures["root credentials"] != 1 || failures["root anonymous"] != 1 || len(failures) != 2 {
		t.Errorf("auth failures reported: %v, want one refused token and one anonymous write", failures)
	}
}

// TestTokenScopes: JSON Web Tokens are held to their storage scopes: a
// create scope writes new objects but does not replace or remove them, a
// modify scope does, nothing is allowed outside a scope's path, and with
// tokens required a read outside the read scope is refused too (expiry,
// signatures and audiences: package jwtauth's tests).
func TestTokenScopes(t *testing.T) {
	c := testcluster.New(t, 6, layout.Geometry{K: 3, M: 2, ChunkSize: 1024})
	c.Put(t, "/atlas/data/f", []byte("data"))
	c.Put(t, "/cms/f", []byte("cms data"))
	is, check := issuerCheck(t)
	ctx := context.Background()
	dial := tokenGateway(t, c, check, true)
	creator := dial(is.Token(t, is.Claims("alice", "storage.read:/ storage.create:/user/alice")))
	modifier := dial(is.Token(t, is.Claims("bob", "storage.read:/data storage.modify:/data")))

	upload(t, creator, "/atlas/user/alice/new", []byte("new"))
	if _, err := creator.Open(ctx, "/atlas/user/alice/new", xrootd.OpenDelete|xrootd.OpenUpdate, 0o644); !hasCode(err, xrootd.ErrNotAuthorized) {
		t.Errorf("replacing with a create scope: %v", err)
	}
	if err := creator.Rm(ctx, "/atlas/user/alice/new"); !hasCode(err, xrootd.ErrNotAuthorized) {
		t.Errorf("rm with a create scope: %v", err)
	}
	if _, err := creator.Open(ctx, "/atlas/user/bob/x", xrootd.OpenNew|xrootd.OpenUpdate, 0o644); !hasCode(err, xrootd.ErrNotAuthorized) {
		t.Errorf("create outside the scope: %v", err)
	}
	if err := creator.Mkdir(ctx, "/atlas/user/alice/sub", 0o755, true); err != nil {
		t.Errorf("mkdir with a create scope: %v", err)
	}
	if got := download(t, creator, "/atlas/data/f"); string(got) != "data" {
		t.Errorf("read with a read scope: %q", got)
	}
	if _, err := creator.Stat(ctx, "/cms/f"); !hasCode(err, xrootd.ErrNotAuthorized) {
		t.Errorf("stat outside the issuer's base with tokens required: %v", err)
	}

	f, err := modifier.Open(ctx, "/atlas/data/f", xrootd.OpenDelete|xrootd.OpenUpdate, 0o644)
	if err != nil {
		t.Fatalf("replacing with a modify scope: %v", err)
	}
	if _, err := f.WriteAt(ctx, []byte("replaced"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := modifier.Mv(ctx, "/atlas/data/f", "/atlas/user/alice/f"); !hasCode(err, xrootd.ErrNotAuthorized) {
		t.Errorf("mv out of the modify scope: %v", err)
	}
	if err := modifier.Rm(ctx, "/atlas/data/f"); err != nil {
		t.Errorf("rm with a modify scope: %v", err)
	}
	if _, err := modifier.Stat(ctx, "/atlas/user/alice/new"); !hasCode(err, xrootd.ErrNotAuthorized) {
		t.Errorf("stat outside the read scope with tokens required: %v", err)
	}

	if got, err := c.Get("/atlas/user/alice/new"); err != nil || string(got) != "new" {
		t.Errorf("the created object: %q %v", got, err)
	}
}

// TestReadiness: /readyz says ready while enough nodes answer for a
// write, and 503 with the counts once too many are down.
func TestReadiness(t *testing.T) {
	geo := layout.Geometry{K: 3, M: 2, ChunkSize: 1024}
	c := testcluster.New(t, 5, geo)
	store, nodes := c.Faulty(t, geo)
	srv := httptest.NewServer(Readiness(store))
	defer srv.Close()
	get := func() (int, string) {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(); code != http.StatusOK || !strings.HasPrefix(body, "ready: 5 of 5") {
		t.Fatalf("all up: %d %q", code, body)
	}
	nodes[0].SetDown(true) // 4 left: the quorum (K+1) still holds
	if code, body := get(); code != http.StatusOK {
		t.Fatalf("one down: %d %q", code, body)
	}
	nodes[1].SetDown(true) // 3 left: reads, but no writes
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "3 of 5 nodes up") || !strings.Contains(body, "writes need 4") {
		t.Fatalf("two down: %d %q", code, body)
	}
}

// issuerCheck returns a test issuer and the token check of a gateway
// that takes its tokens, held to their scopes under /atlas.
func issuerCheck(t *testing.T) (*testissuer.Issuer, func(ctx context.Context, tok string) (string, any, error)) {
	t.Helper()
	is := testissuer.New(t)
	checker, err := jwtauth.New(jwtauth.Options{Issuers: []jwtauth.Issuer{{URL: is.URL, Base: "/atlas"}}})
	if err != nil {
		t.Fatal(err)
	}
	return is, func(ctx context.Context, tok string) (string, any, error) {
		g, err := checker.Check(ctx, tok)
		if err != nil {
			return "", nil, err
		}
		return g.Subject, g, nil
	}
}
