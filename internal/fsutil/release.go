package fsutil

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// releaseQueue bounds the files a Beneath holds for release at once;
// beyond it, a removal or a replacing rename frees its file itself.
const releaseQueue = 64

// releaser frees removed and replaced files in the background. Remove
// and Rename hold an O_PATH descriptor of the file they unlink or
// replace; the file's blocks are freed when the last descriptor closes,
// which releaser does after the call has returned. Freeing is not
// instant: ext4 frees a large file's extents at that point and, on a file
// system mounted with discard, trims them before it returns (some 0.2 s
// for the 128 MiB archive of a 1 GiB object on this project's test
// machine): without the releaser, a client's overwrite or removal waited
// for that. The removal itself (the directory entry, and its fsync) is
// done before the call returns, as before; only the space comes back a
// moment later, as with XFS's background inode inactivation.
type releaser struct {
	mu     sync.Mutex
	fds    chan int
	closed bool
	wg     sync.WaitGroup
	// closeFd, when set, closes a held descriptor instead of unix.Close
	// (for tests; set before the first release).
	closeFd func(fd int) error
}

// free closes a held descriptor, which frees its file if it was the last.
func (r *releaser) free(fd int) {
	if r.closeFd != nil {
		r.closeFd(fd)
		return
	}
	unix.Close(fd)
}

// release closes fd in the background, or now when the queue is full or
// the releaser stopped (outside the lock: a slow free holds up no other
// call).
func (r *releaser) release(fd int) {
	r.mu.Lock()
	queued := false
	if !r.closed {
		if r.fds == nil {
			r.fds = make(chan int, releaseQueue)
			r.wg.Add(1)
			go r.run(r.fds)
		}
		select {
		case r.fds <- fd:
			queued = true
		default:
		}
	}
	r.mu.Unlock()
	if !queued {
		r.free(fd)
	}
}

func (r *releaser) run(fds chan int) {
	defer r.wg.Done()
	for fd := range fds {
		r.free(fd)
	}
}

// stop lets what is queued be freed in the background, without waiting
// (a file system that hangs must not hold up a shutdown; the kernel
// frees whatever is left when the process exits); later releases are
// done at once.
func (r *releaser) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		if r.fds != nil {
			close(r.fds)
		}
	}
}

// holdsFiles reports whether Remove and Rename should hold the files they
// unlink on the file system of dir: local file systems, where the last
// close frees the file. A network file system would rather rename a file
// still open to a hidden name (NFS's "silly rename") than remove it: an
// extra request, and a name left in the directory for a while.
func holdsFiles(dir *os.File) bool {
	var st unix.Statfs_t
	var err error
	if cerr := withFd(dir, func(fd int) { err = unix.Fstatfs(fd, &st) }); cerr != nil || err != nil {
		return false
	}
	switch int64(st.Type) {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.TMPFS_MAGIC,
		unix.OVERLAYFS_SUPER_MAGIC, unix.F2FS_SUPER_MAGIC, zfsSuperMagic:
		return true
	}
	return false
}

// zfsSuperMagic is ZFS's f_type (not in x/sys/unix).
const zfsSuperMagic = 0x2fc12fc1

// holdFile opens base in directory dirfd with O_PATH, not following a
// final symbolic link, and returns the descriptor when base is not a
// directory (-1 otherwise) and whether it is a directory. When base
// cannot be opened for another reason than not existing, it says whether
// it is a directory by fstatat.
func holdFile(dirfd int, base string) (fd int, isDir bool) {
	var st unix.Stat_t
	fd, err := unix.Openat(dirfd, base, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT {
		return -1, false
	}
	if err != nil {
		return -1, unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		unix.Close(fd)
		return -1, true
	}
	return fd, false
}
