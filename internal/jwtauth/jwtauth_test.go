package jwtauth

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/testissuer"
)

func newChecker(t *testing.T, is *testissuer.Issuer, base string, auds ...string) *Checker {
	t.Helper()
	c, err := New(Options{Issuers: []Issuer{{URL: is.URL, Base: base}}, Audiences: auds})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGrantScopes(t *testing.T) {
	is := testissuer.New(t)
	c := newChecker(t, is, "/atlas")
	ctx := context.Background()
	g, err := c.Check(ctx, is.Token(t, is.Claims("alice", "openid storage.read:/ storage.create:/user/alice storage.modify:/scratch")))
	if err != nil {
		t.Fatal(err)
	}
	if g.Subject != "alice" {
		t.Errorf("subject %q", g.Subject)
	}
	for _, tc := range []struct {
		op   Op
		path string
		want bool
	}{
		{Read, "/atlas/data/f", true},
		{Read, "/atlas", true},
		{Read, "/cms/f", false}, // outside the issuer's base
		{Read, "/atlasx/f", false},
		{Create, "/atlas/user/alice/new", true},
		{Modify, "/atlas/user/alice/new", false}, // create only: no overwrite or removal
		{Create, "/atlas/user/bob/new", false},
		{Create, "/atlas/scratch/x", true}, // modify implies create
		{Modify, "/atlas/scratch/x", true},
		{Modify, "/atlas/scratch/../data/x", false},
	} {
		if got := g.Allows(tc.op, tc.path); got != tc.want {
			t.Errorf("%v %s: %v, want %v (scopes %s)", tc.op, tc.path, got, tc.want, g.Scopes())
		}
	}
	// A scope that climbs above the issuer's base grants nothing.
	g, err = c.Check(ctx, is.Token(t, is.Claims("mallory", "storage.modify:/../ storage.read:/../cms")))
	if err != nil {
		t.Fatal(err)
	}
	if g.Allows(Modify, "/x") || g.Allows(Read, "/cms/f") || g.Allows(Modify, "/atlas/x") {
		t.Errorf("scopes with '..': %s", g.Scopes())
	}
	// SciTokens' scopes, signed with RS256.
	g, err = c.Check(ctx, is.TokenRS256(t, is.Claims("bob", "read:/public write:/bob")))
	if err != nil {
		t.Fatal(err)
	}
	if !g.Allows(Read, "/atlas/public/f") || !g.Allows(Modify, "/atlas/bob/f") || g.Allows(Read, "/atlas/private") {
		t.Errorf("SciTokens scopes: %s", g.Scopes())
	}
}

func TestCheckRefuses(t *testing.T) {
	is := testissuer.New(t)
	other := testissuer.New(t)
	c := newChecker(t, is, "/", "https://gw.example.org")
	ctx := context.Background()
	good := is.Claims("alice", "storage.read:/")
	good["aud"] = []string{"https://other.example.org", "https://gw.example.org"}
	if _, err := c.Check(ctx, is.Token(t, good)); err != nil {
		t.Fatalf("a good token: %v", err)
	}
	claims := func(mod func(m map[string]any)) map[string]any {
		m := is.Claims("alice", "storage.read:/")
		mod(m)
		return m
	}
	tok := is.Token(t, is.Claims("alice", "storage.read:/"))
	parts := strings.Split(tok, ".")
	for name, tc := range map[string]struct {
		tok  string
		want error
	}{
		"expired":         {is.Token(t, claims(func(m map[string]any) { m["exp"] = time.Now().Add(-2 * time.Minute).Unix() })), ErrExpired},
		"not yet":         {is.Token(t, claims(func(m map[string]any) { m["nbf"] = time.Now().Add(5 * time.Minute).Unix() })), ErrExpired},
		"no expiry":       {is.Token(t, claims(func(m map[string]any) { delete(m, "exp") })), ErrClaims},
		"other audience":  {is.Token(t, claims(func(m map[string]any) { m["aud"] = "https://other.example.org" })), ErrAudience},
		"other issuer":    {other.Token(t, other.Claims("mallory", "storage.modify:/")), ErrIssuer},
		"forged issuer":   {other.Token(t, claims(func(map[string]any) {})), ErrSignature},
		"tampered claims": {parts[0] + "." + is.Token(t, is.Claims("alice", "storage.modify:/"))[len(parts[0])+1:strings.LastIndex(is.Token(t, is.Claims("alice", "storage.modify:/")), ".")] + "." + parts[2], ErrSignature},
		"alg none":        {"eyJhbGciOiJub25lIn0." + parts[1] + ".", ErrSignature},
		"not a JWT":       {"just-an-opaque-token", ErrNotJWT},
	} {
		if _, err := c.Check(ctx, tc.tok); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
}

// TestKeysCached: the issuer's keys are fetched once for many tokens, and
// a token naming an unknown key id does not make every check fetch them.
func TestKeysCached(t *testing.T) {
	is := testissuer.New(t)
	c := newChecker(t, is, "/")
	ctx := context.Background()
	for range 5 {
		if _, err := c.Check(ctx, is.Token(t, is.Claims("a", "storage.read:/"))); err != nil {
			t.Fatal(err)
		}
	}
	if n := is.Fetches.Load(); n != 1 {
		t.Errorf("%d key fetches for 5 tokens, want 1", n)
	}
	tok := is.Token(t, is.Claims("a", "storage.read:/"))
	bogus := "eyJhbGciOiJFUzI1NiIsImtpZCI6Im5vcGUifQ" + tok[strings.Index(tok, "."):]
	for range 5 {
		if _, err := c.Check(ctx, bogus); !errors.Is(err, ErrSignature) {
			t.Fatalf("unknown key id: %v", err)
		}
	}
	if n := is.Fetches.Load(); n > 2 {
		t.Errorf("%d key fetches after 5 tokens with an unknown key id, want at most 2", n)
	}
}

func TestLooksLikeJWT(t *testing.T) {
	is := testissuer.New(t)
	if !LooksLikeJWT(is.Token(t, is.Claims("a", ""))) || LooksLikeJWT("0123456789abcdef-opaque") || LooksLikeJWT("a.b.c") {
		t.Error("LooksLikeJWT")
	}
}

func FuzzCheck(f *testing.F) {
	f.Add("eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJ4In0.AAAA")
	f.Add("a.b.c")
	f.Add("eyJ.eyJ.")
	c, err := New(Options{Issuers: []Issuer{{URL: "https://issuer.invalid"}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		if g, err := c.Check(ctx, tok); err == nil {
			t.Fatalf("token %q accepted: %+v", tok, g)
		}
	})
}

func TestStaticGrant(t *testing.T) {
	g, err := StaticGrant("ops", "storage.read:/atlas/data storage.modify:/atlas/scratch")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		op   Op
		p    string
		want bool
	}{
		{Read, "/atlas/data/x", true},
		{Read, "/atlas/other", false},
		{Create, "/atlas/scratch/x", true},
		{Modify, "/atlas/data/x", false},
	} {
		if got := g.Allows(tc.op, tc.p); got != tc.want {
			t.Errorf("Allows(%v, %s) = %v", tc.op, tc.p, got)
		}
	}
	if !g.Reaches(Read, "/atlas") || g.Reaches(Read, "/cms") || !g.Reaches(Create, "/atlas") || g.Reaches(Modify, "/atl") {
		t.Errorf("Reaches: %s", g.Scopes())
	}
	for _, bad := range []string{"storage.read:relative", "compute.read:/", "admin", "storage.modify:/../", "storage.read:/a/../../b"} {
		if _, err := StaticGrant("x", bad); err == nil {
			t.Errorf("StaticGrant(%q) accepted", bad)
		}
	}
}

// TestKeyFetchOutlivesItsCaller: the first check fetches the issuer's
// keys for everyone; a caller that has gone away (its context cancelled)
// does not cancel that fetch, which would leave the keys unfetched until
// the refetch allowance came round again.
func TestKeyFetchOutlivesItsCaller(t *testing.T) {
	is := testissuer.New(t)
	c := newChecker(t, is, "/")
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	c.Check(gone, is.Token(t, is.Claims("a", "storage.read:/")))
	if _, err := c.Check(context.Background(), is.Token(t, is.Claims("b", "storage.read:/"))); err != nil {
		t.Fatalf("a check after a caller that went away: %v", err)
	}
	if n := is.Fetches.Load(); n != 1 {
		t.Errorf("%d key fetches, want 1", n)
	}
}
