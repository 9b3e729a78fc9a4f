package webdav

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/ecstore/ecstore/internal/object"
)

// delete removes an object or an empty collection (RFC 4918 section 9.6
// asks for recursive deletion of collections; ecstore refuses a non-empty
// one with 409 so that one request never removes a whole tree).
func (h *handler) delete(req *request) error {
	if req.path == "/" {
		return errorf(http.StatusForbidden, "the root collection cannot be deleted")
	}
	info, err := h.store.Stat(req.ctx, req.path)
	switch {
	case errors.Is(err, object.ErrUnrecoverable):
		info = &object.Info{} // an unreadable object can still be removed
	case err != nil:
		return err
	}
	if preconditions(req.r, etagOf(info), info.MTime) != 0 {
		return errorf(http.StatusPreconditionFailed, "a precondition (If-Match or If-None-Match) failed")
	}
	if info.IsDir {
		err = h.store.Rmdir(req.ctx, req.path)
		if errors.Is(err, object.ErrNotEmpty) {
			return wrapf(err, http.StatusConflict, "collection %s is not empty: delete its members first", req.path)
		}
	} else {
		err = h.store.Remove(req.ctx, req.path)
	}
	if err != nil {
		return fmt.Errorf("webdav: delete %s: %w", req.path, err)
	}
	req.w.WriteHeader(http.StatusNoContent)
	return nil
}

// mkcol creates a collection (RFC 4918 section 9.3): 405 if the path
// exists, 409 if its parent does not, 415 with a body.
func (h *handler) mkcol(req *request) error {
	if hasBody(req.r) {
		return errorf(http.StatusUnsupportedMediaType, "MKCOL with a request body is not supported")
	}
	if req.path == "/" {
		return errorf(http.StatusMethodNotAllowed, "the root collection exists")
	}
	if _, err := h.store.Stat(req.ctx, req.path); err == nil {
		return errorf(http.StatusMethodNotAllowed, "%s exists", req.path)
	} else if !errors.Is(err, object.ErrNotExist) {
		return err
	}
	if err := h.parentOK(req, req.path); err != nil {
		return err
	}
	if err := h.store.Mkdir(req.ctx, req.path); err != nil {
		return fmt.Errorf("webdav: mkcol %s: %w", req.path, err)
	}
	req.w.Header().Set("Content-Length", "0")
	req.w.WriteHeader(http.StatusCreated)
	return nil
}

// hasBody reports whether a request carries a non-empty body.
func hasBody(r *http.Request) bool {
	if r.ContentLength > 0 {
		return true
	}
	if r.ContentLength == 0 || r.Body == nil {
		return false
	}
	var b [1]byte
	n, _ := io.ReadFull(r.Body, b[:])
	return n > 0
}

// moveOrCopy serves MOVE and COPY (RFC 4918 sections 9.8 and 9.9). MOVE
// renames objects and collections. COPY copies an object by streaming it
// into a new one; a collection is copied only with Depth: 0 (which makes
// an empty collection), as recursive copies are not cheap in an
// erasure-coded store. An existing destination is replaced when
// Overwrite is T (the default) — an object, or an empty collection — and
// is a 412 with Overwrite: F.
func (h *handler) moveOrCopy(req *request, copying bool) error {
	r := req.r
	op := "MOVE"
	if copying {
		op = "COPY"
	}
	dst, err := parseDestination(r.Header.Get("Destination"), r.Host, r.Header.Get("X-Forwarded-Host"))
	if err != nil {
		return err
	}
	overwrite := true
	switch strings.ToUpper(strings.TrimSpace(r.Header.Get("Overwrite"))) {
	case "", "T":
	case "F":
		overwrite = false
	default:
		return errorf(http.StatusBadRequest, "Overwrite must be T or F")
	}
	if req.path == "/" {
		return errorf(http.StatusForbidden, "the root collection cannot be moved or copied")
	}
	if dst == req.path {
		return errorf(http.StatusForbidden, "source and destination are the same")
	}
	if dst == "/" || strings.HasPrefix(dst, req.path+"/") {
		return errorf(http.StatusConflict, "%s cannot be moved or copied into itself", req.path)
	}
	src, err := h.store.Stat(req.ctx, req.path)
	if err != nil {
		return err
	}
	if preconditions(r, etagOf(src), src.MTime) != 0 {
		return errorf(http.StatusPreconditionFailed, "a precondition (If-Match or If-None-Match) failed")
	}
	depth := strings.ToLower(strings.TrimSpace(r.Header.Get("Depth")))
	if copying && src.IsDir && depth != "0" {
		return errorf(http.StatusForbidden, "recursive COPY of a collection is not supported (Depth: 0 copies the collection without its members)")
	}
	if err := h.parentOK(req, dst); err != nil {
		return err
	}
	old, err := h.store.Stat(req.ctx, dst)
	existed := err == nil
	switch {
	case err != nil && !errors.Is(err, object.ErrNotExist):
		return err
	case existed && !overwrite:
		return errorf(http.StatusPreconditionFailed, "%s exists and Overwrite is F", dst)
	case existed && req.createOnly:
		// Absent when the credentials were checked, written since.
		return errorf(http.StatusForbidden, "%s exists, and your credentials allow creating it only", dst)
	case existed && old.IsDir:
		// Replace an empty collection; a non-empty one would need a
		// recursive delete.
		if err := h.store.Rmdir(req.ctx, dst); err != nil {
			if errors.Is(err, object.ErrNotEmpty) {
				return wrapf(err, http.StatusConflict, "the destination %s is a collection that is not empty", dst)
			}
			return err
		}
	case existed && src.IsDir:
		if err := h.store.Remove(req.ctx, dst); err != nil {
			return err
		}
	}
	switch {
	case !copying:
		err = h.store.Rename(req.ctx, req.path, dst)
	case src.IsDir:
		err = h.store.Mkdir(req.ctx, dst)
	default:
		err = h.copyObject(req, dst)
	}
	if err != nil {
		return fmt.Errorf("webdav: %s %s to %s: %w", strings.ToLower(op), req.path, dst, err)
	}
	req.w.Header().Set("Content-Length", "0")
	if existed {
		req.w.WriteHeader(http.StatusNoContent)
	} else {
		req.w.Header().Set("Location", hrefOf(dst, false))
		req.w.WriteHeader(http.StatusCreated)
	}
	return nil
}

// copyObject streams the object at the request's path into a new object
// at dst, with the same user metadata.
func (h *handler) copyObject(req *request, dst string) error {
	rd, err := h.store.Open(req.ctx, req.path)
	if err != nil {
		return err
	}
	defer rd.Close()
	w, err := h.store.Create(req.ctx, dst, &object.CreateOptions{User: rd.Info().User, SizeHint: rd.Size(),
		Exclusive: req.createOnly, Precondition: createOnlyAtCommit(req, dst)})
	if err != nil {
		return err
	}
	if _, err := rd.WriteTo(req.ctx, w); err != nil {
		_ = w.Abort()
		return err
	}
	return w.Close()
}
