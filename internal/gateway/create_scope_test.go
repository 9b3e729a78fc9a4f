package gateway

import (
	"context"
	"testing"

	"github.com/ecstore/ecstore/internal/layout"
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
