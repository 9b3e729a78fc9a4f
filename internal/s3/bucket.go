package s3

import (
	"errors"
	"net/http"

	"github.com/ecstore/ecstore/internal/object"
)

// listBuckets lists the top-level directories that can be buckets.
func (h *handler) listBuckets(req *request) error {
	infos, err := h.store.List(req.ctx, "/")
	if err != nil && !errors.Is(err, object.ErrNotExist) {
		return err
	}
	res := listAllMyBucketsResult{Owner: theOwner, Buckets: []bucketInfo{}}
	for _, in := range infos {
		if in.IsDir && bucketPathOK(in.Name) && h.canSeeBucket(req, in.Name) {
			res.Buckets = append(res.Buckets, bucketInfo{Name: in.Name, CreationDate: xmlTime(in.MTime)})
		}
	}
	return writeXML(req.w, res)
}

// createBucket makes the bucket's directory. The optional
// CreateBucketConfiguration body is read (so that its hash is checked)
// and otherwise ignored.
func (h *handler) createBucket(req *request) error {
	if !validBucketName(req.bucket) {
		return ErrInvalidBucketName.with("bucket names have 3 to 63 lower-case letters, digits, '.' and '-', and begin and end with a letter or digit")
	}
	if _, err := readAll(req.r, req.auth, 64<<10); err != nil {
		return err
	}
	isDir, err := h.store.IsDir(req.ctx, bucketPath(req.bucket))
	switch {
	case err == nil && isDir:
		return ErrBucketAlreadyOwnedByYou
	case err == nil:
		return ErrBucketAlreadyExists.with("a top-level object named %q exists", req.bucket)
	case !errors.Is(err, object.ErrNotExist):
		return err
	}
	if err := h.store.Mkdir(req.ctx, bucketPath(req.bucket)); err != nil {
		return err
	}
	req.w.Header().Set("Location", "/"+req.bucket)
	req.w.WriteHeader(http.StatusOK)
	return nil
}

func (h *handler) headBucket(req *request) error {
	if err := h.bucketExists(req.ctx, req.bucket); err != nil {
		return err
	}
	req.w.Header().Set("X-Amz-Bucket-Region", h.region())
	req.w.WriteHeader(http.StatusOK)
	return nil
}

func (h *handler) region() string {
	if h.opts.Region == "" {
		return "us-east-1"
	}
	return h.opts.Region
}

func (h *handler) getBucketLocation(req *request) error {
	if err := h.bucketExists(req.ctx, req.bucket); err != nil {
		return err
	}
	loc := h.region()
	if loc == "us-east-1" {
		loc = "" // S3 reports the classic region as empty
	}
	return writeXML(req.w, locationConstraint{Region: loc})
}

func (h *handler) getBucketVersioning(req *request) error {
	if err := h.bucketExists(req.ctx, req.bucket); err != nil {
		return err
	}
	return writeXML(req.w, versioningConfiguration{})
}

// getACL reports full control for the one owner, on buckets and objects.
func (h *handler) getACL(req *request) error {
	if err := h.bucketExists(req.ctx, req.bucket); err != nil {
		return err
	}
	if req.key != "" {
		path, dir, err := objectPath(req.bucket, req.key)
		if err != nil {
			return err
		}
		info, err := h.store.Stat(req.ctx, path)
		if err != nil || info.IsDir != dir {
			return ErrNoSuchKey
		}
	}
	var g grant
	g.Grantee.XMLNSXSI = "http://www.w3.org/2001/XMLSchema-instance"
	g.Grantee.Type = "CanonicalUser"
	g.Grantee.ID, g.Grantee.DisplayName = theOwner.ID, theOwner.DisplayName
	g.Permission = "FULL_CONTROL"
	return writeXML(req.w, accessControlPolicy{Owner: theOwner, Grants: []grant{g}})
}

// deleteBucket removes an empty bucket, and the multipart uploads still
// in progress in it.
func (h *handler) deleteBucket(req *request) error {
	if err := h.bucketExists(req.ctx, req.bucket); err != nil {
		return err
	}
	infos, err := h.store.List(req.ctx, bucketPath(req.bucket))
	if err != nil {
		return err
	}
	if len(infos) > 0 {
		return ErrBucketNotEmpty
	}
	if err := h.removeBucketUploads(req.ctx, req.bucket); err != nil {
		return err
	}
	if err := h.store.Rmdir(req.ctx, bucketPath(req.bucket)); err != nil {
		if errors.Is(err, object.ErrNotEmpty) {
			return ErrBucketNotEmpty
		}
		return err
	}
	req.w.WriteHeader(http.StatusNoContent)
	return nil
}
