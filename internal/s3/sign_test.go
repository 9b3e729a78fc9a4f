package s3

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// testSigner is a small SigV4 client signer, written apart from the
// server's verifier (so that a shared mistake does not cancel out); the
// AWS vectors in sigv4_test.go pin both.
type testSigner struct {
	ak, sk, region string
	now            func() time.Time
}

func (s testSigner) scope(t time.Time) string {
	return t.Format("20060102") + "/" + s.region + "/s3/aws4_request"
}

func (s testSigner) key(t time.Time) []byte {
	mac := func(k []byte, d string) []byte {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(d))
		return m.Sum(nil)
	}
	k := mac([]byte("AWS4"+s.sk), t.Format("20060102"))
	k = mac(k, s.region)
	k = mac(k, "s3")
	return mac(k, "aws4_request")
}

// testEscape encodes like the AWS SDKs: unreserved bytes kept, '/' kept
// when keepSlash.
func testEscape(s string, keepSlash bool) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.~", c) >= 0 || keepSlash && c == '/' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func testCanonicalQuery(q url.Values) string {
	var parts []string
	for k, vs := range q {
		for _, v := range vs {
			parts = append(parts, testEscape(k, false)+"="+testEscape(v, false))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, "&")
}

func requestHost(r *http.Request) string {
	if r.Host != "" {
		return r.Host
	}
	return r.URL.Host
}

// signedHeaderList returns the headers the signer covers: host and every
// header set on r, sorted.
func signedHeaderList(r *http.Request) []string {
	names := []string{"host"}
	for k := range r.Header {
		l := strings.ToLower(k)
		if l != "authorization" && l != "user-agent" {
			names = append(names, l)
		}
	}
	if r.ContentLength > 0 && r.Header.Get("Content-Length") == "" {
		names = append(names, "content-length")
	}
	sort.Strings(names)
	return names
}

func (s testSigner) canonical(r *http.Request, signed []string, payload string, q url.Values) string {
	var b strings.Builder
	b.WriteString(r.Method + "\n" + testEscape(r.URL.Path, true) + "\n" + testCanonicalQuery(q) + "\n")
	for _, h := range signed {
		var v string
		switch h {
		case "host":
			v = requestHost(r)
		case "content-length":
			v = strconv.FormatInt(r.ContentLength, 10)
		default:
			v = strings.Join(r.Header.Values(h), ",")
		}
		b.WriteString(h + ":" + strings.Join(strings.Fields(v), " ") + "\n")
	}
	b.WriteString("\n" + strings.Join(signed, ";") + "\n" + payload)
	return b.String()
}

func (s testSigner) signature(t time.Time, canonical string) string {
	h := sha256.Sum256([]byte(canonical))
	sts := "AWS4-HMAC-SHA256\n" + t.Format("20060102T150405Z") + "\n" + s.scope(t) + "\n" + hex.EncodeToString(h[:])
	m := hmac.New(sha256.New, s.key(t))
	m.Write([]byte(sts))
	return hex.EncodeToString(m.Sum(nil))
}

// sign adds x-amz-date, x-amz-content-sha256 (payload) and an
// Authorization header to r, and returns the signature.
func (s testSigner) sign(r *http.Request, payload string) string {
	t := s.now().UTC()
	r.Header.Set("X-Amz-Date", t.Format("20060102T150405Z"))
	r.Header.Set("X-Amz-Content-Sha256", payload)
	signed := signedHeaderList(r)
	sig := s.signature(t, s.canonical(r, signed, payload, r.URL.Query()))
	r.Header.Set("Authorization", fmt.Sprintf("AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s",
		s.ak, s.scope(t), strings.Join(signed, ";"), sig))
	return sig
}

// presign turns r (method, URL, headers to sign) into a presigned URL.
func (s testSigner) presign(r *http.Request, expires time.Duration) string {
	t := s.now().UTC()
	q := r.URL.Query()
	signed := signedHeaderList(r)
	q.Set("X-Amz-Algorithm", "AWS4-HMAC-SHA256")
	q.Set("X-Amz-Credential", s.ak+"/"+s.scope(t))
	q.Set("X-Amz-Date", t.Format("20060102T150405Z"))
	q.Set("X-Amz-Expires", strconv.Itoa(int(expires/time.Second)))
	q.Set("X-Amz-SignedHeaders", strings.Join(signed, ";"))
	sig := s.signature(t, s.canonical(r, signed, "UNSIGNED-PAYLOAD", q))
	u := *r.URL
	u.RawQuery = testCanonicalQuery(q) + "&X-Amz-Signature=" + sig
	return u.String()
}

// chunkedBody frames data as aws-chunked with chunks of size bytes,
// signed in a chain from seed when signed; trailer, if not empty, is
// "name:value" (signed too when signed).
func (s testSigner) chunkedBody(data []byte, size int, seed string, signed bool, trailer string) string {
	t := s.now().UTC()
	key := s.key(t)
	prev := seed
	mac := func(sts string) string {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(sts))
		prev = hex.EncodeToString(m.Sum(nil))
		return prev
	}
	chunkSig := func(d []byte) string {
		h := sha256.Sum256(d)
		return mac("AWS4-HMAC-SHA256-PAYLOAD\n" + t.Format("20060102T150405Z") + "\n" + s.scope(t) + "\n" + prev + "\n" +
			"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n" + hex.EncodeToString(h[:]))
	}
	var b strings.Builder
	for off := 0; ; off = min(off+size, len(data)) {
		end := min(off+size, len(data))
		d := data[off:end]
		fmt.Fprintf(&b, "%x", len(d))
		if signed {
			b.WriteString(";chunk-signature=" + chunkSig(d))
		}
		b.WriteString("\r\n")
		if len(d) == 0 {
			break
		}
		b.Write(d)
		b.WriteString("\r\n")
	}
	if trailer != "" {
		b.WriteString(trailer + "\r\n")
		if signed {
			h := sha256.Sum256([]byte(trailer + "\n"))
			sig := mac("AWS4-HMAC-SHA256-TRAILER\n" + t.Format("20060102T150405Z") + "\n" + s.scope(t) + "\n" + prev + "\n" + hex.EncodeToString(h[:]))
			b.WriteString("x-amz-trailer-signature:" + sig + "\r\n")
		}
	}
	b.WriteString("\r\n")
	return b.String()
}
