// Package access holds the credentials the gateway's frontends check
// (access keys and their scopes, bearer tokens, trusted token issuers),
// as one set that is replaced whole when an admin reloads them (SIGHUP):
// a request sees either the old set or the new one, never a mix.
package access

import (
	"sync/atomic"

	"github.com/ecstore/ecstore/internal/jwtauth"
)

// Set is one generation of credentials. It must not be changed once
// stored in a Live.
type Set struct {
	// Keys maps access key ids to their secrets (S3 signing, HTTP Basic).
	Keys map[string]string
	// Grants limits access keys to storage scopes; a key without one may
	// do everything.
	Grants map[string]*jwtauth.Grant
	// Tokens are the opaque bearer tokens (HTTP, root://).
	Tokens []string
	// JWT checks JSON Web Tokens of the trusted issuers; nil: none.
	JWT *jwtauth.Checker
	// AnonymousRead lets HTTP clients without credentials read.
	AnonymousRead bool
}

// Live is the current Set. Safe for concurrent use.
type Live struct{ p atomic.Pointer[Set] }

// NewLive returns a Live holding s.
func NewLive(s *Set) *Live {
	l := &Live{}
	l.Store(s)
	return l
}

// Load returns the current set.
func (l *Live) Load() *Set { return l.p.Load() }

// Store makes s the current set.
func (l *Live) Store(s *Set) {
	if s == nil {
		s = &Set{}
	}
	l.p.Store(s)
}
