package fsutil

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// mountType finds a mount's type after the separator, however many
// optional fields come before it, and nothing for an unknown ID or a
// line without the separator.
func TestMountType(t *testing.T) {
	const info = `22 1 0:21 / /proc rw,nosuid shared:12 - proc proc rw
25 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard
36 25 8:1 /data /srv/data rw,noatime shared:2 master:1 - xfs /dev/sda1 rw,attr2
41 25 0:40 / /mnt/odd rw - ext2 /dev/sdb1 rw
50 25 0:50 / /mnt/broken rw shared:3`
	for _, c := range []struct {
		id   uint64
		want string
	}{{22, "proc"}, {25, "ext4"}, {36, "xfs"}, {41, "ext2"}, {50, ""}, {2, ""}, {2536, ""}} {
		if got := mountType(bufio.NewScanner(strings.NewReader(info)), c.id); got != c.want {
			t.Errorf("mount %d: type %q; want %q", c.id, got, c.want)
		}
	}
}

// FsyncCoversNewEntry says true exactly for ext4 and XFS, as the
// mount table names the test directory's file system.
func TestFsyncCoversNewEntryFollowsTheMountTable(t *testing.T) {
	dir, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	got := FsyncCoversNewEntry(dir)
	t.Logf("%s: FsyncCoversNewEntry %v", dir.Name(), got)
	fstype := testMountType(t, dir)
	if want := fstype == "ext4" || fstype == "xfs"; got != want {
		t.Errorf("FsyncCoversNewEntry on %q = %v; want %v", fstype, got, want)
	}
}

// testMountType is the type of dir's file system by the longest mount
// point of /proc/self/mounts that holds it (another way than the mount
// ID that FsyncCoversNewEntry takes).
func testMountType(t *testing.T, dir *os.File) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	best, fstype := "", ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		mp := f[1]
		if (dir.Name() == mp || strings.HasPrefix(dir.Name(), strings.TrimSuffix(mp, "/")+"/")) && len(mp) >= len(best) {
			best, fstype = mp, f[2]
		}
	}
	return fstype
}
