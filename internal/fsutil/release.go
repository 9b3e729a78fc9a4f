package fsutil

import (
	"sync"

	"golang.org/x/sys/unix"
)

// releaseQueue bounds the files a Beneath holds for release at once;
// beyond it, a removal or a replacing rename frees its file itself.
const releaseQueue = 64

// closeHeld closes a held descriptor (a variable for tests).
var closeHeld = unix.Close

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
}

// release closes fd in the background, or now when the queue is full or
// the releaser stopped.
func (r *releaser) release(fd int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		if r.fds == nil {
			r.fds = make(chan int, releaseQueue)
			r.wg.Add(1)
			go r.run(r.fds)
		}
		select {
		case r.fds <- fd:
			return
		default:
		}
	}
	closeHeld(fd)
}

func (r *releaser) run(fds chan int) {
	defer r.wg.Done()
	for fd := range fds {
		closeHeld(fd)
	}
}

// stop frees what is queued and waits until it is done; later releases
// are done at once.
func (r *releaser) stop() {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		if r.fds != nil {
			close(r.fds)
		}
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// holdFile opens base in directory dirfd with O_PATH, not following a
// final symbolic link, and returns the descriptor when base is not a
// directory (-1 otherwise, or when it cannot be opened) and whether it
// is a directory.
func holdFile(dirfd int, base string) (fd int, isDir bool) {
	fd, err := unix.Openat(dirfd, base, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, false
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, false
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		unix.Close(fd)
		return -1, true
	}
	return fd, false
}
