package s3

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash/crc64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/access"
)

// The vectors below are the worked examples of the Amazon S3 API
// Reference (Authenticating Requests, AWS Signature Version 4):
//
//   - "Examples: Signature Calculations" in sig-v4-header-based-auth.html
//     (GET Object with Range, PUT Object, GET Bucket Lifecycle, GET Bucket),
//   - "An Example" in sigv4-query-string-auth.html (presigned GET),
//   - "Example: PUT Object" in sigv4-streaming.html (aws-chunked, 64 KiB
//     chunks of 'a'), and the trailer example in
//     sigv4-streaming-trailers.html (the same payload with a signed
//     x-amz-checksum-crc32c trailer).
//
// They all use access key AKIAIOSFODNN7EXAMPLE, the secret below, region
// us-east-1 and the time 20130524T000000Z.
const (
	awsExampleAK     = "AKIAIOSFODNN7EXAMPLE"
	awsExampleSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	awsExampleDate   = "20130524T000000Z"
	awsExampleScope  = awsExampleAK + "/20130524/us-east-1/s3/aws4_request"
)

func awsExampleVerifier(at time.Time) *verifier {
	return &verifier{creds: liveKeys(map[string]string{awsExampleAK: awsExampleSecret}), skew: 15 * time.Minute,
		now: func() time.Time { return at }}
}

func awsExampleTime(t *testing.T) time.Time {
	at, err := time.Parse(amzDateFormat, awsExampleDate)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

func authHeader(signed, sig string) string {
	return "AWS4-HMAC-SHA256 Credential=" + awsExampleScope + ",SignedHeaders=" + signed + ",Signature=" + sig
}

func TestAWSHeaderVectors(t *testing.T) {
	at := awsExampleTime(t)
	type tc struct {
		name   string
		req    func() *http.Request
		sig    string
		signed string
	}
	put := func() *http.Request {
		r := httptest.NewRequest(http.MethodPut, "/test$file.text", strings.NewReader("Welcome to Amazon S3."))
		r.Header.Set("Date", "Fri, 24 May 2013 00:00:00 GMT")
		r.Header.Set("X-Amz-Storage-Class", "REDUCED_REDUNDANCY")
		r.Header.Set("X-Amz-Content-Sha256", "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072")
		return r
	}
	cases := []tc{
		{"GET object with range", func() *http.Request {
			r := httptest.NewRequest(http.MethodGet, "/test.txt", nil)
			r.Header.Set("Range", "bytes=0-9")
			r.Header.Set("X-Amz-Content-Sha256", emptySHA256)
			return r
		}, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41", "host;range;x-amz-content-sha256;x-amz-date"},
		{"PUT object", put, "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd",
			"date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class"},
		{"GET bucket lifecycle", func() *http.Request {
			r := httptest.NewRequest(http.MethodGet, "/?lifecycle", nil)
			r.Header.Set("X-Amz-Content-Sha256", emptySHA256)
			return r
		}, "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543", "host;x-amz-content-sha256;x-amz-date"},
		{"GET bucket (list objects)", func() *http.Request {
			r := httptest.NewRequest(http.MethodGet, "/?max-keys=2&prefix=J", nil)
			r.Header.Set("X-Amz-Content-Sha256", emptySHA256)
			return r
		}, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7", "host;x-amz-content-sha256;x-amz-date"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.req()
			r.Host = "examplebucket.s3.amazonaws.com"
			r.Header.Set("X-Amz-Date", awsExampleDate)
			r.Header.Set("Authorization", authHeader(c.signed, c.sig))
			a, err := awsExampleVerifier(at).verify(r)
			if err != nil {
				t.Fatalf("documented request rejected: %v", err)
			}
			if a.signature != c.sig || a.accessKey != awsExampleAK {
				t.Errorf("auth = %+v", a)
			}
			// Any change to a signed part breaks the signature.
			r2 := c.req()
			r2.Host = "examplebucket.s3.amazonaws.com"
			r2.Header.Set("X-Amz-Date", awsExampleDate)
			r2.Header.Set("Authorization", authHeader(c.signed, c.sig))
			r2.URL.Path += "x"
			if _, err := awsExampleVerifier(at).verify(r2); !errors.Is(err, ErrSignatureDoesNotMatch) {
				t.Errorf("altered path: err = %v, want SignatureDoesNotMatch", err)
			}
		})
	}
	// The PUT example's body hashes to its declared x-amz-content-sha256.
	r := put()
	r.Host = "examplebucket.s3.amazonaws.com"
	r.Header.Set("X-Amz-Date", awsExampleDate)
	r.Header.Set("Authorization", authHeader(cases[1].signed, cases[1].sig))
	a, err := awsExampleVerifier(at).verify(r)
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPayload(r, a, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(p); err != nil || string(b) != "Welcome to Amazon S3." {
		t.Fatalf("payload = %q, %v", b, err)
	}
}

func TestAWSPresignedVector(t *testing.T) {
	at := awsExampleTime(t)
	const url = "/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
	for _, c := range []struct {
		name string
		now  time.Time
		url  string
		want error
	}{
		{"valid", at.Add(time.Hour), url, nil},
		{"at expiry", at.Add(86400 * time.Second), url, nil},
		{"expired", at.Add(86401 * time.Second), url, ErrAccessDenied},
		{"not yet valid", at.Add(-time.Hour), url, ErrAccessDenied},
		{"tampered signature", at, strings.Replace(url, "Signature=aeeed", "Signature=beeed", 1), ErrSignatureDoesNotMatch},
		{"longer expiry", at, strings.Replace(url, "86400", "86401", 1), ErrSignatureDoesNotMatch},
		{"expiry over a week", at, strings.Replace(url, "86400", "604801", 1), ErrAuthQueryMalformed},
		{"no signature", at, url[:strings.Index(url, "&X-Amz-Signature")], ErrAuthQueryMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, c.url, nil)
			r.Host = "examplebucket.s3.amazonaws.com"
			_, err := awsExampleVerifier(c.now).verify(r)
			if !errors.Is(err, c.want) && !(err == nil && c.want == nil) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}

// awsStreamingExample is the sigv4-streaming(-trailers) example request.
type awsStreamingExample struct {
	mode, signed, seed  string
	chunkSigs           [3]string
	trailer, trailerSig string
}

var (
	awsStreaming = awsStreamingExample{
		mode:   streamingSigned,
		signed: "content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class",
		seed:   "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9",
		chunkSigs: [3]string{
			"ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
			"0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
			"b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
		},
	}
	awsStreamingTrailer = awsStreamingExample{
		mode:   streamingSignedTrailer,
		signed: "content-encoding;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class;x-amz-trailer",
		seed:   "106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e",
		chunkSigs: [3]string{
			"b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2",
			"1c1344b170168f8e65b41376b44b20fe354e373826ccbbe2c1d40a8cae51e5c7",
			"2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992",
		},
		trailer:    "x-amz-checksum-crc32c:sOO8/Q==",
		trailerSig: "d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435",
	}
	awsChunk1 = strings.Repeat("a", 65536)
	awsChunk2 = strings.Repeat("a", 1024)
)

func (e awsStreamingExample) body() string {
	b := "10000;chunk-signature=" + e.chunkSigs[0] + "\r\n" + awsChunk1 + "\r\n" +
		"400;chunk-signature=" + e.chunkSigs[1] + "\r\n" + awsChunk2 + "\r\n" +
		"0;chunk-signature=" + e.chunkSigs[2] + "\r\n"
	if e.trailer != "" {
		b += e.trailer + "\r\n" + "x-amz-trailer-signature:" + e.trailerSig + "\r\n"
	}
	return b + "\r\n"
}

func (e awsStreamingExample) request(body string) *http.Request {
	r := httptest.NewRequest(http.MethodPut, "/examplebucket/chunkObject.txt", strings.NewReader(body))
	r.Host = "s3.amazonaws.com"
	r.Header.Set("X-Amz-Date", awsExampleDate)
	r.Header.Set("X-Amz-Storage-Class", "REDUCED_REDUNDANCY")
	r.Header.Set("X-Amz-Content-Sha256", e.mode)
	r.Header.Set("Content-Encoding", "aws-chunked")
	r.Header.Set("X-Amz-Decoded-Content-Length", "66560")
	r.Header.Set("Content-Length", "66824")
	if e.trailer != "" {
		r.Header.Set("X-Amz-Trailer", "x-amz-checksum-crc32c")
	}
	r.Header.Set("Authorization", authHeader(e.signed, e.seed))
	return r
}

func readExample(t *testing.T, e awsStreamingExample, body string) ([]byte, error) {
	t.Helper()
	r := e.request(body)
	a, err := awsExampleVerifier(awsExampleTime(t)).verify(r)
	if err != nil {
		t.Fatalf("seed signature rejected: %v", err)
	}
	p, err := newPayload(r, a, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	return io.ReadAll(p)
}

func TestAWSStreamingVectors(t *testing.T) {
	for _, e := range []awsStreamingExample{awsStreaming, awsStreamingTrailer} {
		t.Run(e.mode, func(t *testing.T) {
			got, err := readExample(t, e, e.body())
			if err != nil {
				t.Fatalf("documented body rejected: %v", err)
			}
			if string(got) != awsChunk1+awsChunk2 {
				t.Fatalf("decoded %d bytes", len(got))
			}
		})
	}
}

func TestChunkedTampering(t *testing.T) {
	e := awsStreaming
	good := e.body()
	chunk := func(data, sig string) string {
		return strings.TrimLeft(hex.EncodeToString([]byte{byte(len(data) >> 16), byte(len(data) >> 8), byte(len(data))}), "0") +
			";chunk-signature=" + sig + "\r\n" + data + "\r\n"
	}
	final := "0;chunk-signature=" + e.chunkSigs[2] + "\r\n\r\n"
	cases := []struct {
		name, body string
		want       error
	}{
		{"data byte changed", strings.Replace(good, "a\r\n400;", "b\r\n400;", 1), ErrSignatureDoesNotMatch},
		{"chunk signature changed", strings.Replace(good, e.chunkSigs[1], strings.Repeat("0", 64), 1), ErrSignatureDoesNotMatch},
		{"chunk signature missing", strings.Replace(good, "400;chunk-signature="+e.chunkSigs[1], "400", 1), ErrSignatureDoesNotMatch},
		{"final signature changed", strings.Replace(good, e.chunkSigs[2], e.chunkSigs[1], 1), ErrSignatureDoesNotMatch},
		{"chunks reordered", chunk(awsChunk2, e.chunkSigs[1]) + chunk(awsChunk1, e.chunkSigs[0]) + final, ErrSignatureDoesNotMatch},
		{"chunk dropped", chunk(awsChunk1, e.chunkSigs[0]) + final, ErrSignatureDoesNotMatch},
		{"truncated in data", good[:1000], ErrIncompleteBody},
		{"truncated before final chunk", chunk(awsChunk1, e.chunkSigs[0]) + chunk(awsChunk2, e.chunkSigs[1]), ErrIncompleteBody},
		{"bad size", strings.Replace(good, "400;", "4x0;", 1), ErrInvalidRequest},
		{"missing CRLF", strings.Replace(good, "a\r\n400;", "aa\n400;", 1), ErrInvalidRequest},
		{"trailer on untrailed body", strings.TrimSuffix(good, "\r\n") + "x-amz-checksum-crc32:NSRBwg==\r\n\r\n", ErrInvalidRequest},
		{"huge line", strings.Repeat("1", 70000) + "\r\n", ErrInvalidRequest},
		{"data after the end", good + "x", ErrInvalidRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := readExample(t, e, c.body)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}

func TestTrailerTampering(t *testing.T) {
	e := awsStreamingTrailer
	good := e.body()
	cases := []struct {
		name, body string
		want       error
	}{
		{"checksum changed", strings.Replace(good, "sOO8/Q==", "AAAAAA==", 1), ErrSignatureDoesNotMatch},
		{"trailer added", strings.Replace(good, e.trailer+"\r\n", e.trailer+"\r\nx-amz-meta-x:1\r\n", 1), ErrSignatureDoesNotMatch},
		{"trailer dropped", strings.Replace(good, e.trailer+"\r\n", "", 1), ErrSignatureDoesNotMatch},
		{"trailer signature changed", strings.Replace(good, e.trailerSig, e.seed, 1), ErrSignatureDoesNotMatch},
		{"trailer signature missing", strings.Replace(good, "x-amz-trailer-signature:"+e.trailerSig+"\r\n", "", 1), ErrSignatureDoesNotMatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := readExample(t, e, c.body)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}

// The test signer and the verifier agree on requests with awkward paths
// and queries, and the verifier refuses what it should.
func TestSignRoundTrip(t *testing.T) {
	now := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	s := testSigner{ak: "AK", sk: "secret/+=", region: "us-east-1", now: func() time.Time { return now }}
	v := &verifier{creds: liveKeys(map[string]string{"AK": "secret/+="}), skew: 15 * time.Minute, now: func() time.Time { return now }}
	paths := []string{"/", "/b", "/b/", "/b/a b+c%d", "/b/ü/ñ?x=1&y=a%20b&y=a+c&z", "/b/k?prefix=a/b&delimiter=/&list-type=2", "/b/k?uploads",
		"/b/k~._-*'()!$&,;=@:"}
	for _, p := range paths {
		t.Run(p, func(t *testing.T) {
			u := "http://h.example:9000" + strings.ReplaceAll(strings.ReplaceAll(p, " ", "%20"), "%d", "%25d")
			r, err := http.NewRequest(http.MethodGet, u, nil)
			if err != nil {
				t.Fatal(err)
			}
			r.Header.Set("X-Amz-Meta-Foo", "  a   b ")
			s.sign(r, emptySHA256)
			sr := serverSide(t, r, nil)
			if _, err := v.verify(sr); err != nil {
				t.Fatalf("header auth: %v", err)
			}
			r2, _ := http.NewRequest(http.MethodGet, u, nil)
			pu := s.presign(r2, time.Hour)
			r3, _ := http.NewRequest(http.MethodGet, pu, nil)
			if _, err := v.verify(serverSide(t, r3, nil)); err != nil {
				t.Fatalf("presigned %s: %v", pu, err)
			}
		})
	}
	r, _ := http.NewRequest(http.MethodGet, "http://h/b/k", nil)
	s.sign(r, emptySHA256)
	for _, c := range []struct {
		name string
		mod  func(r *http.Request)
		v    *verifier
		want error
	}{
		{"unsigned x-amz header", func(r *http.Request) { r.Header.Set("X-Amz-Meta-Evil", "1") }, v, ErrAccessDenied},
		{"changed header value", func(r *http.Request) { r.Header.Set("X-Amz-Content-Sha256", unsignedPayload) }, v, ErrSignatureDoesNotMatch},
		{"other host", func(r *http.Request) { r.Host = "evil" }, v, ErrSignatureDoesNotMatch},
		{"wrong secret", func(*http.Request) {}, &verifier{creds: liveKeys(map[string]string{"AK": "other"}), skew: time.Minute, now: v.now}, ErrSignatureDoesNotMatch},
		{"unknown key", func(*http.Request) {}, &verifier{creds: liveKeys(map[string]string{"AK2": "secret"}), skew: time.Minute, now: v.now}, ErrInvalidAccessKeyID},
		{"clock skew", func(*http.Request) {}, &verifier{creds: v.creds, skew: 15 * time.Minute, now: func() time.Time { return now.Add(16 * time.Minute) }}, ErrRequestTimeTooSkewed},
		{"region pinned", func(*http.Request) {}, &verifier{creds: v.creds, region: "eu-west-1", skew: time.Minute, now: v.now}, ErrAuthHeaderMalformed},
		{"no auth", func(r *http.Request) { r.Header.Del("Authorization") }, v, ErrAccessDenied},
		{"sigv2", func(r *http.Request) { r.Header.Set("Authorization", "AWS AK:abc") }, v, ErrInvalidRequest},
		{"no payload hash", func(r *http.Request) { r.Header.Del("X-Amz-Content-Sha256") }, v, ErrInvalidRequest},
		{"malformed", func(r *http.Request) { r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AK/x") }, v, ErrAuthHeaderMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			sr := serverSide(t, r, nil)
			c.mod(sr)
			if _, err := c.v.verify(sr); !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}

// serverSide turns a client request into what a handler receives.
func serverSide(t *testing.T, r *http.Request, body []byte) *http.Request {
	t.Helper()
	sr := httptest.NewRequest(r.Method, r.URL.RequestURI(), bytes.NewReader(body))
	sr.Host = requestHost(r)
	for k, v := range r.Header {
		sr.Header[k] = append([]string(nil), v...)
	}
	return sr
}

func TestPayloadChecks(t *testing.T) {
	now := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	s := testSigner{ak: "AK", sk: "sk", region: "r", now: func() time.Time { return now }}
	v := &verifier{creds: liveKeys(map[string]string{"AK": "sk"}), skew: 15 * time.Minute, now: func() time.Time { return now }}
	data := bytes.Repeat([]byte("0123456789"), 5000)
	sum := sha256.Sum256(data)
	hexSum := hex.EncodeToString(sum[:])
	type tc struct {
		name    string
		payload string
		body    string
		hdr     map[string]string
		want    error
	}
	crc := "x-amz-checksum-crc32:" + b64(crc32IEEE(data))
	cases := []tc{
		{"sha256", hexSum, string(data), nil, nil},
		{"sha256 mismatch", hexSum, string(data[1:]) + "x", nil, ErrContentSHA256Mismatch},
		{"unsigned", unsignedPayload, string(data), nil, nil},
		{"content-md5", unsignedPayload, string(data), map[string]string{"Content-MD5": b64(md5sum(data))}, nil},
		{"content-md5 mismatch", unsignedPayload, string(data), map[string]string{"Content-MD5": b64(md5sum(data[1:]))}, ErrBadDigest},
		{"checksum header", unsignedPayload, string(data), map[string]string{"X-Amz-Checksum-Crc32": b64(crc32IEEE(data))}, nil},
		{"checksum header mismatch", unsignedPayload, string(data), map[string]string{"X-Amz-Checksum-Crc32": b64(crc32IEEE(data[1:]))}, ErrBadDigest},
		{"signed chunks", streamingSigned, "", nil, nil},
		{"signed chunks + trailer", streamingSignedTrailer, crc, map[string]string{"X-Amz-Trailer": "x-amz-checksum-crc32"}, nil},
		{"signed chunks + bad trailer", streamingSignedTrailer, "x-amz-checksum-crc32:AAAAAA==", map[string]string{"X-Amz-Trailer": "x-amz-checksum-crc32"}, ErrBadDigest},
		{"unsigned chunks + trailer", streamingUnsignedTrailer, crc, map[string]string{"X-Amz-Trailer": "x-amz-checksum-crc32"}, nil},
		{"unsigned chunks + bad trailer", streamingUnsignedTrailer, "x-amz-checksum-crc32:AAAAAA==", map[string]string{"X-Amz-Trailer": "x-amz-checksum-crc32"}, ErrBadDigest},
		{"unsigned chunks, trailer missing", streamingUnsignedTrailer, "", map[string]string{"X-Amz-Trailer": "x-amz-checksum-crc32"}, ErrInvalidRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, _ := http.NewRequest(http.MethodPut, "http://h/b/k", nil)
			for k, v := range c.hdr {
				r.Header.Set(k, v)
			}
			if strings.HasPrefix(c.payload, "STREAMING") {
				r.Header.Set("X-Amz-Decoded-Content-Length", "50000")
				r.Header.Set("Content-Encoding", "aws-chunked")
			}
			seed := s.sign(r, c.payload)
			body := c.body
			if strings.HasPrefix(c.payload, "STREAMING") {
				body = s.chunkedBody(data, 8192, seed, c.payload != streamingUnsignedTrailer, c.body)
			}
			sr := serverSide(t, r, []byte(body))
			a, err := v.verify(sr)
			if err != nil {
				t.Fatal(err)
			}
			p, err := newPayload(sr, a, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(p)
			if c.want == nil {
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("read %d bytes, %v", len(got), err)
				}
				if !bytes.Equal(p.MD5(), md5sum(data)) {
					t.Fatal("md5 differs")
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
	// Limits: a payload over the maximum fails, as does a short body.
	r, _ := http.NewRequest(http.MethodPut, "http://h/b/k", nil)
	s.sign(r, unsignedPayload)
	sr := serverSide(t, r, data)
	a, _ := v.verify(sr)
	p, _ := newPayload(sr, a, 100)
	if p != nil {
		t.Fatal("declared length over the maximum accepted")
	}
	sr = serverSide(t, r, data)
	sr.ContentLength = -1
	p, _ = newPayload(sr, a, 100)
	if _, err := io.ReadAll(p); !errors.Is(err, ErrEntityTooLarge) {
		t.Fatalf("over maximum: %v", err)
	}
	sr = serverSide(t, r, data)
	sr.ContentLength = int64(len(data)) + 1
	p, _ = newPayload(sr, a, 1<<20)
	if _, err := io.ReadAll(p); !errors.Is(err, ErrIncompleteBody) {
		t.Fatalf("short body: %v", err)
	}
}

// CRC-64/NVME check value from the CRC catalogue (reveng): "123456789".
func TestCRC64NVME(t *testing.T) {
	if got := crc64.Checksum([]byte("123456789"), crc64NVME); got != 0xAE8B14860A799888 {
		t.Fatalf("crc64nvme = %x", got)
	}
}

// liveKeys is a credential set of keys alone.
func liveKeys(keys map[string]string) *access.Live {
	return access.NewLive(&access.Set{Keys: keys})
}
