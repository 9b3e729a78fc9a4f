package webdav

import (
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"strings"

	"github.com/ecstore/ecstore/internal/access"
	"github.com/ecstore/ecstore/internal/jwtauth"
)

// Authentication. Every request is either authenticated or anonymous:
//
//   - "Authorization: Basic base64(ID:SECRET)" with a configured access
//     key (Options.Keys), or "Authorization: Bearer TOKEN" with a
//     configured token (Options.Tokens), authenticates the request: it may
//     read and write. Secrets and tokens are compared in constant time.
//   - Wrong credentials (an unknown id, a wrong secret or token, a
//     malformed Basic value) are refused with 403 Forbidden, even where
//     anonymous access would be allowed.
//   - A request without an Authorization header is anonymous. It may read
//     when Options.AnonymousRead is set, and write when
//     Options.AnonymousWrite is set and the connection's local address is
//     a loopback address. Otherwise it gets 401 Unauthorized with a
//     WWW-Authenticate challenge for each scheme that is configured.
//   - OPTIONS needs no credentials: it describes the server, not objects.
//   - An Authorization header of another scheme (AWS signatures,
//     Negotiate, ...) is treated like none: 401 unless anonymous access
//     allows the request.

// authenticator checks credentials against the configured ones.
type authenticator struct {
	jwt       *jwtauth.Checker
	grants    map[string]*jwtauth.Grant
	keys      map[string]string
	tokens    [][]byte
	anonRead  bool
	anonWrite bool
	challenge []string // WWW-Authenticate values
}

// newAuthenticator builds the checks of one credential set.
func newAuthenticator(set *access.Set, anonWrite bool) *authenticator {
	a := &authenticator{jwt: set.JWT, grants: set.Grants, keys: set.Keys, anonRead: set.AnonymousRead, anonWrite: anonWrite}
	for _, t := range set.Tokens {
		a.tokens = append(a.tokens, []byte(t))
	}
	if len(a.keys) > 0 || len(a.tokens) == 0 {
		a.challenge = append(a.challenge, `Basic realm="ecstore", charset="UTF-8"`)
	}
	if len(a.tokens) > 0 || a.jwt != nil {
		a.challenge = append(a.challenge, `Bearer realm="ecstore"`)
	}
	return a
}

// authNow returns the authenticator of the current credential set,
// built once per set (a reload replaces the set).
func (h *handler) authNow() *authenticator {
	set := h.access.Load()
	if c := h.auth.Load(); c != nil && c.set == set {
		return c.a
	}
	c := &builtAuth{set: set, a: newAuthenticator(set, h.opts.AnonymousWrite)}
	h.auth.Store(c)
	return c.a
}

// builtAuth is an authenticator and the set it was built from.
type builtAuth struct {
	set *access.Set
	a   *authenticator
}

// check authorizes a request that reads, or writes when write is set.
func (a *authenticator) check(req *request, write bool) error {
	scheme, value, _ := strings.Cut(strings.TrimSpace(req.r.Header.Get("Authorization")), " ")
	value = strings.TrimSpace(value)
	switch {
	case strings.EqualFold(scheme, "Basic"):
		id, ok := a.basic(value)
		if !ok {
			return errorf(http.StatusForbidden, "wrong access key or secret")
		}
		req.grant = a.grants[id] // nil: everything
		return nil
	case strings.EqualFold(scheme, "Bearer"):
		if a.jwt != nil && jwtauth.LooksLikeJWT(value) {
			g, err := a.jwt.Check(req.ctx, value)
			if err != nil {
				return errorf(http.StatusForbidden, "bearer token refused: %v", err)
			}
			req.grant = g // held to its scopes once the path is known
			return nil
		}
		if !a.bearer(value) {
			return errorf(http.StatusForbidden, "wrong bearer token")
		}
		return nil
	}
	if !write && a.anonRead || write && a.anonWrite && loopbackConn(req.r) && !proxied(req.r) {
		return nil
	}
	for _, c := range a.challenge {
		req.w.Header().Add("WWW-Authenticate", c)
	}
	if write && a.anonRead {
		return errorf(http.StatusUnauthorized, "writing needs credentials (an access key with HTTP Basic, or a bearer token)")
	}
	return errorf(http.StatusUnauthorized, "credentials needed (an access key with HTTP Basic, or a bearer token)")
}

// basic checks a Basic credentials value and returns its access key id.
func (a *authenticator) basic(value string) (string, bool) {
	raw, err := base64.StdEncoding.DecodeString(value)
	if err != nil {
		return "", false
	}
	id, secret, ok := strings.Cut(string(raw), ":")
	if !ok {
		return "", false
	}
	want, known := a.keys[id]
	if !known {
		// Compare anyway, so that the time taken does not tell whether
		// the id exists.
		want = "\x00unknown access key id\x00"
	}
	return id, subtle.ConstantTimeCompare([]byte(secret), []byte(want)) == 1 && known
}

// bearer checks a bearer token against every configured one.
func (a *authenticator) bearer(token string) bool {
	ok := 0
	for _, t := range a.tokens {
		ok |= subtle.ConstantTimeCompare([]byte(token), t)
	}
	return ok == 1 && token != ""
}

// proxied reports whether the request names a proxy that forwarded it
// (Forwarded, X-Forwarded-*, X-Real-IP, Via): a proxy on this host makes
// every request arrive on loopback, wherever its client is, so that such
// a request is not taken for a local one.
func proxied(r *http.Request) bool {
	for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip", "Via"} {
		if _, ok := r.Header[h]; ok {
			return true
		}
	}
	return false
}

// loopbackConn reports whether the request arrived on a loopback address
// of this host (the connection's local address, which the client cannot
// forge). Requests without a connection (tests) are not loopback.
func loopbackConn(r *http.Request) bool {
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
