//go:build interop

package interop

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/testtool"
)

// subStreamClosedRE matches the gateway's debug line for a data
// sub-stream (kXR_bind) that ended, with the bytes it sent.
var subStreamClosedRE = regexp.MustCompile(`msg="xrootd sub-stream closed".* sent=(\d+)`)

// answerOnRE matches XrdCl's dump line for a data request sent to the
// gateway, with the stream its answer is expected on.
var answerOnRE = regexp.MustCompile(`Sending message kXR_(read|pgread|write|pgwrite) \(handle: \S+, offset: \d+, size: (\d+)\) \(0x[0-9a-f]+\) through substream (\d+) expecting answer at (\d+)`)

// TestXrdcpSubStreams copies a 50 MB file up and down with xrdcp -S 4
// through a gateway, with and without page checksums: every sub-stream's
// kXR_bind succeeds, the bytes come back as they went, and the download's
// data comes over the sub-streams: the reads name them, and the gateway
// sent at least their bytes there. XrdCl 5.5 sends the reads issued
// before the binds complete on the main connection, and uploads' writes
// always (with pathid 0, whatever -S says), so an upload only checks
// that the binds succeed.
func TestXrdcpSubStreams(t *testing.T) {
	testtool.Need(t, "xrdcp")
	const size = 50*mib + 4321
	for _, tc := range []struct {
		flags []string
	}{
		{nil},
		{[]string{"--page-checksums"}},
	} {
		t.Run(fmt.Sprintf("flags=%v", tc.flags), func(t *testing.T) {
			work := t.TempDir()
			cluster := []string{"--data", filepath.Join(work, "data"), "--fsync=false"}
			gw := startGateway(t, work, false, append(append([]string{"--log-level", "debug"}, cluster...), tc.flags...)...)
			gw.flags = cluster
			local := filepath.Join(work, "in")
			writeRandom(t, local, size, seed(t), 41)

			xrdcp := func(args ...string) string {
				t.Helper()
				cmd := exec.Command("xrdcp", append([]string{"--nopbar", "-f", "-S", "4"}, args...)...)
				cmd.Env = append(os.Environ(), append(xrdEnv, "XRD_LOGLEVEL=Dump")...)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("xrdcp %v: %v\n%s", args, err, lastLines(string(out), 30))
				}
				log := string(out)
				if strings.Contains(log, "kXR_bind request failed") || strings.Contains(log, "Hand shake failed") {
					t.Fatalf("xrdcp %v: a bind failed:\n%s", args, grep(log, "bind"))
				}
				if n := strings.Count(log, "kXR_bind successful"); n != 4 {
					t.Fatalf("xrdcp %v: %d successful binds, want 4:\n%s", args, n, grep(log, "bind"))
				}
				return log
			}

			xrdcp(local, gw.obj("/ss/f"))
			back := filepath.Join(work, "get")
			gw.cli(t, "get", "/ss/f", back)
			sameFile(t, back, local)

			before := subStreamSent(gw)
			back = filepath.Join(work, "back")
			log := xrdcp(gw.obj("/ss/f"), back)
			sameFile(t, back, local)
			var onSub, onMain int
			var subBytes int64
			for _, m := range answerOnRE.FindAllStringSubmatch(log, -1) {
				if m[1] != "read" && m[1] != "pgread" {
					continue
				}
				if m[4] == "0" {
					onMain++
					continue
				}
				onSub++
				n, _ := strconv.ParseInt(m[2], 10, 64)
				subBytes += n
			}
			if onSub == 0 {
				t.Errorf("no read of the download expected its answer on a sub-stream:\n%s", grep(log, "expecting answer"))
			}
			// The sub-streams end when xrdcp exits; the gateway logs
			// each one's bytes as it notices.
			deadline := time.Now().Add(10 * time.Second)
			var sent int64
			for {
				sent = subStreamSent(gw) - before
				if sent >= subBytes || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("download: %d reads (%d bytes) asked for on sub-streams, %d on the main stream; the gateway sent %d bytes on sub-streams (file %d)",
				onSub, subBytes, onMain, sent, size)
			if sent < subBytes {
				t.Errorf("the gateway sent %d bytes on sub-streams, where reads of %d bytes were to be answered", sent, subBytes)
			}
		})
	}
}

// subStreamSent adds up the bytes the gateway reports it sent on the data
// sub-streams that have ended.
func subStreamSent(gw *gateway) int64 {
	b, _ := os.ReadFile(gw.log)
	var sum int64
	for _, m := range subStreamClosedRE.FindAllStringSubmatch(string(b), -1) {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		sum += n
	}
	return sum
}
