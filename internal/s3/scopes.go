package s3

import (
	"errors"
	"net/http"
	"path"
	"strings"

	"github.com/ecstore/ecstore/internal/jwtauth"
	"github.com/ecstore/ecstore/internal/object"
)

// Access keys may be limited to storage scopes (Options.Grants): bucket
// b, key k is the path /b/k, and a request needs
//
//   - to list buckets: nothing (the list shows the buckets the key may
//     read something in);
//   - to create a bucket: storage.create on /b; to delete one:
//     storage.modify on /b;
//   - to look at a bucket (HEAD, location, versioning, ACL): storage.read
//     on /b or below it; to list its objects or uploads: storage.read on
//     the directory part of the listing's prefix ("in/" and "in/x": /b/in;
//     "in", which also matches "inbox/...": /b);
//   - to read an object (GET, HEAD, ACL, the source of a copy):
//     storage.read on /b/k;
//   - to write one (PUT, a copy's destination, a multipart upload and its
//     parts): storage.create, or storage.modify when the key exists;
//   - to delete one: storage.modify (each key of a multi-object delete on
//     its own).
//
// A key without a grant may do everything.

// grant returns the request's key's grant, or nil for a key without one.
func (h *handler) grant(req *request) *jwtauth.Grant {
	if req.auth == nil {
		return nil
	}
	return req.auth.grant
}

// allowed checks op on the object path p for the request's key.
func (h *handler) allowed(req *request, op jwtauth.Op, p string) error {
	if g := h.grant(req); g != nil && !g.Allows(op, p) {
		if req.scopesChecked { // else checkScopes reports it
			h.opts.Hooks.AuthFailed("s3", "permission")
		}
		return ErrAccessDenied.with("the access key's scopes do not allow %s on %s", op, p)
	}
	return nil
}

// allowedWrite checks a write of bucket/key: storage.modify, or
// storage.create when nothing is there yet.
func (h *handler) allowedWrite(req *request, bucket, key string) error {
	g := h.grant(req)
	p := "/" + bucket + "/" + key
	absent := func() bool {
		op, _, err := objectPath(bucket, key)
		if err != nil {
			return true // the request fails on its key
		}
		_, err = h.store.Stat(req.ctx, op)
		return errors.Is(err, object.ErrNotExist)
	}
	if g == nil || g.Allows(jwtauth.Modify, p) {
		return nil
	}
	if g.AllowsWrite(p, absent) {
		req.createOnly = true
		return nil
	}
	return ErrAccessDenied.with("the access key's scopes do not allow writing %s", p)
}

// checkScopes holds a request to its key's scopes, before it is served.
// Multi-object deletes and copies check their keys and sources where
// they are served.
func (h *handler) checkScopes(req *request) error {
	defer func() { req.scopesChecked = true }()
	g := h.grant(req)
	if g == nil {
		return nil
	}
	r, q := req.r, req.r.URL.Query()
	b := "/" + req.bucket
	switch {
	case req.bucket == "":
		return nil
	case req.key == "":
		switch {
		case r.Method == http.MethodPut:
			return h.allowed(req, jwtauth.Create, b)
		case r.Method == http.MethodDelete:
			return h.allowed(req, jwtauth.Modify, b)
		case r.Method == http.MethodPost:
			return nil // a multi-object delete: each key on its own
		case r.Method == http.MethodGet && (q.Has("location") || q.Has("versioning") || q.Has("acl")):
			if g.Reaches(jwtauth.Read, b) {
				return nil
			}
		case r.Method == http.MethodGet:
			// A listing of objects or uploads: everything it shows lies
			// under the directory part of its prefix (an S3 prefix is a
			// string prefix: "in" lists "inbox/..." too), which must be
			// readable.
			if g.Allows(jwtauth.Read, path.Join(b, listingDir(q.Get("prefix")))) {
				return nil
			}
		case g.Reaches(jwtauth.Read, b):
			return nil // HEAD of a bucket the key reaches
		}
		return ErrAccessDenied.with("the access key's scopes do not allow this on bucket %s", req.bucket)
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if q.Has("uploadId") {
			return h.allowed(req, jwtauth.Create, b+"/"+req.key)
		}
		return h.allowed(req, jwtauth.Read, b+"/"+req.key)
	case http.MethodDelete:
		if q.Has("uploadId") {
			return h.allowed(req, jwtauth.Create, b+"/"+req.key)
		}
		return h.allowed(req, jwtauth.Modify, b+"/"+req.key)
	case http.MethodPut, http.MethodPost:
		if q.Has("uploadId") && r.Method == http.MethodPut {
			return h.allowed(req, jwtauth.Create, b+"/"+req.key) // a part; the completion checks the object
		}
		return h.allowedWrite(req, req.bucket, req.key)
	}
	return nil
}

// listingDir is the directory part of a listing's prefix: "in/" and
// "in/ab" are under "in", "in" under the bucket itself ("").
func listingDir(prefix string) string {
	if d, ok := strings.CutSuffix(prefix, "/"); ok {
		return d
	}
	if d := path.Dir(prefix); d != "." {
		return d
	}
	return ""
}

// canSeeBucket reports whether the request's key may read anything in
// bucket (for ListBuckets).
func (h *handler) canSeeBucket(req *request, bucket string) bool {
	g := h.grant(req)
	return g == nil || g.Reaches(jwtauth.Read, "/"+bucket) || g.Reaches(jwtauth.Create, "/"+bucket)
}
