package s3

import (
	"strings"

	"github.com/ecstore/ecstore/internal/node"
)

// Key mapping. A bucket is a top-level directory; key k of bucket b is
// the object at path /b/k. Keys are paths, so:
//
//   - A key whose '/'-separated elements include an empty one (a leading
//     '/', "//") or "." or ".." has no path and is refused with
//     InvalidArgument, as are elements longer than node.MaxNameLen bytes,
//     control characters, and names reserved for temporary files.
//   - A key ending in '/' is a directory marker: PUT with an empty body
//     makes the directory, GET/HEAD answer with an empty object when the
//     directory exists, DELETE removes it when empty. Listings show an
//     empty directory as such a key; a non-empty directory shows only its
//     contents (or its common prefix).
//   - "a" and "a/b" cannot both exist: writing one while the other exists
//     fails with KeyConflict (409).
//   - Deleting a key removes the directories it leaves empty, up to the
//     bucket, so listings do not grow phantom "dir/" markers.

// maxKeyLen is S3's key length limit in bytes.
const maxKeyLen = 1024

// validBucketName reports whether name follows the S3 bucket naming
// rules for new buckets: 3-63 characters of lower-case letters, digits,
// '.' and '-', beginning and ending with a letter or digit, no "..", not
// an IP address.
func validBucketName(name string) bool {
	if len(name) < 3 || len(name) > 63 || strings.Contains(name, "..") {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && c != '.' && c != '-' || (i == 0 || i == len(name)-1) && !alnum {
			return false
		}
	}
	dots, digits := 0, true
	for _, c := range name {
		if c == '.' {
			dots++
		} else if c < '0' || c > '9' {
			digits = false
		}
	}
	return !(dots == 3 && digits)
}

// bucketPathOK reports whether name can address an existing bucket: any
// top-level directory made by other frontends qualifies if it is one
// path element that does not start with '.' (names starting with '.' are
// reserved, e.g. for multipart uploads).
func bucketPathOK(name string) bool {
	return name != "" && len(name) <= 63 && !strings.HasPrefix(name, ".") &&
		!strings.ContainsAny(name, "/\\") && node.CheckPath("/"+name) == nil
}

// bucketPath is the directory of bucket b.
func bucketPath(b string) string { return "/" + b }

// objectPath maps key in bucket to its object path. dir reports a
// directory marker key (trailing '/'), whose path is the directory.
func objectPath(bucket, key string) (path string, dir bool, err error) {
	if len(key) > maxKeyLen {
		return "", false, ErrKeyTooLong.with("keys are limited to %d bytes", maxKeyLen)
	}
	if key == "" {
		return "", false, ErrInvalidArgument.with("empty key")
	}
	k := key
	if strings.HasSuffix(k, "/") {
		dir = true
		k = k[:len(k)-1]
	}
	for _, el := range strings.Split(k, "/") {
		switch {
		case el == "" || el == "." || el == "..":
			return "", false, ErrInvalidArgument.with("key %q cannot be stored: ecstore keeps keys as paths, so a key may not start with '/', contain \"//\" or have \".\" or \"..\" elements", key)
		case len(el) > node.MaxNameLen:
			return "", false, ErrKeyTooLong.with("key %q has a '/'-separated element longer than %d bytes", key, node.MaxNameLen)
		case node.IsTemp(el):
			return "", false, ErrInvalidArgument.with("key %q uses a name reserved for temporary files", key)
		}
	}
	path = bucketPath(bucket) + "/" + k
	if err := node.CheckPath(path); err != nil {
		return "", false, ErrInvalidArgument.with("key %q cannot be stored: %v", key, err)
	}
	return path, dir, nil
}

// parentDir returns the directory holding path.
func parentDir(path string) string {
	d, _ := node.Split(path)
	return d
}
