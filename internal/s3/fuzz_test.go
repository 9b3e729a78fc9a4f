package s3

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/fuzzhttp"
	"github.com/ecstore/ecstore/internal/testcluster"
)

// How FuzzRequest authenticates a request.
const (
	fuzzSignBody     = iota // Authorization with the body's SHA-256
	fuzzSignUnsigned        // Authorization with UNSIGNED-PAYLOAD
	fuzzPresign             // a presigned URL
	fuzzRawAuth             // the fuzzed headers alone (malformed auth)
	fuzzAuthModes
)

var fuzzMethods = []string{"GET", "PUT", "POST", "HEAD", "DELETE", "OPTIONS", "PATCH"}

// FuzzRequest sends arbitrary requests — method, target (path and
// query), headers and body — mostly validly signed, so that they reach
// every operation's parsing rather than stop at authentication. Every
// answer must be a well-formed S3 answer: no panic, no server error
// (other than NotImplemented) on a healthy cluster, and an XML error body
// for every error to a request that may carry one.
func FuzzRequest(f *testing.F) {
	seeds := []struct {
		method      uint8
		auth        uint8
		target, hdr string
		body        string
	}{
		{1, fuzzSignBody, "/bkt", "", ""},
		{1, fuzzSignBody, "/bkt/k", "Content-Type: text/plain\nx-amz-meta-a: 1", "hello"},
		{0, fuzzSignBody, "/bkt/k", "Range: bytes=1-3", ""},
		{0, fuzzSignBody, "/bkt/k", "Range: bytes=-0\nIf-None-Match: *", ""},
		{3, fuzzSignBody, "/bkt/k", "If-Modified-Since: Mon, 02 Jan 2006 15:04:05 GMT", ""},
		{0, fuzzSignBody, "/bkt?list-type=2&prefix=k&delimiter=/&max-keys=1", "", ""},
		{0, fuzzSignBody, "/bkt?marker=a&max-keys=-1", "", ""},
		{0, fuzzSignBody, "/?location", "", ""},
		{1, fuzzSignBody, "/bkt/c", "x-amz-copy-source: /bkt/k\nx-amz-metadata-directive: REPLACE", ""},
		{1, fuzzSignBody, "/bkt/c", "x-amz-copy-source: bkt/../k", ""},
		{2, fuzzSignBody, "/bkt/m?uploads", "", ""},
		{1, fuzzSignBody, "/bkt/m?partNumber=1&uploadId=0000", "", "part"},
		{2, fuzzSignBody, "/bkt/m?uploadId=0000", "", "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>\"x\"</ETag></Part></CompleteMultipartUpload>"},
		{0, fuzzSignBody, "/bkt/m?uploadId=0000&part-number-marker=2", "", ""},
		{0, fuzzSignBody, "/bkt?uploads&key-marker=a&upload-id-marker=b", "", ""},
		{2, fuzzSignBody, "/bkt?delete", "Content-MD5: 1B2M2Y8AsgTpgAmY7PhCfg==", "<Delete><Object><Key>k</Key></Object><Quiet>true</Quiet></Delete>"},
		{4, fuzzSignBody, "/bkt/k", "", ""},
		{4, fuzzSignBody, "/bkt", "", ""},
		{1, fuzzSignUnsigned, "/bkt/u", "Content-MD5: xxxx", "unsigned"},
		{1, fuzzSignBody, "/bkt/s", "Content-Encoding: aws-chunked\nx-amz-decoded-content-length: 5", "5;chunk-signature=00\r\nhello\r\n0;chunk-signature=00\r\n\r\n"},
		{0, fuzzPresign, "/bkt/k?response-content-type=a/b", "", ""},
		{0, fuzzRawAuth, "/bkt/k", "Authorization: AWS4-HMAC-SHA256 Credential=AKTEST/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=00", ""},
		{0, fuzzRawAuth, "/bkt/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKTEST%2F2026&X-Amz-Expires=9999999999", "", ""},
		{1, fuzzSignBody, "/bkt/%2e%2e/x", "", "dots"},
		{1, fuzzSignBody, "/bkt/a//b/./c", "", "slashes"},
		{0, fuzzSignBody, "/bkt/k?acl", "", ""},
		{1, fuzzSignBody, "/bkt/k?tagging", "", "<Tagging/>"},
	}
	for _, s := range seeds {
		f.Add(s.method, s.auth, s.target, s.hdr, []byte(s.body))
	}
	c := testcluster.New(f, 4, testGeometry)
	h := NewHandler(c.Store, Options{Credentials: map[string]string{testAK: testSecret}, MinPartSize: 10}).(*handler)
	h.keepAliveDelay = time.Hour
	signer := testSigner{ak: testAK, sk: testSecret, region: "us-east-1", now: time.Now}
	// A bucket with an object and an upload in progress, for the
	// requests to reach into.
	for _, setup := range []struct{ method, target, body string }{
		{"PUT", "/bkt", ""}, {"PUT", "/bkt/k", "0123456789"}, {"POST", "/bkt/m?uploads", ""},
	} {
		r := httptest.NewRequest(setup.method, setup.target, strings.NewReader(setup.body))
		sum := sha256.Sum256([]byte(setup.body))
		signer.sign(r, hex.EncodeToString(sum[:]))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			f.Fatalf("%s %s: %d %s", setup.method, setup.target, w.Code, w.Body.Bytes())
		}
	}
	f.Fuzz(func(t *testing.T, method, auth uint8, target, hdr string, body []byte) {
		r, ok := fuzzhttp.Request(fuzzMethods[int(method)%len(fuzzMethods)], target, hdr, body)
		if !ok {
			t.Skip("not an HTTP request a server would parse")
		}
		switch auth % fuzzAuthModes {
		case fuzzSignBody:
			sum := sha256.Sum256(body)
			signer.sign(r, hex.EncodeToString(sum[:]))
		case fuzzSignUnsigned:
			signer.sign(r, "UNSIGNED-PAYLOAD")
		case fuzzPresign:
			u, err := url.Parse(signer.presign(r, time.Minute))
			if err != nil {
				t.Skip("the test signer cannot presign this path")
			}
			r.URL, r.RequestURI = u, u.RequestURI()
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		checkAnswer(t, r, w)
	})
}

// checkAnswer fails t unless w holds a well-formed S3 answer to r.
func checkAnswer(t *testing.T, r *http.Request, w *httptest.ResponseRecorder) {
	t.Helper()
	code := w.Code
	if code < 200 || code > 599 {
		t.Fatalf("%s %s: status %d", r.Method, r.URL, code)
	}
	if code >= 500 && code != http.StatusNotImplemented {
		t.Fatalf("%s %s: server error %d on a healthy cluster: %s", r.Method, r.URL, code, w.Body.Bytes())
	}
	if code < 300 || code == http.StatusNotModified || r.Method == "HEAD" {
		return
	}
	body := w.Body.Bytes()
	// CopyObject and CompleteMultipartUpload answer 200 before they
	// know; their errors are never answered with another status.
	var e errorResponse
	if err := xml.Unmarshal(body, &e); err != nil || e.Code == "" {
		t.Fatalf("%s %s: status %d without an S3 error body (%v): %q", r.Method, r.URL, code, err, body)
	}
}
