package gateway

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/testcluster"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// Regression (found by review): a write that a storage.create scope alone
// allowed was checked to be new at its open only; an object written at
// the path before its close was then replaced, by a token that may not
// replace anything. The commit checks again.
func TestCreateScopeDoesNotReplaceAnObjectWrittenMeanwhile(t *testing.T) {
	c := testcluster.New(t, 6, layout.Geometry{K: 3, M: 2, ChunkSize: 1024})
	is, check := issuerCheck(t)
	ctx := context.Background()
	dial := tokenGateway(t, c, check, true)
	creator := dial(is.Token(t, is.Claims("alice", "storage.read:/ storage.create:/shared")))
	modifier := dial(is.Token(t, is.Claims("bob", "storage.read:/ storage.modify:/shared")))
	f, err := creator.Open(ctx, "/atlas/shared/x", xrootd.OpenNew|xrootd.OpenUpdate, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	upload(t, modifier, "/atlas/shared/x", []byte("bob's data"))
	if _, err := f.WriteAt(ctx, []byte("alice's"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err == nil {
		t.Error("the create-only write closed without error over an object written meanwhile")
	}
	if got, _ := c.Get("/atlas/shared/x"); string(got) != "bob's data" {
		t.Fatalf("a storage.create token replaced an existing object: now %q", got)
	}
}

// Regression (issue note): mkdir -p with a storage.create token checked
// only the directory asked for, and created its missing parents outside
// the token's scope. Each directory it would create is checked; those
// that exist need no scope.
func TestCreateScopeMkdirParents(t *testing.T) {
	c := testcluster.New(t, 6, layout.Geometry{K: 3, M: 2, ChunkSize: 1024})
	is, check := issuerCheck(t)
	ctx := context.Background()
	dial := tokenGateway(t, c, check, true)
	creator := dial(is.Token(t, is.Claims("alice", "storage.read:/ storage.create:/user/alice")))

	err := creator.Mkdir(ctx, "/atlas/user/alice/a/b", 0o755, true)
	if !hasCode(err, xrootd.ErrNotAuthorized) || !strings.Contains(err.Error(), "/atlas") {
		t.Errorf("mkdir -p creating /atlas and /atlas/user: %v", err)
	}
	for _, p := range []string{"/atlas", "/atlas/user", "/atlas/user/alice"} {
		if _, err := c.Store.StatBrief(ctx, p); !errors.Is(err, object.ErrNotExist) {
			t.Errorf("%s after the refused mkdir -p: %v", p, err)
		}
	}
	if err := c.Store.Mkdir(ctx, "/atlas/user"); err != nil {
		t.Fatal(err)
	}
	// Now only /atlas/user/alice and below are missing: all in scope.
	if err := creator.Mkdir(ctx, "/atlas/user/alice/a/b", 0o755, true); err != nil {
		t.Errorf("mkdir -p within the scope: %v", err)
	}
	if info, err := c.Store.StatBrief(ctx, "/atlas/user/alice/a/b"); err != nil || !info.IsDir {
		t.Errorf("made: %+v %v", info, err)
	}
	if err := creator.Mkdir(ctx, "/atlas/user/alice/a/b", 0o755, true); err != nil {
		t.Errorf("mkdir -p of an existing directory: %v", err)
	}
	if err := creator.Mkdir(ctx, "/atlas/user/bob/x", 0o755, true); !hasCode(err, xrootd.ErrNotAuthorized) {
		t.Errorf("mkdir -p outside the scope: %v", err)
	}
	if _, err := c.Store.StatBrief(ctx, "/atlas/user/bob"); !errors.Is(err, object.ErrNotExist) {
		t.Errorf("/atlas/user/bob: %v", err)
	}
}
