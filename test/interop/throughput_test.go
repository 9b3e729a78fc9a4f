//go:build interop

package interop

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/testtool"
)

// TestThroughput1GiB logs single-stream xrdcp upload and download rates
// of a 1 GiB file through the gateway on an embedded cluster
// (--fsync=false) next to the same xrdcp commands against one real xrootd
// server on the same machine, with their ratios. It asserts only that the
// bytes come back exact, never a speed. Skipped with -short.
//
// Both sides write without fsync (the gateway runs with --fsync=false; a
// plain xrootd does not fsync by default), and sync(2) runs before each
// timed transfer so that none pays for the page-cache write-back of
// another.
func TestThroughput1GiB(t *testing.T) {
	if testing.Short() {
		t.Skip("the 1 GiB throughput measurement is skipped with -short")
	}
	testtool.Need(t, "xrdcp")
	testtool.Need(t, "xrootd")
	work := t.TempDir()
	gw := startGateway(t, work, false, "--data", filepath.Join(work, "data"), "--fsync=false")
	xs := startXrootd(t, xrootdBase(t), "plain")
	xs.wait(t, 30*time.Second)

	const size = gib
	local := filepath.Join(work, "1GiB")
	start := time.Now()
	writeRandom(t, local, size, seed(t), 500)
	t.Logf("generated %s (1 GiB, seeded ChaCha8) in %v", local, time.Since(start).Round(time.Millisecond))

	type rates struct{ up, down float64 } // MB/s, MB = 10^6 bytes
	measure := func(label, url string) rates {
		t.Helper()
		timed := func(args ...string) float64 {
			t.Helper()
			// Write back the dirty pages of earlier steps first, so that
			// they do not slow down this transfer.
			syscall.Sync()
			start := time.Now()
			must(t, "xrdcp", args...)
			d := time.Since(start)
			mbs := float64(size) / 1e6 / d.Seconds()
			t.Logf("%-8s xrdcp %-50s %6.2fs %7.1f MB/s", label, strings.Join(args, " "), d.Seconds(), mbs)
			return mbs
		}
		var r rates
		r.up = timed("--nopbar", "-f", local, url)
		back := local + "." + label
		r.down = timed("--nopbar", "-f", url, back)
		sameFile(t, back, local)
		if err := os.Remove(back); err != nil {
			t.Fatal(err)
		}
		return r
	}
	plain := measure("xrootd", "root://"+xs.addr+"//1GiB")
	// Free the disk before the gateway writes its 1.25 GiB of archives.
	if err := os.Remove(filepath.Join(xs.data, "1GiB")); err != nil {
		t.Logf("remove the plain copy: %v", err)
	}
	ec := measure("gateway", gw.obj("/1GiB"))
	t.Logf("single-stream xrdcp, 1 GiB, loopback:  upload  gateway %.1f MB/s vs plain xrootd %.1f MB/s (ratio %.2f)",
		ec.up, plain.up, ec.up/plain.up)
	t.Logf("single-stream xrdcp, 1 GiB, loopback:  download gateway %.1f MB/s vs plain xrootd %.1f MB/s (ratio %.2f)",
		ec.down, plain.down, ec.down/plain.down)
	gw.checkAlive(t)
}
