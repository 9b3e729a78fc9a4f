//go:build interop

package interop

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ecstore/ecstore/internal/testport"
	"github.com/ecstore/ecstore/internal/testtool"
)

// TestCrossProtocolS3 writes objects with xrdcp and reads them with the
// aws cli through the same gateway, and the other way round.
func TestCrossProtocolS3(t *testing.T) {
	testtool.Need(t, "xrdcp")
	aws := testtool.Need(t, "aws")
	t.Setenv("ECSTORE_ACCESS_KEY", "interop")
	t.Setenv("ECSTORE_SECRET_KEY", "interop-secret-key")
	work := t.TempDir()
	awsEnv(t, work, "interop", "interop-secret-key")
	s3addr := testport.Addr(t)
	cluster := []string{"--data", filepath.Join(work, "data"), "--fsync=false"}
	gw := startGateway(t, work, false, append(cluster, "--s3-addr", s3addr)...)
	gw.flags = cluster // the CLI commands take the cluster flags only
	endpoint := "http://" + s3addr
	s := seed(t)

	up := filepath.Join(work, "up.bin")
	writeRandom(t, up, 9<<20+17, s, 1)
	must(t, "xrdfs", gw.url, "mkdir", "-p", "/xbucket")
	must(t, "xrdcp", "--nopbar", up, gw.obj("/xbucket/from-xrdcp"))
	back := filepath.Join(work, "via-s3")
	must(t, aws, "--endpoint-url", endpoint, "s3", "cp", "--only-show-errors", "s3://xbucket/from-xrdcp", back)
	sameFile(t, back, up)

	up2 := filepath.Join(work, "up2.bin")
	writeRandom(t, up2, 3<<20+5, s, 2)
	must(t, aws, "--endpoint-url", endpoint, "s3", "cp", "--only-show-errors", up2, "s3://xbucket/from-s3")
	back2 := filepath.Join(work, "via-xrdcp")
	must(t, "xrdcp", "--nopbar", gw.obj("/xbucket/from-s3"), back2)
	sameFile(t, back2, up2)

	ls := must(t, aws, "--endpoint-url", endpoint, "s3", "ls", "s3://xbucket/")
	for _, want := range []string{"9437201 from-xrdcp", "3145733 from-s3"} {
		if !strings.Contains(ls, want) {
			t.Errorf("aws s3 ls lacks %q:\n%s", want, ls)
		}
	}
	checkLs(t, gw.url, "/xbucket", map[string]int64{"/xbucket/from-xrdcp": 9<<20 + 17, "/xbucket/from-s3": 3<<20 + 5})
	gw.fsck(t)
}
