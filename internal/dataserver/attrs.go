package dataserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/ecstore/ecstore/internal/fsutil"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// attrPrefix is where an attribute named N over kXR_fattr is kept on
// disk: user.U.N, as a plain xrootd keeps it, so that either server reads
// the attributes the other set.
const attrPrefix = "user.U."

var _ xrootd.AttrKeeper = (*FS)(nil)

// GetAttrs implements xrootd.AttrKeeper.
func (s *FS) GetAttrs(ctx context.Context, name string, names []string) ([]xrootd.Attr, error) {
	return s.eachAttr(ctx, name, names, false, getAttr())
}

// SetAttrs implements xrootd.AttrKeeper. When the server is durable the
// file is fsynced before the answer, as the attributes are metadata that
// the file's own syncs may not cover (they skip a file not written to).
func (s *FS) SetAttrs(ctx context.Context, name string, attrs []xrootd.Attr, onlyNew bool) ([]xrootd.Attr, error) {
	names, set := setAttr(attrs, onlyNew)
	return s.eachAttr(ctx, name, names, true, set)
}

// DelAttrs implements xrootd.AttrKeeper.
func (s *FS) DelAttrs(ctx context.Context, name string, names []string) ([]xrootd.Attr, error) {
	return s.eachAttr(ctx, name, names, true, delAttr)
}

// getAttr returns the operation of a get: the value of attribute a into
// a.Value.
func getAttr() func(fd, i int, a *xrootd.Attr) error {
	buf := make([]byte, xrootd.MaxFattrValue)
	return func(fd, _ int, a *xrootd.Attr) error {
		n, err := unix.Fgetxattr(fd, attrPrefix+a.Name, buf)
		if err != nil {
			return err
		}
		a.Value = bytes.Clone(buf[:n])
		return nil
	}
}

// setAttr returns the names of attrs and the operation that sets the
// i-th one (only if it does not exist, with onlyNew).
func setAttr(attrs []xrootd.Attr, onlyNew bool) ([]string, func(fd, i int, a *xrootd.Attr) error) {
	flags := 0
	if onlyNew {
		flags = unix.XATTR_CREATE
	}
	names := make([]string, len(attrs))
	for i, a := range attrs {
		names[i] = a.Name
	}
	return names, func(fd, i int, a *xrootd.Attr) error {
		return unix.Fsetxattr(fd, attrPrefix+a.Name, attrs[i].Value, flags)
	}
}

// delAttr is the operation of a del.
func delAttr(fd, _ int, a *xrootd.Attr) error {
	return unix.Fremovexattr(fd, attrPrefix+a.Name)
}

// eachAttr opens name (a regular file or a directory, beneath the
// server's directory) and answers for its attributes as attrsOn does.
// With modify, a durable server fsyncs the file after fn has run for
// every attribute.
func (s *FS) eachAttr(ctx context.Context, name string, names []string, modify bool, fn func(fd, i int, a *xrootd.Attr) error) ([]xrootd.Attr, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// O_NONBLOCK keeps a FIFO planted in the tree from blocking the open.
	f, err := s.beneath.OpenFile(s.root, fsutil.Rel(name), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, osErr(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, osErr(err)
	}
	if !fi.Mode().IsRegular() && !fi.IsDir() {
		return nil, xrootd.Errorf(xrootd.ErrNotFile, "%s is not a regular file", name)
	}
	attrs, err := attrsOn(f, name, names, fn)
	if err != nil {
		return nil, err
	}
	if modify && s.fsync {
		if err := f.Sync(); err != nil {
			return nil, osErr(err)
		}
	}
	return attrs, nil
}

// attrsOn runs fn on each attribute of the open file f (for name) in
// turn, with its descriptor and the attribute's index, and answers one
// Attr per name with fn's error, a missing attribute's as
// ErrAttrNotFound.
func attrsOn(f *os.File, name string, names []string, fn func(fd, i int, a *xrootd.Attr) error) ([]xrootd.Attr, error) {
	attrs := make([]xrootd.Attr, len(names))
	raw, err := f.SyscallConn()
	if err != nil {
		return nil, osErr(err)
	}
	cerr := raw.Control(func(fd uintptr) {
		for i, n := range names {
			attrs[i].Name = n
			switch err := fn(int(fd), i, &attrs[i]); {
			case errors.Is(err, unix.ENODATA):
				attrs[i].Err = xrootd.Errorf(xrootd.ErrAttrNotFound, "%s has no attribute %s", name, n)
			case err != nil:
				attrs[i].Err = &os.PathError{Op: "xattr " + n, Path: name, Err: err}
			}
		}
	})
	if cerr != nil {
		return nil, osErr(cerr)
	}
	return attrs, nil
}

var _ xrootd.FileAttrKeeper = (*file)(nil)

// GetAttrs implements xrootd.FileAttrKeeper.
func (f *file) GetAttrs(ctx context.Context, names []string) ([]xrootd.Attr, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return attrsOn(f.f, f.name, names, getAttr())
}

// SetAttrs implements xrootd.FileAttrKeeper. The change counts as a write:
// the file's next sync or close makes it durable, with no fsync of its
// own (a set by path costs one).
func (f *file) SetAttrs(ctx context.Context, attrs []xrootd.Attr, onlyNew bool) ([]xrootd.Attr, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	names, set := setAttr(attrs, onlyNew)
	f.changed()
	return attrsOn(f.f, f.name, names, set)
}

// DelAttrs implements xrootd.FileAttrKeeper, counting as a write as
// SetAttrs does.
func (f *file) DelAttrs(ctx context.Context, names []string) ([]xrootd.Attr, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.changed()
	return attrsOn(f.f, f.name, names, delAttr)
}

// changed counts a change to the file that its next sync or close must
// make durable.
func (f *file) changed() {
	f.mu.Lock()
	f.writes++
	f.mu.Unlock()
}

var _ xrootd.AttrLister = (*FS)(nil)

// ListAttr implements xrootd.AttrLister: the entries of dir as List
// describes them, each regular file with the value of attribute attr (as
// kXR_fattr keeps it, user.U.attr), read by name through the directory's
// descriptor: one lgetxattr per file via /proc/self/fd, or an openat,
// fgetxattr and close where /proc is missing. Symbolic links are not
// followed.
func (s *FS) ListAttr(ctx context.Context, dir, attr string) iter.Seq2[xrootd.AttrEntry, error] {
	return func(yield func(xrootd.AttrEntry, error) bool) {
		if !validAttrName(attr) {
			yield(xrootd.AttrEntry{}, xrootd.Errorf(xrootd.ErrArgInvalid, "attribute name %q is not valid", attr))
			return
		}
		buf := make([]byte, xrootd.MaxFattrValue)
		var raw syscall.RawConn
		err := s.eachEntry(ctx, dir, func(d *os.File, fi fs.FileInfo) bool {
			e := xrootd.AttrEntry{FileInfo: s.info(fi)}
			if raw == nil {
				raw, _ = d.SyscallConn() // fails only for a nil file
			}
			if fi.Mode().IsRegular() && raw != nil {
				// A value that cannot be read is left out, as an absent one.
				_ = raw.Control(func(fd uintptr) {
					if n, err := entryXattr(int(fd), fi.Name(), attrPrefix+attr, buf); err == nil {
						e.Value, e.HasValue = bytes.Clone(buf[:n]), true
					}
				})
			}
			return yield(e, nil)
		})
		if err != nil {
			yield(xrootd.AttrEntry{}, err)
		}
	}
}

// procFD reports whether /proc/self/fd can name a directory's entries.
var procFD = sync.OnceValue(func() bool {
	_, err := os.Stat("/proc/self/fd")
	return err == nil
})

// entryXattr reads extended attribute xattr of the entry name of the
// directory open as dirfd into buf, without following a symbolic link.
func entryXattr(dirfd int, name, xattr string, buf []byte) (int, error) {
	if procFD() {
		return unix.Lgetxattr("/proc/self/fd/"+strconv.Itoa(dirfd)+"/"+name, xattr, buf)
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	return unix.Fgetxattr(fd, xattr, buf)
}

// validAttrName reports whether attr can name an attribute: 1 to
// xrootd.MaxFattrName bytes, no NUL.
func validAttrName(attr string) bool {
	return attr != "" && len(attr) <= xrootd.MaxFattrName && !strings.ContainsRune(attr, 0)
}

var _ xrootd.AttrRemover = (*FS)(nil)

// RemoveWithAttr implements xrootd.AttrRemover: Remove that first reads
// the file's attribute attr, through the parent directory Remove opens.
// A symbolic link is removed with no attribute; a directory, or a file
// that is neither (a FIFO, say), is refused and left alone.
func (s *FS) RemoveWithAttr(ctx context.Context, name, attr string) (value []byte, had bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if name == "/" {
		return nil, false, xrootd.Errorf(xrootd.ErrNotAuthorized, "rm /: the root cannot be removed")
	}
	if !validAttrName(attr) {
		return nil, false, xrootd.Errorf(xrootd.ErrArgInvalid, "rm %s: invalid attribute name %q", name, attr)
	}
	err = s.beneath.RemoveInspected(s.root, fsutil.Rel(name), s.fsync, func(dirfd int, base string) error {
		value, had, err = attrAt(dirfd, base, attrPrefix+attr)
		return err
	})
	switch {
	case errors.Is(err, syscall.EISDIR):
		return nil, false, xrootd.Errorf(xrootd.ErrIsDirectory, "rm %s: is a directory; use rmdir", name)
	case errors.Is(err, errNotRegular):
		return nil, false, xrootd.Errorf(xrootd.ErrNotFile, "rm %s: not a regular file", name)
	case err != nil:
		return nil, false, fmt.Errorf("rm %s: %w", name, osErr(err))
	}
	return value, had, nil
}

// errNotRegular is attrAt's refusal of a file that is neither regular nor
// a symbolic link.
var errNotRegular = errors.New("not a regular file")

// attrAt reads extended attribute key of the file name in directory
// dirfd: had is false when the file has none, or is a symbolic link
// (whose own attributes are not a file's). A directory fails with EISDIR.
func attrAt(dirfd int, name, key string) (value []byte, had bool, err error) {
	// O_NONBLOCK keeps a FIFO from blocking the open.
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	switch {
	case err == unix.ELOOP:
		return nil, false, nil
	case err != nil:
		return nil, false, &os.PathError{Op: "open", Path: name, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, false, &os.PathError{Op: "stat", Path: name, Err: err}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		return nil, false, &os.PathError{Op: "remove", Path: name, Err: syscall.EISDIR}
	default:
		return nil, false, errNotRegular
	}
	// An archive's summary is short: a large buffer only if it is not.
	buf := make([]byte, 512)
	n, err := unix.Fgetxattr(fd, key, buf)
	if err == unix.ERANGE {
		buf = make([]byte, xrootd.MaxFattrValue)
		n, err = unix.Fgetxattr(fd, key, buf)
	}
	switch {
	case err == unix.ENODATA:
		return nil, false, nil
	case err != nil:
		return nil, false, &os.PathError{Op: "getxattr", Path: name, Err: err}
	}
	return buf[:n:n], true, nil
}
