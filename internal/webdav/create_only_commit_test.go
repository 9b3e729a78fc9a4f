package webdav

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/jwtauth"
	"github.com/ecstore/ecstore/internal/testissuer"
)

// TestCreateOnlyPutDoesNotReplaceAnObjectWrittenMeanwhile: a token with
// storage.create only may write new objects but not replace them, also
// one that another writer commits while the create-only upload streams:
// the check is made again at commit (CreateOptions.Precondition), as
// root:// does. Regression (found by review): HTTP opened the write
// Exclusive only, which the engine checks at open, and the upload
// replaced the other writer's object (201).
func TestCreateOnlyPutDoesNotReplaceAnObjectWrittenMeanwhile(t *testing.T) {
	is := testissuer.New(t)
	checker, err := jwtauth.New(jwtauth.Options{Issuers: []jwtauth.Issuer{{URL: is.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, func(o *Options) { o.JWT = checker })
	ts.c.Put(t, "/in/keep", []byte("dir")) // makes /in
	creator := is.Token(t, is.Claims("alice", "storage.create:/in"))

	pr, pw := io.Pipe()
	req := ts.req("PUT", "/in/f", pr, map[string]string{"Authorization": "Bearer " + creator})
	done := make(chan *response, 1)
	go func() { done <- ts.send(req) }()
	pw.Write(bytes.Repeat([]byte("a"), 64<<10)) // the upload is under way (scopes checked, writer open)
	time.Sleep(200 * time.Millisecond)

	ts.put("/in/f", []byte("the other writer's object")) // someone with modify writes it meanwhile

	pw.Write(bytes.Repeat([]byte("a"), 64<<10))
	pw.Close()
	r := <-done
	got := ts.get("/in/f")
	if r.StatusCode != http.StatusForbidden {
		t.Errorf("the create-only PUT was answered %d, want 403", r.StatusCode)
	}
	if string(got) != "the other writer's object" {
		t.Errorf("a storage.create-only PUT replaced an object written meanwhile: status %d, object now %d bytes", r.StatusCode, len(got))
	}
}
