package gateway

import (
	"context"
	"strings"
	"testing"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/testcluster"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// Regression (issue note): kXR_locate answered "w" (writable) on a
// read-only listener too. It answers "r" to the clients that may not
// write there, as xrootd answers for a path exported read-only, and "w"
// to those that may: anonymous clients of a listener that is not
// read-only, a token's holder within its create or modify scope.
func TestLocateSaysWhoMayWrite(t *testing.T) {
	c := testcluster.New(t, 6, layout.Geometry{K: 3, M: 2, ChunkSize: 1024})
	c.Put(t, "/atlas/shared/x", []byte("x"))
	c.Put(t, "/atlas/other/y", []byte("y"))
	ctx := context.Background()
	locate := func(t *testing.T, cl *xrootd.Client, p, want string) {
		t.Helper()
		if got, err := cl.Locate(ctx, p); err != nil || !strings.HasPrefix(got, want) {
			t.Errorf("locate %s: %q %v, want %s...", p, got, err, want)
		}
	}
	_, open := serveFS(t, &xrootd.Server{Handler: NewFS(c.Store, nil, Hooks{})})
	locate(t, open, "/atlas/shared/x", "Sw")
	locate(t, open, "*/atlas", "Sw")
	_, anonymous := serveFS(t, &xrootd.Server{Handler: NewFS(c.Store, nil, Hooks{}).ReadOnly()})
	locate(t, anonymous, "/atlas/shared/x", "Sr")
	locate(t, anonymous, "*/atlas", "Sr")
	locate(t, anonymous, "*", "Sr")

	is, check := issuerCheck(t)
	dial := tokenGateway(t, c, check, false)
	creator := dial(is.Token(t, is.Claims("alice", "storage.read:/ storage.create:/shared")))
	locate(t, creator, "/atlas/shared/x", "Sw")
	locate(t, creator, "*/atlas/shared", "Sw")
	locate(t, creator, "/atlas/other/y", "Sr")
	reader := dial(is.Token(t, is.Claims("bob", "storage.read:/")))
	locate(t, reader, "/atlas/shared/x", "Sr")
}
