package webdav

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/object"
)

// Paths. A request's URL path (percent-decoded) names an object path:
// empty and "." elements are dropped, so "//a/./b/" is /a/b. A ".."
// element is refused (400) rather than resolved: clients resolve them
// before sending, so one that arrives is an attempt to escape. Elements
// must pass node.CheckPath (no control characters, at most
// node.MaxNameLen bytes, not a temporary upload name: 400), and
// top-level names starting with ".ecstore-" are ecstore's own (the S3
// multipart area, tombstones) and refused with 403.

// reservedPrefix starts the top-level names ecstore keeps for itself.
const reservedPrefix = ".ecstore-"

// cleanPath maps a URL path to an object path. slash reports a trailing
// '/' (a collection's URL).
func cleanPath(p string) (path string, slash bool, err error) {
	if p == "" || p[0] != '/' {
		return "", false, errorf(http.StatusBadRequest, "the request path must be absolute")
	}
	if len(p) > node.MaxPathLen {
		return "", false, errorf(http.StatusRequestURITooLong, "the path is longer than %d bytes", node.MaxPathLen)
	}
	var els []string
	for _, el := range strings.Split(p, "/") {
		switch el {
		case "", ".":
			continue
		case "..":
			return "", false, errorf(http.StatusBadRequest, "%q: '..' path elements are refused", p)
		}
		els = append(els, el)
	}
	if len(els) == 0 {
		return "/", true, nil
	}
	path = "/" + strings.Join(els, "/")
	if err := node.CheckPath(path); err != nil {
		return "", false, wrapf(err, http.StatusBadRequest, "invalid path %q: names may not contain control characters, be longer than %d bytes or be temporary upload names", p, node.MaxNameLen)
	}
	if strings.HasPrefix(els[0], reservedPrefix) {
		return "", false, errorf(http.StatusForbidden, "%q: names starting with %q are reserved at the top level", p, reservedPrefix)
	}
	return path, strings.HasSuffix(p, "/"), nil
}

// parseDestination returns the object path named by the Destination
// header of MOVE and COPY (RFC 4918 section 10.3): an absolute URI on
// this server (its host must be the request's Host, or the
// X-Forwarded-Host a proxy set), or an absolute path.
func parseDestination(value, host, fwdHost string) (string, error) {
	value = strings.TrimSpace(value)
	if value == "" {
		return "", errorf(http.StatusBadRequest, "MOVE and COPY need a Destination header")
	}
	u, err := url.Parse(value)
	if err != nil {
		return "", wrapf(err, http.StatusBadRequest, "bad Destination %q", value)
	}
	switch {
	case u.Scheme == "" && u.Host == "" && strings.HasPrefix(value, "/"):
	case (u.Scheme == "http" || u.Scheme == "https") && u.Host == "":
		return "", errorf(http.StatusBadRequest, "bad Destination %q: no host", value)
	case u.Scheme == "http" || u.Scheme == "https":
		if !strings.EqualFold(u.Host, host) && (fwdHost == "" || !strings.EqualFold(u.Host, fwdHost)) {
			return "", errorf(http.StatusBadGateway, "Destination %q is on another server", value)
		}
	default:
		return "", errorf(http.StatusBadRequest, "bad Destination %q: want an http(s) URL or an absolute path", value)
	}
	p, _, err := cleanPath(u.Path)
	return p, err
}

// parentOK checks that the directory that would hold path exists and is
// a directory: 409 Conflict otherwise (RFC 4918 sections 9.3.1, 9.8.5,
// 9.9.4).
func (h *handler) parentOK(req *request, path string) error {
	dir, _ := node.Split(path)
	if dir == "/" {
		return nil
	}
	info, err := h.store.Stat(req.ctx, dir)
	switch {
	case err == nil && info.IsDir:
		return nil
	case err == nil:
		return errorf(http.StatusConflict, "%s is an object, not a collection", dir)
	case errors.Is(err, object.ErrNotExist), errors.Is(err, object.ErrNotDir):
		return errorf(http.StatusConflict, "the parent collection %s does not exist", dir)
	}
	return err
}

// noObjectAbove checks that no directory path needs is an object ("a/b"
// cannot be written while "a" is an object); missing directories are
// fine, the engine creates them. It stops at the first ancestor that is
// a directory.
func (h *handler) noObjectAbove(req *request, path string) error {
	for dir, _ := node.Split(path); dir != "/"; dir, _ = node.Split(dir) {
		info, err := h.store.Stat(req.ctx, dir)
		switch {
		case err == nil && info.IsDir:
			return nil
		case err == nil:
			return errorf(http.StatusConflict, "%s is an object, not a collection", dir)
		case !errors.Is(err, object.ErrNotExist):
			return err
		}
	}
	return nil
}
