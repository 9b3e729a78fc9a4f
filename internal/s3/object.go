package s3

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ecstore/ecstore/internal/jwtauth"
	"github.com/ecstore/ecstore/internal/object"
)

// User metadata keys of objects written through S3 (object.Info.User).
// Standard headers are kept under their lower-case names and x-amz-meta-*
// verbatim, so that other frontends can serve them too.
const (
	// etagKey holds the S3 ETag: the hex MD5 of the object, or
	// "<md5 of the parts' MD5s>-<parts>" after a multipart upload.
	etagKey = "s3-etag"
	// metaPrefix starts user-defined metadata (x-amz-meta-*).
	metaPrefix = "x-amz-meta-"
	// missingMetaKey holds the number of x-amz-meta-* headers of a write
	// that named no metadata ("x-amz-meta-" alone). AWS stores no such
	// entry and answers GET and HEAD with x-amz-missing-meta, that
	// number, rather than refusing the write.
	missingMetaKey = "s3-missing-meta"
	// maxUserMeta is S3's limit on x-amz-meta-* names and values, in bytes.
	maxUserMeta = 2 << 10
	// maxStoredMeta bounds the names and values of all the headers kept
	// (x-amz-meta-* and storedHeaders), which GET and HEAD send back:
	// AWS's limit on a PUT's headers, well within the header lines
	// clients read (Python's http.client: 64 KiB).
	maxStoredMeta = 8 << 10
)

// storedHeaders are the standard headers kept with an object and sent
// back on GET and HEAD.
var storedHeaders = []string{"Content-Type", "Content-Encoding", "Content-Disposition", "Content-Language", "Cache-Control", "Expires"}

// emptyMD5 is the ETag of an empty object (and of directory markers).
const emptyMD5 = "d41d8cd98f00b204e9800998ecf8427e"

// userMetadata collects the metadata of a PUT, Copy (REPLACE) or
// CreateMultipartUpload request. x-amz-meta-* values are decoded from
// RFC 2047 encoded-words (=?UTF-8?B?...?=), as AWS decodes them before
// storing; an x-amz-meta- header without a name is counted
// (missingMetaKey), not kept. Values must be UTF-8, x-amz-meta-* hold
// at most maxUserMeta bytes and all of them maxStoredMeta.
func userMetadata(r *http.Request) (map[string]string, error) {
	m := map[string]string{}
	for _, k := range storedHeaders {
		v := r.Header.Get(k)
		if k == "Content-Encoding" {
			v = stripAWSChunked(v)
		}
		if v != "" {
			m[strings.ToLower(k)] = v
		}
	}
	size, missing := 0, 0
	for k, vs := range r.Header {
		l := strings.ToLower(k)
		name, ok := strings.CutPrefix(l, metaPrefix)
		switch {
		case !ok:
			continue
		case name == "":
			missing++
			continue
		}
		dec := make([]string, len(vs))
		for i, v := range vs {
			dec[i] = decodeMetaValue(v)
		}
		v := strings.Join(dec, ",")
		m[l] = v
		size += len(name) + len(v)
	}
	if size > maxUserMeta {
		return nil, ErrMetadataTooLarge.with("x-amz-meta-* headers hold %d bytes; the limit is %d", size, maxUserMeta)
	}
	all := 0
	for k, v := range m {
		all += len(k) + len(v)
	}
	if all > maxStoredMeta {
		return nil, ErrMetadataTooLarge.with("the headers kept with the object (x-amz-meta-*, Content-Type, Content-Disposition, ...) hold %d bytes; the limit is %d", all, maxStoredMeta)
	}
	for k, v := range m {
		// Kept in JSON strings (the metadata entry), where each byte
		// of a value that is not UTF-8 would become U+FFFD.
		if !utf8.ValidString(v) {
			return nil, ErrInvalidArgument.with("the value of %s is not UTF-8; metadata is kept as UTF-8 text", k)
		}
	}
	if missing > 0 {
		m[missingMetaKey] = strconv.Itoa(missing)
	}
	return m, nil
}

// decodeMetaValue decodes the RFC 2047 encoded-words of an x-amz-meta-*
// value (=?UTF-8?B?...?=, =?UTF-8?Q?...?=; charsets UTF-8, ISO-8859-1
// and US-ASCII), which is how clients send text that is not US-ASCII.
// A value with a word in another charset is kept as sent.
func decodeMetaValue(v string) string {
	if !strings.Contains(v, "=?") {
		return v
	}
	d, err := new(mime.WordDecoder).DecodeHeader(v)
	if err != nil {
		return v
	}
	return d
}

// encodeMetaValue is the header value of stored metadata v: v itself
// when it is printable US-ASCII, else one or more RFC 2047 encoded-words
// of its UTF-8 (=?UTF-8?B?...?=), as AWS sends it. mime writes the
// encoding in lower case, which RFC 2047 allows; AWS's upper case is
// kept for clients that match its answers literally (base64 holds no
// "?", so only the words' heads are replaced).
func encodeMetaValue(v string) string {
	return strings.ReplaceAll(mime.BEncoding.Encode("UTF-8", v), "=?UTF-8?b?", "=?UTF-8?B?")
}

// stripAWSChunked removes the aws-chunked transfer coding from a
// Content-Encoding value: it describes the request, not the object.
func stripAWSChunked(v string) string {
	var out []string
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" && !strings.EqualFold(e, "aws-chunked") {
			out = append(out, e)
		}
	}
	return strings.Join(out, ",")
}

// s3Metadata returns the S3 metadata of an object (for COPY) or of a
// multipart upload (for its object), without the ETag.
func s3Metadata(user map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range user {
		if strings.HasPrefix(k, metaPrefix) || k == missingMetaKey {
			m[k] = v
		}
	}
	for _, k := range storedHeaders {
		if v, ok := user[strings.ToLower(k)]; ok {
			m[strings.ToLower(k)] = v
		}
	}
	return m
}

// otherMetadata returns the user metadata of an object that is not S3's
// (the extended attributes set over root://, "xrootd.U.*"): S3 neither
// shows nor sets it, and a copy keeps it whatever its metadata directive,
// as S3 keeps a source's tags (which have a directive of their own).
func otherMetadata(user map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range user {
		if !s3Key(k) {
			m[k] = v
		}
	}
	return m
}

// s3Key reports whether user metadata key k is S3's: x-amz-meta-*, a
// stored header, or S3's own (the ETag, a multipart upload's "s3-*").
func s3Key(k string) bool {
	if strings.HasPrefix(k, metaPrefix) || strings.HasPrefix(k, "s3-") {
		return true
	}
	for _, h := range storedHeaders {
		if strings.EqualFold(k, h) {
			return true
		}
	}
	return false
}

// etagOf is the (unquoted) ETag of an object. Objects not written
// through S3 have no MD5; theirs is derived from the version, with a "-1"
// suffix so that clients do not take it for an MD5 and compare it with
// what they downloaded.
func etagOf(info *object.Info) string {
	if e := info.User[etagKey]; e != "" {
		return e
	}
	if info.IsDir {
		return emptyMD5
	}
	s := md5.Sum([]byte("ecstore-version:" + string(info.Version)))
	return hex.EncodeToString(s[:]) + "-1"
}

func quote(etag string) string { return `"` + etag + `"` }

// setObjectHeaders sets the headers describing an object on GET/HEAD.
func setObjectHeaders(hdr http.Header, info *object.Info) {
	hdr.Set("ETag", quote(etagOf(info)))
	hdr.Set("Last-Modified", info.MTime.UTC().Format(http.TimeFormat))
	hdr.Set("Accept-Ranges", "bytes")
	hdr.Set("Content-Type", "binary/octet-stream")
	for _, k := range storedHeaders {
		if v, ok := info.User[strings.ToLower(k)]; ok {
			hdr.Set(k, v)
		}
	}
	for k, v := range info.User {
		if strings.HasPrefix(k, metaPrefix) {
			// Lower case as S3 sends them: SDKs take the metadata names
			// from the header names as they arrive. Values that are not
			// US-ASCII are RFC 2047-encoded, as AWS sends them.
			hdr[k] = []string{encodeMetaValue(v)}
		}
	}
	if n := info.User[missingMetaKey]; n != "" {
		hdr.Set("X-Amz-Missing-Meta", n)
	}
}

// checkParents makes sure that the bucket exists and that no directory
// path needs is an object ("a/b" cannot be written while "a" is an
// object). It asks from path's parent up, one round trip per level
// (object.Store.IsDir), and stops at the first directory: the bucket's
// is then there too. A key right under the bucket costs what
// bucketExists does.
func (h *handler) checkParents(ctx context.Context, bucket, path string) error {
	if !bucketPathOK(bucket) {
		return ErrNoSuchBucket
	}
	root := bucketPath(bucket)
	for d := parentDir(path); d == root || strings.HasPrefix(d, root+"/"); d = parentDir(d) {
		isDir, err := h.store.IsDir(ctx, d)
		switch {
		case err == nil && isDir:
			return nil
		case err != nil && !errors.Is(err, object.ErrNotExist):
			return err
		case d == root:
			return ErrNoSuchBucket
		case err == nil:
			return ErrKeyConflict.with("key prefix %q is an object; it cannot also be a directory", strings.TrimPrefix(d, root+"/"))
		}
	}
	return ErrNoSuchBucket // path is not in the bucket: not reached
}

// onlyCreates is cond, and no object at the key: the commit-time check
// of a write that the access key's scopes allow only where nothing is.
func onlyCreates(cond writeCond) writeCond {
	return func(current *object.Info) error {
		if current != nil && !current.IsDir {
			return ErrAccessDenied.with("the key exists, and the access key's scopes allow creating only")
		}
		if cond != nil {
			return cond(current)
		}
		return nil
	}
}

// writeCond is what a conditional write asks of the object its key
// holds when it commits (nil: nothing there); see writeCondition.
type writeCond = func(current *object.Info) error

// writeCondition reads a write's conditions on what its key holds: with
// If-None-Match: * it is written only where no object is, with If-Match
// only over the object of one of the ETags named (S3's conditional
// writes, which lock files and commit protocols rely on). They are
// checked now, before the body is read, and again when the write commits
// (object.CreateOptions.Precondition), after this gateway's other
// commits of the key. nil when the request names none.
func (h *handler) writeCondition(req *request, path string) (writeCond, error) {
	none, match := req.r.Header.Get("If-None-Match"), req.r.Header.Get("If-Match")
	if none == "" && match == "" {
		return nil, nil
	}
	if none != "" && strings.TrimSpace(none) != "*" {
		return nil, ErrNotImplemented.with("If-None-Match on a write takes only *")
	}
	cond := func(current *object.Info) error {
		there := current != nil && !current.IsDir
		if none != "" && there {
			return ErrPreconditionFailed
		}
		if match != "" {
			if !there {
				return ErrNoSuchKey
			}
			if !etagMatches(match, etagOf(current)) {
				return ErrPreconditionFailed
			}
		}
		return nil
	}
	current, err := h.store.Stat(req.ctx, path)
	switch {
	case missing(err):
		current = nil
	case err != nil:
		return nil, err
	}
	if err := cond(current); err != nil {
		return nil, err
	}
	return cond, nil
}

// conflict explains an engine error about a key that is a directory or
// lies under an object.
func conflict(err error, key string) error {
	if errors.Is(err, object.ErrIsDir) {
		return ErrKeyConflict.with("key %q is the prefix of other keys (a directory); it cannot also be an object", key)
	}
	return err
}

func (h *handler) putObject(req *request) error {
	path, dir, err := objectPath(req.bucket, req.key)
	if err != nil {
		return err
	}
	// The bucket and the key's prefixes (a marker's own path too) are
	// checked before the body is read.
	need := path
	if dir {
		need = path + "/x"
	}
	if err := h.checkParents(req.ctx, req.bucket, need); err != nil {
		return err
	}
	cond, err := h.writeCondition(req, path)
	if err != nil {
		return err
	}
	p, err := newPayload(req.r, req.auth, h.opts.MaxObjectSize)
	if err != nil {
		return err
	}
	if dir {
		return h.putDirMarker(req, path, p)
	}
	meta, err := userMetadata(req.r)
	if err != nil {
		return err
	}
	etag, err := h.write(req.ctx, path, meta, p.size, req.createOnly, cond, func(w *object.Writer) (string, error) {
		n, err := w.ReadFrom(p)
		h.bytes("write", n)
		if err != nil {
			return "", err
		}
		return hex.EncodeToString(p.MD5()), nil
	})
	if err != nil {
		return conflict(err, req.key)
	}
	req.w.Header().Set("ETag", quote(etag))
	req.w.WriteHeader(http.StatusOK)
	return nil
}

// write creates the object at path, lets fill stream its content, and
// commits it with the ETag fill returns, if cond (nil: none) holds then;
// on any error it aborts the write, leaving nothing new visible. size is
// the expected size (-1: unknown), a hint for the engine's small-object
// path.
func (h *handler) write(ctx context.Context, path string, meta map[string]string, size int64, createOnly bool, cond writeCond, fill func(*object.Writer) (string, error)) (string, error) {
	if createOnly {
		// Allowed by storage.create alone: it must not replace an object
		// written meanwhile either (checked again at commit).
		cond = onlyCreates(cond)
	}
	w, err := h.store.Create(ctx, path, &object.CreateOptions{User: meta, SizeHint: max(size, 0), Exclusive: createOnly, Precondition: cond})
	if createOnly && errors.Is(err, object.ErrExist) {
		return "", ErrAccessDenied.with("the key exists, and the access key's scopes allow creating only")
	}
	if err != nil {
		return "", err
	}
	etag, err := fill(w)
	if err != nil {
		_ = w.Abort()
		return "", err
	}
	w.SetUser(etagKey, etag)
	err = w.Close()
	h.listings.changedDir(parentDir(path)) // even failed: a write in doubt may show
	if err != nil {
		return "", err
	}
	return etag, nil
}

// putDirMarker handles PUT of a key ending in '/': an empty body makes
// the directory.
func (h *handler) putDirMarker(req *request, path string, p *payload) error {
	n, err := io.Copy(io.Discard, io.LimitReader(p, 1))
	if err != nil {
		return err
	}
	if n > 0 {
		return ErrInvalidArgument.with("key %q ends in '/', which names a directory in ecstore; only an empty body can be stored under it", req.key)
	}
	if _, err := io.Copy(io.Discard, p); err != nil { // verify the (empty) payload
		return err
	}
	if err := h.makeMarker(req, path); err != nil {
		return err
	}
	req.w.Header().Set("ETag", quote(emptyMD5))
	req.w.WriteHeader(http.StatusOK)
	return nil
}

// noSuchKey returns NoSuchBucket when the bucket is missing, else
// NoSuchKey.
func (h *handler) noSuchKey(ctx context.Context, bucket string) error {
	if err := h.bucketExists(ctx, bucket); err != nil {
		return err
	}
	return ErrNoSuchKey
}

// missing reports engine errors that mean "no object at this path".
func missing(err error) bool {
	return errors.Is(err, object.ErrNotExist) || errors.Is(err, object.ErrIsDir) || errors.Is(err, object.ErrNotDir)
}

// getObject serves GET and HEAD of an object, streaming the (ranged)
// content from the store's Reader.
func (h *handler) getObject(req *request, head bool) error {
	path, dir, err := objectPath(req.bucket, req.key)
	if err != nil {
		return h.noSuchKey(req.ctx, req.bucket)
	}
	if dir {
		info, err := h.store.Stat(req.ctx, path)
		if err != nil || !info.IsDir {
			return h.noSuchKey(req.ctx, req.bucket)
		}
		return h.sendObject(req, info, nil, head)
	}
	rd, err := h.store.Open(req.ctx, path)
	if err != nil {
		if missing(err) {
			return h.noSuchKey(req.ctx, req.bucket)
		}
		return err
	}
	defer rd.Close()
	return h.sendObject(req, rd.Info(), rd, head)
}

func (h *handler) sendObject(req *request, info *object.Info, rd *object.Reader, head bool) error {
	hdr := req.w.Header()
	// An error (304 and 412 included) carries none of the object's own
	// headers (its Content-Encoding would mislabel the XML): only what
	// identifies the version, and a 416 its size.
	hdr.Set("ETag", quote(etagOf(info)))
	hdr.Set("Last-Modified", info.MTime.UTC().Format(http.TimeFormat))
	if err := checkPreconditions(req.r, etagOf(info), info.MTime); err != nil {
		return err
	}
	size := info.Size
	start, length, partial, err := parseRange(req.r.Header.Get("Range"), size)
	if err != nil {
		hdr.Set("Content-Range", "bytes */"+strconv.FormatInt(size, 10))
		return err
	}
	setObjectHeaders(hdr, info)
	q := req.r.URL.Query()
	for _, o := range []struct{ param, header string }{
		{"response-content-type", "Content-Type"}, {"response-content-language", "Content-Language"},
		{"response-expires", "Expires"}, {"response-cache-control", "Cache-Control"},
		{"response-content-disposition", "Content-Disposition"}, {"response-content-encoding", "Content-Encoding"},
	} {
		if v := q.Get(o.param); v != "" {
			hdr.Set(o.header, v)
		}
	}
	hdr.Set("Content-Length", strconv.FormatInt(length, 10))
	if partial {
		hdr.Set("Content-Range", "bytes "+strconv.FormatInt(start, 10)+"-"+strconv.FormatInt(start+length-1, 10)+"/"+strconv.FormatInt(size, 10))
		req.w.WriteHeader(http.StatusPartialContent)
	} else {
		req.w.WriteHeader(http.StatusOK)
	}
	if head || length == 0 || rd == nil {
		return nil
	}
	if _, err := rd.WriteRange(req.ctx, req.w, start, length); err != nil {
		return err
	}
	h.bytes("read", length)
	return nil
}

// parseRange interprets a Range header for an object of size bytes
// (RFC 9110 section 14): "bytes=a-b", "bytes=a-" and "bytes=-n". A header
// that does not parse, or asks for several ranges, is ignored (the whole
// object is sent), as S3 does; a range starting past the end is
// InvalidRange.
func parseRange(h string, size int64) (start, length int64, partial bool, err error) {
	spec, ok := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return 0, size, false, nil
	}
	a, b, ok := strings.Cut(spec, "-")
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	if !ok || !digits(a) || !digits(b) || a == "" && b == "" {
		return 0, size, false, nil
	}
	if a == "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil {
			return 0, size, false, nil
		}
		if n == 0 || size == 0 {
			return 0, 0, false, ErrInvalidRange
		}
		n = min(n, size)
		return size - n, n, true, nil
	}
	s, err := strconv.ParseInt(a, 10, 64)
	if err != nil {
		return 0, size, false, nil
	}
	e := size - 1
	if b != "" {
		if e, err = strconv.ParseInt(b, 10, 64); err != nil {
			e = size - 1 // beyond int64: to the end
		}
		if e < s {
			return 0, size, false, nil
		}
	}
	if s >= size {
		return 0, 0, false, ErrInvalidRange
	}
	e = min(e, size-1)
	return s, e - s + 1, true, nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// checkPreconditions evaluates If-Match, If-Unmodified-Since,
// If-None-Match and If-Modified-Since as S3 does (RFC 9110 section 13.2.2
// order; dates compare at one-second resolution).
func checkPreconditions(r *http.Request, etag string, mtime time.Time) error {
	mt := mtime.Truncate(time.Second)
	if v := r.Header.Get("If-Match"); v != "" {
		if !etagMatches(v, etag) {
			return ErrPreconditionFailed
		}
	} else if v := r.Header.Get("If-Unmodified-Since"); v != "" {
		if t, err := http.ParseTime(v); err == nil && mt.After(t) {
			return ErrPreconditionFailed
		}
	}
	if v := r.Header.Get("If-None-Match"); v != "" {
		if etagMatches(v, etag) {
			return ErrNotModified
		}
	} else if v := r.Header.Get("If-Modified-Since"); v != "" {
		if t, err := http.ParseTime(v); err == nil && !mt.After(t) {
			return ErrNotModified
		}
	}
	return nil
}

// etagMatches reports whether a list of entity tags (or "*") holds etag.
func etagMatches(list, etag string) bool {
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimSpace(t)
		if t == "*" {
			return true
		}
		t = strings.Trim(strings.TrimPrefix(t, "W/"), `"`)
		if t == etag {
			return true
		}
	}
	return false
}

// deleteObject removes a key; deleting a missing key succeeds (204).
func (h *handler) deleteObject(req *request) error {
	if err := h.bucketExists(req.ctx, req.bucket); err != nil {
		return err
	}
	if err := h.remove(req.ctx, req.bucket, req.key); err != nil {
		return err
	}
	h.prune(req.ctx, req.bucket, []string{req.key})
	req.w.WriteHeader(http.StatusNoContent)
	return nil
}

// remove deletes one key; a key that does not exist (or cannot) is not
// an error. Emptied directories are left for prune.
func (h *handler) remove(ctx context.Context, bucket, key string) error {
	path, dir, err := objectPath(bucket, key)
	if err != nil {
		return nil // no such key can exist
	}
	defer h.listings.changedDir(parentDir(path))
	if dir {
		err = h.store.Rmdir(ctx, path)
		if err == nil || missing(err) || errors.Is(err, object.ErrNotEmpty) {
			return nil
		}
		return err
	}
	if err := h.store.Remove(ctx, path); err != nil && !missing(err) {
		return err
	}
	return nil
}

// prune removes the directories that deleting keys left empty, deepest
// first, up to (not including) the bucket. It is best effort: a directory
// that is not empty, or fails, stops the climb.
func (h *handler) prune(ctx context.Context, bucket string, keys []string) {
	root := bucketPath(bucket)
	seen := map[string]bool{}
	var dirs []string
	for _, k := range keys {
		path, _, err := objectPath(bucket, k)
		if err != nil {
			continue
		}
		for d := parentDir(path); d != root && strings.HasPrefix(d, root+"/") && !seen[d]; d = parentDir(d) {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	// Deepest first, so a parent is tried after its children.
	sortByDepth(dirs)
	for _, d := range dirs {
		_ = h.store.Rmdir(ctx, d)
	}
}

func sortByDepth(dirs []string) {
	depth := func(s string) int { return strings.Count(s, "/") }
	for i := 1; i < len(dirs); i++ {
		for j := i; j > 0 && depth(dirs[j]) > depth(dirs[j-1]); j-- {
			dirs[j], dirs[j-1] = dirs[j-1], dirs[j]
		}
	}
}

// deleteObjects handles the multi-object delete (POST ?delete).
func (h *handler) deleteObjects(req *request) error {
	if err := h.bucketExists(req.ctx, req.bucket); err != nil {
		return err
	}
	body, err := readAll(req.r, req.auth, 2<<20)
	if err != nil {
		return err
	}
	var d deleteRequest
	if err := xmlUnmarshal(body, &d); err != nil || len(d.Objects) == 0 || len(d.Objects) > 1000 {
		return ErrMalformedXML
	}
	res := deleteResult{}
	errs := make([]error, len(d.Objects))
	keys := make([]string, len(d.Objects))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, o := range d.Objects {
		keys[i] = o.Key
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			switch {
			case !nullVersion(o.VersionID):
				errs[i] = errVersions // not the current object: nothing is removed
			default:
				if errs[i] = h.allowed(req, jwtauth.Modify, "/"+req.bucket+"/"+o.Key); errs[i] == nil {
					errs[i] = h.remove(req.ctx, req.bucket, o.Key)
				}
			}
		}()
	}
	wg.Wait()
	h.prune(req.ctx, req.bucket, keys)
	for i, o := range d.Objects {
		if errs[i] != nil {
			e := toError(errs[i])
			res.Errors = append(res.Errors, deleteError{Key: o.Key, Code: e.Code, Message: e.Message})
		} else if !d.Quiet {
			res.Deleted = append(res.Deleted, deletedObject{Key: o.Key})
		}
	}
	return writeXML(req.w, res)
}

// errVersions answers a request for an object version other than the
// current one ("null", as S3 calls the version of an object written
// without versioning): ecstore keeps no versions, and a request that
// names one must not act on the current object instead (a DELETE of an
// old version removed the object).
var errVersions = ErrNotImplemented.with("object versions are not implemented by ecstore: only versionId=null, the current object, can be named")

// nullVersion reports whether a versionId names the current object: none
// given, or "null".
func nullVersion(id string) bool { return id == "" || id == "null" }

// copySource parses x-amz-copy-source ("[/]bucket/key[?versionId=...]",
// URL-encoded).
func copySource(v string) (bucket, key string, err error) {
	if i := strings.Index(v, "?"); i >= 0 {
		if q, _ := url.ParseQuery(v[i+1:]); !nullVersion(q.Get("versionId")) {
			return "", "", errVersions
		}
		v = v[:i]
	}
	u, err := url.PathUnescape(v)
	if err != nil {
		return "", "", ErrInvalidArgument.with("x-amz-copy-source %q is not URL-encoded", v)
	}
	bucket, key, ok := strings.Cut(strings.TrimPrefix(u, "/"), "/")
	if !ok || bucket == "" || key == "" {
		return "", "", ErrInvalidArgument.with("x-amz-copy-source must be bucket/key")
	}
	return bucket, key, nil
}

// openSource opens the source of a copy and checks the
// x-amz-copy-source-if-* conditions (all of which fail with
// PreconditionFailed).
func (h *handler) openSource(req *request) (*object.Reader, error) {
	bucket, key, err := copySource(req.r.Header.Get("X-Amz-Copy-Source"))
	if err != nil {
		return nil, err
	}
	if err := h.allowed(req, jwtauth.Read, "/"+bucket+"/"+key); err != nil {
		return nil, err
	}
	path, dir, err := objectPath(bucket, key)
	if err != nil || dir {
		return nil, h.noSuchKey(req.ctx, bucket)
	}
	rd, err := h.store.Open(req.ctx, path)
	if err != nil {
		if missing(err) {
			return nil, h.noSuchKey(req.ctx, bucket)
		}
		return nil, err
	}
	info := rd.Info()
	etag, mt := etagOf(info), info.MTime.Truncate(time.Second)
	hdr := req.r.Header
	ok := true
	if v := hdr.Get("X-Amz-Copy-Source-If-Match"); v != "" && !etagMatches(v, etag) {
		ok = false
	}
	if v := hdr.Get("X-Amz-Copy-Source-If-None-Match"); v != "" && etagMatches(v, etag) {
		ok = false
	}
	if t, err := http.ParseTime(hdr.Get("X-Amz-Copy-Source-If-Unmodified-Since")); err == nil && mt.After(t) &&
		hdr.Get("X-Amz-Copy-Source-If-Match") == "" {
		ok = false
	}
	if t, err := http.ParseTime(hdr.Get("X-Amz-Copy-Source-If-Modified-Since")); err == nil && !mt.After(t) &&
		hdr.Get("X-Amz-Copy-Source-If-None-Match") == "" {
		ok = false
	}
	if !ok {
		rd.Close()
		return nil, ErrPreconditionFailed
	}
	return rd, nil
}

// makeMarker makes the directory of marker key req.key at path.
func (h *handler) makeMarker(req *request, path string) error {
	err := h.store.Mkdir(req.ctx, path)
	h.listings.changedDir(parentDir(path))
	if errors.Is(err, object.ErrExist) {
		return ErrKeyConflict.with("key %q is an object; %q cannot be a directory", strings.TrimSuffix(req.key, "/"), req.key)
	}
	return err
}

// copyMarker copies a directory marker (a key ending in '/', listed as an
// empty object) onto the marker key at path: the directory is made, as a
// PUT of the marker makes it (aws s3 sync, and folder renames in
// graphical clients, copy markers as they copy objects).
func (h *handler) copyMarker(req *request, path string) error {
	bucket, key, err := copySource(req.r.Header.Get("X-Amz-Copy-Source"))
	if err != nil {
		return err
	}
	if err := h.allowed(req, jwtauth.Read, "/"+bucket+"/"+key); err != nil {
		return err
	}
	src, srcDir, err := objectPath(bucket, key)
	if err != nil || !srcDir {
		return ErrInvalidArgument.with("key %q ends in '/', which names a directory in ecstore; only a directory marker can be copied onto it", req.key)
	}
	if isDir, err := h.store.IsDir(req.ctx, src); err != nil || !isDir {
		if err != nil && !missing(err) {
			return err
		}
		return h.noSuchKey(req.ctx, bucket)
	}
	if err := h.checkParents(req.ctx, req.bucket, path+"/x"); err != nil {
		return err
	}
	if _, err := readAll(req.r, req.auth, 0); err != nil {
		return err
	}
	if err := h.makeMarker(req, path); err != nil {
		return err
	}
	return writeXML(req.w, copyObjectResult{LastModified: xmlTime(h.opts.Now()), ETag: quote(emptyMD5)})
}

// copyObject copies an object (PUT with x-amz-copy-source), streaming it
// from a Reader into a Writer. The copy's ETag is the MD5 of its content.
// It keeps the source's metadata of other frontends (otherMetadata).
func (h *handler) copyObject(req *request) error {
	path, dir, err := objectPath(req.bucket, req.key)
	if err != nil {
		return err
	}
	if dir {
		return h.copyMarker(req, path)
	}
	if err := h.checkParents(req.ctx, req.bucket, path); err != nil {
		return err
	}
	cond, err := h.writeCondition(req, path)
	if err != nil {
		return err
	}
	if _, err := readAll(req.r, req.auth, 0); err != nil {
		return err
	}
	rd, err := h.openSource(req)
	if err != nil {
		return err
	}
	defer rd.Close()
	src := rd.Info()
	var meta map[string]string
	switch d := req.r.Header.Get("X-Amz-Metadata-Directive"); d {
	case "", "COPY":
		if src.Path == path {
			return ErrInvalidRequest.with("This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.")
		}
		meta = s3Metadata(src.User)
	case "REPLACE":
		if meta, err = userMetadata(req.r); err != nil {
			return err
		}
	default:
		return ErrInvalidArgument.with("unknown metadata directive %q", d)
	}
	maps.Copy(meta, otherMetadata(src.User))
	ka := h.startKeepAlive(req)
	etag, err := h.write(req.ctx, path, meta, src.Size, req.createOnly, cond, func(w *object.Writer) (string, error) {
		sum := md5.New()
		if _, err := rd.WriteTo(req.ctx, io.MultiWriter(w, sum)); err != nil {
			return "", err
		}
		return hex.EncodeToString(sum.Sum(nil)), nil
	})
	if err != nil {
		return ka.fail(conflict(err, req.key))
	}
	return ka.finish(copyObjectResult{LastModified: xmlTime(h.opts.Now()), ETag: quote(etag)})
}
