package webdav

import (
	"errors"
	"net/http"

	"github.com/ecstore/ecstore/internal/jwtauth"
	"github.com/ecstore/ecstore/internal/object"
)

// checkScopes holds a request made with a JSON Web Token to the token's
// storage scopes: reads (GET, HEAD, PROPFIND, the source of a COPY) need
// storage.read, DELETE and the source of a MOVE storage.modify, MKCOL
// storage.create; a PUT, or the destination of a MOVE or COPY, needs
// storage.modify, or storage.create when nothing is there yet. What the
// scopes do not allow is allowed when anonymous clients may do it.
func (h *handler) checkScopes(req *request) error {
	r := req.r
	need := func(op jwtauth.Op, p string) error {
		if req.grant.Allows(op, p) || op == jwtauth.Read && h.authNow().anonRead {
			return nil
		}
		return errorf(http.StatusForbidden, "your credentials do not allow %s on %s", op, p)
	}
	// put: a new object needs create, a replacement modify.
	put := func(p string) error {
		absent := func() bool {
			_, err := h.store.Stat(req.ctx, p)
			return errors.Is(err, object.ErrNotExist)
		}
		if req.grant.AllowsWrite(p, absent) {
			req.createOnly = !req.grant.Allows(jwtauth.Modify, p)
			return nil
		}
		return errorf(http.StatusForbidden, "your credentials do not allow writing %s", p)
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, "PROPFIND":
		return need(jwtauth.Read, req.path)
	case http.MethodDelete:
		return need(jwtauth.Modify, req.path)
	case "MKCOL":
		return need(jwtauth.Create, req.path)
	case http.MethodPut:
		return put(req.path)
	case "COPY":
		switch {
		case r.Header.Get("Source") != "": // a third-party pull into the path
			return put(req.path)
		case isRemoteDestination(r): // a third-party push of the path
			return need(jwtauth.Read, req.path)
		}
		fallthrough
	case "MOVE":
		src := jwtauth.Modify
		if r.Method == "COPY" {
			src = jwtauth.Read
		}
		if err := need(src, req.path); err != nil {
			return err
		}
		dst, err := parseDestination(r.Header.Get("Destination"), r.Host, r.Header.Get("X-Forwarded-Host"))
		if err != nil {
			return err
		}
		return put(dst)
	}
	return errorf(http.StatusForbidden, "your credentials do not allow %s", r.Method)
}
