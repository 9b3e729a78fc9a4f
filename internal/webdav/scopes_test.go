package webdav

import (
	"net/http"
	"testing"

	"github.com/ecstore/ecstore/internal/jwtauth"
	"github.com/ecstore/ecstore/internal/testissuer"
)

// TestTokenScopes: a JSON Web Token of the configured issuer is held to
// its storage scopes for every method: create writes new objects but
// does not replace or delete them, modify does, reads need a read scope
// (unless anonymous reads are allowed), and a MOVE needs modify at both
// ends; a token of another issuer is refused.
func TestTokenScopes(t *testing.T) {
	is := testissuer.New(t)
	checker, err := jwtauth.New(jwtauth.Options{Issuers: []jwtauth.Issuer{{URL: is.URL, Base: "/vo"}}})
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, func(o *Options) { o.JWT = checker })
	ts.c.Put(t, "/vo/data/f", []byte("data"))
	ts.c.Put(t, "/other/f", []byte("other"))
	creator := map[string]string{"Authorization": "Bearer " + is.Token(t, is.Claims("alice", "storage.read:/data storage.create:/alice"))}
	modifier := map[string]string{"Authorization": "Bearer " + is.Token(t, is.Claims("bob", "storage.modify:/data storage.modify:/bob"))}
	stranger := testissuer.New(t)
	foreign := map[string]string{"Authorization": "Bearer " + stranger.Token(t, stranger.Claims("eve", "storage.modify:/"))}
	with := func(h map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range h {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}

	ts.must(http.StatusCreated, "PUT", "/vo/alice/new", []byte("new"), creator)
	ts.must(http.StatusForbidden, "PUT", "/vo/alice/new", []byte("again"), creator)
	ts.must(http.StatusForbidden, "DELETE", "/vo/alice/new", nil, creator)
	ts.must(http.StatusCreated, "MKCOL", "/vo/alice/dir", nil, creator)
	ts.must(http.StatusForbidden, "PUT", "/vo/bob/x", []byte("x"), creator)
	ts.must(http.StatusOK, "GET", "/vo/data/f", nil, creator)
	ts.must(http.StatusForbidden, "GET", "/other/f", nil, creator)

	ts.must(http.StatusNoContent, "PUT", "/vo/data/f", []byte("replaced"), modifier)
	ts.must(http.StatusForbidden, "GET", "/vo/data/f", nil, modifier) // no read scope
	ts.must(http.StatusForbidden, "MOVE", "/vo/data/f", nil, with(modifier, "Destination", ts.srv.URL+"/vo/alice/f"))
	ts.must(http.StatusCreated, "MKCOL", "/vo/bob", nil, modifier)
	ts.must(http.StatusCreated, "MOVE", "/vo/data/f", nil, with(modifier, "Destination", ts.srv.URL+"/vo/bob/f"))
	ts.must(http.StatusNoContent, "DELETE", "/vo/bob/f", nil, modifier)
	ts.must(http.StatusNoContent, "DELETE", "/vo/bob", nil, modifier)

	ts.must(http.StatusForbidden, "GET", "/vo/alice/new", nil, foreign)
	ts.must(http.StatusForbidden, "DELETE", "/vo/alice/new", nil, foreign)
	ts.must(http.StatusNoContent, "DELETE", "/vo/alice/new", nil, nil) // the opaque test token may do everything
	ts.must(http.StatusNoContent, "DELETE", "/vo/alice/dir", nil, nil)
}
