//go:build fault

package fault

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/testport"
)

// An xrdcp upload whose client host drops off the network for a few
// seconds, then comes back: XrdCl's stream times out, it connects again,
// ends its old session (kXR_endsess) and opens the file again to send
// the rest. The gateway, which saw nothing of a silent network, gives
// the upload back once that session has ended: by the kXR_endsess, or
// by the old connection's FIN, which comes through with the network
// (without kXR_endsess: 7.8 s instead of 6.2). The upload must go on to
// the whole object, as against a plain xrootd.
func TestUploadGoesOnAfterItsClientsNetworkFails(t *testing.T) {
	lab := newNetLab(t, 1) // the client's host
	work := t.TempDir()
	data := filepath.Join(work, "cluster")
	mustRun(t, time.Minute, ecstoreBin, "mkdir", "--data", data, "--ec", "8+2", "--spares", "0", "--fsync=false", "/setup")
	addr := fmt.Sprintf("%s.1:%d", lab.subnet, testport.Free(t))
	gw := startProc(t, work, "gateway", "serve", "--data", data, "--root-addr", addr, "--metrics-addr=",
		"--heal=false", "--log-level", "info", "--root-anonymous-writes")
	if _, err := gw.waitLog(0, servingRE, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	body := newContents(t, filepath.Join(work, "bodies"), testSeed(t)).make(48*mib + 7)

	// The stream is judged broken after 2 s without an answer (checked
	// every second); connecting again is tried for 30 s.
	env := []string{"XRD_STREAMTIMEOUT=2", "XRD_TIMEOUTRESOLUTION=1", "XRD_CONNECTIONWINDOW=5", "XRD_CONNECTIONRETRY=6"}
	done := make(chan result, 1)
	go func() {
		args := append(lab.exec(0), "xrdcp", "--nopbar", "--xrate", "16M", body.file, "root://"+addr+"//net/obj")
		done <- runIn(2*time.Minute, env, args[0], args[1:]...)
	}()
	time.Sleep(time.Second)
	lab.fence(0)
	time.Sleep(5 * time.Second)
	lab.unfence(0)
	r := <-done
	if !r.ok() {
		t.Fatalf("xrdcp, its host off the network for 5 s: %v", r)
	}
	if _, err := gw.waitLog(0, regexp.MustCompile(`taken up again.* path=/net/obj `), 5*time.Second); err != nil {
		t.Fatalf("xrdcp succeeded but its upload was not taken up again: the fence missed it? %v", err)
	}
	got := filepath.Join(work, "got")
	mustRun(t, time.Minute, "xrdcp", "--nopbar", "-f", "root://"+addr+"//net/obj", got)
	a, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(body.file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("the object (%d bytes) is not what xrdcp sent (%d bytes)", len(a), len(b))
	}
	t.Logf("xrdcp: %v", r.elapsed.Round(time.Millisecond))
}
