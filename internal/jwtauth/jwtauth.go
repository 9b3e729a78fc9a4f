// Package jwtauth checks bearer tokens that are JSON Web Tokens issued by
// a trusted token issuer, as the WLCG token profile and SciTokens define
// them: the signature against the issuer's published keys (RS256 or
// ES256, found through the issuer's OpenID discovery document), the
// expiry, the audience, and the storage scopes that say what the holder
// may do where ("storage.read:/atlas", "storage.modify:/atlas/user";
// SciTokens' "read:" and "write:"). A Grant is what a valid token allows.
package jwtauth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// AnyAudience is the WLCG audience that any server accepts.
const AnyAudience = "https://wlcg.cern.ch/jwt/v1/any"

// Issuer is a token issuer the server trusts.
type Issuer struct {
	// URL is the issuer's identifier, its "iss" claim (https://...).
	URL string
	// Base is the namespace path that the token's scope paths are
	// relative to ("/" by default): with Base "/atlas", a scope
	// "storage.read:/data" allows reading /atlas/data.
	Base string
}

// Options configure a Checker.
type Options struct {
	Issuers []Issuer
	// Audiences the server answers to; a token must name one of them
	// (or AnyAudience) in "aud". Empty: any audience is accepted.
	Audiences []string
	// Client fetches the issuers' discovery documents and keys. Default:
	// an http.Client with a 10 s timeout.
	Client *http.Client
	Logger *slog.Logger
	// Now is the clock (tests). Default time.Now.
	Now func() time.Time
}

// Op is what a request does to a path.
type Op int

const (
	Read   Op = iota // read or list
	Create           // write a new file
	Modify           // overwrite, remove, rename, make or remove directories
)

func (o Op) String() string {
	return [...]string{"read", "create", "modify"}[o]
}

// Grant is what a valid token allows.
type Grant struct {
	Subject string // "sub"
	Issuer  string
	Expires time.Time
	scopes  []scope
	now     func() time.Time
}

type scope struct {
	op   Op
	path string // absolute, cleaned, in the server's namespace
}

// Allows reports whether the grant lets its holder do op on p (an
// absolute object path), now: a scope for op (or, for Create, Modify)
// whose path is p or one of p's parents, and the token not expired.
func (g *Grant) Allows(op Op, p string) bool {
	if g == nil || !g.now().Before(g.Expires) {
		return false
	}
	p = path.Clean("/" + p)
	for _, s := range g.scopes {
		if s.op != op && !(op == Create && s.op == Modify) {
			continue
		}
		if s.path == "/" || p == s.path || strings.HasPrefix(p, s.path+"/") {
			return true
		}
	}
	return false
}

// AllowsWrite reports whether the grant lets its holder write p: with
// storage.modify, or with storage.create when absent (asked only then)
// reports that nothing is at p yet.
func (g *Grant) AllowsWrite(p string, absent func() bool) bool {
	return g.Allows(Modify, p) || g.Allows(Create, p) && absent()
}

// Reaches reports whether the grant allows op on p or on something
// below p (a bucket whose one prefix the holder may read is one it may
// look at).
func (g *Grant) Reaches(op Op, p string) bool {
	if g.Allows(op, p) {
		return true
	}
	p = path.Clean("/" + p)
	for _, s := range g.scopes {
		if (s.op == op || op == Create && s.op == Modify) && strings.HasPrefix(s.path, p+"/") {
			return g.now().Before(g.Expires)
		}
	}
	return false
}

// StaticGrant returns the grant of a credential that does not expire
// (an access key), for storage scopes in the WLCG syntax separated by
// blanks ("storage.read:/atlas storage.modify:/atlas/scratch"), with
// paths from the namespace's root. It fails on a scope it does not know.
func StaticGrant(subject, scopes string) (*Grant, error) {
	g := &Grant{Subject: subject, Expires: time.Unix(1<<62, 0), now: time.Now}
	for _, s := range strings.Fields(scopes) {
		sc, ok := parseScope(s, "/")
		if !ok {
			return nil, fmt.Errorf("jwtauth: scope %q: want storage.read, storage.create or storage.modify, and an absolute path", s)
		}
		g.scopes = append(g.scopes, sc...)
	}
	return g, nil
}

// Scopes describes the grant's scopes, for logs.
func (g *Grant) Scopes() string {
	var b strings.Builder
	for i, s := range g.scopes {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s:%s", s.op, s.path)
	}
	return b.String()
}

// Errors of Check.
var (
	ErrNotJWT    = errors.New("jwtauth: not a JSON Web Token")
	ErrIssuer    = errors.New("jwtauth: token issuer not trusted")
	ErrSignature = errors.New("jwtauth: bad signature")
	ErrExpired   = errors.New("jwtauth: token expired or not yet valid")
	ErrAudience  = errors.New("jwtauth: token not meant for this server")
	ErrClaims    = errors.New("jwtauth: malformed claims")
)

// Checker checks tokens. Safe for concurrent use.
type Checker struct {
	opts    Options
	issuers map[string]*issuerKeys
}

// issuerKeys caches an issuer's keys.
type issuerKeys struct {
	Issuer
	mu      sync.Mutex
	keys    map[string]crypto.PublicKey // by kid
	fetched time.Time                   // last successful fetch
	tried   time.Time                   // last attempt
	// fetching, while a fetch of the keys runs, is closed when it ends.
	fetching chan struct{}
}

// keysFresh is how long fetched keys are used before they are fetched
// again; minRefetch spaces fetches for an unknown key id, so that tokens
// naming made-up ids cannot make the server hammer the issuer.
const (
	keysFresh  = 10 * time.Minute
	minRefetch = 30 * time.Second
)

// New returns a Checker for the issuers.
func New(opts Options) (*Checker, error) {
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Checker{opts: opts, issuers: map[string]*issuerKeys{}}
	for _, is := range opts.Issuers {
		if !strings.HasPrefix(is.URL, "https://") && !strings.HasPrefix(is.URL, "http://") {
			return nil, fmt.Errorf("jwtauth: issuer %q: want an https:// URL", is.URL)
		}
		if is.Base == "" {
			is.Base = "/"
		}
		if !strings.HasPrefix(is.Base, "/") {
			return nil, fmt.Errorf("jwtauth: issuer %s: base path %q is not absolute", is.URL, is.Base)
		}
		is.Base = path.Clean(is.Base)
		c.issuers[strings.TrimSuffix(is.URL, "/")] = &issuerKeys{Issuer: is}
	}
	return c, nil
}

// LooksLikeJWT reports whether tok has the shape of a JWT (three
// base64url parts, the first a JSON object): such a token is checked by
// a Checker, any other compared with the configured opaque tokens.
func LooksLikeJWT(tok string) bool {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 || !strings.HasPrefix(parts[0], "eyJ") {
		return false
	}
	return true
}

type header struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
}

type claims struct {
	Iss   string          `json:"iss"`
	Sub   string          `json:"sub"`
	Aud   json.RawMessage `json:"aud"`
	Exp   *json.Number    `json:"exp"`
	Nbf   *json.Number    `json:"nbf"`
	Scope string          `json:"scope"`
}

// Check verifies tok and returns what it grants.
func (c *Checker) Check(ctx context.Context, tok string) (*Grant, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return nil, ErrNotJWT
	}
	var h header
	if err := decodePart(parts[0], &h); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrNotJWT, err)
	}
	var cl claims
	if err := decodePart(parts[1], &cl); err != nil {
		return nil, fmt.Errorf("%w: claims: %v", ErrNotJWT, err)
	}
	is := c.issuers[strings.TrimSuffix(cl.Iss, "/")]
	if is == nil {
		return nil, fmt.Errorf("%w: %q", ErrIssuer, cl.Iss)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSignature, err)
	}
	key, err := c.key(ctx, is, h.Kid)
	if err != nil {
		return nil, err
	}
	if err := verify(h.Alg, key, parts[0]+"."+parts[1], sig); err != nil {
		return nil, err
	}
	now := c.opts.Now()
	exp, err := numericDate(cl.Exp)
	if err != nil || exp.IsZero() {
		return nil, fmt.Errorf("%w: exp: %v", ErrClaims, err)
	}
	nbf, err := numericDate(cl.Nbf)
	if err != nil {
		return nil, fmt.Errorf("%w: nbf: %v", ErrClaims, err)
	}
	const skew = time.Minute
	if !now.Before(exp.Add(skew)) || (!nbf.IsZero() && now.Add(skew).Before(nbf)) {
		return nil, fmt.Errorf("%w (expires %s)", ErrExpired, exp.UTC().Format(time.RFC3339))
	}
	if err := c.checkAudience(cl.Aud); err != nil {
		return nil, err
	}
	g := &Grant{Subject: cl.Sub, Issuer: is.URL, Expires: exp.Add(skew), now: c.opts.Now}
	for _, s := range strings.Fields(cl.Scope) {
		if sc, ok := parseScope(s, is.Base); ok {
			g.scopes = append(g.scopes, sc...)
		}
	}
	return g, nil
}

// parseScope turns a storage scope into grants in the server's namespace:
// storage.read, storage.create, storage.modify (WLCG), read and write
// (SciTokens). A scope without a path means the issuer's whole base.
// Other scopes (openid, offline_access, compute.*) grant nothing here.
func parseScope(s, base string) ([]scope, bool) {
	name, p, hasPath := strings.Cut(s, ":")
	var ops []Op
	switch name {
	case "storage.read", "read":
		ops = []Op{Read}
	case "storage.create":
		ops = []Op{Create}
	case "storage.modify", "write":
		ops = []Op{Modify}
	default:
		return nil, false
	}
	if !hasPath || p == "" {
		p = "/"
	}
	if !strings.HasPrefix(p, "/") {
		return nil, false
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return nil, false // it would reach above the issuer's base
		}
	}
	full := path.Clean(path.Join(base, p))
	if full != base && !strings.HasPrefix(full, strings.TrimSuffix(base, "/")+"/") {
		return nil, false
	}
	out := make([]scope, len(ops))
	for i, op := range ops {
		out[i] = scope{op: op, path: full}
	}
	return out, true
}

func (c *Checker) checkAudience(raw json.RawMessage) error {
	if len(c.opts.Audiences) == 0 {
		return nil
	}
	var auds []string
	if len(raw) > 0 {
		var one string
		if json.Unmarshal(raw, &one) == nil {
			auds = []string{one}
		} else if err := json.Unmarshal(raw, &auds); err != nil {
			return fmt.Errorf("%w: aud: %v", ErrClaims, err)
		}
	}
	for _, a := range auds {
		if a == AnyAudience || slices.Contains(c.opts.Audiences, a) {
			return nil
		}
	}
	return fmt.Errorf("%w: aud %q", ErrAudience, auds)
}

func numericDate(n *json.Number) (time.Time, error) {
	if n == nil {
		return time.Time{}, nil
	}
	f, err := n.Float64()
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(int64(f), 0), nil
}

// decodePart decodes one base64url JSON part of a token into v.
func decodePart(part string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	return dec.Decode(v)
}

// verify checks a signature made with alg.
func verify(alg string, key crypto.PublicKey, signed string, sig []byte) error {
	sum := sha256.Sum256([]byte(signed))
	switch alg {
	case "RS256":
		k, ok := key.(*rsa.PublicKey)
		if !ok {
			return fmt.Errorf("%w: RS256 with a key that is not RSA", ErrSignature)
		}
		if err := rsa.VerifyPKCS1v15(k, crypto.SHA256, sum[:], sig); err != nil {
			return fmt.Errorf("%w: %v", ErrSignature, err)
		}
	case "ES256":
		k, ok := key.(*ecdsa.PublicKey)
		if !ok || k.Curve != elliptic.P256() || len(sig) != 64 {
			return fmt.Errorf("%w: ES256 with a key that is not P-256, or a signature of %d bytes", ErrSignature, len(sig))
		}
		r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
		if !ecdsa.Verify(k, sum[:], r, s) {
			return ErrSignature
		}
	default:
		return fmt.Errorf("%w: algorithm %q is not accepted (RS256, ES256)", ErrSignature, alg)
	}
	return nil
}

// key returns the issuer's key kid. Keys are fetched again when they are
// stale or do not hold kid, not more often than minRefetch, and never
// under the issuer's lock: a caller whose key is known (stale or not) is
// answered at once while a fetch runs in the background; only a caller
// whose kid is unknown waits for it.
func (c *Checker) key(ctx context.Context, is *issuerKeys, kid string) (crypto.PublicKey, error) {
	is.mu.Lock()
	now := c.opts.Now()
	k, ok := is.lookup(kid)
	if ok && now.Sub(is.fetched) <= keysFresh {
		is.mu.Unlock()
		return k, nil
	}
	wait := is.fetching
	if wait == nil && (is.tried.IsZero() || now.Sub(is.tried) >= minRefetch) {
		is.tried = now
		wait = make(chan struct{})
		is.fetching = wait
		go c.refresh(is, wait)
	}
	is.mu.Unlock()
	if ok {
		return k, nil // stale: an issuer that does not answer keeps its old keys
	}
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: issuer %s: waiting for its keys: %w", ErrSignature, is.URL, ctx.Err())
		}
		is.mu.Lock()
		k, ok = is.lookup(kid)
		is.mu.Unlock()
		if ok {
			return k, nil
		}
	}
	return nil, fmt.Errorf("%w: issuer %s has no key %q", ErrSignature, is.URL, kid)
}

// lookup returns the key kid of the keys held, or the only key for a
// token that names none. The caller holds is.mu.
func (is *issuerKeys) lookup(kid string) (crypto.PublicKey, bool) {
	if k, ok := is.keys[kid]; ok {
		return k, true
	}
	if kid == "" && len(is.keys) == 1 {
		for _, k := range is.keys {
			return k, true
		}
	}
	return nil, false
}

// refresh fetches the issuer's keys, keeps them if the fetch succeeded,
// and closes done. It runs on its own: a client that hangs up must not
// cancel the fetch other callers wait for (and spend the refetch
// allowance); the HTTP client's timeout bounds it.
func (c *Checker) refresh(is *issuerKeys, done chan struct{}) {
	keys, err := c.fetchKeys(context.Background(), is.URL)
	is.mu.Lock()
	defer is.mu.Unlock()
	if err != nil {
		c.opts.Logger.Warn("token issuer's keys not fetched", "issuer", is.URL, "err", err)
	} else {
		is.keys, is.fetched = keys, c.opts.Now()
	}
	is.fetching = nil
	close(done)
}

// fetchKeys reads the issuer's discovery document and its key set.
func (c *Checker) fetchKeys(ctx context.Context, issuer string) (map[string]crypto.PublicKey, error) {
	var disc struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := c.getJSON(ctx, strings.TrimSuffix(issuer, "/")+"/.well-known/openid-configuration", &disc); err != nil {
		return nil, err
	}
	if disc.JWKSURI == "" {
		return nil, fmt.Errorf("discovery document without jwks_uri")
	}
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := c.getJSON(ctx, disc.JWKSURI, &set); err != nil {
		return nil, err
	}
	keys := map[string]crypto.PublicKey{}
	for _, k := range set.Keys {
		pk, err := k.publicKey()
		if err != nil {
			c.opts.Logger.Debug("token issuer key skipped", "issuer", issuer, "kid", k.Kid, "err", err)
			continue
		}
		keys[k.Kid] = pk
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("no usable key in %s", disc.JWKSURI)
	}
	return keys, nil
}

func (c *Checker) getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.opts.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v)
}

// jwk is one key of a JSON Web Key Set.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

func (k jwk) publicKey() (crypto.PublicKey, error) {
	if k.Use != "" && k.Use != "sig" {
		return nil, fmt.Errorf("key use %q", k.Use)
	}
	b := func(s string) (*big.Int, error) {
		raw, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(raw) == 0 {
			return nil, fmt.Errorf("bad key number %q", s)
		}
		return new(big.Int).SetBytes(raw), nil
	}
	switch k.Kty {
	case "RSA":
		n, err := b(k.N)
		if err != nil {
			return nil, err
		}
		e, err := b(k.E)
		if err != nil || !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31 {
			return nil, fmt.Errorf("bad RSA exponent")
		}
		if n.BitLen() < 2048 {
			return nil, fmt.Errorf("RSA key of %d bits", n.BitLen())
		}
		return &rsa.PublicKey{N: n, E: int(e.Int64())}, nil
	case "EC":
		if k.Crv != "P-256" {
			return nil, fmt.Errorf("curve %q", k.Crv)
		}
		x, errX := base64.RawURLEncoding.DecodeString(k.X)
		y, errY := base64.RawURLEncoding.DecodeString(k.Y)
		if errX != nil || errY != nil || len(x) != 32 || len(y) != 32 {
			return nil, fmt.Errorf("bad P-256 point")
		}
		return ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
	}
	return nil, fmt.Errorf("key type %q", k.Kty)
}
