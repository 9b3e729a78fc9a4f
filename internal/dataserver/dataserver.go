// Package dataserver serves a plain local directory over the XRootD
// protocol: a vanilla data server in the manner of xrootd with
// "all.export /" and "oss.localroot DIR", for `ecstore node --dir DIR`.
//
// FS implements xrootd.FileSystem and the optional Remover, Renamer,
// DirMaker, DirRemover, SpaceReporter and AttrKeeper (kXR_fattr get, set
// and del; an attribute N lies on disk as user.U.N, where xrootd keeps
// it); its files implement
// xrootd.FileWriter, FileSyncer and FileAborter. Run it with
//
//	srv := &xrootd.Server{Handler: fs}
//	srv.Serve(ctx, ln)
//
// It knows nothing of erasure coding, archives or temporary names: files
// are stored, listed, renamed and removed as they are. Writes are
// accepted at any offset. Where the behaviour of a plain file server is
// a choice, FS does what xrootd 5.5 does, as observed on the wire:
//
//   - A create (kXR_new or kXR_delete) makes missing parent directories
//     when the request carries kXR_mkpath or kXR_async (xrdcp sends the
//     latter and never the former); otherwise a missing parent is
//     kXR_NotFound.
//   - kXR_mv replaces an existing file and creates the target's missing
//     parent directories.
//   - kXR_mkdir of an existing directory succeeds, with or without
//     kXR_mkdirpath.
//   - "not a directory" and "directory not empty" have no protocol code
//     and are kXR_FSError with that text, as in xrootd.
//   - A file left open when its client goes away (FileAborter) is closed
//     and kept, partial as it is, unless it was opened with kXR_posc
//     (persist on successful close, announced with kXR_supposc): such a
//     file is removed, at once rather than after xrootd's hold time (see
//     FS.PersistOnClose), as it is when its close fails.
//
// Unlike xrootd, kXR_rm of a directory fails with kXR_isDirectory (use
// kXR_rmdir); kXR_rmdir of a missing directory is kXR_NotFound; kXR_mv
// never replaces a directory (kXR_ItExists; xrootd answers
// kXR_isDirectory for a file and replaces an empty directory with a
// directory, as rename(2) does); and symbolic links are followed only
// within the directory.
//
// All access goes through an os.Root: no path, including one that meets a
// symbolic link, reaches outside the directory; such paths are refused
// with kXR_NotAuthorized.
//
// Not supported: listing extended attributes, checksums (kXR_query
// checksum), truncate, chmod. Durability: see Options.Fsync; an attribute
// set or deleted is fsynced before the answer.
package dataserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"os/user"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ecstore/ecstore/internal/bufpool"
	"github.com/ecstore/ecstore/internal/directio"
	"github.com/ecstore/ecstore/internal/fsutil"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// Options configure an FS.
type Options struct {
	// Fsync makes the server durable: a file opened for writing is
	// fsynced when the client closes it, before the close is
	// acknowledged, and creating, renaming or removing an entry fsyncs
	// the directories it changes. Without it only kXR_sync fsyncs.
	Fsync bool
}

// FS serves a local directory. It is safe for concurrent use.
type FS struct {
	dir     string
	root    *os.Root
	beneath *fsutil.Beneath // one-call opens under dir; nil: root only
	fsync   bool
	// entryWithFile: the file system of dir (device entryDev) makes a
	// created file's directory entry durable with the file's own fsync
	// (fsutil.FsyncCoversNewEntry), so a sync or close of a file on it
	// need not fsync the directory as well.
	entryWithFile bool
	entryDev      uint64
	// synced, if set (by tests), is told of every fsync of an open
	// file ("file") and of a directory ("dir").
	synced func(what string)

	mu    sync.Mutex
	users map[uint32]string
	group map[uint32]string
}

// Compile-time checks of the optional interfaces FS implements.
var (
	_ xrootd.FileSystem     = (*FS)(nil)
	_ xrootd.Remover        = (*FS)(nil)
	_ xrootd.Renamer        = (*FS)(nil)
	_ xrootd.DirMaker       = (*FS)(nil)
	_ xrootd.DirRemover     = (*FS)(nil)
	_ xrootd.SpaceReporter  = (*FS)(nil)
	_ xrootd.ConfigReporter = (*FS)(nil)
	_ xrootd.WholeOpener    = (*FS)(nil)
)

// New returns an FS serving dir, which must be an existing directory: a
// missing mount point must not silently become a directory on the root
// file system. Call Close to release it.
func New(dir string, opts Options) (*FS, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("dataserver: %s: %w", dir, err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("dataserver: %w", err)
	}
	beneath, err := fsutil.NewBeneath(abs)
	if err != nil {
		beneath = nil // os.Root alone serves
	}
	entryWithFile, entryDev := false, uint64(0)
	if d, err := os.Open(abs); err == nil {
		if fi, err := d.Stat(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				entryWithFile, entryDev = fsutil.FsyncCoversNewEntry(d), st.Dev
			}
		}
		d.Close()
	}
	return &FS{
		dir:           abs,
		root:          root,
		beneath:       beneath,
		fsync:         opts.Fsync,
		entryWithFile: entryWithFile,
		entryDev:      entryDev,
		users:         make(map[uint32]string),
		group:         make(map[uint32]string),
	}, nil
}

// Dir returns the absolute directory served.
func (s *FS) Dir() string { return s.dir }

// Close releases the directory. Files already open keep working; every
// other later call fails.
func (s *FS) Close() error {
	if s.beneath != nil {
		s.beneath.Close()
	}
	if err := s.root.Close(); err != nil {
		return fmt.Errorf("dataserver: close: %w", err)
	}
	return nil
}

// OpenWholeMax implements xrootd.WholeOpener: files of up to a megabyte
// are sent whole to a client that asks, in one answer.
func (s *FS) OpenWholeMax() int64 { return openWholeMax }

// openWholeMax bounds the files an open answers whole (WholeOpener), and
// so the memory such an answer takes.
const openWholeMax = 1 << 20

// Open implements xrootd.FileSystem. A file opened for reading must be a
// regular file. For writing, kXR_new fails if the file exists, kXR_delete
// truncates it, and kXR_open_updt (or kXR_open_wrto, kXR_open_apnd)
// without either opens an existing file; see the package doc for
// parent directories. Writes go to the offsets the client names, even
// in append mode.
func (s *FS) Open(ctx context.Context, name string, opts xrootd.OpenOptions) (xrootd.File, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	fl := opts.Flags
	if !fl.Writable() {
		// O_NONBLOCK keeps a FIFO planted in the tree from blocking the
		// open; it has no effect on regular files.
		f, err := s.beneath.OpenFile(s.root, fsutil.Rel(name), os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return nil, osErr(err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, osErr(err)
		}
		switch {
		case fi.IsDir():
			f.Close()
			return nil, xrootd.Errorf(xrootd.ErrIsDirectory, "%s is a directory", name)
		case !fi.Mode().IsRegular():
			f.Close()
			return nil, xrootd.Errorf(xrootd.ErrNotFile, "%s is not a regular file", name)
		}
		return &file{fs: s, name: name, f: f}, nil
	}

	flag := os.O_RDWR
	switch {
	case fl&xrootd.OpenNew != 0:
		flag |= os.O_CREATE | os.O_EXCL
	case fl&xrootd.OpenDelete != 0:
		flag |= os.O_CREATE | os.O_TRUNC
	}
	if name == "/" {
		return nil, xrootd.Errorf(xrootd.ErrIsDirectory, "/ is a directory")
	}
	perm := opts.Perm
	if perm == 0 {
		perm = 0o644
	}
	create := flag&os.O_CREATE != 0
	f, err := s.beneath.OpenFile(s.root, fsutil.Rel(name), flag|syscall.O_NONBLOCK, perm)
	if errors.Is(err, fs.ErrNotExist) && create && fl&(xrootd.OpenMkpath|xrootd.OpenAsync) != 0 {
		if err := s.mkdirs(path.Dir(name), 0o755); err != nil {
			return nil, osErr(err)
		}
		f, err = s.beneath.OpenFile(s.root, fsutil.Rel(name), flag|syscall.O_NONBLOCK, perm)
	}
	if err != nil {
		return nil, osErr(err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = xrootd.Errorf(xrootd.ErrNotFile, "%s is not a regular file", name)
	}
	if err != nil {
		f.Close()
		return nil, osErr(err)
	}
	// The new directory entry is made durable with the file, at its
	// first sync or close: by the file's own fsync where the file system
	// does that (ext4, XFS), else by an fsync of the directory right
	// after the file's, where at the open it cost a journal commit of
	// its own on every create.
	return &file{fs: s, name: name, f: f, writable: true, posc: fl&xrootd.OpenPOSC != 0, empty: fi.Size() == 0, entryPending: create, writes: 1}, nil
}

// PersistOnClose implements xrootd.PersistOnCloser: a file opened for
// writing with kXR_posc is removed when its client goes away before
// closing it, or when its close fails. It is removed at once, where
// xrootd keeps it for its ofs.persist hold time (10 minutes by default)
// so that the same client may reopen it: an XRootD client does not
// resume a write after its session ended, and a partial file left at
// its name is what posc exists to prevent.
func (s *FS) PersistOnClose() bool { return true }

// Stat implements xrootd.FileSystem. Symbolic links inside the directory
// are followed.
func (s *FS) Stat(ctx context.Context, name string) (xrootd.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return xrootd.FileInfo{}, err
	}
	fi, err := s.root.Stat(fsutil.Rel(name))
	if err != nil {
		return xrootd.FileInfo{}, osErr(err)
	}
	return s.info(fi), nil
}

// listBatch is how many directory entries List reads at a time.
const listBatch = 256

// List implements xrootd.FileSystem. Entries are read lazily in batches
// and described without following symbolic links.
func (s *FS) List(ctx context.Context, dir string) iter.Seq2[xrootd.FileInfo, error] {
	return func(yield func(xrootd.FileInfo, error) bool) {
		err := s.eachEntry(ctx, dir, func(_ *os.File, fi fs.FileInfo) bool {
			return yield(s.info(fi), nil)
		})
		if err != nil {
			yield(xrootd.FileInfo{}, err)
		}
	}
}

// eachEntry calls fn on the entries of dir, read in batches of listBatch
// and described without following symbolic links (Readdir stats them
// with fstatat on the directory's descriptor, so they cannot escape the
// root either), with the open directory, until fn returns false. The
// error is the listing's, nil once fn returned false.
func (s *FS) eachEntry(ctx context.Context, dir string, fn func(d *os.File, fi fs.FileInfo) bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := s.beneath.OpenFile(s.root, fsutil.Rel(dir), os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return osErr(err)
	}
	defer f.Close()
	for {
		fis, err := f.Readdir(listBatch)
		for _, fi := range fis {
			if !fn(f, fi) {
				return nil
			}
		}
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			return osErr(err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// ConfigValue implements xrootd.ConfigReporter: xrootd.CloseSyncsKey.
func (s *FS) ConfigValue(key string) (string, bool) {
	if key != xrootd.CloseSyncsKey {
		return "", false
	}
	if s.fsync {
		return "1", true
	}
	return "0", true
}

// Remove implements xrootd.Remover: it removes a file or a symbolic
// link. A directory is refused with kXR_isDirectory.
func (s *FS) Remove(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if name == "/" {
		return xrootd.Errorf(xrootd.ErrNotAuthorized, "rm /: the root cannot be removed")
	}
	err := s.beneath.Remove(s.root, fsutil.Rel(name), false, s.fsync)
	if errors.Is(err, syscall.EISDIR) {
		return xrootd.Errorf(xrootd.ErrIsDirectory, "rm %s: is a directory; use rmdir", name)
	}
	if err != nil {
		return fmt.Errorf("rm %s: %w", name, osErr(err))
	}
	return nil
}

// Rmdir implements xrootd.DirRemover: it removes an empty directory.
func (s *FS) Rmdir(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if name == "/" {
		return xrootd.Errorf(xrootd.ErrNotAuthorized, "rmdir /: the root cannot be removed")
	}
	fi, err := s.root.Lstat(fsutil.Rel(name))
	if err != nil {
		return fmt.Errorf("rmdir %s: %w", name, osErr(err))
	}
	if !fi.IsDir() {
		return fmt.Errorf("rmdir %s: %w", name, syscall.ENOTDIR)
	}
	if err := s.root.Remove(fsutil.Rel(name)); err != nil {
		return fmt.Errorf("rmdir %s: %w", name, osErr(err))
	}
	if err := s.syncDir(path.Dir(name)); err != nil {
		return fmt.Errorf("rmdir %s: %w", name, osErr(err))
	}
	return nil
}

// Rename implements xrootd.Renamer. It replaces an existing file at
// newName, creates newName's missing parent directories, and refuses to
// replace a directory (kXR_ItExists).
func (s *FS) Rename(ctx context.Context, oldName, newName string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if oldName == "/" || newName == "/" {
		return xrootd.Errorf(xrootd.ErrNotAuthorized, "the root cannot be renamed")
	}
	if oldName == newName {
		_, err := s.root.Lstat(fsutil.Rel(oldName))
		return osErr(err)
	}
	err := s.beneath.Rename(s.root, fsutil.Rel(oldName), fsutil.Rel(newName), s.fsync)
	if errors.Is(err, fs.ErrNotExist) {
		// Either oldName is missing or newName's parent is.
		if _, serr := s.root.Lstat(fsutil.Rel(oldName)); serr != nil {
			return osErr(serr)
		}
		if err := s.mkdirs(path.Dir(newName), 0o755); err != nil {
			return osErr(err)
		}
		err = s.beneath.Rename(s.root, fsutil.Rel(oldName), fsutil.Rel(newName), s.fsync)
	}
	return osErr(err)
}

// Mkdir implements xrootd.DirMaker. An existing directory is not an
// error, with or without parents; an existing file is kXR_ItExists.
func (s *FS) Mkdir(ctx context.Context, name string, perm fs.FileMode, parents bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if parents {
		return osErr(s.mkdirs(name, perm))
	}
	err := s.root.Mkdir(fsutil.Rel(name), perm)
	if errors.Is(err, fs.ErrExist) {
		if fi, serr := s.root.Stat(fsutil.Rel(name)); serr == nil && fi.IsDir() {
			return nil
		}
	}
	if err != nil {
		return osErr(err)
	}
	return osErr(s.syncDir(path.Dir(name)))
}

// Space implements xrootd.SpaceReporter with statfs of the directory
// (whatever name is): Free is the space available to unprivileged users.
func (s *FS) Space(ctx context.Context, name string) (xrootd.Space, error) {
	if err := ctx.Err(); err != nil {
		return xrootd.Space{}, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(s.dir, &st); err != nil {
		return xrootd.Space{}, fmt.Errorf("statfs: %w", err)
	}
	bs := int64(st.Bsize)
	sp := xrootd.Space{
		Total: int64(st.Blocks) * bs,
		Free:  int64(st.Bavail) * bs,
		Used:  int64(st.Blocks-st.Bfree) * bs,
	}
	sp.LargestFree = sp.Free
	return sp, nil
}

// mkdirs creates directory p and its missing parents with perm, fsyncing
// the parent of every directory it creates when the server is durable.
// An existing directory is not an error; a file in the way is EEXIST
// (for p itself) or ENOTDIR (for a parent), as mkdir(2) reports them.
func (s *FS) mkdirs(p string, perm fs.FileMode) error {
	if fi, err := s.root.Stat(fsutil.Rel(p)); err == nil {
		if !fi.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: p, Err: syscall.EEXIST}
		}
		return nil
	}
	parent := "/"
	for _, el := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		cur := path.Join(parent, el)
		err := s.root.Mkdir(fsutil.Rel(cur), perm)
		switch {
		case err == nil:
			if err := s.syncDir(parent); err != nil {
				return err
			}
		case errors.Is(err, fs.ErrExist):
			fi, serr := s.root.Stat(fsutil.Rel(cur))
			if serr != nil {
				return serr
			}
			if !fi.IsDir() {
				if cur == p {
					return err
				}
				return &fs.PathError{Op: "mkdir", Path: p, Err: syscall.ENOTDIR}
			}
		default:
			return err
		}
		parent = cur
	}
	return nil
}

// syncDir fsyncs directory dir when the server is durable.
func (s *FS) syncDir(dir string) error {
	if !s.fsync {
		return nil
	}
	if s.synced != nil {
		s.synced("dir")
	}
	return s.beneath.SyncDir(s.root, fsutil.Rel(dir))
}

// info converts an fs.FileInfo. ID combines the device and inode numbers
// as xrootd does; owner and group are names when they resolve.
func (s *FS) info(fi fs.FileInfo) xrootd.FileInfo {
	out := xrootd.FileInfo{
		Name:    fi.Name(),
		Size:    fi.Size(),
		Mode:    fi.Mode(),
		ModTime: fi.ModTime(),
	}
	out.ChangeTime, out.AccessTime = out.ModTime, out.ModTime
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		out.ID = uint64(st.Dev)<<32 | uint64(st.Ino)&0xffffffff
		out.ChangeTime = time.Unix(st.Ctim.Unix())
		out.AccessTime = time.Unix(st.Atim.Unix())
		out.Owner = s.name(s.users, st.Uid, true)
		out.Group = s.name(s.group, st.Gid, false)
	}
	return out
}

// name resolves a user or group id through a cache; unknown ids are
// shown as numbers.
func (s *FS) name(cache map[uint32]string, id uint32, isUser bool) string {
	s.mu.Lock()
	n, ok := cache[id]
	s.mu.Unlock()
	if ok {
		return n
	}
	n = strconv.FormatUint(uint64(id), 10)
	if isUser {
		if u, err := user.LookupId(n); err == nil {
			n = u.Username
		}
	} else if g, err := user.LookupGroupId(n); err == nil {
		n = g.Name
	}
	s.mu.Lock()
	cache[id] = n
	s.mu.Unlock()
	return n
}

// osErr strips the operation and root-relative path off an os error,
// keeping its errno, which the server maps to a protocol code (see
// xrootd.FileSystem); the server adds the request's own path. A path
// that leads out of the directory is fs.ErrPermission.
func osErr(err error) error {
	if err == nil {
		return nil
	}
	if isEscape(err) {
		return fmt.Errorf("%w: path leads outside the exported directory", fs.ErrPermission)
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}

// isEscape reports whether err is os.Root's refusal to follow a path out
// of the root. The os package does not export that error, so its text is
// matched; the server has cleaned "..", so only symbolic links get here.
func isEscape(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if err.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}

// file is an open file of an FS.
//
// A file written from its start, sequentially, is written through a
// directio.Appender: whole megabytes go to the disk with O_DIRECT, not
// through the page cache, which is most of the CPU a write costs a node.
// Up to directBuffer acknowledged bytes are then held in memory until the
// next megabyte fills; every other operation on the handle (read, stat,
// sync, close) writes them out first, and so does a write elsewhere in
// the file, after which the file is written as usual. Another handle may
// see the file up to that much shorter while it is being written; as with
// any XRootD data server, only a sync or close makes writes durable.
type file struct {
	fs       *FS
	name     string
	f        *os.File
	writable bool
	// posc: opened with kXR_posc, the file is removed unless its close
	// succeeds (FS.PersistOnClose).
	posc bool

	mu       sync.Mutex         // guards the fields below
	empty    bool               // opened empty: a write at 0 may start an appender
	app      *directio.Appender // nil unless writing sequentially
	appErr   error              // what flushing the appender failed with
	appTried bool               // an appender was started (only once)
	// flusher makes what the appender writes durable as it goes, on a
	// durable server, so that the fsync of the commit has little left.
	flusher *fsutil.Flusher
	// writes counts the changes to the file (its creation or
	// truncation at the open is the first), synced the count of them
	// the last successful fsync covers: close fsyncs only if they differ.
	writes, synced uint64
	// entryPending: the open created the file, and its directory entry
	// is not yet known durable.
	entryPending bool
}

// directBuffer is the staging buffer of a sequentially written file.
const directBuffer = 1 << 20

var (
	_ xrootd.File        = (*file)(nil)
	_ xrootd.FileWriter  = (*file)(nil)
	_ xrootd.FileSyncer  = (*file)(nil)
	_ xrootd.FileAborter = (*file)(nil)
	_ xrootd.FileSender  = (*file)(nil)
)

// appenderAt returns the appender to take a write at off: the running one
// if off continues it, a new one for the first write at 0 of an empty
// file, or nil (after flushing a running one) for the file to be written
// as usual. f.mu is held.
func (f *file) appenderAt(off int64) (*directio.Appender, error) {
	if f.app != nil {
		if f.app.Offset() == off {
			return f.app, nil
		}
		return nil, f.flushLocked(true)
	}
	if off == 0 && f.empty && !f.appTried {
		f.appTried = true
		f.app = directio.NewAppender(f.f, 0, directBuffer)
		if f.fs.fsync {
			f.flusher = fsutil.NewFlusher(f.f, 0)
		}
		return f.app, nil
	}
	return nil, f.appErr
}

// flushLocked writes out what the appender holds; with stop, the
// appender is released and the file written as usual from then on. A
// failure sticks: the bytes it held were acknowledged to the client.
func (f *file) flushLocked(stop bool) error {
	if f.app == nil {
		return f.appErr
	}
	if err := f.app.Flush(); err != nil && f.appErr == nil {
		f.appErr = err
	}
	if stop || f.appErr != nil {
		f.app.Release()
		f.app = nil
	}
	return f.appErr
}

// flush writes out what the appender holds, keeping it.
func (f *file) flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flushLocked(false)
}

func (f *file) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := f.flush(); err != nil {
		return 0, osErr(err)
	}
	n, err := f.f.ReadAt(p, off)
	if err != nil && err != io.EOF {
		return n, osErr(err)
	}
	return n, err
}

// SendSource lets the server send the file's bytes with sendfile(2). A
// file open for writing is read with ReadAt instead: its appender may
// turn O_DIRECT on while a read is under way, which an unaligned
// sendfile would fail on after the reply's header has gone out.
func (f *file) SendSource(ctx context.Context, off int64, n int) (*os.File, int, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	if f.writable {
		return nil, 0, nil
	}
	if err := f.flush(); err != nil {
		return nil, 0, osErr(err)
	}
	fi, err := f.f.Stat()
	if err != nil {
		return nil, 0, osErr(err)
	}
	return f.f, int(max(0, min(int64(n), fi.Size()-off))), nil
}

func (f *file) Stat(ctx context.Context) (xrootd.FileInfo, error) {
	if err := f.flush(); err != nil {
		return xrootd.FileInfo{}, osErr(err)
	}
	fi, err := f.f.Stat()
	if err != nil {
		return xrootd.FileInfo{}, osErr(err)
	}
	return f.fs.info(fi), nil
}

// WriteAt writes p at off; the server calls it only on files opened for
// writing.
func (f *file) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	app, err := f.appenderAt(off)
	if err != nil {
		return 0, osErr(err)
	}
	if app != nil {
		n, err := app.Write(p)
		f.flusher.Wrote(n)
		return n, osErr(err)
	}
	n, err := f.f.WriteAt(p, off)
	return n, osErr(err)
}

// WriteFrom writes a large request's payload straight from the connection
// to the file at off. As with any interrupted write to a plain file, the
// bytes before a failure stay written; the client was told the write
// failed.
func (f *file) WriteFrom(ctx context.Context, r io.Reader, off, n int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	app, err := f.appenderAt(off)
	if err != nil {
		return 0, osErr(err)
	}
	var got int64
	if app != nil {
		got, err = app.ReadFrom(io.LimitReader(r, n))
		f.flusher.Wrote(int(got))
	} else {
		buf := bufpool.Get(copyBuffer)
		defer bufpool.Put(buf)
		got, err = io.CopyBuffer(io.NewOffsetWriter(f.f, off), io.LimitReader(r, n), buf)
	}
	if err == nil && got < n {
		err = io.ErrUnexpectedEOF
	}
	return got, osErr(err)
}

// copyBuffer is the buffer of a streamed write.
const copyBuffer = 256 << 10

// Sync fsyncs the file (kXR_sync), whatever Options.Fsync says, and,
// when the server is durable, the directory entry the open created.
func (f *file) Sync(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return osErr(f.sync(false))
}

// sync flushes the appender and fsyncs the file and then, when the
// server is durable, its new directory entry (unless the file's fsync
// covered it: entryWithFile). With stop (at the close),
// it releases the appender and fsyncs the file only if it changed since
// its last fsync: a kXR_sync before the close needs no second one.
func (f *file) sync(stop bool) error {
	f.mu.Lock()
	err := f.flushLocked(stop)
	if ferr := f.flusher.Wait(); err == nil {
		err = ferr
	}
	writes, synced, entry := f.writes, f.synced, f.entryPending
	f.mu.Unlock()
	if err != nil {
		return err
	}
	if writes != synced || !stop {
		if f.fs.synced != nil {
			f.fs.synced("file")
		}
		if err := f.f.Sync(); err != nil {
			return err
		}
	}
	if entry && f.fs.fsync && !f.fs.fsyncCoversEntry(f.f) {
		if err := f.fs.syncDir(path.Dir(f.name)); err != nil {
			return err
		}
	}
	f.mu.Lock()
	f.synced = max(f.synced, writes)
	f.entryPending = f.entryPending && !entry
	f.mu.Unlock()
	return nil
}

// fsyncCoversEntry reports whether f's own fsync made its new directory
// entry durable: it lies on the served directory's file system (not on
// one mounted below it), which does that (entryWithFile).
func (s *FS) fsyncCoversEntry(f *os.File) bool {
	if !s.entryWithFile {
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Dev == s.entryDev
}

// Close closes the file, fsyncing it first if it was written since its
// last fsync and the server is durable: a nil error is the durability
// point.
func (f *file) Close(ctx context.Context) error {
	var err error
	if f.writable && f.fs.fsync {
		err = f.sync(true)
	} else {
		f.mu.Lock()
		err = f.flushLocked(true)
		f.mu.Unlock()
	}
	if err != nil && f.posc {
		f.discard()
		return osErr(err)
	}
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	return osErr(err)
}

// Abort closes a file whose client went away. The file is kept as it is,
// like xrootd does without persist-on-close: what was acknowledged is
// written out first. A file opened with kXR_posc is removed instead.
func (f *file) Abort(ctx context.Context) error {
	if f.posc {
		return f.discard()
	}
	f.mu.Lock()
	err := f.flushLocked(true)
	_ = f.flusher.Wait() // kept as it is, not made durable
	f.mu.Unlock()
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	return osErr(err)
}

// discard closes a kXR_posc file that was not closed successfully and
// removes it from its name, if the name still holds it: a file that was
// renamed or replaced since its open is not touched.
func (f *file) discard() error {
	f.mu.Lock()
	if f.app != nil {
		f.app.Release() // what it holds goes with the file
		f.app = nil
	}
	_ = f.flusher.Wait()
	f.mu.Unlock()
	fi, serr := f.f.Stat()
	err := f.f.Close()
	if serr != nil {
		return osErr(serr)
	}
	rel := fsutil.Rel(f.name)
	if now, lerr := f.fs.root.Lstat(rel); lerr != nil || !os.SameFile(fi, now) {
		return osErr(err)
	}
	if rerr := f.fs.beneath.Remove(f.fs.root, rel, false, f.fs.fsync); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		return osErr(rerr)
	}
	return osErr(err)
}
