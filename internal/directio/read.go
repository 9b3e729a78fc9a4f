package directio

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ReadSlack is how many bytes beyond the span a buffer given to ReadSpan
// must hold: room to align the buffer in memory, to start the read at the
// aligned offset before the span and to end it at the one after.
const ReadSlack = 3 * Align

// ErrRefused means the file system or device refused a direct read; the
// caller reads through the page cache instead.
var ErrRefused = errors.New("directio: direct read refused")

// OpenReader opens the file f is open on a second time, read-only with
// O_DIRECT, for ReadSpan: through /proc/self/fd, so that it is the same
// file even if its path was renamed or replaced meanwhile. It fails (and
// the caller keeps reading f) where /proc is missing or the file system
// refuses O_DIRECT.
func OpenReader(f *os.File) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var fd int
	var oerr error
	err = rc.Control(func(orig uintptr) {
		fd, oerr = unix.Open("/proc/self/fd/"+strconv.Itoa(int(orig)), unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	})
	if err == nil {
		err = oerr
	}
	if err != nil {
		return nil, fmt.Errorf("directio: reopen %s with O_DIRECT: %w", f.Name(), err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// ReadSpan reads the n bytes at off of the file d (opened by OpenReader)
// straight from the device into buf, which must hold n+ReadSlack bytes,
// and returns them: a part of buf. The read covers the aligned range
// around the span; the bytes before and after it are read too and
// ignored. It returns io.ErrUnexpectedEOF if the file ends inside the
// span, and ErrRefused (wrapping the cause) if the read fails: the
// device wants another alignment, or the file system no direct reads.
func ReadSpan(d *os.File, buf []byte, off int64, n int) ([]byte, error) {
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("directio: read span at %d of %d bytes", off, n)
	}
	if len(buf) < n+ReadSlack {
		return nil, fmt.Errorf("directio: read buffer of %d bytes for a span of %d", len(buf), n)
	}
	pad := (Align - int(uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%Align)) % Align
	start := off / Align * Align
	end := (off + int64(n) + Align - 1) / Align * Align
	dst := buf[pad : pad+int(end-start)]
	// os.File.ReadAt, not pread on d.Fd(): the file keeps its descriptor
	// open while a read uses it, so a Close racing a late read cannot
	// make it read whatever file reuses the number. A short read ends
	// only at the end of the file; the read after it, at an unaligned
	// offset, returns io.EOF.
	got, err := d.ReadAt(dst, start)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("%w: %v", ErrRefused, err)
	}
	lo := int(off - start)
	if got < lo+n {
		return nil, io.ErrUnexpectedEOF
	}
	return dst[lo : lo+n], nil
}
