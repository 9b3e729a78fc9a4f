package cluster

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestAccessSettings(t *testing.T) {
	text := "ec = 4+2\n" +
		"access-key = AK1:secret/one+x\n" +
		"access-key = AK2:two:with:colons # comment\n" +
		"access-key = AK1:secret/one+x\n" + // the same key again is harmless
		"http-token = 0123456789abcdef0123\n" +
		"http-token = another-token-of-length\n" +
		"token = a-token-by-its-new-name\n" +
		"token = 0123456789abcdef0123\n" + // the same token again is harmless
		"http-anonymous-read = true\n"
	c, err := ParseConfig(strings.NewReader(text), "test.conf")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"AK1": "secret/one+x", "AK2": "two:with:colons"}; !maps.Equal(c.AccessKeys(), want) {
		t.Errorf("access keys %v, want %v", c.AccessKeys(), want)
	}
	if want := []string{"0123456789abcdef0123", "another-token-of-length", "a-token-by-its-new-name"}; !slices.Equal(c.Tokens(), want) {
		t.Errorf("tokens %q, want %q", c.Tokens(), want)
	}
	if !c.HTTPAnonymousRead() {
		t.Error("http-anonymous-read not set")
	}
	if k, ok := c.OnlyAccess(); ok || k != KeyEC {
		t.Errorf("OnlyAccess = %q, %v; want ec, false", k, ok)
	}
	if strings.Contains(string(c.Format("")), "secret") || strings.Contains(string(c.Format("")), "token") {
		t.Errorf("Format writes secrets:\n%s", c.Format(""))
	}
	only, err := ParseConfig(strings.NewReader("access-key = a:b\n"), "creds")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := only.OnlyAccess(); !ok {
		t.Error("a file of access keys only is not OnlyAccess")
	}
}

func TestAccessSettingErrors(t *testing.T) {
	for _, tt := range []struct{ name, text, want string }{
		{"no secret", "access-key = AK1", "test.conf:1:"},
		{"empty id", "access-key = :s", "ID:SECRET"},
		{"empty secret", "access-key = AK:", "ID:SECRET"},
		{"blank in key", "access-key = A K:s", "ID:SECRET"},
		{"conflicting secrets", "access-key = A:s1\naccess-key = A:s2", "test.conf:2:"},
		{"short token", "http-token = short", "at least 16"},
		{"token with comma", "http-token = 0123456789abcdef,x", "no blanks"},
		{"bad bool", "http-anonymous-read = perhaps", "true or false"},
		{"anonymous twice", "http-anonymous-read = true\nhttp-anonymous-read = false", "set twice"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig(strings.NewReader(tt.text), "test.conf")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// The access settings of a config file survive Open (which merges the
// flags into the stored config).
func TestOpenKeepsAccess(t *testing.T) {
	dir := t.TempDir()
	var nodes []string
	for i := range 3 {
		n := filepath.Join(dir, fmt.Sprintf("d%d", i))
		if err := os.Mkdir(n, 0o755); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	file := filepath.Join(dir, "c.conf")
	text := "ec = 2+1\nspares = 0\nnodes = " + strings.Join(nodes, ", ") + "\naccess-key = K:s\nhttp-token = token-0123456789abcdef\n"
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	var flags Config
	if err := flags.Set(KeyFsync, "false"); err != nil {
		t.Fatal(err)
	}
	c, err := Open(Options{ConfigFile: file, Flags: flags})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !maps.Equal(c.Config().AccessKeys(), map[string]string{"K": "s"}) || len(c.Config().Tokens()) != 1 {
		t.Fatalf("access after Open: %v %q", c.Config().AccessKeys(), c.Config().Tokens())
	}
}
