// Package testtool finds the external programs that tests drive: the
// real XRootD tools, S3 clients, unzip, bindfs. CI installs every one of
// them (scripts/install-deps.sh), so there a missing program fails the
// test; elsewhere it skips it, as Go's internal testenv.MustHaveExecPath
// does.
package testtool

import (
	"os"
	"os/exec"
	"testing"
)

// Need returns the path of the program name (looked up in PATH unless
// it holds a slash). When there is none it skips the test, or fails it
// when the environment sets CI=true.
func Need(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required when CI=true (scripts/install-deps.sh installs it): %v", name, err)
		}
		t.Skipf("%s not installed (scripts/install-deps.sh installs it): %v", name, err)
	}
	return p
}
