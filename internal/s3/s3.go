// Package s3 is ecstore's S3 frontend: an http.Handler that serves the
// everyday S3 REST API over an object.Store.
//
// Scope: buckets (ListBuckets, CreateBucket, HeadBucket, DeleteBucket,
// GetBucketLocation), objects (PutObject, GetObject with ranges and
// conditions, HeadObject, DeleteObject, DeleteObjects, CopyObject, user
// metadata), listings (ListObjectsV2 and V1 with prefix, delimiter,
// max-keys and markers) and multipart uploads (Create, UploadPart,
// UploadPartCopy, Complete, Abort, ListParts, ListMultipartUploads).
// Requests are authenticated with AWS Signature Version 4: Authorization
// header, presigned URLs, UNSIGNED-PAYLOAD, a signed x-amz-content-sha256
// checked while the body streams, and aws-chunked bodies with chunk
// signatures and trailing checksums. Path-style and (with
// Options.Domain) virtual-host-style addressing are served.
//
// Non-goals: versioning, ACLs and policies (every authenticated key may
// do everything; GetBucketAcl/GetObjectAcl report full control), object
// tagging, lifecycle, server-side encryption, Signature Version 2 and
// anonymous access. Unsupported subresources answer NotImplemented.
//
// Mapping to the namespace (DESIGN.md section 2): bucket b is the
// top-level directory /b and key k is the object /b/k; see names.go for
// the keys that have no path, listing.go for how listings walk the
// directory tree, and multipart.go for where uploads in progress live.
// Every write streams into an object.Writer and is aborted when any check
// of the payload fails, so a rejected upload leaves nothing visible.
// Durability: a PUT, copy or completed multipart upload is acknowledged
// only after Writer.Close committed the object (write quorum of archives
// durable); objects are never buffered whole in memory, in either
// direction.
package s3

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/ecstore/ecstore/internal/access"
	"github.com/ecstore/ecstore/internal/httpmeter"
	"github.com/ecstore/ecstore/internal/jwtauth"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ecstore/ecstore/internal/gateway"
	"github.com/ecstore/ecstore/internal/object"
)

// Options configure the S3 frontend. Zero values take the documented
// defaults.
type Options struct {
	// Grants limits access keys to storage scopes (scopes.go): a key
	// without one may do everything.
	Grants map[string]*jwtauth.Grant
	// Access, when set, replaces Credentials and Grants with a set that
	// may be reloaded while the handler serves.
	Access *access.Live
	// Credentials maps access key ids to secret keys. Every request must
	// be signed with one of them; with none, every request is refused.
	// (The caller may add a first key from ECSTORE_ACCESS_KEY and
	// ECSTORE_SECRET_KEY; this package reads no environment.)
	Credentials map[string]string
	// Region, when set, is the only region accepted in credential scopes
	// and is reported by GetBucketLocation. Default: any region is
	// accepted and us-east-1 is reported.
	Region string
	// Domain enables virtual-host-style requests: the host
	// "<bucket>.<Domain>" (any port) addresses bucket. Other hosts are
	// served path-style.
	Domain string
	// MaxClockSkew bounds the difference between a request's signing time
	// and the server's clock. Default 15 minutes.
	MaxClockSkew time.Duration
	// MaxObjectSize bounds an object's size. Default 5 TiB.
	MaxObjectSize int64
	// MaxPartSize bounds one multipart part. Default 5 GiB.
	MaxPartSize int64
	// MinPartSize is the smallest size of a multipart part other than the
	// last. Default 5 MiB, as S3.
	MinPartSize int64
	// Logger receives one record per failed request (Error for server
	// faults, Debug otherwise). Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// KeepCompletions keeps a record of every completed multipart
	// upload, so that a CompleteMultipartUpload sent again (a client that
	// lost the first answer retries it) is answered as the first was, as
	// S3 does. The records go with the upload expiry (ExpireUploads,
	// which must then run), a day by default.
	KeepCompletions bool
	// Hooks observe every request (op "s3_get", "s3_put", "s3_head",
	// "s3_delete", "s3_post"; an error for any status of 400 or more) and
	// the object bytes clients read and write.
	Hooks gateway.Hooks
}

func (o *Options) withDefaults() {
	if o.MaxClockSkew <= 0 {
		o.MaxClockSkew = 15 * time.Minute
	}
	if o.MaxObjectSize <= 0 {
		o.MaxObjectSize = 5 << 40
	}
	if o.MaxPartSize <= 0 {
		o.MaxPartSize = 5 << 30
	}
	if o.MinPartSize <= 0 {
		o.MinPartSize = 5 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Domain = strings.ToLower(strings.TrimPrefix(o.Domain, "."))
	o.Credentials = maps.Clone(o.Credentials)
}

// handler serves S3 requests over a store.
type handler struct {
	store *object.Store
	opts  Options
	auth  verifier
	ids   atomic.Uint64
	host  string // random request-id prefix of this handler

	// keepAliveDelay is how long CopyObject and CompleteMultipartUpload
	// run before the 200 status is sent and whitespace keeps the
	// connection alive (as S3 does). Tests shorten it.
	keepAliveDelay time.Duration

	// background counts the goroutines removing completed uploads' parts.
	background sync.WaitGroup

	// listings keeps large directories' name listings for the pages
	// that continue a listing.
	listings *listingCache
}

// access returns the credentials the handler checks.
func (o *Options) access() *access.Live {
	if o.Access != nil {
		return o.Access
	}
	return access.NewLive(&access.Set{Keys: o.Credentials, Grants: o.Grants})
}

// NewHandler returns an http.Handler serving the S3 API over store. It is
// safe for concurrent use; each request's context governs its store
// operations (a client that goes away aborts its upload).
func NewHandler(store *object.Store, opts Options) http.Handler {
	opts.withDefaults()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return &handler{store: store, opts: opts, host: strings.ToUpper(hex.EncodeToString(b[:])),
		auth:           verifier{creds: opts.access(), region: opts.Region, skew: opts.MaxClockSkew, now: opts.Now},
		keepAliveDelay: 10 * time.Second, listings: newListingCache(opts.Now)}
}

// request is one S3 request being served.
type request struct {
	w      *httpmeter.Writer
	r      *http.Request
	ctx    context.Context
	auth   *auth
	id     string
	bucket string
	key    string
	// createOnly: the key's scopes allow this write only as a creation,
	// so its object must not replace one that appears meanwhile.
	createOnly bool
	// scopesChecked: checkScopes has run (later refusals, of a copy's
	// source or a deleted key, are reported where they happen).
	scopesChecked bool
}

func (h *handler) ServeHTTP(hw http.ResponseWriter, r *http.Request) {
	if r.ContentLength == 0 && strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		// net/http sends "100 Continue" only when a handler reads a
		// non-empty body. botocore (1.29) waits for it even before an
		// empty body, and when a final response comes instead it parses
		// the next response on the connection wrongly: answer as S3 does.
		hw.WriteHeader(http.StatusContinue)
	}
	w := &httpmeter.Writer{ResponseWriter: hw}
	id := fmt.Sprintf("%s%012X", h.host, h.ids.Add(1))
	w.Header().Set("X-Amz-Request-Id", id)
	w.Header().Set("X-Amz-Id-2", id)
	w.Header().Set("Server", "ecstore")
	req := &request{w: w, r: r, ctx: r.Context(), id: id}
	req.bucket, req.key = h.route(r)
	var err error
	defer h.record(req, time.Now(), &err) // also when a broken stream panics
	err = h.serve(req)
	if err == nil {
		return
	}
	e := toError(err)
	if e.Status >= 500 {
		h.opts.Logger.Error("s3 request failed", "method", r.Method, "path", r.URL.Path, "request_id", id, "code", e.Code, "err", err)
	} else {
		h.opts.Logger.Debug("s3 request refused", "method", r.Method, "path", r.URL.Path, "request_id", id, "code", e.Code, "err", err)
	}
	if w.Status != 0 {
		// The response is under way (a failed read mid-stream): break the
		// connection so that the client cannot take it for complete.
		panic(http.ErrAbortHandler)
	}
	writeError(w, r, id, e)
}

// record reports a finished request to the hooks.
func (h *handler) record(req *request, start time.Time, errp *error) {
	if h.opts.Hooks.Request == nil {
		return
	}
	status, err := req.w.Status, *errp
	if err != nil && (status == 0 || status < 400) {
		status = toError(err).Status
	}
	if status >= 400 && err == nil {
		err = fmt.Errorf("s3: status %d", status)
	}
	if status < 400 {
		err = nil
	}
	op := "s3_other"
	switch req.r.Method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodPost:
		op = "s3_" + strings.ToLower(req.r.Method)
	}
	h.opts.Hooks.Request(op, time.Since(start), err)
}

// bytes reports object bytes moved for a client.
func (h *handler) bytes(direction string, n int64) {
	if h.opts.Hooks.Bytes != nil && n > 0 {
		h.opts.Hooks.Bytes(direction, int(n))
	}
}

// route splits a request into bucket and key, virtual-host-style when the
// host is a subdomain of Options.Domain, path-style otherwise.
func (h *handler) route(r *http.Request) (bucket, key string) {
	path := strings.TrimPrefix(r.URL.Path, "/")
	if h.opts.Domain != "" {
		host := strings.ToLower(r.Host)
		if hh, _, err := net.SplitHostPort(host); err == nil {
			host = hh
		}
		if b, ok := strings.CutSuffix(host, "."+h.opts.Domain); ok && b != "" {
			return b, path
		}
	}
	bucket, key, _ = strings.Cut(path, "/")
	return bucket, key
}

// unsupported are subresources this frontend does not implement.
var unsupported = []string{"policy", "cors", "lifecycle", "tagging", "website", "logging", "notification",
	"replication", "encryption", "object-lock", "ownershipControls", "publicAccessBlock", "accelerate",
	"requestPayment", "analytics", "metrics", "inventory", "intelligent-tiering", "retention", "legal-hold",
	"torrent", "restore", "select", "attributes", "versions", "policyStatus"}

func (h *handler) serve(req *request) error {
	a, err := h.auth.verify(req.r)
	if err != nil {
		if errors.Is(err, ErrInvalidAccessKeyID) || errors.Is(err, ErrSignatureDoesNotMatch) {
			h.opts.Hooks.AuthFailed("s3", "credentials")
		}
		return err
	}
	req.auth = a
	if err := h.checkScopes(req); err != nil {
		h.opts.Hooks.AuthFailed("s3", "permission")
		return err
	}
	r, q := req.r, req.r.URL.Query()
	for _, s := range unsupported {
		if q.Has(s) {
			return ErrNotImplemented.with("the %q subresource is not implemented by ecstore", s)
		}
	}
	if q.Has("acl") && r.Method != http.MethodGet {
		return ErrNotImplemented.with("ACLs are not implemented by ecstore; a key's storage scopes in the gateway's config say what it may do")
	}
	switch {
	case req.bucket == "":
		if r.Method != http.MethodGet {
			return ErrMethodNotAllowed
		}
		return h.listBuckets(req)
	case req.key == "":
		if r.Method == http.MethodPut && q.Has("versioning") {
			// Not a CreateBucket: a missing bucket is not made.
			if err := h.bucketExists(req.ctx, req.bucket); err != nil {
				return err
			}
			return ErrNotImplemented.with("bucket versioning is not implemented by ecstore: an overwrite replaces an object")
		}
		if r.Method == http.MethodPut && !q.Has("acl") {
			return h.createBucket(req)
		}
		if !bucketPathOK(req.bucket) {
			return ErrNoSuchBucket
		}
		switch r.Method {
		case http.MethodGet:
			switch {
			case q.Has("location"):
				return h.getBucketLocation(req)
			case q.Has("versioning"):
				return h.getBucketVersioning(req)
			case q.Has("acl"):
				return h.getACL(req)
			case q.Has("uploads"):
				return h.listUploads(req)
			case q.Get("list-type") == "2":
				return h.listObjects(req, true)
			}
			return h.listObjects(req, false)
		case http.MethodHead:
			return h.headBucket(req)
		case http.MethodDelete:
			return h.deleteBucket(req)
		case http.MethodPost:
			if q.Has("delete") {
				return h.deleteObjects(req)
			}
		}
		return ErrMethodNotAllowed
	}
	if !bucketPathOK(req.bucket) {
		return ErrNoSuchBucket
	}
	if !nullVersion(q.Get("versionId")) {
		return errVersions
	}
	switch r.Method {
	case http.MethodGet:
		switch {
		case q.Has("uploadId"):
			return h.listParts(req)
		case q.Has("acl"):
			return h.getACL(req)
		}
		return h.getObject(req, false)
	case http.MethodHead:
		return h.getObject(req, true)
	case http.MethodPut:
		switch {
		case q.Has("uploadId") || q.Has("partNumber"):
			return h.uploadPart(req)
		case r.Header.Get("X-Amz-Copy-Source") != "":
			return h.copyObject(req)
		}
		return h.putObject(req)
	case http.MethodDelete:
		if q.Has("uploadId") {
			return h.abortUpload(req)
		}
		return h.deleteObject(req)
	case http.MethodPost:
		switch {
		case q.Has("uploads"):
			return h.createUpload(req)
		case q.Has("uploadId"):
			return h.completeUpload(req)
		}
	}
	return ErrMethodNotAllowed
}

// bucketExists returns nil if the bucket's directory exists.
func (h *handler) bucketExists(ctx context.Context, bucket string) error {
	if !bucketPathOK(bucket) {
		return ErrNoSuchBucket
	}
	isDir, err := h.store.IsDir(ctx, bucketPath(bucket))
	switch {
	case err == nil && isDir:
		return nil
	case err == nil, errors.Is(err, object.ErrNotExist):
		return ErrNoSuchBucket
	}
	return err
}
