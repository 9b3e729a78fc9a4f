// Package testissuer is a token issuer for tests: it publishes an OpenID
// discovery document and a key set over HTTP on loopback, and signs JSON
// Web Tokens with its keys (ES256, RS256), as a WLCG token issuer does.
package testissuer

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// Issuer signs tokens and serves its keys.
type Issuer struct {
	URL     string
	ec      *ecdsa.PrivateKey
	rsa     *rsa.PrivateKey
	Fetches atomic.Int64 // key set fetches
}

// New starts an issuer until the test ends.
func New(t testing.TB) *Issuer {
	t.Helper()
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &Issuer{ec: ec, rsa: rk}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"issuer": is.URL, "jwks_uri": is.URL + "/jwks"})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		is.Fetches.Add(1)
		b := func(n *big.Int, size int) string {
			return base64.RawURLEncoding.EncodeToString(n.FillBytes(make([]byte, size)))
		}
		json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{
			{"kty": "EC", "kid": "es", "use": "sig", "crv": "P-256", "x": b(ec.X, 32), "y": b(ec.Y, 32)},
			{"kty": "RSA", "kid": "rs", "use": "sig", "n": b(rk.N, rk.Size()), "e": b(big.NewInt(int64(rk.E)), 3)},
		}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	is.URL = srv.URL
	return is
}

// Claims returns the usual claims of a token of this issuer for subject
// sub with scope, valid for an hour.
func (is *Issuer) Claims(sub, scope string) map[string]any {
	now := time.Now()
	return map[string]any{"iss": is.URL, "sub": sub, "scope": scope, "aud": "https://wlcg.cern.ch/jwt/v1/any",
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(), "wlcg.ver": "1.0"}
}

// Token signs claims with the issuer's ES256 key.
func (is *Issuer) Token(t testing.TB, claims map[string]any) string {
	return is.sign(t, "ES256", "es", claims)
}

// TokenRS256 signs claims with the issuer's RSA key.
func (is *Issuer) TokenRS256(t testing.TB, claims map[string]any) string {
	return is.sign(t, "RS256", "rs", claims)
}

func (is *Issuer) sign(t testing.TB, alg, kid string, claims map[string]any) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	signed := enc(map[string]string{"alg": alg, "kid": kid, "typ": "JWT"}) + "." + enc(claims)
	sum := sha256.Sum256([]byte(signed))
	var sig []byte
	switch alg {
	case "ES256":
		r, s, err := ecdsa.Sign(rand.Reader, is.ec, sum[:])
		if err != nil {
			t.Fatal(err)
		}
		sig = append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
	default:
		var err error
		if sig, err = rsa.SignPKCS1v15(rand.Reader, is.rsa, crypto.SHA256, sum[:]); err != nil {
			t.Fatal(err)
		}
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}
