package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Regression: cp and get took -f but not --force, which xrdcp also
// takes (and which their own "use -f" messages lead users of xrdcp to
// try). --force is now the same flag as -f wherever -f exists, and the
// help shows both names on one line.
func TestForceLongForm(t *testing.T) {
	c := newTestCluster(t)
	c.put("/a/f", []byte("object"))
	local := filepath.Join(t.TempDir(), "f")
	os.WriteFile(local, []byte("mine"), 0o644)
	mustRun(t, nil, c.cmd("get", "--force", "/a/f", local)...)
	if got, _ := os.ReadFile(local); string(got) != "object" {
		t.Errorf("get --force: %q", got)
	}

	url := gatewayURL(t)
	mustRun(t, strings.NewReader("one"), "cp", "-", url+"/up/f")
	mustRun(t, strings.NewReader("two"), "cp", "--force", "-", url+"/up/f")
	if got := mustRun(t, nil, "cp", url+"/up/f", "-"); got != "two" {
		t.Errorf("cp --force: %q", got)
	}
	mustRun(t, nil, "cp", "--force", url+"/up/f", local)
	if got, _ := os.ReadFile(local); string(got) != "two" {
		t.Errorf("cp --force download: %q", got)
	}

	for _, cmd := range []string{"cp", "get", "put"} {
		help := mustRun(t, nil, cmd, "--help")
		if !strings.Contains(help, "\n  -f, --force\n") {
			t.Errorf("%s --help does not show -f, --force:\n%s", cmd, help)
		}
	}
}
