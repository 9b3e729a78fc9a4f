package webdav

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/ecstore/ecstore/internal/testcluster"
)

func TestOptions(t *testing.T) {
	ts := newTestServer(t)
	// ("OPTIONS *" is answered by net/http itself.)
	for _, p := range []string{"/", "/missing/thing", "/.ecstore-uploads"} {
		r := ts.do("OPTIONS", p, nil, map[string]string{"Authorization": ""})
		if r.StatusCode != 200 || r.Header.Get("DAV") != "1" || !strings.Contains(r.Header.Get("Allow"), "PROPFIND") ||
			!strings.Contains(r.Header.Get("Allow"), "MKCOL") {
			t.Errorf("OPTIONS %s: %d %v", p, r.StatusCode, r.Header)
		}
	}
	r := ts.do("LOCK", "/x", nil, nil)
	if r.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(r.Header.Get("Allow"), "PUT") {
		t.Errorf("LOCK: %d %v", r.StatusCode, r.Header)
	}
	if !hasLine(ts.opsRecorded(), "http_other error") {
		t.Errorf("LOCK not counted as http_other: %q", ts.opsRecorded())
	}
}

func TestDelete(t *testing.T) {
	ts := newTestServer(t)
	ts.put("/d/obj", []byte("x"))
	ts.put("/full/obj", []byte("x"))
	ts.must(http.StatusCreated, "MKCOL", "/empty", nil, nil)
	ts.must(http.StatusNoContent, "DELETE", "/d/obj", nil, nil)
	ts.must(http.StatusNotFound, "DELETE", "/d/obj", nil, nil)
	ts.must(http.StatusNoContent, "DELETE", "/d", nil, nil) // now empty
	ts.must(http.StatusNoContent, "DELETE", "/empty/", nil, nil)
	ts.must(http.StatusConflict, "DELETE", "/full", nil, nil)
	ts.must(http.StatusForbidden, "DELETE", "/", nil, nil)
	ts.must(http.StatusPreconditionFailed, "DELETE", "/full/obj", nil, map[string]string{"If-Match": `"other"`})
	if ts.exists("/d") || ts.exists("/empty") || !ts.exists("/full/obj") {
		t.Fatal("wrong state after the DELETEs")
	}
}

func TestMkcol(t *testing.T) {
	ts := newTestServer(t)
	ts.must(http.StatusCreated, "MKCOL", "/a", nil, nil)
	ts.must(http.StatusCreated, "MKCOL", "/a/b/", nil, nil)
	ts.must(http.StatusMethodNotAllowed, "MKCOL", "/a/b", nil, nil) // exists
	ts.must(http.StatusMethodNotAllowed, "MKCOL", "/", nil, nil)
	ts.must(http.StatusConflict, "MKCOL", "/no/such/parent", nil, nil)
	ts.put("/a/obj", []byte("x"))
	ts.must(http.StatusMethodNotAllowed, "MKCOL", "/a/obj", nil, nil) // an object exists
	ts.must(http.StatusConflict, "MKCOL", "/a/obj/sub", nil, nil)     // parent is an object
	ts.must(http.StatusUnsupportedMediaType, "MKCOL", "/a/c", []byte("<x/>"), nil)
	if info, err := ts.store.Stat(t.Context(), "/a/b"); err != nil || !info.IsDir {
		t.Fatalf("/a/b: %+v %v", info, err)
	}
	if ts.exists("/no") || ts.exists("/a/c") {
		t.Fatal("a refused MKCOL created something")
	}
}

func TestMoveCopy(t *testing.T) {
	ts := newTestServer(t)
	dest := func(p string) map[string]string { return map[string]string{"Destination": ts.srv.URL + p} }
	with := func(h map[string]string, k, v string) map[string]string { h[k] = v; return h }
	ts.put("/src/a", []byte("content a"))
	ts.put("/src/b", []byte("content b"))
	ts.must(http.StatusCreated, "MKCOL", "/dst", nil, nil)

	// MOVE an object; the source is gone.
	ts.must(http.StatusCreated, "MOVE", "/src/a", nil, dest("/dst/a"))
	if string(ts.get("/dst/a")) != "content a" || ts.exists("/src/a") {
		t.Fatal("MOVE of an object")
	}
	// Overwrite: F refuses an existing destination; T (the default)
	// replaces it.
	ts.must(http.StatusPreconditionFailed, "MOVE", "/src/b", nil, with(dest("/dst/a"), "Overwrite", "F"))
	ts.must(http.StatusNoContent, "MOVE", "/src/b", nil, with(dest("/dst/a"), "Overwrite", "T"))
	if string(ts.get("/dst/a")) != "content b" || ts.exists("/src/b") {
		t.Fatal("MOVE over an object")
	}
	// COPY an object; both exist. An absolute path is a Destination too.
	ts.must(http.StatusCreated, "COPY", "/dst/a", nil, map[string]string{"Destination": "/dst/copy%20of%20a"})
	if string(ts.get("/dst/copy of a")) != "content b" || string(ts.get("/dst/a")) != "content b" {
		t.Fatal("COPY of an object")
	}
	ts.must(http.StatusNoContent, "COPY", "/dst/a", nil, dest("/dst/copy%20of%20a"))
	// MOVE a collection with its members.
	ts.must(http.StatusCreated, "MOVE", "/dst", nil, dest("/moved/"))
	if string(ts.get("/moved/a")) != "content b" || ts.exists("/dst") {
		t.Fatal("MOVE of a collection")
	}
	// COPY of a collection: only Depth: 0.
	ts.must(http.StatusForbidden, "COPY", "/moved", nil, dest("/copied"))
	ts.must(http.StatusCreated, "COPY", "/moved", nil, with(dest("/copied"), "Depth", "0"))
	if info, err := ts.store.Stat(t.Context(), "/copied"); err != nil || !info.IsDir {
		t.Fatal("COPY Depth 0 of a collection")
	}
	// An object over an empty collection (Overwrite: T) replaces it; a
	// collection that is not empty cannot be replaced.
	ts.must(http.StatusNoContent, "MOVE", "/moved/copy%20of%20a", nil, dest("/copied"))
	ts.must(http.StatusCreated, "MKCOL", "/full", nil, nil)
	ts.put("/full/x", []byte("x"))
	ts.must(http.StatusConflict, "COPY", "/moved/a", nil, dest("/full"))

	for _, tt := range []struct {
		name   string
		path   string
		hdr    map[string]string
		status int
	}{
		{"no destination", "/moved/a", nil, http.StatusBadRequest},
		{"missing source", "/nothing", dest("/n2"), http.StatusNotFound},
		{"same path", "/moved/a", dest("/moved/a"), http.StatusForbidden},
		{"into itself", "/moved", dest("/moved/sub"), http.StatusConflict},
		{"missing parent", "/moved/a", dest("/no/parent/a"), http.StatusConflict},
		{"other server", "/moved/a", map[string]string{"Destination": "http://elsewhere.example:81/x"}, http.StatusBadGateway},
		{"other scheme", "/moved/a", map[string]string{"Destination": "ftp://h/x"}, http.StatusBadRequest},
		{"no host", "/moved/a", map[string]string{"Destination": "http:"}, http.StatusBadRequest}, // found by FuzzHandler: was 502 "on another server"
		{"relative", "/moved/a", map[string]string{"Destination": "x/y"}, http.StatusBadRequest},
		{"dot-dot escape", "/moved/a", dest("/moved/../../etc"), http.StatusBadRequest},
		{"reserved", "/moved/a", dest("/.ecstore-uploads/x"), http.StatusForbidden},
		{"bad overwrite", "/moved/a", with(dest("/z"), "Overwrite", "maybe"), http.StatusBadRequest},
		{"root", "/", dest("/r"), http.StatusForbidden},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, m := range []string{"MOVE", "COPY"} {
				if m == "COPY" && tt.name == "other server" {
					continue // a third-party push (tpc_test.go)
				}
				if r := ts.do(m, tt.path, nil, tt.hdr); r.StatusCode != tt.status {
					t.Errorf("%s: status %d, want %d: %s", m, r.StatusCode, tt.status, r.body)
				}
			}
		})
	}
	if string(ts.get("/moved/a")) != "content b" {
		t.Fatal("a refused MOVE changed the source")
	}
}

func TestPaths(t *testing.T) {
	ts := newTestServer(t)
	ts.put("/p/ok", []byte("x"))
	for _, tt := range []struct {
		method, raw string
		status      int
	}{
		{"GET", "/p/../p/ok", http.StatusBadRequest},
		{"PUT", "/p/..", http.StatusBadRequest},
		{"GET", "/p//./ok", http.StatusOK}, // empty and "." elements are dropped
		{"GET", "/p/%2E%2E/%2E%2E/etc/passwd", http.StatusBadRequest},
		{"GET", "/p/.ok.ecstore-tmp.0123456789abcdef", http.StatusBadRequest}, // temporary upload name
		{"PUT", "/p/.x.ecstore-tmp.00", http.StatusBadRequest},
		{"GET", "/p/a%01b", http.StatusBadRequest},
		{"GET", "/.ecstore-uploads/b", http.StatusForbidden},
		{"PUT", "/.ecstore-rm/p/ok", http.StatusForbidden},
		{"PROPFIND", "/.ecstore-uploads", http.StatusForbidden},
		{"GET", "/" + strings.Repeat("n", 300), http.StatusBadRequest},
	} {
		req := ts.req(tt.method, "/", nil, map[string]string{"Depth": "1"})
		req.URL.Opaque = "//" + req.URL.Host + tt.raw // sent as is
		if r := ts.send(req); r.StatusCode != tt.status {
			t.Errorf("%s %s: status %d, want %d: %s", tt.method, tt.raw, r.StatusCode, tt.status, r.body)
		}
	}
	if ts.exists("/p/.x.ecstore-tmp.00") {
		t.Fatal("a temporary name was written")
	}
}

// An object that can no longer be read (too few archives) answers 503 to
// reads, and can still be deleted or replaced.
func TestUnrecoverableObject(t *testing.T) {
	ts := newTestServer(t)
	data := testcluster.Rand(testRand(t), 200000)
	for _, p := range []string{"/broken/a", "/broken/b"} {
		ts.put(p, data)
		removed := 0
		for i := range ts.c.Dirs {
			if removed < 2 && os.Remove(ts.c.Archive(i, p)) == nil {
				removed++
			}
		}
		if removed != 2 {
			t.Fatalf("removed %d archives of %s", removed, p)
		}
	}
	ts.must(http.StatusServiceUnavailable, "GET", "/broken/a", nil, nil)
	ts.must(http.StatusNoContent, "DELETE", "/broken/a", nil, nil)
	ts.must(http.StatusPreconditionFailed, "PUT", "/broken/b", []byte("new"), map[string]string{"If-Match": "*"})
	ts.must(http.StatusNoContent, "PUT", "/broken/b", []byte("new"), nil)
	if string(ts.get("/broken/b")) != "new" || ts.exists("/broken/a") {
		t.Fatal("broken objects not replaced or removed")
	}
}
