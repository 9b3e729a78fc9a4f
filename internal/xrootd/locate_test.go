package xrootd

import (
	"context"
	"strings"
	"testing"
)

// readOnlyFS reports that nobody may write below /ro (WriteReporter).
type readOnlyFS struct{ plainFS }

func (readOnlyFS) MayWrite(_ context.Context, name string) bool {
	return name != "/ro" && !strings.HasPrefix(name, "/ro/")
}

// Regression (issue note): kXR_locate answered "w" (writable) where the
// file system refuses writes. A WriteReporter's answer for the path
// located (the wildcard's too) makes it "r", as xrootd answers for a
// path exported read-only; without one it stays "w".
func TestLocateReadOnly(t *testing.T) {
	m := newMemFS()
	m.put("/ro/f", []byte("x"))
	m.put("/rw/f", []byte("x"))
	ctx := testCtx(t)
	ro := dial(t, startServerWith(t, &Server{Handler: readOnlyFS{plainFS{m}}, Logger: testLogger(t)}), nil)
	plain := dial(t, startServerWith(t, &Server{Handler: plainFS{m}, Logger: testLogger(t)}), nil)
	for _, tc := range []struct {
		c          *Client
		path, want string
	}{
		{ro, "/ro/f", "Sr["},
		{ro, "*/ro", "Sr["},
		{ro, "/rw/f", "Sw["},
		{ro, "*/rw", "Sw["},
		{plain, "/ro/f", "Sw["},
	} {
		if loc, err := tc.c.Locate(ctx, tc.path); err != nil || !strings.HasPrefix(loc, tc.want) {
			t.Errorf("locate %s: %q %v, want %s...", tc.path, loc, err, tc.want)
		}
	}
}
