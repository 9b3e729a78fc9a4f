package xrootd

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/testtls"
)

const testToken = "0123456789abcdef-token"

// identityFS records the identity of the client of each Stat.
type identityFS struct {
	*memFS
	mu   sync.Mutex
	seen []Identity
}

func (f *identityFS) Stat(ctx context.Context, name string) (FileInfo, error) {
	f.mu.Lock()
	f.seen = append(f.seen, PeerIdentity(ctx))
	f.mu.Unlock()
	return f.memFS.Stat(ctx, name)
}

func (f *identityFS) last() Identity {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.seen) == 0 {
		return Identity{Holder: "(no stat)"}
	}
	return f.seen[len(f.seen)-1]
}

// tokenServer serves an identityFS with TLS and, when tokens, the one
// token testToken.
func tokenServer(t *testing.T, tokens, required bool) (string, *identityFS, *testtls.Files) {
	t.Helper()
	files := testtls.New(t, "localhost")
	cert, err := tls.LoadX509KeyPair(files.CertFile, files.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	h := &identityFS{memFS: newMemFS()}
	srv := &Server{Handler: h, Logger: testLogger(t), TLS: &tls.Config{Certificates: []tls.Certificate{cert}}, TokenRequired: required}
	if tokens {
		srv.Tokens = func(_ context.Context, tok string) (string, any, error) {
			if tok != testToken {
				return "", nil, errors.New("unknown token")
			}
			return "holder-1", nil, nil
		}
	}
	return startServerWith(t, srv), h, files
}

func dialErr(t *testing.T, addr string, opts *DialOptions) (*Client, error) {
	t.Helper()
	opts.Logger = testLogger(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, opts)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// TestTLSSession: a roots:// client is moved to TLS and served as usual;
// a root:// client of a server without tokens stays in the clear; a
// roots:// client of a server without TLS is refused; a client that does
// not trust the server's authority fails its handshake.
func TestTLSSession(t *testing.T) {
	addr, h, files := tokenServer(t, false, false)
	ctx := context.Background()
	c, err := dialErr(t, "roots://"+addr, &DialOptions{TLS: files.ClientConfig()})
	if err != nil {
		t.Fatal(err)
	}
	if !c.tls {
		t.Error("roots:// client not under TLS")
	}
	f, err := c.Open(ctx, "/x", OpenNew|OpenUpdate, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("tls!"), 300000) // several records and frames
	if _, err := f.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rf, err := c.Open(ctx, "/x", OpenRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if n, err := rf.ReadAt(ctx, got, 0); n != len(data) || !bytes.Equal(got, data) {
		t.Fatalf("read back over TLS: %d bytes, %v", n, err)
	}
	rf.Close(ctx)
	if _, err := c.Stat(ctx, "/x"); err != nil {
		t.Fatal(err)
	}
	if id := h.last(); !id.TLS || id.Authenticated {
		t.Errorf("identity of a roots:// client without tokens: %+v", id)
	}

	plain, err := dialErr(t, addr, &DialOptions{AbleTLS: true})
	if err != nil {
		t.Fatal(err)
	}
	if plain.tls {
		t.Error("a root:// client was moved to TLS by a server that takes no tokens")
	}
	if _, err := plain.Stat(ctx, "/x"); err != nil || h.last().TLS {
		t.Errorf("root:// stat: %v, identity %+v", err, h.last())
	}

	noTLS, _ := startServer(t, newMemFS(), Limits{})
	if _, err := dialErr(t, "roots://"+noTLS, &DialOptions{}); !isCode(err, ErrTLSRequired) {
		t.Errorf("roots:// to a server without TLS: %v", err)
	}
	if _, err := dialErr(t, "roots://"+addr, &DialOptions{TLS: &tls.Config{}}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("roots:// without trusting the server's authority: %v", err)
	}
}

// TestTokenAuthentication: with tokens, a TLS-capable client is moved to
// TLS and authenticated with its token; a wrong token or none falls back
// to an anonymous session (TokenRefused says which); a client that cannot
// use TLS logs in anonymously in the clear.
func TestTokenAuthentication(t *testing.T) {
	addr, h, files := tokenServer(t, true, false)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts DialOptions
		want Identity
	}{
		{"token", DialOptions{TLS: files.ClientConfig(), Token: testToken}, Identity{Holder: "holder-1", Authenticated: true, TLS: true}},
		{"wrong token", DialOptions{TLS: files.ClientConfig(), Token: "not-the-token-0123"}, Identity{Holder: "ecstore", TLS: true, TokenRefused: true}},
		{"no token", DialOptions{TLS: files.ClientConfig(), Username: "anon"}, Identity{Holder: "anon", TLS: true}},
		{"no TLS", DialOptions{Username: "old"}, Identity{Holder: "old"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("BEARER_TOKEN", "")
			t.Setenv("BEARER_TOKEN_FILE", "")
			t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
			t.Setenv("TMPDIR", t.TempDir())
			c, err := dialErr(t, addr, &tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Stat(ctx, "/"); err != nil {
				t.Fatal(err)
			}
			got := h.last()
			if got.User != tc.opts.Username && !(tc.opts.Username == "" && got.User == "ecstore") ||
				got.PID != int32(os.Getpid()) || !got.Remote.Addr().IsLoopback() {
				t.Errorf("identity %+v: want the login's user and pid and a loopback address", got)
			}
			got.User, got.PID, got.Remote = "", 0, netip.AddrPort{}
			if got != tc.want {
				t.Errorf("identity %+v, want %+v", got, tc.want)
			}
		})
	}
	// The token from BEARER_TOKEN, over a root:// URL: the server moves
	// the connection to TLS for it.
	t.Setenv("BEARER_TOKEN", " "+testToken+"\n")
	if c, err := dialErr(t, "root://"+addr, &DialOptions{TLS: files.ClientConfig()}); err != nil {
		t.Fatal(err)
	} else if _, err := c.Stat(ctx, "/"); err != nil || !h.last().Authenticated {
		t.Errorf("token from BEARER_TOKEN: %v, identity %+v", err, h.last())
	}
}

// TestTokenRequired: without a valid token, nothing is served: a wrong
// token or none fails the login's authentication, a client without TLS
// is refused at login, and a client that skips kXR_auth gets
// kXR_NotAuthorized for its requests.
func TestTokenRequired(t *testing.T) {
	addr, h, files := tokenServer(t, true, true)
	t.Setenv("BEARER_TOKEN", "")
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	t.Setenv("TMPDIR", t.TempDir())
	if _, err := dialErr(t, addr, &DialOptions{TLS: files.ClientConfig(), Token: "not-the-token-0123"}); !isCode(err, ErrAuthFailed) {
		t.Errorf("wrong token: %v, want kXR_AuthFailed", err)
	}
	if _, err := dialErr(t, addr, &DialOptions{TLS: files.ClientConfig()}); !isCode(err, ErrAuthFailed) || !strings.Contains(err.Error(), "BEARER_TOKEN") {
		t.Errorf("no token: %v, want kXR_AuthFailed naming BEARER_TOKEN", err)
	}
	if _, err := dialErr(t, addr, &DialOptions{}); !isCode(err, ErrTLSRequired) {
		t.Errorf("no TLS: %v, want kXR_TLSRequired", err)
	}
	c, err := dialErr(t, addr, &DialOptions{TLS: files.ClientConfig(), Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat(context.Background(), "/"); err != nil || !h.last().Authenticated {
		t.Fatalf("with the token: %v, %+v", err, h.last())
	}

	// By hand: TLS, login, then a stat without kXR_auth.
	rc := rawDialTLS(t, addr, files)
	rc.send(StreamID{0, 1}, &LoginRequest{Username: "raw"})
	f := rc.read()
	if f.Status != StatusOK || string(f.Body[16:]) != ztnParams {
		t.Fatalf("login answer %v %q, want the ztn parameters alone", f.Status, f.Body)
	}
	rc.send(StreamID{0, 2}, &StatRequest{Path: "/"})
	if f := rc.read(); f.Status != StatusError || !bytes.Contains(f.Body, []byte("before authentication")) {
		t.Errorf("stat before kXR_auth: %v %q", f.Status, f.Body)
	}
	bad := &AuthRequest{Credentials: []byte("ztn\x00\x00T\x00\x00\xff\xffshort")}
	copy(bad.CredType[:], "ztn")
	rc.send(StreamID{0, 3}, bad)
	if f := rc.read(); f.Status != StatusError || !bytes.Contains(f.Body, []byte("malformed")) {
		t.Errorf("malformed credential: %v %q", f.Status, f.Body)
	}
	good := &AuthRequest{Credentials: AppendZtnCredential(nil, testToken)}
	copy(good.CredType[:], "ztn")
	rc.send(StreamID{0, 4}, good)
	if f := rc.read(); f.Status != StatusOK {
		t.Fatalf("auth with the token: %v %q", f.Status, f.Body)
	}
	rc.send(StreamID{0, 5}, &StatRequest{Path: "/"})
	if f := rc.read(); f.Status != StatusOK {
		t.Errorf("stat after kXR_auth: %v %q", f.Status, f.Body)
	}
}

// rawDialTLS is rawDial for a server that moves TLS-capable clients to
// TLS: handshake and kXR_protocol in the clear, then TLS.
func rawDialTLS(t *testing.T, addr string, files *testtls.Files) *rawConn {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	rc := &rawConn{t: t, conn: conn}
	rc.write(EncodeRequest(StreamID{}, &ProtocolRequest{ClientVersion: ProtocolVersion, Flags: ProtoAbleTLS, Expect: ProtoExpectLogin}).AppendTo(AppendHandshake(nil)))
	rc.read() // handshake answer
	if f := rc.read(); f.Status != StatusOK {
		t.Fatalf("protocol answer %v", f.Status)
	} else if p, _ := ParseProtocolResponse(f.Body); p.Flags&(FlagGotoTLS|FlagTLSLogin|FlagHaveTLS) != FlagGotoTLS|FlagTLSLogin|FlagHaveTLS {
		t.Fatalf("protocol flags %#x, want haveTLS, gotoTLS and tlsLogin", p.Flags)
	}
	cfg := files.ClientConfig()
	cfg.ServerName = "localhost"
	tc := tls.Client(conn, cfg)
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	rc.conn = tc
	return rc
}

func TestZtnCredential(t *testing.T) {
	for _, tok := range []string{"x", testToken, strings.Repeat("t", maxTokenLen)} {
		got, err := ParseZtnCredential(AppendZtnCredential(nil, tok))
		if err != nil || got != tok {
			t.Errorf("round trip of a %d-byte token: %d bytes, %v", len(tok), len(got), err)
		}
	}
	for name, b := range map[string][]byte{
		"empty":      nil,
		"other":      []byte("gsi\x00\x00T\x00\x00\x00\x02a\x00"),
		"version":    []byte("ztn\x00\x01T\x00\x00\x00\x02a\x00"),
		"issuers":    []byte("ztn\x00\x00S\x00\x00\x00\x02a\x00"),
		"too long":   []byte("ztn\x00\x00T\x00\x00\x00\x09a\x00"),
		"no token":   []byte("ztn\x00\x00T\x00\x00\x00\x01\x00\x00"),
		"no NUL":     []byte("ztn\x00\x00T\x00\x00\x00\x02ab"),
		"NUL inside": []byte("ztn\x00\x00T\x00\x00\x00\x03a\x00\x00"),
		"oversize":   append([]byte("ztn\x00\x00T\x00\x00\x10\x02"), make([]byte, 4098)...),
	} {
		if _, err := ParseZtnCredential(b); !errors.Is(err, ErrBadCredential) {
			t.Errorf("%s: %v, want ErrBadCredential", name, err)
		}
	}
}

func FuzzZtnCredential(f *testing.F) {
	f.Add(AppendZtnCredential(nil, testToken))
	f.Add([]byte("ztn\x00\x00T\x00\x00\x00\x02a\x00"))
	f.Add([]byte("ztn\x00\x00T\x00\x00\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, err := ParseZtnCredential(b)
		if err != nil {
			return
		}
		if tok == "" || strings.IndexByte(tok, 0) >= 0 || len(tok) > maxTokenLen {
			t.Fatalf("accepted token %q", tok)
		}
		if again, err := ParseZtnCredential(AppendZtnCredential(nil, tok)); err != nil || again != tok {
			t.Fatalf("re-encoded token: %q, %v", again, err)
		}
	})
}

// isCode reports whether err is an *Error with code c.
func isCode(err error, c ErrorCode) bool {
	var xe *Error
	return errors.As(err, &xe) && xe.Code == c
}

// TestNoTLSAfterLogin: a client that asks for TLS again after its login
// is not moved to it (frames of other requests could interleave with
// the handshake): the answer offers no TLS and the session goes on in
// the clear.
func TestNoTLSAfterLogin(t *testing.T) {
	addr, _, _ := tokenServer(t, true, false)
	rc := rawDial(t, addr, true) // not TLS-capable: logged in in the clear
	rc.send(StreamID{0, 2}, &ProtocolRequest{ClientVersion: ProtocolVersion, Flags: ProtoAbleTLS | ProtoWantTLS, Expect: ProtoExpectLogin})
	f := rc.read()
	p, err := ParseProtocolResponse(f.Body)
	if f.Status != StatusOK || err != nil || p.Flags&(FlagGotoTLS|FlagHaveTLS) != 0 {
		t.Fatalf("kXR_protocol after login: %v %#x %v, want no TLS offered", f.Status, p.Flags, err)
	}
	rc.send(StreamID{0, 3}, &StatRequest{Path: "/"})
	if f := rc.read(); f.Status != StatusOK {
		t.Errorf("stat after the second kXR_protocol: %v %q", f.Status, f.Body)
	}
}

// TestBindNeedsAuthentication binds to a session of a token server: not
// before the session's kXR_auth, nor from a connection in the clear; then
// under TLS it binds.
func TestBindNeedsAuthentication(t *testing.T) {
	addr, _, files := tokenServer(t, true, true)
	rc := rawDialTLS(t, addr, files)
	rc.send(StreamID{0, 1}, &LoginRequest{Username: "raw"})
	f := rc.read()
	if f.Status != StatusOK || len(f.Body) < 16 {
		t.Fatalf("login answer %v %q", f.Status, f.Body)
	}
	var id [16]byte
	copy(id[:], f.Body)
	sid := StreamID{0, 2}
	sub := rawDialTLS(t, addr, files)
	sub.send(sid, &BindRequest{SessionID: id})
	sub.expectError(sid, ErrNotAuthorized)

	good := &AuthRequest{Credentials: AppendZtnCredential(nil, testToken)}
	copy(good.CredType[:], "ztn")
	rc.send(StreamID{0, 4}, good)
	if f := rc.read(); f.Status != StatusOK {
		t.Fatalf("auth with the token: %v %q", f.Status, f.Body)
	}
	clear := rawDial(t, addr, false)
	clear.send(sid, &BindRequest{SessionID: id})
	clear.expectError(sid, ErrTLSRequired)
	sub.send(sid, &BindRequest{SessionID: id})
	if f := sub.read(); f.Status != StatusOK || !bytes.Equal(f.Body, []byte{1}) {
		t.Fatalf("bind after kXR_auth answered %v %q", f.Status, f.Body)
	}
	// The bound connection cannot authenticate itself.
	sub.send(sid, good)
	sub.expectError(sid, ErrInvalidRequest)
}
