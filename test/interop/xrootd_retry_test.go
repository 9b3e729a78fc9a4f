//go:build interop

package interop

import (
	"syscall"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/testtool"
)

// A real xrootd killed by a signal before it answered (Debian's 5.5.3
// has died of SIGSEGV at start) is started again by waitUp, which then
// waits for the new process.
func TestXrootdCrashAtStartIsStartedAgain(t *testing.T) {
	testtool.Need(t, "xrootd")
	s := startXrootd(t, xrootdBase(t), "crash")
	first := s.proc
	if err := first.cmd.Process.Signal(syscall.SIGSEGV); err != nil {
		t.Fatal(err)
	}
	<-first.done
	if !killedBySignal(first.err) {
		t.Fatalf("test setup: xrootd exited with %v, not by a signal", first.err)
	}
	if err := s.waitUp(t, 30*time.Second); err != nil {
		t.Fatalf("wait after a crash at start: %v", err)
	}
	if s.proc == first || !s.alive() {
		t.Fatal("the server was not started again")
	}
	if err := probeHandshake(s.addr); err != nil {
		t.Fatalf("the restarted server does not answer: %v", err)
	}
}
