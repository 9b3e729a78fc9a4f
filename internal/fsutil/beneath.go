package fsutil

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// ErrEscapes is returned by Beneath.Open for a path that would lead
// outside the directory (through "..", an absolute symbolic link, or one
// that climbs out).
var ErrEscapes = errors.New("path escapes from parent")

// Beneath opens files under one directory with a single openat2(2)
// call, RESOLVE_BENEATH and RESOLVE_NO_MAGICLINKS: the kernel keeps the
// whole resolution, symbolic links included, inside the directory, as
// os.Root does by opening the path one component at a time (two system
// calls per component). Where the kernel has no openat2 (Linux before
// 5.6, or a seccomp filter that refuses it), Open reports that it did
// nothing and the caller uses its os.Root.
type Beneath struct {
	dir     *os.File // O_PATH descriptor of the directory
	missing atomic.Bool
	syncs   SyncGroup // directory fsyncs of Remove, Rename and SyncDir
	release releaser  // frees what Remove and Rename unlink or replace
	holds   bool      // whether they hold it for release (holdsFiles)
}

// NewBeneath opens dir for Beneath.Open.
func NewBeneath(dir string) (*Beneath, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	b := &Beneath{dir: os.NewFile(uintptr(fd), dir)}
	b.holds = holdsFiles(b.dir)
	return b, nil
}

// Close releases the directory; the files that Remove and Rename
// unlinked or replaced are freed in the background if not yet.
func (b *Beneath) Close() error {
	b.release.stop()
	return b.dir.Close()
}

// holdsFiles reports whether Remove and Rename hold the files they
// unlink for release in the background.
func (b *Beneath) holdsFiles() bool { return b != nil && b.holds }

// free frees the file held by fd (see releaser): in the background for a
// Beneath, at once for a nil one. A negative fd is nothing.
func (b *Beneath) free(fd int) {
	switch {
	case fd < 0:
	case b == nil:
		unix.Close(fd)
	default:
		b.release.release(fd)
	}
}

// Open opens rel, a relative slash-separated name, under the directory
// with the os.OpenFile flags and permission given. done is false when
// openat2 is not available (or kept failing with EAGAIN); err is then
// nil.
func (b *Beneath) Open(rel string, flag int, perm os.FileMode) (f *os.File, done bool, err error) {
	fd, done, err := b.OpenFd(rel, flag, perm)
	if !done || err != nil {
		return nil, done, err
	}
	return os.NewFile(uintptr(fd), b.Name(rel)), true, nil
}

// OpenFd is Open returning the bare descriptor, which the caller closes
// (unix.Close) or hands to os.NewFile. A caller that reads a small file
// once and closes it saves what os.NewFile costs: a fcntl, and for a
// descriptor opened O_NONBLOCK an attempt to register it with the
// poller, which a regular file refuses.
func (b *Beneath) OpenFd(rel string, flag int, perm os.FileMode) (fd int, done bool, err error) {
	if b.missing.Load() {
		return -1, false, nil
	}
	how := unix.OpenHow{
		Flags:   uint64(flag) | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	}
	if flag&(unix.O_CREAT|unix.O_TMPFILE) != 0 {
		how.Mode = uint64(perm.Perm()) // openat2 refuses a mode otherwise
	}
	if cerr := withFd(b.dir, func(dirfd int) {
		// EAGAIN: a rename raced with the resolution; try again a few
		// times, then let os.Root walk the path.
		for range 8 {
			fd, err = unix.Openat2(dirfd, rel, &how)
			if err != unix.EINTR && err != unix.EAGAIN {
				return
			}
		}
	}); cerr != nil {
		return -1, true, &os.PathError{Op: "openat2", Path: rel, Err: cerr}
	}
	switch {
	case err == unix.EINTR || err == unix.EAGAIN:
		return -1, false, nil
	case err == unix.ENOSYS || err == unix.EPERM && b.probeMissing():
		b.missing.Store(true)
		return -1, false, nil
	case err == unix.EXDEV:
		return -1, true, &os.PathError{Op: "openat2", Path: rel, Err: ErrEscapes}
	case err != nil:
		return -1, true, &os.PathError{Op: "openat2", Path: rel, Err: err}
	}
	return fd, true, nil
}

// IsDir reports whether rel, not following a final symbolic link, is a
// directory, as os.Root.Lstat would tell, in three system calls
// (openat2 with O_PATH, fstat, close) rather than two per component of
// rel. done is false when openat2 is not available; a missing rel is
// reported as an error wrapping fs.ErrNotExist.
func (b *Beneath) IsDir(rel string) (isDir, done bool, err error) {
	fd, done, err := b.OpenFd(rel, unix.O_PATH|unix.O_NOFOLLOW, 0)
	if !done || err != nil {
		return false, done, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, true, &os.PathError{Op: "fstat", Path: rel, Err: err}
	}
	return st.Mode&unix.S_IFMT == unix.S_IFDIR, true, nil
}

// Name returns the name of file rel under the directory, for messages
// and for os.NewFile.
func (b *Beneath) Name(rel string) string { return filepath.Join(b.dir.Name(), rel) }

// probeMissing tells a seccomp refusal of openat2 from a permission
// error on the file: openat2 of the directory itself must succeed.
func (b *Beneath) probeMissing() bool {
	var fd int
	err := errors.New("directory closed")
	withFd(b.dir, func(dirfd int) {
		fd, err = unix.Openat2(dirfd, ".", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH})
	})
	if err == nil {
		unix.Close(fd)
		return false
	}
	return true
}

// withFd calls fn with f's descriptor, which stays open until fn returns.
func withFd(f *os.File, fn func(fd int)) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(func(fd uintptr) { fn(int(fd)) })
}

// OpenFile opens rel under the directory with one openat2 call where the
// kernel has it, else through root, which must be the same directory. A
// nil Beneath uses root alone.
func (b *Beneath) OpenFile(root *os.Root, rel string, flag int, perm os.FileMode) (*os.File, error) {
	if b != nil {
		if f, done, err := b.Open(rel, flag, perm); done {
			return f, err
		}
	}
	return root.OpenFile(rel, flag, perm)
}

// Remove removes rel, a file (or, with dirs, an empty directory), under
// the directory through its parent, opened once (with openat2 where the
// kernel has it, else through root), and with sync fsyncs that parent
// (an fsync shared with concurrent callers, see SyncGroup),
// which makes the removal durable: one open instead of a walk for the
// removal and another for the fsync. A directory when dirs is false
// fails with EISDIR.
func (b *Beneath) Remove(root *os.Root, rel string, dirs, sync bool) error {
	return b.remove(root, rel, dirs, sync, nil)
}

// RemoveInspected is Remove of a file (not a directory) that first calls
// inspect with the descriptor of rel's parent and rel's name in it, as
// Remove opened them: an error from inspect is returned and nothing is
// removed. It lets a caller read what it is about to remove (an
// attribute, say) without a second walk to the parent.
func (b *Beneath) RemoveInspected(root *os.Root, rel string, sync bool, inspect func(dirfd int, name string) error) error {
	return b.remove(root, rel, false, sync, inspect)
}

func (b *Beneath) remove(root *os.Root, rel string, dirs, sync bool, inspect func(dirfd int, name string) error) error {
	parent, base := splitRel(rel)
	d, err := b.OpenFile(root, parent, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer d.Close()
	var uerr, ierr error
	held := -1
	if err := withFd(d, func(fd int) {
		if inspect != nil {
			if ierr = inspect(fd, base); ierr != nil {
				return
			}
		}
		if b.holdsFiles() {
			held, _ = holdFile(fd, base)
		}
		uerr = unix.Unlinkat(fd, base, 0)
		if uerr == unix.EISDIR && dirs {
			uerr = unix.Unlinkat(fd, base, unix.AT_REMOVEDIR)
		}
	}); err != nil {
		return err
	}
	if ierr != nil {
		return ierr
	}
	if uerr != nil {
		if held >= 0 {
			unix.Close(held)
		}
		return &os.PathError{Op: "remove", Path: rel, Err: uerr}
	}
	b.free(held)
	if sync {
		return b.syncGroup().Sync(d)
	}
	return nil
}

// Rename renames oldRel to newRel under the directory through their
// parents, each opened once (with openat2 where the kernel has it), and
// with sync fsyncs the new parent, and the old one when it differs
// (fsyncs shared as in SyncDir),
// which makes the rename durable. As with os.Root.Rename, an existing
// file at newRel is replaced and an existing directory makes it fail
// with EEXIST. A missing parent of newRel fails with ENOENT, like a
// missing oldRel. A failed rename is an *os.LinkError; any other error
// came after the rename was done (opening a parent, or the fsync).
func (b *Beneath) Rename(root *os.Root, oldRel, newRel string, sync bool) error {
	oldParent, oldBase := splitRel(oldRel)
	newParent, newBase := splitRel(newRel)
	nd, err := b.OpenFile(root, newParent, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer nd.Close()
	od := nd
	if oldParent != newParent {
		if od, err = b.OpenFile(root, oldParent, os.O_RDONLY|unix.O_DIRECTORY, 0); err != nil {
			return err
		}
		defer od.Close()
	}
	var rerr, cerr error
	replaced := -1 // the file at newRel, held for release
	err = withFd(od, func(ofd int) {
		cerr = withFd(nd, func(nfd int) {
			var isDir bool
			if b.holdsFiles() {
				replaced, isDir = holdFile(nfd, newBase)
			} else {
				var st unix.Stat_t
				isDir = unix.Fstatat(nfd, newBase, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
			}
			if isDir {
				rerr = unix.EEXIST
				return
			}
			rerr = unix.Renameat(ofd, oldBase, nfd, newBase)
		})
	})
	for _, e := range []error{cerr, rerr} {
		if err == nil {
			err = e
		}
	}
	if err != nil {
		if replaced >= 0 {
			unix.Close(replaced)
		}
		return &os.LinkError{Op: "rename", Old: oldRel, New: newRel, Err: err}
	}
	b.free(replaced)
	if !sync {
		return nil
	}
	if err := b.syncGroup().Sync(nd); err != nil {
		return err
	}
	if od != nd {
		return b.syncGroup().Sync(od)
	}
	return nil
}

// SyncDir fsyncs directory rel under the directory, which makes the
// creations, removals and renames done in it durable; concurrent calls
// for one directory share fsyncs (see SyncGroup). A nil Beneath opens
// rel through root and fsyncs it on its own.
func (b *Beneath) SyncDir(root *os.Root, rel string) error {
	d, err := b.OpenFile(root, rel, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	err = b.syncGroup().Sync(d)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncGroup is b's SyncGroup; nil (an fsync per call) for a nil b.
func (b *Beneath) syncGroup() *SyncGroup {
	if b == nil {
		return nil
	}
	return &b.syncs
}

// splitRel splits a relative slash-separated name into its parent
// (".", at the top) and last element.
func splitRel(rel string) (parent, base string) {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i], rel[i+1:]
	}
	return ".", rel
}
