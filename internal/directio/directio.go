// Package directio appends to a file with O_DIRECT where the file system
// allows it. Bytes are staged in a memory-aligned buffer; each time the
// buffer fills at an aligned file offset it is written straight to the
// device, bypassing the page cache. A large sequential write then costs no
// copy into the page cache and leaves no dirty pages for fsync to flush:
// on a 2-core machine that is most of the CPU a storage node spends on a
// write. Whatever is staged when Flush is called — the unaligned tail —
// goes through the page cache as usual.
//
// A file system that refuses O_DIRECT (tmpfs on older kernels, some FUSE
// and network file systems) gets ordinary writes; nothing else changes.
// O_DIRECT is not a durability promise: callers still fsync.
package directio

import (
	"errors"
	"fmt"
	"io"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ecstore/ecstore/internal/bufpool"
)

// Align is the alignment of direct writes, in memory and in the file: the
// page size, a multiple of every common logical block size.
const Align = 4096

// Appender writes sequentially to a file from a starting offset. It is not
// safe for concurrent use.
type Appender struct {
	f       *os.File
	raw     []byte // from bufpool, returned by Release
	buf     []byte // raw, aligned; len is the staging size
	n       int    // bytes staged in buf
	off     int64  // file offset of buf[0]
	direct  bool   // O_DIRECT is set on f
	refused bool   // O_DIRECT failed on f: ordinary writes only
	err     error  // sticky write error
	written int64  // bytes written with O_DIRECT
	// directEnd is the file offset where the last O_DIRECT write ended,
	// advised where Flush last read the tail back into the page cache.
	directEnd, advised int64
}

// TailCached is how much of the end of what it wrote Flush leaves in the
// page cache, asking the kernel to read back (asynchronously) what went
// to the disk with O_DIRECT: files are often read from their end first
// (a ZIP archive's directory, and archive.FirstTail of an ecstore
// archive), and a new file's end would otherwise be a disk read away.
const TailCached = 16 << 10

// NewAppender returns an Appender writing f from offset off, staging up to
// size bytes (rounded up to a multiple of Align). f must be open for
// writing and not be written by anyone else until Flush.
func NewAppender(f *os.File, off int64, size int) *Appender {
	size = max(Align, (size+Align-1)/Align*Align)
	raw, buf := alignedBuffer(size)
	return &Appender{f: f, raw: raw, buf: buf, off: off}
}

// Grow replaces the staging buffer with one of size bytes (rounded up to a
// multiple of Align), keeping what is staged, if that is larger than the
// current one; every later buffer written is then of the new size. Fewer,
// larger O_DIRECT writes cost fewer system calls and device round trips.
func (a *Appender) Grow(size int) {
	size = (size + Align - 1) / Align * Align
	if a.raw == nil || size <= len(a.buf) {
		return
	}
	raw, buf := alignedBuffer(size)
	copy(buf, a.buf[:a.n])
	bufpool.Put(a.raw)
	a.raw, a.buf = raw, buf
}

// alignedBuffer returns a pooled buffer raw and its part buf of size
// bytes that starts at an Align boundary in memory.
func alignedBuffer(size int) (raw, buf []byte) {
	raw = bufpool.Get(size + Align)
	pad := (Align - int(uintptr(unsafe.Pointer(unsafe.SliceData(raw)))%Align)) % Align
	return raw, raw[pad : pad+size : pad+size]
}

// Offset is the file offset the next byte written goes to.
func (a *Appender) Offset() int64 { return a.off + int64(a.n) }

// DirectBytes is how many bytes went to the file with O_DIRECT.
func (a *Appender) DirectBytes() int64 { return a.written }

// Write stages p, writing every buffer it fills.
func (a *Appender) Write(p []byte) (int, error) {
	if a.err != nil {
		return 0, a.err
	}
	done := 0
	for len(p) > 0 {
		c := copy(a.buf[a.n:], p)
		a.n += c
		p = p[c:]
		if a.n == len(a.buf) {
			if err := a.writeStaged(); err != nil {
				return done, err
			}
		}
		done += c
	}
	return done, nil
}

// ReadFrom stages what r yields until EOF, reading straight into the
// staging buffer, and writes every buffer it fills.
func (a *Appender) ReadFrom(r io.Reader) (int64, error) {
	var total int64
	for a.err == nil {
		c, err := r.Read(a.buf[a.n:])
		a.n += c
		total += int64(c)
		if a.n == len(a.buf) {
			if werr := a.writeStaged(); werr != nil {
				return total, werr
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
	return total, a.err
}

// Flush writes what is staged, through the page cache, and leaves O_DIRECT
// off on the file: it may then be read, synced and closed as any other.
// The file's last TailCached bytes are then in the page cache, or on their
// way there. The Appender may be written to again.
func (a *Appender) Flush() error {
	if a.err != nil {
		return a.err
	}
	if err := a.setDirect(false); err != nil {
		return a.fail(err)
	}
	if a.n == 0 {
		return nil
	}
	if _, err := a.f.WriteAt(a.buf[:a.n], a.off); err != nil {
		return a.fail(err)
	}
	a.off += int64(a.n)
	a.n = 0
	a.cacheTail()
	return nil
}

// cacheTail asks for the part of the file's last TailCached bytes written
// with O_DIRECT to be read into the page cache; an advice, so failures
// are ignored.
func (a *Appender) cacheTail() {
	from := max(0, a.off-TailCached, a.advised)
	if a.directEnd <= from {
		return
	}
	a.advised = a.directEnd
	if rc, err := a.f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _ = unix.Fadvise(int(fd), from, a.directEnd-from, unix.FADV_WILLNEED) })
	}
}

// Release returns the staging buffer; staged bytes not flushed are
// dropped. The Appender must not be used afterwards.
func (a *Appender) Release() {
	if a.raw != nil {
		bufpool.Put(a.raw)
		a.raw, a.buf, a.n = nil, nil, 0
	}
	if a.err == nil {
		a.err = errors.New("directio: appender released")
	}
}

// writeStaged writes the full staging buffer: with O_DIRECT when the file
// offset is aligned and the file system takes it, else through the page
// cache.
func (a *Appender) writeStaged() error {
	if !a.refused && a.off%Align == 0 {
		if err := a.setDirect(true); err != nil {
			a.refused = true
		} else if _, err := a.f.WriteAt(a.buf, a.off); err == nil {
			a.written += int64(len(a.buf))
			a.off += int64(len(a.buf))
			a.directEnd = a.off
			a.n = 0
			return nil
		} else if !errors.Is(err, unix.EINVAL) {
			return a.fail(err)
		} else {
			// The device wants a larger alignment: write as usual.
			a.refused = true
		}
	}
	if err := a.setDirect(false); err != nil {
		return a.fail(err)
	}
	if _, err := a.f.WriteAt(a.buf, a.off); err != nil {
		return a.fail(err)
	}
	a.off += int64(len(a.buf))
	a.n = 0
	return nil
}

// setDirect turns O_DIRECT on or off on the open file.
func (a *Appender) setDirect(on bool) error {
	if a.direct == on {
		return nil
	}
	rc, err := a.f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		if err != nil {
			serr = err
			return
		}
		want := flags &^ unix.O_DIRECT
		if on {
			want |= unix.O_DIRECT
		}
		if want != flags {
			_, serr = unix.FcntlInt(fd, unix.F_SETFL, want)
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("directio: set O_DIRECT %v: %w", on, err)
	}
	a.direct = on
	return nil
}

func (a *Appender) fail(err error) error {
	a.err = err
	return err
}
