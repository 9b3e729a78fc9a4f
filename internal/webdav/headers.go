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

// errUnsatisfiable is parseRanges' answer to ranges that all start past
// the end of the object.
var errUnsatisfiable = errorf(http.StatusRequestedRangeNotSatisfiable, "the requested range is not satisfiable")

// byteRange is a part of an object: length bytes from start.
type byteRange struct{ start, length int64 }

// maxRanges is the most ranges one request may ask for; a Range header
// with more is ignored (the whole object is sent), as Apache and nginx do
// past their limits. ROOT's and uproot's vector reads send tens to a few
// hundred.
const maxRanges = 4096

// parseRanges interprets a Range header for an object of size bytes
// (RFC 9110 section 14.1.2): a comma-separated list of "first-last",
// "first-" and "-suffix" ranges after "bytes=". It returns nil (send the
// whole object, as section 14.2 allows) for a header that does not parse,
// asks for more than maxRanges ranges, or for more bytes in all than the
// object has (ranges that overlap, a way to make a small request cost a
// large answer). Ranges that start at or past the end, and zero-length
// suffixes, are left out; when none is left the answer is
// errUnsatisfiable (416). A last position past the end is clamped. The
// ranges keep the order of the header.
func parseRanges(h string, size int64) ([]byteRange, error) {
	h = strings.TrimSpace(h)
	if len(h) < 6 || !strings.EqualFold(h[:6], "bytes=") {
		return nil, nil
	}
	var out []byteRange
	specs, unsatisfiable, total := 0, false, int64(0)
	for spec := range strings.SplitSeq(h[6:], ",") {
		spec = strings.TrimSpace(spec)
		if spec == "" {
			continue // empty list elements are allowed (RFC 9110 section 5.6.1)
		}
		if specs++; specs > maxRanges {
			return nil, nil
		}
		r, ok, err := parseRangeSpec(spec, size)
		switch {
		case err != nil:
			unsatisfiable = true
		case !ok:
			return nil, nil
		default:
			if total += r.length; total > size {
				return nil, nil
			}
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		if unsatisfiable {
			return nil, errUnsatisfiable
		}
		return nil, nil
	}
	return out, nil
}

// parseRangeSpec interprets one range of a Range header: ok is false
// when it does not parse, and err errUnsatisfiable when it lies past the
// end of the object.
func parseRangeSpec(spec string, size int64) (byteRange, bool, error) {
	first, last, ok := strings.Cut(spec, "-")
	first, last = strings.TrimSpace(first), strings.TrimSpace(last)
	if !ok || !allDigits(first) || !allDigits(last) || first == "" && last == "" {
		return byteRange{}, false, nil
	}
	if first == "" {
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil {
			n = size // more digits than int64 holds: the whole object
		}
		if n == 0 || size == 0 {
			return byteRange{}, true, errUnsatisfiable
		}
		n = min(n, size)
		return byteRange{size - n, n}, true, nil
	}
	s, err := strconv.ParseInt(first, 10, 64)
	if err != nil {
		return byteRange{}, true, errUnsatisfiable // beyond int64: past any end
	}
	e := size - 1
	if last != "" {
		if e, err = strconv.ParseInt(last, 10, 64); err != nil {
			e = size - 1
		}
		if e < s {
			return byteRange{}, false, nil // invalid: the header is ignored
		}
	}
	if s >= size {
		return byteRange{}, true, errUnsatisfiable
	}
	e = min(e, size-1)
	return byteRange{s, e - s + 1}, true, nil
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
