package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ecstore/ecstore/internal/erasure"
	"golang.org/x/sys/unix"
)

const getHelp = `
Reads the object /path into the local file LOCAL ("-" for standard
output). If LOCAL is a directory, the file is named after the object
inside it. A file that exists is not replaced without -f (--force), as
xrdcp and cp do; a device or FIFO (/dev/null) is written in place.

Every chunk is verified against its checksum; missing or corrupt chunks
are rebuilt from parity. The whole object's CRC32C is checked against
the one recorded at write time. The file is written under a temporary
name next to LOCAL and renamed into place only when all of it was read
and verified, so a failed get leaves no partial file.

Examples:
  ecstore get /atlas/run1.root run1.root
  ecstore get -f /atlas/run1.root run1.root     # replace run1.root
  ecstore get /backup/results.tar - | tar x
`

// cmdGet is "ecstore get /path LOCAL".
func cmdGet(ctx context.Context, e *env, args []string) error {
	fset := newFlagSet(e, "get", "get [flags] /path LOCAL", getHelp)
	cf := fset.addClusterFlags()
	force := fset.forceFlag("replace LOCAL if it exists")
	pos, err := fset.parse(args, 2, 2)
	if err != nil {
		return err
	}
	path, local := pos[0], pos[1]
	if err := checkObjectPath(path); err != nil {
		return err
	}
	c, err := cf.open(e, false)
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := c.Store().Open(ctx, path)
	if err != nil {
		return describe(ctx, path, err)
	}
	defer r.Close()
	want := r.Info().CRC32C

	if local == "-" {
		bw := bufio.NewWriterSize(e.stdout, 1<<16)
		// No bar over the bytes themselves on a terminal.
		bar := e.isTerminal == nil || !e.isTerminal(e.stdout)
		if err := copyObject(ctx, e, r, path, bw, want, bar); err != nil {
			return err
		}
		return bw.Flush()
	}

	if fi, err := os.Stat(local); err == nil && fi.IsDir() {
		_, base := filepath.Split(path)
		local = filepath.Join(local, base)
	}
	if err := mayReplace(local, *force); err != nil {
		return fmt.Errorf("get %s: %w", path, err)
	}
	if f, ok, err := specialTarget(local); ok {
		if err != nil {
			return fmt.Errorf("get %s: %w", path, err)
		}
		err := copyObject(ctx, e, r, path, f, want, true)
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("get %s: %w", path, cerr)
		}
		return err
	}
	dir, base := filepath.Split(local)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".ecstore-get-*")
	if err != nil {
		return fmt.Errorf("get %s: %w", path, err)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := copyObject(ctx, e, r, path, tmp, want, true); err != nil {
		return err
	}
	if err := tmp.Chmod(fileMode(local)); err != nil {
		return fmt.Errorf("get %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("get %s: %w", path, err)
	}
	if err := placeFile(tmp.Name(), local, *force); err != nil {
		return fmt.Errorf("get %s: %w", path, err)
	}
	ok = true
	return nil
}

// mayReplace checks, before a download, that it may write local: a
// directory never, a regular file only with force. Devices and FIFOs
// are written in place (specialTarget), as xrdcp writes /dev/null.
func mayReplace(local string, force bool) error {
	fi, err := os.Stat(local)
	switch {
	case err != nil:
		return nil // placeFile has the last word
	case fi.IsDir():
		return fmt.Errorf("%s is a directory", local)
	case fi.Mode().IsRegular() && !force:
		return fmt.Errorf("%s exists (use -f to replace it)", local)
	}
	return nil
}

// placeFile renames the finished download tmp to local. Without force it
// does not replace a file, even one created during the download: the
// rename is RENAME_NOREPLACE or, on a file system without it, a hard link
// (which fails on an existing name) and the removal of tmp; on one
// without hard links either, a check and a plain rename. tmp is gone on
// success.
func placeFile(tmp, local string, force bool) error {
	if force {
		return os.Rename(tmp, local)
	}
	err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, local, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
		if err = os.Link(tmp, local); err == nil {
			os.Remove(tmp)
		} else if !errors.Is(err, fs.ErrExist) {
			if _, serr := os.Lstat(local); serr == nil {
				err = fs.ErrExist
			} else {
				err = os.Rename(tmp, local)
			}
		}
	}
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists (use -f to replace it)", local)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: tmp, New: local, Err: err}
	}
	return nil
}

// objectReader is what copyObject needs of an object.Reader.
type objectReader interface {
	Size() int64
	WriteTo(ctx context.Context, w io.Writer) (int64, error)
}

// copyObject streams r to w, with a progress bar if showBar, and checks
// the object's size and CRC32C (want, 8 hex digits) at the end.
func copyObject(ctx context.Context, e *env, r objectReader, path string, w io.Writer, want string, showBar bool) error {
	var bar *progress
	if showBar {
		bar = startProgress(e, path, r.Size())
	}
	sum := &crcWriter{}
	n, err := r.WriteTo(ctx, io.MultiWriter(progressWriter{w, bar}, sum))
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		bar.finish(false)
		return fmt.Errorf("get %s: %w", path, describe(ctx, path, err))
	}
	bar.finish(true)
	if n != r.Size() {
		return fmt.Errorf("get %s: read %d bytes, the object has %d", path, n, r.Size())
	}
	if got := erasure.FormatSum(sum.crc); got != want {
		return fmt.Errorf("get %s: object crc32c %s, want %s recorded at write time: the bytes read are wrong", path, got, want)
	}
	return nil
}

// crcWriter computes the CRC32C of what is written to it.
type crcWriter struct{ crc uint32 }

func (c *crcWriter) Write(p []byte) (int, error) {
	c.crc = erasure.UpdateCRC32C(c.crc, p)
	return len(p), nil
}

// fileMode is the mode for a new local file at name: that of the file it
// replaces, else 0666 minus the umask.
func fileMode(name string) fs.FileMode {
	if fi, err := os.Stat(name); err == nil && fi.Mode().IsRegular() {
		return fi.Mode().Perm()
	}
	return 0o666 &^ umask()
}

// umask reads the process umask from /proc (Linux 4.7+) without changing
// it; 022 if unknown.
func umask() fs.FileMode {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0o022
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			if m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
				return fs.FileMode(m)
			}
		}
	}
	return 0o022
}
