package xrootd

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestBearerTokenFileMustBePrivate: FindBearerToken takes a token file
// only when it is the caller's own and closed to group and others, as
// XRootD's ztn client does. Regression (found by review): the last place
// it looks, /tmp/bt_u<uid>, is in a directory every user may write, and a
// file another user put there was presented as the caller's token.
func TestBearerTokenFileMustBePrivate(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o1777); err != nil { // like /tmp
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", dir)
	t.Setenv("BEARER_TOKEN", "")
	t.Setenv("BEARER_TOKEN_FILE", "")
	t.Setenv("XDG_RUNTIME_DIR", "")
	f := filepath.Join(dir, "bt_u"+strconv.Itoa(os.Geteuid()))

	if err := os.WriteFile(f, []byte("my-own-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, err := FindBearerToken(); err != nil || tok != "my-own-token-0123456789" {
		t.Fatalf("own 0600 token file: %q, %v", tok, err)
	}

	if err := os.Chmod(f, 0o644); err != nil {
		t.Fatal(err)
	}
	if tok, err := FindBearerToken(); tok != "" || err == nil {
		t.Errorf("a token file others may read was taken: %q, %v", tok, err)
	}

	if os.Geteuid() != 0 {
		t.Log("not root: the foreign owner case is not checked")
		return
	}
	if err := os.WriteFile(f, []byte("mallorys-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(f, 65534, 65534); err != nil { // nobody
		t.Fatal(err)
	}
	if tok, err := FindBearerToken(); tok != "" || err == nil {
		t.Errorf("a token file owned by uid 65534 was taken: %q, %v", tok, err)
	}
}
