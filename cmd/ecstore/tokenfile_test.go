package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ecstore/ecstore/internal/cluster"
)

// Regression (found by review): a node's --token-file cut tokens at '#',
// where the gateway's node-token line keeps it: a token with '#' was
// refused by its node, which took a shorter secret instead. Only a line
// that starts with '#' is a comment; both read the same token.
func TestTokenFileKeepsHashInTokens(t *testing.T) {
	const token = "s3cr3t-n0de-t0ken#2024-rotation"
	name := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(name, []byte("# node tokens\n  # indented comment\n"+token+"\n\nsecond-token-0123456789 # rotated in May\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readTokenFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{token, "second-token-0123456789"}; !slices.Equal(got, want) {
		t.Errorf("tokens %q, want %q", got, want)
	}
	cfg, err := cluster.ParseConfig(strings.NewReader("nodes = a, b, c\nnode-token = "+token+"\n"), "test.conf")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NodeToken() != got[0] {
		t.Errorf("the gateway presents %q, the node takes %q", cfg.NodeToken(), got[0])
	}
}
