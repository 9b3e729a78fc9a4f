package fsutil

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// FsyncCoversNewEntry reports whether, on the file system that holds dir,
// an fsync of a newly created file also makes the file's directory entry
// durable, so that the directory needs no fsync of its own for the file
// to be found after a crash. That holds on ext4 and XFS:
//
//   - ext4 with a journal commits the transaction that holds the file's
//     last change, and the entry was added in it or in an earlier one;
//     without a journal, its fsync writes the parent directory of a file
//     created since the parent was last written (ext4_sync_parent);
//   - XFS forces its log up to the file's last logged change, which comes
//     after the create that logged the entry.
//
// Any other file system, one that cannot be identified (a kernel before
// 5.8, without statx's mount ID, or no /proc), and ext2 and ext3 under
// their own drivers get false: there, only an fsync of the directory is
// sure to keep the entry. Renames and removals are not covered on any:
// they change the directory alone.
func FsyncCoversNewEntry(dir *os.File) bool {
	var st unix.Statx_t
	var err error
	if cerr := withFd(dir, func(fd int) {
		err = unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_STATX_DONT_SYNC, unix.STATX_MNT_ID, &st)
	}); cerr != nil || err != nil || st.Mask&unix.STATX_MNT_ID == 0 {
		return false
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	switch mountType(bufio.NewScanner(f), st.Mnt_id) {
	case "ext4", "xfs":
		return true
	}
	return false
}

// mountType returns the file-system type of mount id in the lines of a
// /proc/PID/mountinfo, or "" when none describes it. A line reads
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext4 /dev/root rw
//
// the mount ID first, the type right after the " - " separator (the
// optional fields before it vary in number).
func mountType(lines *bufio.Scanner, id uint64) string {
	for lines.Scan() {
		line := lines.Text()
		first, _, _ := strings.Cut(line, " ")
		if n, err := strconv.ParseUint(first, 10, 64); err != nil || n != id {
			continue
		}
		_, after, ok := strings.Cut(line, " - ")
		if !ok {
			return ""
		}
		fstype, _, _ := strings.Cut(after, " ")
		return fstype
	}
	return ""
}
