package webdav

import (
	"context"
	"encoding/base64"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ecstore/ecstore/internal/testcluster"
)

func basic(id, secret string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(id+":"+secret))
}

func TestAuth(t *testing.T) {
	c := testcluster.New(t, 4, testGeometry)
	c.Put(t, "/pub/obj", []byte("readable"))
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	remote := &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 8080}
	strict := Options{Keys: map[string]string{testKey: testSecret}, Tokens: []string{testToken}}
	anonRead := strict
	anonRead.AnonymousRead = true
	anonAll := anonRead
	anonAll.AnonymousWrite = true
	onlyTokens := Options{Tokens: []string{testToken}}
	tests := []struct {
		name      string
		opts      Options
		method    string
		auth      string
		local     net.Addr
		status    int
		challenge bool
	}{
		{"no credentials read", strict, "GET", "", loop, 401, true},
		{"no credentials write", strict, "PUT", "", loop, 401, true},
		{"token read", strict, "GET", "Bearer " + testToken, remote, 200, false},
		{"token write", strict, "PUT", "Bearer " + testToken, remote, 201, false},
		{"token scheme case", strict, "GET", "bearer " + testToken, remote, 200, false},
		{"wrong token", strict, "GET", "Bearer nope-nope-nope-nope", remote, 403, false},
		{"empty token", strict, "GET", "Bearer", remote, 403, false},
		{"token prefix", strict, "GET", "Bearer " + testToken[:10], remote, 403, false},
		{"basic read", strict, "GET", basic(testKey, testSecret), remote, 200, false},
		{"basic write", strict, "DELETE", basic(testKey, testSecret), remote, 204, false},
		{"basic wrong secret", strict, "GET", basic(testKey, "wrong"), remote, 403, false},
		{"basic unknown key", strict, "GET", basic("OTHER", testSecret), remote, 403, false},
		{"basic malformed", strict, "GET", "Basic !!!", remote, 403, false},
		{"basic no colon", strict, "GET", "Basic " + base64.StdEncoding.EncodeToString([]byte(testKey)), remote, 403, false},
		{"other scheme", strict, "GET", "AWS4-HMAC-SHA256 Credential=x", remote, 401, true},
		{"anonymous read allowed", anonRead, "GET", "", remote, 200, false},
		{"anonymous propfind allowed", anonRead, "PROPFIND", "", remote, 207, false},
		{"anonymous write refused", anonRead, "PUT", "", loop, 401, true},
		{"wrong credentials on anonymous read", anonRead, "GET", "Bearer wrong-wrong-wrong-wrong", remote, 403, false},
		{"anonymous write on loopback", anonAll, "PUT", "", loop, 201, false},
		{"anonymous write from afar", anonAll, "PUT", "", remote, 401, true},
		{"anonymous mkcol from afar", anonAll, "MKCOL", "", remote, 401, true},
		{"anonymous write without a connection", anonAll, "PUT", "", nil, 401, true},
		{"basic with only tokens configured", onlyTokens, "GET", basic(testKey, testSecret), remote, 403, false},
		{"nothing configured", Options{}, "GET", "", loop, 401, true},
		{"options needs nothing", strict, "OPTIONS", "", remote, 200, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHandler(c.Store, tt.opts)
			path := "/pub/obj"
			switch tt.method {
			case "PUT":
				path = "/pub/new-" + strings.ReplaceAll(tt.name, " ", "-")
			case "DELETE":
				c.Put(t, "/pub/victim", []byte("x"))
				path = "/pub/victim"
			case "MKCOL":
				path = "/pub/newdir"
			}
			r := httptest.NewRequest(tt.method, path, strings.NewReader("body"))
			if tt.method == "PROPFIND" {
				r.Header.Set("Depth", "0")
				r.Body = http.NoBody
				r.ContentLength = 0
			}
			if tt.auth != "" {
				r.Header.Set("Authorization", tt.auth)
			}
			if tt.local != nil {
				r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, tt.local))
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.status, w.Body)
			}
			ch := w.Header().Values("WWW-Authenticate")
			if tt.challenge != (len(ch) > 0) {
				t.Fatalf("WWW-Authenticate %q", ch)
			}
			if tt.challenge && len(tt.opts.Tokens) > 0 && !strings.HasPrefix(ch[len(ch)-1], "Bearer ") {
				t.Errorf("no Bearer challenge: %q", ch)
			}
			if tt.status >= 400 && tt.method == "PUT" {
				if _, err := c.Store.Stat(t.Context(), path); err == nil {
					t.Fatalf("a refused PUT stored %s", path)
				}
			}
		})
	}
}

func TestLoopbackConn(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:80": true, "[::1]:80": true, "127.9.9.9:1": true, "10.0.0.1:80": false, "[2001:db8::1]:80": false} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("GET", "/", nil)
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, a))
		if got := loopbackConn(r); got != want {
			t.Errorf("loopbackConn(%s) = %v", addr, got)
		}
	}
}

// Regression (found by review): behind a proxy on the same host, every
// request arrives on loopback, so anonymous writes allowed on a loopback
// listener were open to whoever reached the proxy. A request that names a
// proxy is not taken for a local one.
func TestAnonymousWriteThroughAProxyIsRefused(t *testing.T) {
	c := testcluster.New(t, 4, testGeometry)
	h := NewHandler(c.Store, Options{Tokens: []string{testToken}, AnonymousWrite: true})
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	for hdr, want := range map[string]int{"": 201, "X-Forwarded-For": 401, "Forwarded": 401, "Via": 401, "X-Real-IP": 401} {
		r := httptest.NewRequest("PUT", "/pub/p-"+hdr, strings.NewReader("body"))
		if hdr != "" {
			r.Header.Set(hdr, "203.0.113.9")
		}
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.Addr(loop)))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("anonymous PUT on loopback with %q: %d, want %d", hdr, w.Code, want)
		}
	}
}
