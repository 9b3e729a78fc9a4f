package cluster

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/ecstore/ecstore/internal/jwtauth"
)

// Gateway access settings. They configure who may use the gateway's
// HTTP and S3 frontends (`ecstore serve`); other commands ignore them.
// They are config-file keys only, with no command-line flags, so that
// secrets never appear in a process list:
//
//	access-key = ID:SECRET [SCOPE...]
//	                           an access key: S3 SigV4 signing, and HTTP
//	                           Basic authentication with ID and SECRET.
//	                           Storage scopes after it limit what it may
//	                           do ("storage.read:/atlas
//	                           storage.modify:/atlas/scratch"); without
//	                           any it may do everything. May repeat, one
//	                           key per line.
//	token = TOKEN              a bearer token: for the HTTP frontend
//	                           ("Authorization: Bearer TOKEN") and, when
//	                           the gateway has a TLS certificate, for
//	                           root:// (XRootD's ztn: roots:// and
//	                           BEARER_TOKEN). May repeat.
//	http-token = TOKEN         the same (its first name).
//	token-issuer = URL [BASE]  a token issuer whose JSON Web Tokens are
//	                           taken (signature, expiry, audience and
//	                           storage scopes checked; scope paths are
//	                           under BASE, / by default). May repeat.
//	node-token = TOKEN         the token the gateway presents to remote
//	                           nodes that ask for one (ecstore node
//	                           --token-file, xrootd with ztn), under TLS.
//	token-audience = AUD       an audience such tokens must name (or the
//	                           WLCG "any" audience). May repeat; none:
//	                           any audience.
//	http-anonymous-read = BOOL let clients without credentials read over
//	                           HTTP (GET, HEAD, PROPFIND).
const (
	KeyAccessKey         = "access-key"
	KeyToken             = "token"
	KeyHTTPToken         = "http-token"
	KeyHTTPAnonymousRead = "http-anonymous-read"
	KeyTokenIssuer       = "token-issuer"
	KeyTokenAudience     = "token-audience"
	KeyNodeToken         = "node-token"
)

// accessKeys lists the access settings, for error messages.
var accessKeys = []string{KeyAccessKey, KeyToken, KeyHTTPToken, KeyHTTPAnonymousRead, KeyTokenIssuer, KeyTokenAudience, KeyNodeToken}

// MinTokenLen is the shortest bearer token accepted, so that a token
// cannot be guessed by trying.
const MinTokenLen = 16

// access holds the gateway access settings of a Config.
type access struct {
	keys      map[string]string // access key id -> secret
	scopes    map[string]string // access key id -> its storage scopes ("": all)
	tokens    []string
	anonRead  bool
	issuers   []TokenIssuer
	audiences []string
	nodeToken string
}

// TokenIssuer is a token-issuer line: an issuer whose JSON Web Tokens
// are taken, and the namespace path its scopes are relative to.
type TokenIssuer struct {
	URL  string
	Base string
}

// repeatable reports whether key may appear on several lines.
func repeatable(key string) bool {
	switch key {
	case KeyAccessKey, KeyToken, KeyHTTPToken, KeyTokenIssuer, KeyTokenAudience:
		return true
	}
	return false
}

// set parses an access setting; handled is false for other keys.
func (a *access) set(key, value string) (handled bool, err error) {
	switch key {
	case KeyAccessKey:
		cred, scopes, _ := strings.Cut(strings.TrimSpace(value), " ")
		scopes = strings.Join(strings.Fields(scopes), " ")
		id, secret, ok := strings.Cut(cred, ":")
		if !ok || id == "" || secret == "" || strings.ContainsAny(cred, "\t") {
			return true, fmt.Errorf("%w: access-key: want ID:SECRET (no blanks), then optionally storage scopes", ErrConfig)
		}
		if _, err := jwtauth.StaticGrant(id, scopes); err != nil {
			return true, fmt.Errorf("%w: access-key %s: %v", ErrConfig, id, err)
		}
		if old, dup := a.scopes[id]; dup && old != scopes {
			return true, fmt.Errorf("%w: access-key %s is given twice with different scopes", ErrConfig, id)
		}
		if a.scopes == nil {
			a.scopes = map[string]string{}
		}
		a.scopes[id] = scopes
		if old, dup := a.keys[id]; dup && old != secret {
			return true, fmt.Errorf("%w: access-key %s is given twice with different secrets", ErrConfig, id)
		}
		if a.keys == nil {
			a.keys = map[string]string{}
		}
		a.keys[id] = secret
	case KeyToken, KeyHTTPToken:
		if len(value) < MinTokenLen || strings.ContainsAny(value, " \t,") {
			return true, fmt.Errorf("%w: %s: want at least %d characters, no blanks or commas", ErrConfig, key, MinTokenLen)
		}
		if !slices.Contains(a.tokens, value) {
			a.tokens = append(a.tokens, value)
		}
	case KeyTokenIssuer:
		f := strings.Fields(value)
		if len(f) < 1 || len(f) > 2 || !secureURL(f[0]) {
			return true, fmt.Errorf("%w: token-issuer: want an https:// URL (http:// only on loopback) and, optionally, the base path of its scopes", ErrConfig)
		}
		is := TokenIssuer{URL: f[0], Base: "/"}
		if len(f) == 2 {
			if !strings.HasPrefix(f[1], "/") {
				return true, fmt.Errorf("%w: token-issuer %s: base path %q is not absolute", ErrConfig, f[0], f[1])
			}
			is.Base = f[1]
		}
		if !slices.Contains(a.issuers, is) {
			a.issuers = append(a.issuers, is)
		}
	case KeyNodeToken:
		if len(value) < MinTokenLen || strings.ContainsAny(value, " \t,") {
			return true, fmt.Errorf("%w: node-token: want at least %d characters, no blanks or commas", ErrConfig, MinTokenLen)
		}
		a.nodeToken = value
	case KeyTokenAudience:
		if value == "" || strings.ContainsAny(value, " \t") {
			return true, fmt.Errorf("%w: token-audience: want one audience, no blanks", ErrConfig)
		}
		if !slices.Contains(a.audiences, value) {
			a.audiences = append(a.audiences, value)
		}
	case KeyHTTPAnonymousRead:
		b, err := strconv.ParseBool(value)
		if err != nil {
			return true, fmt.Errorf("%w: http-anonymous-read %q: want true or false", ErrConfig, value)
		}
		a.anonRead = b
	default:
		return false, nil
	}
	return true, nil
}

// AccessKeyScopes returns each access key's storage scopes ("" for a
// key that may do everything); the map is a copy.
func (c *Config) AccessKeyScopes() map[string]string { return maps.Clone(c.access.scopes) }

// AccessKeys returns the configured access keys (id -> secret); the map
// is a copy.
func (c *Config) AccessKeys() map[string]string { return maps.Clone(c.access.keys) }

// Tokens returns the configured bearer tokens (token and http-token
// lines), in order.
func (c *Config) Tokens() []string { return slices.Clone(c.access.tokens) }

// secureURL reports whether u is https://, or http:// on loopback (where
// nobody between can change the issuer's keys).
func secureURL(u string) bool {
	if strings.HasPrefix(u, "https://") {
		return true
	}
	for _, h := range []string{"http://127.0.0.1", "http://localhost", "http://[::1]"} {
		if rest, ok := strings.CutPrefix(u, h); ok && (rest == "" || rest[0] == ':' || rest[0] == '/') {
			return true
		}
	}
	return false
}

// NodeToken returns the node-token line's token ("" without one).
func (c *Config) NodeToken() string { return c.access.nodeToken }

// TokenIssuers returns the token-issuer lines.
func (c *Config) TokenIssuers() []TokenIssuer { return slices.Clone(c.access.issuers) }

// TokenAudiences returns the token-audience lines.
func (c *Config) TokenAudiences() []string { return slices.Clone(c.access.audiences) }

// HTTPAnonymousRead reports whether http-anonymous-read is true.
func (c *Config) HTTPAnonymousRead() bool { return c.access.anonRead }

// OnlyAccess reports whether the config sets nothing but access settings
// (for a separate credentials file), naming the first other key if not.
func (c *Config) OnlyAccess() (string, bool) {
	for _, k := range append(slices.Clone(keys), GatewayKeys...) {
		if c.IsSet(k) {
			return k, false
		}
	}
	return "", true
}
