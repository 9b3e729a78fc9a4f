package s3

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ecstore/ecstore/internal/access"
	"github.com/ecstore/ecstore/internal/jwtauth"
)

// AWS Signature Version 4, as S3 uses it:
// https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-authenticating-requests.html
// (Authorization header), .../sigv4-query-string-auth.html (presigned
// URLs) and .../sigv4-streaming.html (aws-chunked payloads).

const (
	sigAlgorithm    = "AWS4-HMAC-SHA256"
	amzDateFormat   = "20060102T150405Z"
	scopeTerminator = "aws4_request"
	emptySHA256     = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

	// The values of x-amz-content-sha256 besides a hex SHA-256.
	unsignedPayload          = "UNSIGNED-PAYLOAD"
	streamingSigned          = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	streamingSignedTrailer   = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
	streamingUnsignedTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"

	// maxPresignedExpiry is the longest X-Amz-Expires S3 accepts.
	maxPresignedExpiry = 7 * 24 * time.Hour
)

// auth is the signing context of a request whose signature verified.
type auth struct {
	accessKey string
	grant     *jwtauth.Grant // the key's scopes; nil: everything
	key       []byte         // the signing key of the credential scope
	amzDate   string         // the request time, as signed
	scope     string         // date/region/service/aws4_request
	signature string         // the request's signature: the seed of aws-chunked chains
	payload   string         // declared payload hash (x-amz-content-sha256)
	presigned bool
}

// verifier checks SigV4 signatures against a set of credentials.
type verifier struct {
	creds  *access.Live // access keys and their scopes
	region string       // required scope region; "" accepts any
	skew   time.Duration
	now    func() time.Time
}

// verify authenticates r, by its Authorization header or by presigned
// query parameters. The payload is not read: its hash (or chunk
// signatures) are verified while it streams, see newPayload.
func (v *verifier) verify(r *http.Request) (*auth, error) {
	q := r.URL.Query()
	if q.Has("X-Amz-Algorithm") || q.Has("X-Amz-Signature") {
		if r.Header.Get("Authorization") != "" {
			return nil, ErrInvalidArgument.with("only one auth mechanism allowed; only the X-Amz-Algorithm query parameter or the Authorization header should be specified")
		}
		return v.verifyPresigned(r, q)
	}
	h := r.Header.Get("Authorization")
	switch {
	case h == "":
		if q.Has("Signature") || q.Has("AWSAccessKeyId") {
			return nil, ErrInvalidRequest.with("Signature Version 2 is not supported; use AWS4-HMAC-SHA256")
		}
		return nil, ErrAccessDenied.with("Anonymous access is not allowed; sign the request with AWS Signature Version 4.")
	case strings.HasPrefix(h, "AWS "):
		return nil, ErrInvalidRequest.with("Signature Version 2 is not supported; use AWS4-HMAC-SHA256")
	}
	cred, signed, sig, err := parseAuthorization(h)
	if err != nil {
		return nil, err
	}
	date := r.Header.Get("X-Amz-Date")
	if date == "" {
		t, err := http.ParseTime(r.Header.Get("Date"))
		if err != nil {
			return nil, ErrAccessDenied.with("AWS authentication requires a valid Date or x-amz-date header")
		}
		date = t.UTC().Format(amzDateFormat)
	}
	t, err := time.Parse(amzDateFormat, date)
	if err != nil {
		return nil, ErrAccessDenied.with("AWS authentication requires a valid Date or x-amz-date header")
	}
	if d := v.now().Sub(t); d > v.skew || d < -v.skew {
		return nil, ErrRequestTimeTooSkewed.with("The difference between the request time (%s) and the server's time (%s) exceeds %s.",
			t.Format(time.RFC3339), v.now().UTC().Format(time.RFC3339), v.skew)
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		return nil, ErrInvalidRequest.with("Missing required header for this request: x-amz-content-sha256")
	}
	if !validPayloadHash(payload) {
		return nil, ErrInvalidArgument.with("x-amz-content-sha256 must be UNSIGNED-PAYLOAD, a STREAMING-* value or a hex SHA-256, not %q", payload)
	}
	a, err := v.check(r, cred, date, signed, sig, payload, ErrAuthHeaderMalformed, false)
	if err != nil {
		return nil, err
	}
	return a, nil
}

func (v *verifier) verifyPresigned(r *http.Request, q url.Values) (*auth, error) {
	if alg := q.Get("X-Amz-Algorithm"); alg != sigAlgorithm {
		return nil, ErrAuthQueryMalformed.with("X-Amz-Algorithm only supports %q, not %q", sigAlgorithm, alg)
	}
	for _, p := range []string{"X-Amz-Credential", "X-Amz-Signature", "X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Expires"} {
		if q.Get(p) == "" {
			return nil, ErrAuthQueryMalformed.with("Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters; %s is missing", p)
		}
	}
	date := q.Get("X-Amz-Date")
	t, err := time.Parse(amzDateFormat, date)
	if err != nil {
		return nil, ErrAuthQueryMalformed.with("X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"")
	}
	secs, err := strconv.ParseInt(q.Get("X-Amz-Expires"), 10, 64)
	if err != nil || secs < 0 {
		return nil, ErrAuthQueryMalformed.with("X-Amz-Expires should be a non-negative number of seconds")
	}
	if time.Duration(secs)*time.Second > maxPresignedExpiry {
		return nil, ErrAuthQueryMalformed.with("X-Amz-Expires must be less than a week (in seconds) that is 604800")
	}
	now := v.now()
	if t.Sub(now) > v.skew {
		return nil, ErrAccessDenied.with("Request is not valid yet")
	}
	if now.After(t.Add(time.Duration(secs) * time.Second)) {
		return nil, ErrAccessDenied.with("Request has expired")
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		payload = unsignedPayload
	}
	if !validPayloadHash(payload) {
		return nil, ErrInvalidArgument.with("x-amz-content-sha256 must be UNSIGNED-PAYLOAD, a STREAMING-* value or a hex SHA-256, not %q", payload)
	}
	return v.check(r, q.Get("X-Amz-Credential"), date, q.Get("X-Amz-SignedHeaders"), q.Get("X-Amz-Signature"), payload, ErrAuthQueryMalformed, true)
}

// check verifies the credential scope and the signature of r.
func (v *verifier) check(r *http.Request, cred, date, signedList, sig, payload string, malformed *Error, presigned bool) (*auth, error) {
	ak, scopeDate, region, service, ok := parseCredential(cred)
	if !ok {
		return nil, malformed.with("the Credential %q is malformed; expecting \"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\"", cred)
	}
	set := v.creds.Load()
	secret, known := set.Keys[ak]
	if !known {
		return nil, ErrInvalidAccessKeyID
	}
	switch {
	case scopeDate != date[:8]:
		return nil, malformed.with("the credential date %q does not match the request date %q", scopeDate, date[:8])
	case service != "s3":
		return nil, malformed.with("the credential service %q is wrong; expecting \"s3\"", service)
	case v.region != "" && region != v.region:
		return nil, malformed.with("the region %q is wrong; expecting %q", region, v.region)
	}
	signed := strings.Split(signedList, ";")
	hasHost := false
	for _, h := range signed {
		if h == "" || h != strings.ToLower(h) {
			return nil, malformed.with("SignedHeaders %q is malformed", signedList)
		}
		hasHost = hasHost || h == "host"
	}
	if !hasHost {
		return nil, ErrAccessDenied.with("the host header must be signed")
	}
	for name := range r.Header {
		if l := strings.ToLower(name); strings.HasPrefix(l, "x-amz-") && !contains(signed, l) &&
			!(presigned && l == "x-amz-content-sha256") {
			return nil, ErrAccessDenied.with("There were headers present in the request which were not signed: %s", l)
		}
	}
	scope := scopeDate + "/" + region + "/" + service + "/" + scopeTerminator
	creq := canonicalRequest(r, signed, payload, presigned)
	key := signingKey(secret, scopeDate, region, service)
	want := hex.EncodeToString(hmacSHA256(key, stringToSign(date, scope, creq)))
	if !hmac.Equal([]byte(want), []byte(strings.ToLower(sig))) {
		return nil, ErrSignatureDoesNotMatch
	}
	return &auth{accessKey: ak, grant: set.Grants[ak], key: key, amzDate: date, scope: scope, signature: want, payload: payload, presigned: presigned}, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func validPayloadHash(p string) bool {
	switch p {
	case unsignedPayload, streamingSigned, streamingSignedTrailer, streamingUnsignedTrailer:
		return true
	}
	if len(p) != 64 {
		return false
	}
	_, err := hex.DecodeString(p)
	return err == nil
}

// parseAuthorization splits an "AWS4-HMAC-SHA256 Credential=...,
// SignedHeaders=..., Signature=..." header.
func parseAuthorization(h string) (cred, signed, sig string, err error) {
	rest, ok := strings.CutPrefix(h, sigAlgorithm+" ")
	if !ok {
		return "", "", "", ErrAuthHeaderMalformed.with("the authorization header is malformed; the algorithm must be %s", sigAlgorithm)
	}
	for _, part := range strings.Split(rest, ",") {
		k, val, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			cred = val
		case "SignedHeaders":
			signed = val
		case "Signature":
			sig = val
		}
	}
	if cred == "" || signed == "" || sig == "" {
		return "", "", "", ErrAuthHeaderMalformed.with("the authorization header requires Credential, SignedHeaders and Signature")
	}
	return cred, signed, sig, nil
}

// parseCredential splits "AKID/YYYYMMDD/region/service/aws4_request".
func parseCredential(c string) (ak, date, region, service string, ok bool) {
	f := strings.Split(c, "/")
	if len(f) < 5 || f[len(f)-1] != scopeTerminator {
		return "", "", "", "", false
	}
	n := len(f)
	ak = strings.Join(f[:n-4], "/")
	date, region, service = f[n-4], f[n-3], f[n-2]
	if ak == "" || len(date) != 8 || region == "" {
		return "", "", "", "", false
	}
	if _, err := time.Parse("20060102", date); err != nil {
		return "", "", "", "", false
	}
	return ak, date, region, service, true
}

// canonicalRequest builds the SigV4 canonical request of r over the
// signed headers. The URI is the decoded path encoded again the way S3
// does it (once, '/' kept), so any equivalent encoding the client sent
// verifies.
func canonicalRequest(r *http.Request, signed []string, payload string, presigned bool) string {
	path := r.URL.Path
	if path == "" {
		path = "/"
	}
	var b strings.Builder
	b.WriteString(r.Method)
	b.WriteByte('\n')
	b.WriteString(uriEncode(path, false))
	b.WriteByte('\n')
	b.WriteString(canonicalQuery(r.URL.RawQuery, presigned))
	b.WriteByte('\n')
	for _, h := range signed {
		b.WriteString(h)
		b.WriteByte(':')
		b.WriteString(headerValue(r, h))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(strings.Join(signed, ";"))
	b.WriteByte('\n')
	b.WriteString(payload)
	return b.String()
}

// headerValue is the canonical value of header h (lowercase) in r: the
// values trimmed, inner runs of spaces collapsed, joined by commas. Go's
// server moves Host and Transfer-Encoding out of the header map.
func headerValue(r *http.Request, h string) string {
	var vals []string
	switch h {
	case "host":
		vals = []string{r.Host}
	case "transfer-encoding":
		vals = r.TransferEncoding
	default:
		vals = r.Header.Values(h)
		if len(vals) == 0 && h == "content-length" && r.ContentLength >= 0 {
			vals = []string{strconv.FormatInt(r.ContentLength, 10)}
		}
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = strings.Join(strings.Fields(v), " ")
	}
	return strings.Join(out, ",")
}

// canonicalQuery sorts the query parameters by name and value and encodes
// them the SigV4 way; presigned requests leave X-Amz-Signature out.
func canonicalQuery(raw string, presigned bool) string {
	if raw == "" {
		return ""
	}
	type kv struct{ k, v string }
	var params []kv
	for _, p := range strings.Split(raw, "&") {
		if p == "" {
			continue
		}
		k, v, _ := strings.Cut(p, "=")
		k, v = unescapeQuery(k), unescapeQuery(v)
		if presigned && k == "X-Amz-Signature" {
			continue
		}
		params = append(params, kv{uriEncode(k, true), uriEncode(v, true)})
	}
	sort.Slice(params, func(i, j int) bool {
		if params[i].k != params[j].k {
			return params[i].k < params[j].k
		}
		return params[i].v < params[j].v
	})
	parts := make([]string, len(params))
	for i, p := range params {
		parts[i] = p.k + "=" + p.v
	}
	return strings.Join(parts, "&")
}

// unescapeQuery decodes a query component as net/url does ('+' is a
// space), keeping it raw when it is not valid.
func unescapeQuery(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}

// uriEncode percent-encodes every byte except the unreserved characters
// A-Z a-z 0-9 - _ . ~ (and '/' unless encodeSlash), with upper-case hex.
func uriEncode(s string, encodeSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9',
			c == '-', c == '_', c == '.', c == '~', c == '/' && !encodeSlash:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}

func stringToSign(date, scope, canonical string) string {
	h := sha256.Sum256([]byte(canonical))
	return sigAlgorithm + "\n" + date + "\n" + scope + "\n" + hex.EncodeToString(h[:])
}

// signingKey derives the SigV4 signing key of a credential scope.
func signingKey(secret, date, region, service string) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), date)
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, service)
	return hmacSHA256(k, scopeTerminator)
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}
