package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/ecstore/ecstore/internal/archive"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

const versionHelp = `
Prints the ecstore version, the archive format version it writes, and
the Go version and platform it was built with.
`

// cmdVersion is "ecstore version".
func cmdVersion(_ context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "version", "version", versionHelp)
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "ecstore %s\narchive format %d\n%s %s/%s\n", buildVersion(), archive.FormatVersion,
		runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}

// buildVersion is the -X version, else the module version (go install),
// else the VCS revision recorded by go build, else "devel".
func buildVersion() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return "devel " + rev
}
