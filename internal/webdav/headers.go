package webdav

import (
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ecstore/ecstore/internal/object"
)

// errUnsatisfiable is parseRange's answer to a range that starts past the
// end of the object.
var errUnsatisfiable = errorf(http.StatusRequestedRangeNotSatisfiable, "the requested range is not satisfiable")

// parseRange interprets a Range header for an object of size bytes
// (RFC 9110 section 14.1.2): "bytes=first-last", "bytes=first-" and
// "bytes=-suffix". A header that does not parse, or that asks for more
// than one range, is ignored (partial is false: send the whole object),
// as section 14.2 allows. A range that starts at or past the end, a
// zero-length suffix, or any range of an empty object is
// errUnsatisfiable (416). A last position past the end is clamped.
func parseRange(h string, size int64) (start, length int64, partial bool, err error) {
	h = strings.TrimSpace(h)
	if len(h) < 6 || !strings.EqualFold(h[:6], "bytes=") || strings.Contains(h, ",") {
		return 0, size, false, nil
	}
	first, last, ok := strings.Cut(h[6:], "-")
	first, last = strings.TrimSpace(first), strings.TrimSpace(last)
	if !ok || !allDigits(first) || !allDigits(last) || first == "" && last == "" {
		return 0, size, false, nil
	}
	if first == "" {
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil {
			n = size // more digits than int64 holds: the whole object
		}
		if n == 0 || size == 0 {
			return 0, 0, false, errUnsatisfiable
		}
		n = min(n, size)
		return size - n, n, true, nil
	}
	s, err := strconv.ParseInt(first, 10, 64)
	if err != nil {
		return 0, 0, false, errUnsatisfiable // beyond int64: past any end
	}
	e := size - 1
	if last != "" {
		if e, err = strconv.ParseInt(last, 10, 64); err != nil {
			e = size - 1
		}
		if e < s {
			return 0, size, false, nil // invalid: ignored
		}
	}
	if s >= size {
		return 0, 0, false, errUnsatisfiable
	}
	e = min(e, size-1)
	return s, e - s + 1, true, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// digestAlgorithms are the instance digests served (RFC 3230 section
// 4.1.1 names; matched case-insensitively).
var digestAlgorithms = []string{"adler32", "crc32c"}

// parseWantDigest returns the supported algorithms that a Want-Digest
// header (RFC 3230 section 4.3.1: "alg[;q=value], ...") accepts, most
// preferred first (by q-value, then by order in the header). Algorithms
// with q=0 and unknown ones are left out; a malformed q-value counts as 1.
func parseWantDigest(h string) []string {
	type choice struct {
		alg string
		q   float64
	}
	var cs []choice
	for _, item := range strings.Split(h, ",") {
		name, params, _ := strings.Cut(item, ";")
		name = strings.ToLower(strings.TrimSpace(name))
		if !slices.Contains(digestAlgorithms, name) || slices.ContainsFunc(cs, func(c choice) bool { return c.alg == name }) {
			continue
		}
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			k, v, ok := strings.Cut(p, "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f >= 0 && f <= 1 {
					q = f
				}
			}
		}
		if q > 0 {
			cs = append(cs, choice{name, q})
		}
	}
	slices.SortStableFunc(cs, func(a, b choice) int {
		switch {
		case a.q > b.q:
			return -1
		case a.q < b.q:
			return 1
		}
		return 0
	})
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.alg
	}
	return out
}

// digestValue formats an object's stored checksum as RFC 3230 instance
// digest: adler32 as 8 lower-case hex digits (RFC 3230 section 4.1.1),
// crc32c as the base64 of its 4 big-endian bytes (what XRootD's HTTP
// server and davix use). It returns "" when the object has none.
func digestValue(info *object.Info, alg string) string {
	var sum string
	switch alg {
	case "adler32":
		sum = info.Adler32
	case "crc32c":
		sum = info.CRC32C
	}
	b, err := hex.DecodeString(sum)
	if err != nil || len(b) != 4 {
		return ""
	}
	if alg == "crc32c" {
		return base64.StdEncoding.EncodeToString(b)
	}
	return strings.ToLower(sum)
}

// digestHeader returns the Digest header for a Want-Digest header, or "".
func digestHeader(want string, info *object.Info) string {
	var parts []string
	for _, alg := range parseWantDigest(want) {
		if v := digestValue(info, alg); v != "" {
			parts = append(parts, alg+"="+v)
		}
	}
	return strings.Join(parts, ",")
}

// etagOf is an object's entity tag: its version, which changes with
// every write. Directories have none.
func etagOf(info *object.Info) string {
	if info.IsDir || info.Version == "" {
		return ""
	}
	return `"` + string(info.Version) + `"`
}

// etagListMatches reports whether an If-Match or If-None-Match list
// ("*" or entity tags) matches etag; weak compares W/"x" equal to "x".
func etagListMatches(list, etag string, weak bool) bool {
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimSpace(t)
		if t == "*" {
			return etag != ""
		}
		if strings.HasPrefix(t, "W/") {
			if !weak {
				continue
			}
			t = t[2:]
		}
		if t != "" && t == etag {
			return true
		}
	}
	return false
}

// preconditions evaluates the conditional headers (RFC 9110 section
// 13.2.2 order) for a resource with entity tag etag (empty when it does
// not exist) and modification time mtime. It returns 0 to go on, 304 Not
// Modified (GET and HEAD) or 412 Precondition Failed.
func preconditions(r *http.Request, etag string, mtime time.Time) int {
	exists := etag != ""
	mt := mtime.Truncate(time.Second)
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	if v := r.Header.Get("If-Match"); v != "" {
		if !etagListMatches(v, etag, false) {
			return http.StatusPreconditionFailed
		}
	} else if v := r.Header.Get("If-Unmodified-Since"); v != "" && exists {
		if t, err := http.ParseTime(v); err == nil && mt.After(t) {
			return http.StatusPreconditionFailed
		}
	}
	if v := r.Header.Get("If-None-Match"); v != "" {
		if etagListMatches(v, etag, true) {
			if get {
				return http.StatusNotModified
			}
			return http.StatusPreconditionFailed
		}
	} else if v := r.Header.Get("If-Modified-Since"); v != "" && get && exists {
		if t, err := http.ParseTime(v); err == nil && !mt.After(t) {
			return http.StatusNotModified
		}
	}
	return 0
}

// rangeStillValid evaluates If-Range (RFC 9110 section 13.1.5): the Range
// header applies only if the representation is the one the client has.
func rangeStillValid(r *http.Request, etag string, mtime time.Time) bool {
	v := strings.TrimSpace(r.Header.Get("If-Range"))
	if v == "" {
		return true
	}
	if strings.HasPrefix(v, `"`) {
		return v == etag
	}
	t, err := http.ParseTime(v)
	return err == nil && mtime.Truncate(time.Second).Equal(t)
}
