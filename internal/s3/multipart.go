package s3

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ecstore/ecstore/internal/object"
)

// Multipart uploads in progress live outside every bucket, as ordinary
// erasure-coded objects under a reserved top-level directory (its name
// starts with '.', so it is never a bucket and no listing shows it):
//
//	/.ecstore-uploads/<bucket>/<upload id>/upload        empty object; its user metadata
//	                                                      holds the key ("s3-key"), the
//	                                                      initiation time ("s3-initiated")
//	                                                      and the object's metadata
//	/.ecstore-uploads/<bucket>/<upload id>/part.00001    part 1 (ETag "s3-etag": its MD5)
//	/.ecstore-uploads/<bucket>/<upload id>/part.00002    ...
//
// An upload id is 32 hex digits: the initiation time in nanoseconds and
// 64 random bits. UploadPart writes a part like any object (a re-upload
// replaces it). CompleteMultipartUpload checks every listed part's ETag
// and size, then streams the parts in order from Readers into one Writer
// for the final object (memory: the engine's few blocks, never a part),
// stores the ETag hex(md5(md5(part 1) || ... || md5(part N)))-N, and
// removes the upload's directory. AbortMultipartUpload removes it. Parts
// are removed before the "upload" object, so an interrupted removal
// leaves an upload that can still be listed and aborted again. Uploads
// that are never completed nor aborted expire (expire.go). With
// Options.KeepCompletions a completed upload's directory keeps a
// "completed" record (the key and the ETag) until it expires, so that
// a Complete sent again is answered as the first was.

const (
	uploadsRoot    = "/.ecstore-uploads"
	uploadInfoName = "upload"
	uploadKeyMeta  = "s3-key"
	uploadTimeMeta = "s3-initiated"
	maxParts       = 10000
	// uploadDoneName is the record of a completed upload (Options.
	// KeepCompletions): an empty object whose user metadata holds the
	// key (uploadKeyMeta) and the object's ETag (etagKey). It stays in
	// the upload's directory, its parts gone, until the upload expiry
	// removes the directory.
	uploadDoneName = "completed"
)

func uploadDir(bucket, id string) string { return uploadsRoot + "/" + bucket + "/" + id }

func partPath(bucket, id string, n int) string {
	return fmt.Sprintf("%s/part.%05d", uploadDir(bucket, id), n)
}

// partNumber parses a part's name.
func partNumber(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, "part.")
	if !ok || len(s) != 5 {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 1 && n <= maxParts
}

func newUploadID(now time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.UnixNano()))
	_, _ = rand.Read(b[8:])
	return hex.EncodeToString(b[:])
}

func validUploadID(id string) bool {
	if len(id) != 32 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.ToLower(id) == id
}

// upload is a multipart upload in progress.
type upload struct {
	bucket, id, key string
	initiated       time.Time
	user            map[string]string
}

// loadUpload finds upload id of key in bucket.
func (h *handler) loadUpload(ctx context.Context, bucket, id, key string) (*upload, error) {
	if !validUploadID(id) {
		return nil, ErrNoSuchUpload
	}
	info, err := h.store.Stat(ctx, uploadDir(bucket, id)+"/"+uploadInfoName)
	if err != nil {
		if missing(err) {
			if err := h.bucketExists(ctx, bucket); err != nil {
				return nil, err
			}
			return nil, ErrNoSuchUpload
		}
		return nil, err
	}
	if info.IsDir || info.User[uploadKeyMeta] != key {
		return nil, ErrNoSuchUpload
	}
	t, _ := time.Parse(time.RFC3339Nano, info.User[uploadTimeMeta])
	return &upload{bucket: bucket, id: id, key: key, initiated: t, user: info.User}, nil
}

// createUpload starts a multipart upload (POST ?uploads).
func (h *handler) createUpload(req *request) error {
	path, dir, err := objectPath(req.bucket, req.key)
	if err != nil {
		return err
	}
	if dir {
		return ErrInvalidArgument.with("key %q ends in '/', which names a directory in ecstore; it cannot be uploaded in parts", req.key)
	}
	if err := h.checkParents(req.ctx, req.bucket, path); err != nil {
		return err
	}
	if _, err := readAll(req.r, req.auth, 64<<10); err != nil {
		return err
	}
	meta, err := userMetadata(req.r)
	if err != nil {
		return err
	}
	now := h.opts.Now()
	id := newUploadID(now)
	meta[uploadKeyMeta] = req.key
	meta[uploadTimeMeta] = now.UTC().Format(time.RFC3339Nano)
	w, err := h.store.Create(req.ctx, uploadDir(req.bucket, id)+"/"+uploadInfoName, &object.CreateOptions{User: meta})
	if err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return writeXML(req.w, initiateMultipartUploadResult{Bucket: req.bucket, Key: req.key, UploadID: id})
}

// partQuery parses uploadId and partNumber.
func partQuery(req *request) (id string, n int, err error) {
	q := req.r.URL.Query()
	n, err = strconv.Atoi(q.Get("partNumber"))
	if err != nil || n < 1 || n > maxParts {
		return "", 0, ErrInvalidArgument.with("Part number must be an integer between 1 and %d, inclusive", maxParts)
	}
	return q.Get("uploadId"), n, nil
}

// uploadPart stores one part (PUT ?partNumber&uploadId), or copies it
// from an object with x-amz-copy-source (UploadPartCopy).
func (h *handler) uploadPart(req *request) error {
	id, n, err := partQuery(req)
	if err != nil {
		return err
	}
	up, err := h.loadUpload(req.ctx, req.bucket, id, req.key)
	if err != nil {
		return err
	}
	if req.r.Header.Get("X-Amz-Copy-Source") != "" {
		return h.uploadPartCopy(req, up, n)
	}
	p, err := newPayload(req.r, req.auth, h.opts.MaxPartSize)
	if err != nil {
		return err
	}
	etag, err := h.write(req.ctx, partPath(up.bucket, up.id, n), nil, p.size, false, nil, func(w *object.Writer) (string, error) {
		n, err := w.ReadFrom(p)
		h.bytes("write", n)
		if err != nil {
			return "", err
		}
		return hex.EncodeToString(p.MD5()), nil
	})
	if err != nil {
		return err
	}
	if err := h.stillOpen(req.ctx, up, n); err != nil {
		return err
	}
	req.w.Header().Set("ETag", quote(etag))
	req.w.WriteHeader(http.StatusOK)
	return nil
}

// stillOpen checks, after part n was written, that the upload was not
// completed or aborted meanwhile; if it was, the part is removed again
// so that it is not left orphaned.
func (h *handler) stillOpen(ctx context.Context, up *upload, n int) error {
	if _, err := h.store.Stat(ctx, uploadDir(up.bucket, up.id)+"/"+uploadInfoName); err != nil {
		if missing(err) {
			_ = h.store.Remove(ctx, partPath(up.bucket, up.id, n))
			_ = h.store.Rmdir(ctx, uploadDir(up.bucket, up.id))
			return ErrNoSuchUpload
		}
		return err
	}
	return nil
}

// uploadPartCopy copies (a range of) an object into part n.
func (h *handler) uploadPartCopy(req *request, up *upload, n int) error {
	if _, err := readAll(req.r, req.auth, 0); err != nil {
		return err
	}
	rd, err := h.openSource(req)
	if err != nil {
		return err
	}
	defer rd.Close()
	info := rd.Info()
	start, length := int64(0), info.Size
	if v := req.r.Header.Get("X-Amz-Copy-Source-Range"); v != "" {
		a, b, ok := strings.Cut(strings.TrimPrefix(v, "bytes="), "-")
		s, err1 := strconv.ParseInt(a, 10, 64)
		e, err2 := strconv.ParseInt(b, 10, 64)
		if !strings.HasPrefix(v, "bytes=") || !ok || err1 != nil || err2 != nil || s < 0 || e < s {
			return ErrInvalidArgument.with("The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy")
		}
		if e >= info.Size {
			return ErrInvalidArgument.with("Range specified is not valid for source object of size: %d", info.Size)
		}
		start, length = s, e-s+1
	}
	if length > h.opts.MaxPartSize {
		return ErrEntityTooLarge.with("a part is at most %d bytes", h.opts.MaxPartSize)
	}
	ka := h.startKeepAlive(req)
	etag, err := h.write(req.ctx, partPath(up.bucket, up.id, n), nil, length, false, nil, func(w *object.Writer) (string, error) {
		sum := md5.New()
		if _, err := rd.WriteRange(req.ctx, io.MultiWriter(w, sum), start, length); err != nil {
			return "", err
		}
		return hex.EncodeToString(sum.Sum(nil)), nil
	})
	if err == nil {
		err = h.stillOpen(req.ctx, up, n)
	}
	if err != nil {
		return ka.fail(err)
	}
	return ka.finish(copyPartResult{LastModified: xmlTime(h.opts.Now()), ETag: quote(etag)})
}

// completeUpload assembles the final object (POST ?uploadId).
func (h *handler) completeUpload(req *request) error {
	id := req.r.URL.Query().Get("uploadId")
	up, err := h.loadUpload(req.ctx, req.bucket, id, req.key)
	if err != nil && (!errors.Is(err, ErrNoSuchUpload) || !h.opts.KeepCompletions || !validUploadID(id)) {
		return err
	}
	body, rerr := readAll(req.r, req.auth, 4<<20)
	if rerr != nil {
		return rerr
	}
	var c completeMultipartUpload
	if err := xmlUnmarshal(body, &c); err != nil || len(c.Parts) == 0 || len(c.Parts) > maxParts {
		if up == nil {
			return ErrNoSuchUpload
		}
		return ErrMalformedXML
	}
	if up == nil {
		return h.completedBefore(req, id, c.Parts)
	}
	for i, p := range c.Parts {
		if p.PartNumber < 1 || p.PartNumber > maxParts {
			return ErrInvalidPart.with("part number %d is out of range", p.PartNumber)
		}
		if i > 0 && p.PartNumber <= c.Parts[i-1].PartNumber {
			return ErrInvalidPartOrder
		}
	}
	// Check every part before writing anything.
	infos := make([]*object.Info, len(c.Parts))
	errs := make([]error, len(c.Parts))
	parallel(len(c.Parts), 16, func(i int) {
		infos[i], errs[i] = h.store.Stat(req.ctx, partPath(up.bucket, up.id, c.Parts[i].PartNumber))
	})
	var total int64
	sums := make([]byte, 0, md5.Size*len(c.Parts))
	for i, p := range c.Parts {
		if errs[i] != nil {
			if missing(errs[i]) {
				return ErrInvalidPart.with("part %d has not been uploaded", p.PartNumber)
			}
			return errs[i]
		}
		etag := infos[i].User[etagKey]
		sum, err := hex.DecodeString(etag)
		if err != nil || len(sum) != md5.Size || strings.Trim(p.ETag, `" `) != etag {
			return ErrInvalidPart.with("part %d has ETag %q, not %s", p.PartNumber, etag, p.ETag)
		}
		if i < len(c.Parts)-1 && infos[i].Size < h.opts.MinPartSize {
			return ErrEntityTooSmall.with("part %d has %d bytes; every part but the last needs at least %d", p.PartNumber, infos[i].Size, h.opts.MinPartSize)
		}
		total += infos[i].Size
		sums = append(sums, sum...)
	}
	if total > h.opts.MaxObjectSize {
		return ErrEntityTooLarge
	}
	path, _, err := objectPath(up.bucket, up.key)
	if err != nil {
		return err
	}
	if err := h.checkParents(req.ctx, up.bucket, path); err != nil {
		return err
	}
	cond, err := h.writeCondition(req, path)
	if err != nil {
		return err
	}
	ka := h.startKeepAlive(req)
	all := md5.Sum(sums)
	numbers := make([]int, len(c.Parts))
	for i, p := range c.Parts {
		numbers[i] = p.PartNumber
	}
	etag, err := h.write(req.ctx, path, s3Metadata(up.user), total, req.createOnly, cond, func(w *object.Writer) (string, error) {
		if err := h.appendParts(req.ctx, w, up, numbers, infos); err != nil {
			return "", err
		}
		return fmt.Sprintf("%x-%d", all, len(c.Parts)), nil
	})
	if err != nil {
		return ka.fail(conflict(err, up.key))
	}
	if h.opts.KeepCompletions {
		h.recordCompletion(req.ctx, up, etag)
	}
	h.retireUpload(req.ctx, up, path)
	loc := "http://" + req.r.Host + "/" + up.bucket + "/" + up.key
	return ka.finish(completeMultipartUploadResult{Location: loc, Bucket: up.bucket, Key: up.key, ETag: quote(etag)})
}

// recordCompletion records that up was completed into an object of ETag
// etag (uploadDoneName). Without the record a repeated Complete answers
// NoSuchUpload: a failure is logged, not the request's.
func (h *handler) recordCompletion(ctx context.Context, up *upload, etag string) {
	w, err := h.store.Create(ctx, uploadDir(up.bucket, up.id)+"/"+uploadDoneName,
		&object.CreateOptions{User: map[string]string{uploadKeyMeta: up.key, etagKey: etag}})
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		h.opts.Logger.Warn("s3: completed upload not recorded: a repeated Complete will answer NoSuchUpload", "upload", up.id, "key", up.key, "err", err)
	}
}

// completedBefore answers a CompleteMultipartUpload of upload id, which
// is no longer in progress, as S3 does a repeated one: with the first
// answer, when the upload was completed with the same parts (the ETag,
// computed from the parts' ETags, matches the record's) and the object
// is still the one it made. Otherwise NoSuchUpload.
func (h *handler) completedBefore(req *request, id string, parts []completedPart) error {
	done, err := h.store.Stat(req.ctx, uploadDir(req.bucket, id)+"/"+uploadDoneName)
	if err != nil || done.IsDir || done.User[uploadKeyMeta] != req.key {
		return ErrNoSuchUpload
	}
	sums := make([]byte, 0, md5.Size*len(parts))
	for _, p := range parts {
		sum, err := hex.DecodeString(strings.Trim(p.ETag, `" `))
		if err != nil || len(sum) != md5.Size {
			return ErrNoSuchUpload
		}
		sums = append(sums, sum...)
	}
	etag := fmt.Sprintf("%x-%d", md5.Sum(sums), len(parts))
	if done.User[etagKey] != etag {
		return ErrNoSuchUpload
	}
	path, _, err := objectPath(req.bucket, req.key)
	if err != nil {
		return err
	}
	if cur, err := h.store.Stat(req.ctx, path); err != nil || cur.IsDir || cur.User[etagKey] != etag {
		return ErrNoSuchUpload // replaced or removed since
	}
	loc := "http://" + req.r.Host + "/" + req.bucket + "/" + req.key
	return writeXML(req.w, completeMultipartUploadResult{Location: loc, Bucket: req.bucket, Key: req.key, ETag: quote(etag)})
}

// appendParts streams the parts numbered numbers, checked as infos, into
// w in order. The next part is opened (its archives located) while one is
// copied, so that the copy does not stop at every part for the lookup.
func (h *handler) appendParts(ctx context.Context, w *object.Writer, up *upload, numbers []int, infos []*object.Info) error {
	type opened struct {
		rd  *object.Reader
		err error
	}
	open := func(i int) chan opened {
		ch := make(chan opened, 1)
		go func() {
			rd, err := h.openPart(ctx, up, numbers[i], infos[i])
			ch <- opened{rd, err}
		}()
		return ch
	}
	next := open(0)
	for i := range numbers {
		o := <-next
		next = nil
		if o.err == nil && i+1 < len(numbers) {
			next = open(i + 1)
		}
		if o.err != nil {
			return o.err
		}
		_, err := o.rd.WriteTo(ctx, w)
		o.rd.Close()
		if err != nil {
			if next != nil {
				go func() {
					if o := <-next; o.rd != nil {
						o.rd.Close()
					}
				}()
			}
			return err
		}
	}
	return nil
}

// openPart opens part n of up, checking that it is still the version
// that was checked.
func (h *handler) openPart(ctx context.Context, up *upload, n int, checked *object.Info) (*object.Reader, error) {
	rd, err := h.store.Open(ctx, partPath(up.bucket, up.id, n))
	if err != nil {
		return nil, err
	}
	if rd.Info().Version != checked.Version {
		rd.Close()
		return nil, ErrInvalidPart.with("part %d changed during completion", n)
	}
	return rd, nil
}

// retireUpload ends up once its object is written. The upload's record
// goes first, so that the upload is no longer listed, completed or
// aborted; its parts, of no use from then on, are removed after the
// client has its answer (a gigabyte's 128 parts take a second or more),
// as a clean-up of the store that Store.Drain, at the gateway's shutdown,
// waits for. Parts that a dying gateway leaves behind go with the upload
// expiry.
func (h *handler) retireUpload(ctx context.Context, up *upload, path string) {
	info := uploadDir(up.bucket, up.id) + "/" + uploadInfoName
	if err := h.store.Remove(ctx, info); err != nil && !missing(err) {
		h.opts.Logger.Warn("s3: completed upload still recorded", "obj", path, "upload", up.id, "err", err)
	}
	h.background.Add(1)
	h.store.Background(func() { // the gateway's shutdown waits for it (Store.Drain)
		defer h.background.Done()
		if err := removeUpload(context.WithoutCancel(ctx), h.store, up.bucket, up.id, uploadDoneName); err != nil {
			h.opts.Logger.Warn("s3: completed upload not fully removed", "obj", path, "upload", up.id, "err", err)
		}
	})
}

// abortUpload removes an upload and its parts (DELETE ?uploadId).
func (h *handler) abortUpload(req *request) error {
	up, err := h.loadUpload(req.ctx, req.bucket, req.r.URL.Query().Get("uploadId"), req.key)
	if err != nil {
		return err
	}
	if err := h.removeUpload(req.ctx, up.bucket, up.id); err != nil {
		return err
	}
	req.w.WriteHeader(http.StatusNoContent)
	return nil
}

// removeUpload removes an upload's parts, then its "upload" object, then
// its directory.
func (h *handler) removeUpload(ctx context.Context, bucket, id string) error {
	return removeUpload(ctx, h.store, bucket, id, "")
}

// removeUpload removes upload id of bucket: its parts, then its record,
// then its directory; an entry named keep (the completion record of a
// completed upload, or "") stays, and with it the directory.
func removeUpload(ctx context.Context, store *object.Store, bucket, id, keep string) error {
	dir := uploadDir(bucket, id)
	infos, err := store.List(ctx, dir)
	if err != nil {
		if missing(err) {
			return nil
		}
		return err
	}
	var names []string
	for _, in := range infos {
		if in.Name != uploadInfoName && in.Name != keep {
			names = append(names, in.Name)
		}
	}
	errs := make([]error, len(names))
	parallel(len(names), 8, func(i int) {
		if err := store.Remove(ctx, dir+"/"+names[i]); err != nil && !missing(err) {
			errs[i] = err
		}
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := store.Remove(ctx, dir+"/"+uploadInfoName); err != nil && !missing(err) {
		return err
	}
	// With the record gone the upload is aborted. A part still being
	// written (its temporary archives keep the directory from being
	// removed) finds the record gone when it ends, and removes itself and
	// the directory then (stillOpen).
	if err := store.Rmdir(ctx, dir); err != nil && !missing(err) && !errors.Is(err, object.ErrNotEmpty) {
		return err
	}
	_ = store.Rmdir(ctx, uploadsRoot+"/"+bucket) // when it was the last upload
	return nil
}

// removeBucketUploads aborts every upload of bucket.
func (h *handler) removeBucketUploads(ctx context.Context, bucket string) error {
	infos, err := h.store.List(ctx, uploadsRoot+"/"+bucket)
	if err != nil {
		if missing(err) {
			return nil
		}
		return err
	}
	for _, in := range infos {
		if in.IsDir {
			if err := h.removeUpload(ctx, bucket, in.Name); err != nil {
				return err
			}
		}
	}
	_ = h.store.Rmdir(ctx, uploadsRoot+"/"+bucket)
	return nil
}

// listParts lists an upload's parts (GET ?uploadId).
func (h *handler) listParts(req *request) error {
	q := req.r.URL.Query()
	up, err := h.loadUpload(req.ctx, req.bucket, q.Get("uploadId"), req.key)
	if err != nil {
		return err
	}
	maxP, marker := 1000, 0
	if v := q.Get("max-parts"); v != "" {
		if maxP, err = strconv.Atoi(v); err != nil || maxP < 0 {
			return ErrInvalidArgument.with("max-parts must be a non-negative integer")
		}
		maxP = min(maxP, 1000)
	}
	if v := q.Get("part-number-marker"); v != "" {
		if marker, err = strconv.Atoi(v); err != nil || marker < 0 {
			return ErrInvalidArgument.with("part-number-marker must be a non-negative integer")
		}
	}
	infos, err := h.store.List(req.ctx, uploadDir(up.bucket, up.id))
	if err != nil {
		return err
	}
	type part struct {
		n    int
		info object.Info
	}
	var parts []part
	for _, in := range infos {
		if n, ok := partNumber(in.Name); ok && !in.IsDir && n > marker {
			parts = append(parts, part{n, in})
		}
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].n < parts[j].n })
	res := listPartsResult{Bucket: up.bucket, Key: up.key, UploadID: up.id, Initiator: theOwner, Owner: theOwner,
		StorageClass: "STANDARD", PartNumberMarker: marker, MaxParts: maxP}
	if len(parts) > maxP {
		parts, res.IsTruncated = parts[:maxP], true
	}
	res.Parts = make([]partInfo, len(parts))
	parallel(len(parts), 16, func(i int) {
		p := parts[i]
		res.Parts[i] = partInfo{PartNumber: p.n, LastModified: xmlTime(p.info.MTime), Size: p.info.Size}
		if info, err := h.store.Stat(req.ctx, p.info.Path); err == nil {
			res.Parts[i].ETag = quote(info.User[etagKey])
		}
	})
	if len(parts) > 0 {
		res.NextPartNumberMarker = parts[len(parts)-1].n
	}
	return writeXML(req.w, res)
}

// listUploads lists a bucket's uploads in progress (GET ?uploads), by
// key and then initiation time. It reads the "upload" object of every
// upload of the bucket: O(uploads in progress) per request.
func (h *handler) listUploads(req *request) error {
	if err := h.bucketExists(req.ctx, req.bucket); err != nil {
		return err
	}
	q := req.r.URL.Query()
	maxU := 1000
	if v := q.Get("max-uploads"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return ErrInvalidArgument.with("max-uploads must be a non-negative integer")
		}
		maxU = min(n, 1000)
	}
	enc := q.Get("encoding-type") == "url"
	prefix, delim := q.Get("prefix"), q.Get("delimiter")
	keyMarker, idMarker := q.Get("key-marker"), q.Get("upload-id-marker")
	res := listMultipartUploadsResult{Bucket: req.bucket, KeyMarker: encodeKey(keyMarker, enc), UploadIDMarker: idMarker,
		Prefix: encodeKey(prefix, enc), Delimiter: encodeKey(delim, enc), MaxUploads: maxU}
	if enc {
		res.EncodingType = "url"
	}
	infos, err := h.store.List(req.ctx, uploadsRoot+"/"+req.bucket)
	if err != nil && !missing(err) {
		return err
	}
	ups := make([]*upload, len(infos))
	parallel(len(infos), 16, func(i int) {
		if infos[i].IsDir && validUploadID(infos[i].Name) {
			info, err := h.store.Stat(req.ctx, infos[i].Path+"/"+uploadInfoName)
			if err == nil && !info.IsDir {
				t, _ := time.Parse(time.RFC3339Nano, info.User[uploadTimeMeta])
				ups[i] = &upload{bucket: req.bucket, id: infos[i].Name, key: info.User[uploadKeyMeta], initiated: t}
			}
		}
	})
	var list []*upload
	for _, u := range ups {
		if u == nil || !strings.HasPrefix(u.key, prefix) {
			continue
		}
		if keyMarker != "" && (u.key < keyMarker || u.key == keyMarker && (idMarker == "" || u.id <= idMarker)) {
			continue
		}
		list = append(list, u)
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].key != list[j].key {
			return list[i].key < list[j].key
		}
		return list[i].id < list[j].id // ids start with the initiation time
	})
	seen := map[string]bool{}
	n := 0
	for _, u := range list {
		if n == maxU {
			res.IsTruncated = true
			break
		}
		if delim != "" {
			if i := strings.Index(u.key[len(prefix):], delim); i >= 0 {
				cp := u.key[:len(prefix)+i+len(delim)]
				if !seen[cp] {
					seen[cp] = true
					res.CommonPrefixes = append(res.CommonPrefixes, commonPrefix{Prefix: encodeKey(cp, enc)})
					n++
				}
				continue
			}
		}
		res.Uploads = append(res.Uploads, uploadInfo{Key: encodeKey(u.key, enc), UploadID: u.id, Initiator: theOwner,
			Owner: theOwner, StorageClass: "STANDARD", Initiated: xmlTime(u.initiated)})
		res.NextKeyMarker, res.NextUploadIDMarker = encodeKey(u.key, enc), u.id
		n++
	}
	return writeXML(req.w, res)
}

// parallel runs fn(0..n-1) with at most width at a time.
func parallel(n, width int, fn func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, width)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(i)
		}()
	}
	wg.Wait()
}
