// Package fuzzhttp turns fuzzer inputs into server-side HTTP requests, for
// the handler fuzz tests of the HTTP frontends (S3, HTTP/WebDAV). It
// keeps only what net/http's server would have let through to a
// handler, so that a fuzz failure is the handler's.
package fuzzhttp

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
)

// Request builds a request of method for target (path and query) with
// body, and the headers of hdr, one "Name: value" per line; lines that
// are not valid header fields, and Host, Content-Length and
// Transfer-Encoding (which the transport sets), are left out. It reports
// false for a target no server would parse.
func Request(method, target, hdr string, body []byte) (*http.Request, bool) {
	if !strings.HasPrefix(target, "/") || strings.ContainsAny(target, " \t\r\n\x00#") {
		return nil, false
	}
	if _, err := url.ParseRequestURI(target); err != nil {
		return nil, false
	}
	r := httptest.NewRequest(method, target, bytes.NewReader(body))
	for line := range strings.SplitSeq(hdr, "\n") {
		name, value, ok := strings.Cut(line, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || !token(name) || strings.ContainsAny(value, "\r\n\x00") {
			continue
		}
		switch http.CanonicalHeaderKey(name) {
		case "Host", "Content-Length", "Transfer-Encoding":
			continue
		}
		r.Header.Add(name, value)
	}
	return r, true
}

// token reports whether s is an HTTP token (a valid field name).
func token(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
