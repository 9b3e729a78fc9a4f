package testtool

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestNeedFindsAProgram(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "ecstore-testtool-probe")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	if got := Need(t, "ecstore-testtool-probe"); got != prog {
		t.Fatalf("Need = %q, want %q", got, prog)
	}
}

// TestNeedMissing runs Need for a missing program in a subtest: it must
// skip it, or fail it under CI=true, and never return.
func TestNeedMissing(t *testing.T) {
	for _, ci := range []string{"", "true"} {
		t.Run("CI="+ci, func(t *testing.T) {
			t.Setenv("CI", ci)
			t.Setenv("PATH", t.TempDir())
			ft := &fakeT{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				Need(ft, "no-such-program")
				ft.returned = true
			}()
			<-done
			switch {
			case ft.returned:
				t.Fatal("Need returned for a missing program")
			case ci == "true" && !ft.fatal:
				t.Fatal("missing program under CI=true: not a failure")
			case ci == "" && !ft.skipped:
				t.Fatal("missing program outside CI: not skipped")
			}
		})
	}
}

// fakeT records how Need ended the test; Fatalf and Skipf end the
// goroutine as the testing package's do.
type fakeT struct {
	testing.TB
	fatal, skipped, returned bool
}

func (f *fakeT) Helper() {}

func (f *fakeT) Fatalf(string, ...any) { f.fatal = true; runtimeGoexit() }

func (f *fakeT) Skipf(string, ...any) { f.skipped = true; runtimeGoexit() }

func runtimeGoexit() { runtime.Goexit() }
