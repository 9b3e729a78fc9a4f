package gateway

import (
	"context"
	"errors"

	"github.com/ecstore/ecstore/internal/jwtauth"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// Who may do what over root://. The server (xrootd.Server) has already
// decided who the client is (xrootd.PeerIdentity):
//
//   - a client that presented an opaque token (a configured shared
//     secret) may do everything;
//   - a client whose token is a JWT may do what its scopes allow
//     (jwtauth.Grant): read where it has storage.read, create new
//     objects and directories where it has storage.create, and also
//     replace, remove and rename where it has storage.modify;
//   - anything else, and what a JWT's scopes do not allow, is what
//     anonymous clients may do: read unless RequireToken, write unless
//     ReadOnly.

// RequireToken makes reads by clients that have not authenticated fail
// too (the server turns such clients away first; a JWT holder without a
// read scope for the path meets this).
func (f *FS) RequireToken() *FS { f.tokenRequired = true; return f }

// allow checks that the client of ctx may do op on name, and reports a
// refusal to the AuthFailure hook.
func (f *FS) allow(ctx context.Context, op jwtauth.Op, what, name string) error {
	err := f.decide(ctx, op, what, name)
	if err != nil {
		f.refused(ctx)
	}
	return err
}

// refused reports a refusal of the client of ctx: "permission" for a
// client with valid credentials, "anonymous" for one without.
func (f *FS) refused(ctx context.Context) {
	reason := "anonymous"
	if xrootd.PeerIdentity(ctx).Authenticated {
		reason = "permission"
	}
	f.hooks.AuthFailed("root", reason)
}

// decide is allow without the report.
func (f *FS) decide(ctx context.Context, op jwtauth.Op, what, name string) error {
	id := xrootd.PeerIdentity(ctx)
	if id.Authenticated {
		g, ok := id.Grant.(*jwtauth.Grant)
		if !ok || g.Allows(op, name) {
			return nil // an opaque token, or a scope for it
		}
	}
	// What anonymous clients may do, which a token's holder may do
	// beyond its scopes; nothing where every client must bring a token
	// (--root-token-required, even with --root-anonymous-writes).
	anonymous := !f.tokenRequired && (op == jwtauth.Read || !f.readOnly)
	switch {
	case anonymous:
		return nil
	case id.Authenticated:
		return xrootd.Errorf(xrootd.ErrNotAuthorized, "%s %s: your token does not allow %s there", what, name, op)
	case id.TokenRefused:
		return xrootd.Errorf(xrootd.ErrNotAuthorized, "%s %s: your token was not accepted, and anonymous clients may only read here", what, name)
	case op == jwtauth.Read:
		return xrootd.Errorf(xrootd.ErrNotAuthorized, "%s %s: a token is required", what, name)
	}
	return xrootd.Errorf(xrootd.ErrNotAuthorized, "%s %s: anonymous clients may only read here; authenticate with a token over roots:// (BEARER_TOKEN)", what, name)
}

// MayWrite implements xrootd.WriteReporter: kXR_locate answers "r" to a
// client that may not create anything at name (an anonymous client of a
// read-only listener, a token without a create or modify scope there),
// as xrootd answers for a path exported read-only.
func (f *FS) MayWrite(ctx context.Context, name string) bool {
	return f.decide(ctx, jwtauth.Create, "locate", name) == nil
}

// allowWrite checks a write of name: creating it needs storage.create,
// replacing an object that exists storage.modify. exclusive reports a
// write allowed by storage.create alone, which must then not replace an
// object that appears meanwhile (its Create is exclusive).
func (f *FS) allowWrite(ctx context.Context, name string) (exclusive bool, err error) {
	err = f.decide(ctx, jwtauth.Modify, "write", name)
	if err == nil {
		return false, nil
	}
	absent := func() bool {
		_, serr := f.store.StatBrief(ctx, name)
		return errors.Is(serr, object.ErrNotExist) // else it exists, or cannot be told not to
	}
	if id := xrootd.PeerIdentity(ctx); id.Authenticated {
		if g, ok := id.Grant.(*jwtauth.Grant); ok && g.AllowsWrite(name, absent) {
			return true, nil
		}
	}
	f.refused(ctx)
	return false, err
}
