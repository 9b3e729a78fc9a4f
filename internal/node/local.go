package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/ecstore/ecstore/internal/directio"
	"github.com/ecstore/ecstore/internal/fsutil"
	"github.com/ecstore/ecstore/internal/watchdog"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// attrsXattr is the extended attribute in which Local keeps a file's
// attributes, all in one (url.Values encoding: one fsetxattr per upload,
// one getxattr per listed file, where a key each took six of each).
// Files written before it hold one "user.ecstore.<key>" attribute per
// key (xattrPrefix), which are still read.
const (
	attrsXattr  = "user.ecstore"
	xattrPrefix = "user.ecstore."
)

// uploadBufferSize is the staging buffer of a Local upload: each time it
// fills, it is written with O_DIRECT (package directio), so that archive
// data does not pass through the page cache; the small ZIP headers
// between chunks are coalesced with the chunks around them.
const uploadBufferSize = 128 << 10

// An upload written in pieces of at least half of largeUploadBuffer (the
// chunks of a large object) moves to a staging buffer of that size: one
// O_DIRECT write a megabyte instead of eight costs a 1 GiB put about a
// sixth of the gateway's CPU (measured on 10 local directories). The
// uploads of a process hold at most largeBufferBudget bytes of them, so
// that many transfers at once keep to the small buffers and memory stays
// bounded; six large puts at 8+2 (10 uploads each) fit. With 16 MiB (one
// put), 8 puts of 256 MiB at once on 10 local directories cost the
// gateway a third more CPU and ran at 547-826 MB/s against 798-848, for
// a peak RSS 35-45 MiB lower (204-224 MiB against 248-258).
const (
	largeUploadBuffer = 1 << 20
	largeBufferBudget = 64 << 20
)

// largeBuffersHeld counts the bytes of large staging buffers held by the
// uploads of this process.
var largeBuffersHeld atomic.Int64

// LocalOptions configure a Local node.
type LocalOptions struct {
	// Fsync makes the node durable: Finish fsyncs the file, and Commit,
	// Mkdir, Remove and Rename fsync the directories they change. Without
	// it no fsync is issued at all, which suits scratch data and tests.
	Fsync bool
}

// Local is a Node backed by a directory of the local file system, usually
// one per disk. All access goes through an os.Root, so no path (including
// one that meets a symbolic link) can reach outside the directory.
//
// Extended attributes (see Attributes) are stored as "user.ecstore.<key>"
// xattrs. On a file system without user xattrs, SetAttrs silently does
// nothing and Stat and List report no Attrs.
//
// Local's Upload.Abort ignores its context: it is local cleanup and must
// work after the write's context was cancelled. Commit finishes an
// upload that was not finished.
type Local struct {
	id      string
	dir     string
	root    *os.Root
	beneath *fsutil.Beneath // one-call opens under dir; nil: root only
	fsync   bool
	procFD  bool        // /proc/self/fd can name a directory fd
	noAttr  atomic.Bool // the file system refused user xattrs
}

var _ Node = (*Local)(nil)

// NewLocal returns a node named id that stores its files under dir, which
// must be an existing directory. It is not created: a missing mount point
// must not silently become a directory on the root file system. Call
// Close to release the directory.
func NewLocal(id, dir string, opts LocalOptions) (*Local, error) {
	if id == "" {
		return nil, errors.New("node: new local: empty node id")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("node %s: open dir %s: %w", id, dir, err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("node %s: open dir %s: %w", id, abs, mapErr(err))
	}
	_, perr := os.Stat("/proc/self/fd")
	beneath, err := fsutil.NewBeneath(abs)
	if err != nil {
		beneath = nil // os.Root alone serves
	}
	return &Local{
		id:      id,
		dir:     abs,
		root:    root,
		beneath: beneath,
		fsync:   opts.Fsync,
		procFD:  perr == nil,
	}, nil
}

// ID returns the node's name.
func (l *Local) ID() string { return l.id }

// openFile opens path under the node's directory (fsutil.Beneath).
func (l *Local) openFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	return l.beneath.OpenFile(l.root, fsutil.Rel(path), flag, perm)
}

// isDir reports whether path, not following a final symbolic link, is a
// directory.
func (l *Local) isDir(path string) (bool, error) {
	if l.beneath != nil {
		if isDir, done, err := l.beneath.IsDir(fsutil.Rel(path)); done {
			return isDir, err
		}
	}
	fi, err := l.root.Lstat(fsutil.Rel(path))
	if err != nil {
		return false, err
	}
	return fi.IsDir(), nil
}

// Dir returns the absolute directory the node stores its files in.
func (l *Local) Dir() string { return l.dir }

// Close releases the node's directory. Files already open stay
// readable; every other later call fails, including the Commit of an
// upload in progress.
func (l *Local) Close() error {
	if l.beneath != nil {
		l.beneath.Close()
	}
	if err := l.root.Close(); err != nil {
		return fmt.Errorf("node %s: close: %w", l.id, err)
	}
	return nil
}

// Create implements Node.
func (l *Local) Create(ctx context.Context, path string) (Upload, error) {
	if err := l.check(ctx, "create", path); err != nil {
		return nil, err
	}
	if path == "/" {
		return nil, l.wrap("create", path, ErrIsDir)
	}
	// Fail early, before any byte is written, when path is a directory
	// or its parent is a file.
	if isDir, err := l.isDir(path); err == nil && isDir {
		return nil, l.wrap("create", path, ErrIsDir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, l.fail("create", path, err)
	}
	dir, base := Split(path)
	var sfx [8]byte
	_, _ = rand.Read(sfx[:]) // never fails (crypto/rand docs)
	tmp := Join(dir, TempName(base, hex.EncodeToString(sfx[:])))
	const flag = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	f, err := l.openFile(tmp, flag, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		if err := l.mkdirs(dir); err != nil {
			return nil, l.fail("create", path, err)
		}
		f, err = l.openFile(tmp, flag, 0o644)
	}
	if err != nil {
		return nil, l.fail("create", path, err)
	}
	u := &localUpload{
		l:    l,
		path: path,
		tmp:  tmp,
		f:    f,
		w:    directio.NewAppender(f, 0, uploadBufferSize),
	}
	if l.fsync {
		u.flusher = fsutil.NewFlusher(f, 0)
	}
	return u, nil
}

// Open implements Node. Opening a directory fails with ErrIsDir.
//
// A file smaller than WholeRead is read whole by the open, into memory,
// and its descriptor closed at once: the File is then a ContentsFile,
// whose reads cost nothing. Opening a small object's archive, the common
// case among many small files, costs four system calls so (openat2,
// fstat, pread, close) rather than six, and parsing it needs no copy. A
// larger file is not read by the open.
func (l *Local) Open(ctx context.Context, path string) (File, error) {
	if err := l.check(ctx, "open", path); err != nil {
		return nil, err
	}
	// O_NONBLOCK keeps a FIFO planted in the tree from blocking the open;
	// it has no effect on regular files.
	const flag = os.O_RDONLY | syscall.O_NONBLOCK
	if l.beneath != nil {
		fd, done, err := l.beneath.OpenFd(fsutil.Rel(path), flag, 0)
		if done {
			if err != nil {
				return nil, l.fail("open", path, err)
			}
			return l.openFd(path, fd)
		}
	}
	f, err := l.root.OpenFile(fsutil.Rel(path), flag, 0)
	if err != nil {
		return nil, l.fail("open", path, err)
	}
	return l.openedFile(path, f)
}

// WholeRead bounds the files that Local's Open reads whole: a regular
// file shorter than this is held in memory.
const WholeRead = 64 << 10

// openFd returns the file open as fd: in memory, read whole, when it is
// shorter than WholeRead, and as an open file otherwise. The size comes
// from fstat, so that opening a large file reads none of it: where the
// file is not in the page cache (cold, or just written with O_DIRECT)
// such a read would be a disk access before the one of the archive's
// tail, doubling the time an open or a stat of the object waits.
func (l *Local) openFd(path string, fd int) (File, error) {
	var st unix.Stat_t
	if err := fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, l.fail("open", path, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		unix.Close(fd)
		return nil, l.wrap("open", path, ErrIsDir)
	default: // a FIFO, a socket or a device planted in the tree
		unix.Close(fd)
		return nil, l.wrap("open", path, errors.New("not a regular file"))
	}
	name := l.beneath.Name(fsutil.Rel(path))
	if st.Size >= WholeRead {
		return &localFile{l: l, path: path, f: os.NewFile(uintptr(fd), name), size: st.Size}, nil
	}
	// One byte more than fstat said: a single pread then both reads the
	// file and shows it has not grown since (no second read to find the
	// end), straight into the buffer the File keeps.
	b := make([]byte, st.Size+1)
	n, err := preadAtLeast(fd, b, int(st.Size))
	switch {
	case err != nil:
		unix.Close(fd)
		return nil, l.fail("open", path, err)
	case n <= int(st.Size):
		unix.Close(fd)
		return &contentsFile{b: b[:n:n]}, nil
	}
	// It grew since the fstat.
	return l.openedFile(path, os.NewFile(uintptr(fd), name))
}

// fstat is unix.Fstat, retried on EINTR.
func fstat(fd int, st *unix.Stat_t) error {
	for {
		if err := unix.Fstat(fd, st); err != unix.EINTR {
			return err
		}
	}
}

// preadAtLeast reads from fd at offset 0 into p until it holds at least
// want bytes (after one pread at least) or the file ends, and returns how
// many it holds: a single pread when the file has want bytes.
func preadAtLeast(fd int, p []byte, want int) (int, error) {
	done := 0
	for {
		n, err := unix.Pread(fd, p[done:], int64(done))
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return done, err
		}
		done += n
		if n == 0 || done >= want || done == len(p) {
			return done, nil
		}
	}
}

// openedFile returns the File of f, a file open for reading, once it is
// known to be a regular file.
func (l *Local) openedFile(path string, f *os.File) (File, error) {
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, l.fail("open", path, err)
	}
	if fi.IsDir() {
		f.Close()
		return nil, l.wrap("open", path, ErrIsDir)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, l.wrap("open", path, fmt.Errorf("not a regular file (%v)", fi.Mode().Type()))
	}
	return &localFile{l: l, path: path, f: f, size: fi.Size()}, nil
}

// Stat implements Node. Symbolic links inside the directory are followed.
func (l *Local) Stat(ctx context.Context, path string) (FileInfo, error) {
	if err := l.check(ctx, "stat", path); err != nil {
		return FileInfo{}, err
	}
	fi, err := l.root.Stat(fsutil.Rel(path))
	if err != nil {
		return FileInfo{}, l.fail("stat", path, err)
	}
	info := toInfo(fi)
	if path == "/" {
		info.Name = "/"
	}
	if fi.Mode().IsRegular() && !l.noAttr.Load() {
		info.Attrs, _ = l.attrsAt(path) // best effort
	}
	return info, nil
}

// ReadAttrs implements AttrReader: an open of the file, a getxattr and a
// close (with no read of the file, and no fstat). A directory at path has
// no attributes.
func (l *Local) ReadAttrs(ctx context.Context, path string) (map[string]string, error) {
	if err := l.check(ctx, "readattrs", path); err != nil {
		return nil, err
	}
	if l.noAttr.Load() {
		return nil, l.wrap("readattrs", path, ErrNoAttrs)
	}
	attrs, err := l.attrsAt(path)
	if err != nil {
		return nil, l.fail("readattrs", path, err)
	}
	return attrs, nil
}

// attrsAt opens the file at path (not following a final symbolic link
// out of the node) and reads its attributes (readAttrs).
func (l *Local) attrsAt(path string) (map[string]string, error) {
	const flag = os.O_RDONLY | syscall.O_NONBLOCK
	if l.beneath != nil {
		fd, done, err := l.beneath.OpenFd(fsutil.Rel(path), flag, 0)
		if done {
			if err != nil {
				return nil, err
			}
			defer unix.Close(fd)
			return l.fdAttrs(fd), nil
		}
	}
	f, err := l.openFile(path, flag, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var attrs map[string]string
	if err := control(f, func(fd int) { attrs = l.fdAttrs(fd) }); err != nil {
		return nil, err
	}
	return attrs, nil
}

// fdAttrs reads the attributes of the file open as fd (readAttrs).
func (l *Local) fdAttrs(fd int) map[string]string {
	return l.readAttrs(
		func(b []byte) (int, error) { return unix.Flistxattr(fd, b) },
		func(a string, b []byte) (int, error) { return unix.Fgetxattr(fd, a, b) })
}

// KeepsAttrs implements AttrReader.
func (l *Local) KeepsAttrs() bool { return !l.noAttr.Load() }

// List implements Node. Entries are not followed if they are symbolic
// links.
func (l *Local) List(ctx context.Context, dir string) ([]FileInfo, error) {
	f, err := l.openDir(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// A directory opened in a Root stats its entries with fstatat on the
	// directory's descriptor, so they cannot escape either.
	fis, err := readInBatches(ctx, f.Readdir)
	if err != nil {
		return nil, l.fail("list", dir, err)
	}
	out := make([]FileInfo, 0, len(fis))
	for _, fi := range fis {
		out = append(out, toInfo(fi))
	}
	if l.noAttr.Load() {
		return out, nil
	}
	err = control(f, func(dirfd int) {
		for i := range out {
			if i%listBatch == listBatch-1 {
				watchdog.Progress(ctx)
			}
			if !fis[i].Mode().IsRegular() || l.noAttr.Load() {
				continue
			}
			out[i].Attrs = l.entryAttrs(dirfd, out[i].Name)
		}
	})
	if err != nil {
		return nil, l.fail("list", dir, err)
	}
	return out, nil
}

// listBatch is how many entries a listing reads, or describes, between
// two reports of progress to the watchdogs of its context: a listing of a
// large directory is bounded by how long the file system goes silent
// (watchdog.WithIdleTimeout), not by how long the whole listing takes,
// and a guarded node (Guard) cuts off one that stops.
const listBatch = 1024

// readInBatches reads a directory's entries listBatch at a time with
// read (os.File's Readdir or ReadDir), reporting progress after each.
func readInBatches[T any](ctx context.Context, read func(n int) ([]T, error)) ([]T, error) {
	var all []T
	for {
		batch, err := read(listBatch)
		all = append(all, batch...)
		watchdog.Progress(ctx)
		if errors.Is(err, io.EOF) {
			return all, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// ListNames implements NameLister: the directory's entries from getdents
// (their types included), a stat for each directory, nothing read for
// files.
func (l *Local) ListNames(ctx context.Context, dir string) ([]FileInfo, error) {
	f, err := l.openDir(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	des, err := readInBatches(ctx, f.ReadDir)
	if err != nil {
		return nil, l.fail("list", dir, err)
	}
	out := make([]FileInfo, 0, len(des))
	var serr error
	err = control(f, func(dirfd int) {
		for i, de := range des {
			if i%listBatch == listBatch-1 {
				watchdog.Progress(ctx)
			}
			if !de.IsDir() {
				out = append(out, FileInfo{Name: de.Name()})
				continue
			}
			// Stated through the directory's descriptor: DirEntry.Info
			// would lstat the entry by its path, which a directory
			// renamed or replaced meanwhile could lead out of the root.
			var st unix.Stat_t
			err := unix.Fstatat(dirfd, de.Name(), &st, unix.AT_SYMLINK_NOFOLLOW)
			switch {
			case errors.Is(err, unix.ENOENT):
				continue // removed since the directory was read
			case err != nil:
				serr = err
				return
			}
			fi := FileInfo{Name: de.Name(), IsDir: st.Mode&unix.S_IFMT == unix.S_IFDIR}
			if fi.IsDir {
				fi.Size, fi.ModTime = st.Size, time.Unix(st.Mtim.Unix())
			}
			out = append(out, fi)
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return nil, l.fail("list", dir, err)
	}
	return out, nil
}

// openDir opens directory dir for a listing.
func (l *Local) openDir(ctx context.Context, dir string) (*os.File, error) {
	if err := l.check(ctx, "list", dir); err != nil {
		return nil, err
	}
	f, err := l.openFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, l.fail("list", dir, err)
	}
	return f, nil
}

// entryAttrs reads the attributes of the entry name of the directory open
// as dirfd. Through /proc/self/fd it costs one listxattr plus one getxattr
// per attribute; without /proc it opens the entry.
func (l *Local) entryAttrs(dirfd int, name string) map[string]string {
	if l.procFD {
		p := "/proc/self/fd/" + strconv.Itoa(dirfd) + "/" + name
		return l.readAttrs(
			func(b []byte) (int, error) { return unix.Llistxattr(p, b) },
			func(a string, b []byte) (int, error) { return unix.Lgetxattr(p, a, b) })
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	return l.fdAttrs(fd)
}

// readAttrs returns the attributes kept in attrsXattr, or else in
// user.ecstore.* attributes, through list and get, or nil if there are
// none or they cannot be read. Attributes are best effort (see
// FileInfo.Attrs), so errors are dropped; ENOTSUP marks the node as
// having no attributes.
func (l *Local) readAttrs(list func([]byte) (int, error), get func(string, []byte) (int, error)) map[string]string {
	val, err := xattrCall(func(b []byte) (int, error) { return get(attrsXattr, b) }, 512)
	switch {
	case err == nil:
		return DecodeAttrs(val)
	case isNotSup(err):
		l.noAttr.Store(true)
		return nil
	case err != unix.ENODATA:
		return nil
	}
	names, err := xattrCall(list, 512)
	if err != nil {
		if isNotSup(err) {
			l.noAttr.Store(true)
		}
		return nil
	}
	var attrs map[string]string
	for len(names) > 0 {
		i := strings.IndexByte(string(names), 0)
		if i < 0 {
			i = len(names)
		}
		name := string(names[:i])
		names = names[min(i+1, len(names)):]
		key, ok := strings.CutPrefix(name, xattrPrefix)
		if !ok || key == "" {
			continue
		}
		val, err := xattrCall(func(b []byte) (int, error) { return get(name, b) }, 256)
		if err != nil {
			continue
		}
		if attrs == nil {
			attrs = make(map[string]string)
		}
		attrs[key] = string(val)
	}
	return attrs
}

// xattrCall calls a listxattr or getxattr style function, growing the
// buffer from size when the value does not fit.
func xattrCall(call func([]byte) (int, error), size int) ([]byte, error) {
	for range 4 {
		b := make([]byte, size)
		n, err := call(b)
		if err == nil {
			return b[:n], nil
		}
		if err != unix.ERANGE {
			return nil, err
		}
		n, err = call(nil) // ask for the size
		if err != nil {
			return nil, err
		}
		size = n + 64 // room for an attribute added meanwhile
	}
	return nil, unix.ERANGE
}

// Remove implements Node. The root directory cannot be removed.
func (l *Local) Remove(ctx context.Context, path string) error {
	if err := l.check(ctx, "remove", path); err != nil {
		return err
	}
	if path == "/" {
		return l.wrap("remove", path, fmt.Errorf("%w: cannot remove the root", ErrPath))
	}
	if err := l.beneath.Remove(l.root, fsutil.Rel(path), true, l.fsync); err != nil {
		return l.fail("remove", path, err)
	}
	return nil
}

// Rename implements Node. Renaming onto an existing directory fails with
// ErrExist; the root directory cannot be renamed.
func (l *Local) Rename(ctx context.Context, oldPath, newPath string) error {
	if err := l.check(ctx, "rename", oldPath); err != nil {
		return err
	}
	if err := CheckPath(newPath); err != nil {
		return l.wrap("rename", newPath, err)
	}
	what := oldPath + " -> " + newPath
	if oldPath == "/" || newPath == "/" {
		return l.wrap("rename", what, fmt.Errorf("%w: cannot rename the root", ErrPath))
	}
	err := l.beneath.Rename(l.root, fsutil.Rel(oldPath), fsutil.Rel(newPath), l.fsync)
	if errors.Is(err, fs.ErrNotExist) {
		// Either oldPath is missing or newPath's parent is.
		if _, serr := l.root.Lstat(fsutil.Rel(oldPath)); serr != nil {
			return l.fail("rename", what, serr)
		}
		newDir, _ := Split(newPath)
		if err := l.mkdirs(newDir); err != nil {
			return l.fail("rename", what, err)
		}
		err = l.beneath.Rename(l.root, fsutil.Rel(oldPath), fsutil.Rel(newPath), l.fsync)
	}
	if err != nil {
		return l.fail("rename", what, err)
	}
	return nil
}

// Mkdir implements Node. If path or one of its parents is a file, it
// fails with ErrNotDir.
func (l *Local) Mkdir(ctx context.Context, path string) error {
	if err := l.check(ctx, "mkdir", path); err != nil {
		return err
	}
	if err := l.mkdirs(path); err != nil {
		return l.fail("mkdir", path, err)
	}
	return nil
}

// Space implements Node: Free is the space available to unprivileged
// users.
func (l *Local) Space(ctx context.Context) (Space, error) {
	if err := ctx.Err(); err != nil {
		return Space{}, fmt.Errorf("node %s: space: %w", l.id, err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(l.dir, &st); err != nil {
		return Space{}, fmt.Errorf("node %s: space: %w", l.id, err)
	}
	bs := int64(st.Bsize)
	return Space{Total: int64(st.Blocks) * bs, Free: int64(st.Bavail) * bs}, nil
}

// mkdirs creates directory p and its missing parents, fsyncing the parent
// of every directory it creates. It returns an unwrapped error.
func (l *Local) mkdirs(p string) error {
	if fi, err := l.root.Stat(fsutil.Rel(p)); err == nil {
		if !fi.IsDir() {
			return syscall.ENOTDIR
		}
		return nil
	}
	parent := "/"
	existed := false
	for _, el := range strings.Split(p[1:], "/") {
		cur := Join(parent, el)
		err := l.root.Mkdir(fsutil.Rel(cur), 0o755)
		switch {
		case err == nil:
			existed = false
			if err := l.syncDir(parent); err != nil {
				return err
			}
		case errors.Is(err, fs.ErrExist):
			existed = true
		default:
			return err
		}
		parent = cur
	}
	if existed {
		fi, err := l.root.Stat(fsutil.Rel(p))
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return syscall.ENOTDIR
		}
	}
	return nil
}

// syncDir fsyncs directory dir if the node is durable. It returns an
// unwrapped error.
func (l *Local) syncDir(dir string) error {
	if !l.fsync {
		return nil
	}
	return l.beneath.SyncDir(l.root, fsutil.Rel(dir))
}

// check validates path and ctx for operation op. Stat, open and remove
// accept a temporary name as the last element, to reach debris.
func (l *Local) check(ctx context.Context, op, path string) error {
	valid := CheckPath
	if op == "stat" || op == "open" || op == "remove" || op == "rename" {
		valid = CheckDebrisPath
	}
	if err := valid(path); err != nil {
		return l.wrap(op, path, err)
	}
	if err := ctx.Err(); err != nil {
		return l.wrap(op, path, err)
	}
	return nil
}

// wrap adds the node, operation and path to err.
func (l *Local) wrap(op, path string, err error) error {
	return fmt.Errorf("node %s: %s %s: %w", l.id, op, path, err)
}

// fail maps an OS error to the node sentinels and wraps it.
func (l *Local) fail(op, path string, err error) error {
	return l.wrap(op, path, mapErr(err))
}

// mapErr translates an OS error into the matching sentinel. Errors with
// no sentinel are returned as they are.
func mapErr(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ENOENT:
			return ErrNotExist
		case syscall.EEXIST:
			return ErrExist
		case syscall.ENOTEMPTY:
			return ErrNotEmpty
		case syscall.EISDIR:
			return ErrIsDir
		case syscall.ENOTDIR:
			return ErrNotDir
		case syscall.ENOSPC, syscall.EDQUOT:
			return ErrNoSpace
		case syscall.ENAMETOOLONG:
			return fmt.Errorf("%w: name too long", ErrPath)
		}
	}
	if isEscape(err) {
		return fmt.Errorf("%w: leads outside the node directory", ErrPath)
	}
	return err
}

// isEscape reports whether err is os.Root's refusal to follow a path out
// of the root. The os package does not export that error, so its text is
// matched; CheckPath has already rejected "..", so only symbolic links
// get here.
func isEscape(err error) bool {
	for err != nil {
		if err.Error() == "path escapes from parent" {
			return true
		}
		err = errors.Unwrap(err)
	}
	return false
}

// isNotSup reports whether err says the file system has no user xattrs.
func isNotSup(err error) bool {
	return errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP)
}

// toInfo converts an fs.FileInfo.
func toInfo(fi fs.FileInfo) FileInfo {
	return FileInfo{Name: fi.Name(), Size: fi.Size(), ModTime: fi.ModTime(), IsDir: fi.IsDir()}
}

// control runs fn with the descriptor of f.
func control(f *os.File, fn func(fd int)) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(func(fd uintptr) { fn(int(fd)) })
}

// Upload states.
const (
	upWriting = iota
	upFinished
	upCommitted
	upAborted
)

// localUpload is the Upload of a Local node. The temporary file stays open
// until Commit or Abort so that attributes can still be set after Finish.
type localUpload struct {
	l     *Local
	path  string // final node path
	tmp   string // temporary node path
	f     *os.File
	w     *directio.Appender // nil once flushed or discarded
	large bool               // w has a large staging buffer, counted in largeBuffersHeld
	// flusher makes the written data durable as it goes (durable nodes
	// only), so that the fsync of Finish has little left to do.
	flusher *fsutil.Flusher
	state   int
	err     error             // sticky write or finish error
	attrs   map[string]string // set by SetAttrs so far
}

var (
	_ Upload     = (*localUpload)(nil)
	_ Attributes = (*localUpload)(nil)
	_ AttrReader = (*Local)(nil)
)

func (u *localUpload) Write(ctx context.Context, p []byte) error {
	switch {
	case u.state != upWriting:
		return u.l.wrap("write", u.path, errors.New("upload already finished"))
	case u.err != nil:
		return u.err
	}
	if err := ctx.Err(); err != nil {
		return u.l.wrap("write", u.path, err)
	}
	if !u.large && len(p) >= largeUploadBuffer/2 {
		if largeBuffersHeld.Add(largeUploadBuffer) <= largeBufferBudget {
			u.w.Grow(largeUploadBuffer)
			u.large = true
		} else {
			largeBuffersHeld.Add(-largeUploadBuffer)
		}
	}
	if _, err := u.w.Write(p); err != nil {
		u.err = u.l.fail("write", u.path, err)
		return u.err
	}
	u.flusher.Wrote(len(p))
	return nil
}

func (u *localUpload) Finish(ctx context.Context) error {
	if u.state != upWriting {
		if u.state == upFinished {
			return u.err
		}
		return u.l.wrap("finish", u.path, errors.New("upload already committed or aborted"))
	}
	if u.err != nil {
		return u.err
	}
	if err := ctx.Err(); err != nil {
		return u.l.wrap("finish", u.path, err)
	}
	u.state = upFinished
	err := u.w.Flush()
	u.release()
	if ferr := u.flusher.Wait(); err == nil {
		err = ferr
	}
	if err != nil {
		u.err = u.l.fail("finish", u.path, err)
		return u.err
	}
	if u.l.fsync {
		if err := u.f.Sync(); err != nil {
			u.err = u.l.fail("finish", u.path, err)
			return u.err
		}
	}
	return nil
}

func (u *localUpload) Commit(ctx context.Context) error {
	switch u.state {
	case upCommitted, upAborted:
		return u.l.wrap("commit", u.path, errors.New("upload already committed or aborted"))
	case upWriting:
		if err := u.Finish(ctx); err != nil {
			return err
		}
	}
	if u.err != nil {
		return u.err
	}
	if err := ctx.Err(); err != nil {
		return u.l.wrap("commit", u.path, err)
	}
	if u.f != nil {
		err := u.f.Close()
		u.f = nil
		if err != nil {
			u.err = u.l.fail("commit", u.path, err)
			return u.err
		}
	}
	err := u.l.beneath.Rename(u.l.root, fsutil.Rel(u.tmp), fsutil.Rel(u.path), u.l.fsync)
	var notRenamed *os.LinkError
	if err != nil && errors.As(err, &notRenamed) {
		if errors.Is(err, fs.ErrExist) {
			// Renaming onto a directory fails with EEXIST.
			return u.l.wrap("commit", u.path, ErrIsDir)
		}
		return u.l.fail("commit", u.path, err)
	}
	u.state = upCommitted
	if err != nil { // the fsync of the directory
		return u.l.fail("commit", u.path, err)
	}
	return nil
}

// release returns the upload's staging buffer.
func (u *localUpload) release() {
	if u.w == nil {
		return
	}
	u.w.Release()
	u.w = nil
	if u.large {
		largeBuffersHeld.Add(-largeUploadBuffer)
		u.large = false
	}
}

func (u *localUpload) Abort(context.Context) error {
	if u.state == upCommitted || u.state == upAborted {
		return nil
	}
	u.state = upAborted
	u.release()
	_ = u.flusher.Wait() // the data is being discarded
	if u.f != nil {
		_ = u.f.Close()
		u.f = nil
	}
	if err := u.l.root.Remove(fsutil.Rel(u.tmp)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return u.l.fail("abort", u.path, err)
	}
	return nil
}

// TempPath implements Upload.
func (u *localUpload) TempPath() string { return u.tmp }

// SetAttrs implements Attributes. Keys may hold ASCII letters, digits,
// '.', '_' and '-'. It may be called until Commit.
func (u *localUpload) SetAttrs(ctx context.Context, attrs map[string]string) error {
	if (u.state != upWriting && u.state != upFinished) || u.f == nil {
		return u.l.wrap("setattrs", u.path, errors.New("upload already committed or aborted"))
	}
	if err := ctx.Err(); err != nil {
		return u.l.wrap("setattrs", u.path, err)
	}
	for k := range attrs {
		if !ValidAttrKey(k) {
			return u.l.wrap("setattrs", u.path, fmt.Errorf("invalid attribute key %q", k))
		}
	}
	if u.l.noAttr.Load() {
		return nil
	}
	// Every call writes all the attributes set so far, in one value.
	if u.attrs == nil {
		u.attrs = make(map[string]string, len(attrs))
	}
	maps.Copy(u.attrs, attrs)
	val := EncodeAttrs(u.attrs)
	var serr error
	err := control(u.f, func(fd int) {
		serr = unix.Fsetxattr(fd, attrsXattr, val, 0)
	})
	if err == nil {
		err = serr
	}
	if isNotSup(err) {
		u.l.noAttr.Store(true)
		return nil
	}
	if err != nil {
		return u.l.fail("setattrs", u.path, err)
	}
	if u.state == upFinished && u.l.fsync {
		if err := u.f.Sync(); err != nil {
			return u.l.fail("setattrs", u.path, err)
		}
	}
	return nil
}

// localFile is the File of a Local node.
type localFile struct {
	l    *Local
	path string
	f    *os.File
	size int64

	// direct is f opened again with O_DIRECT for ReadSpan, on its first
	// use; nil when that failed or the device refused a direct read.
	directOnce sync.Once
	direct     *os.File
	refused    atomic.Bool
}

var _ File = (*localFile)(nil)

func (f *localFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, f.l.wrap("read", f.path, err)
	}
	if off < 0 {
		return 0, f.l.wrap("read", f.path, fmt.Errorf("negative offset %d", off))
	}
	n, err := f.f.ReadAt(p, off)
	if err == io.EOF {
		return n, io.EOF
	}
	if err != nil {
		return n, f.l.fail("read", f.path, err)
	}
	return n, nil
}

// ReadSpan implements SpanReader: spans of at least DirectSpan bytes are
// read with O_DIRECT, straight from the device into buf, skipping the
// page cache. A chunk of a large object is read once per transfer, and
// its archive was written with O_DIRECT (so it is not in the page cache
// to begin with): copying it through fresh page-cache pages cost a cold
// get several times the CPU of the direct read. Smaller spans, and
// files on file systems that refuse O_DIRECT, are read as by ReadAt.
func (f *localFile) ReadSpan(ctx context.Context, buf []byte, off int64, n int) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, f.l.wrap("read", f.path, err)
	}
	if off < 0 || n < 0 || len(buf) < n {
		return nil, f.l.wrap("read", f.path, fmt.Errorf("bad span at %d of %d bytes into %d", off, n, len(buf)))
	}
	if n >= DirectSpan && len(buf) >= n+SpanSlack && !f.refused.Load() {
		f.directOnce.Do(func() {
			if d, err := directio.OpenReader(f.f); err == nil {
				f.direct = d
			}
		})
		if f.direct != nil {
			data, err := directio.ReadSpan(f.direct, buf, off, n)
			switch {
			case err == nil:
				return data, nil
			case errors.Is(err, io.ErrUnexpectedEOF):
				return nil, f.l.wrap("read", f.path, io.ErrUnexpectedEOF)
			}
			// Refused (an alignment the device does not take, a file
			// system without direct reads): read as usual from now on;
			// a real I/O error shows there too.
			f.refused.Store(true)
		}
	}
	got, err := f.f.ReadAt(buf[:n], off)
	switch {
	case got == n:
		return buf[:n], nil
	case err == io.EOF || err == nil:
		return nil, f.l.wrap("read", f.path, io.ErrUnexpectedEOF)
	default:
		return nil, f.l.fail("read", f.path, err)
	}
}

func (f *localFile) Size() int64 { return f.size }

func (f *localFile) Close() error {
	// Waits for a reopen under way in a late ReadSpan, and keeps any
	// from starting.
	f.directOnce.Do(func() {})
	if f.direct != nil {
		f.direct.Close()
	}
	if err := f.f.Close(); err != nil {
		return f.l.wrap("close", f.path, err)
	}
	return nil
}
