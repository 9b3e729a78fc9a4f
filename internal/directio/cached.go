package directio

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// CachedPages counts the pages of f from off (a multiple of the page
// size) for n bytes that are in the page cache (mincore(2) of a mapping).
// It tells whether reading them would go to the disk.
func CachedPages(f *os.File, off, n int64) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	var (
		m   []byte
		err error
	)
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("directio: cached pages: %w", err)
	}
	if cerr := rc.Control(func(fd uintptr) {
		m, err = unix.Mmap(int(fd), off, int(n), unix.PROT_READ, unix.MAP_SHARED)
	}); cerr != nil {
		return 0, fmt.Errorf("directio: cached pages: %w", cerr)
	}
	if err != nil {
		return 0, fmt.Errorf("directio: cached pages: mmap: %w", err)
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return 0, fmt.Errorf("directio: cached pages: mincore: %w", e)
	}
	c := 0
	for _, v := range vec {
		c += int(v & 1)
	}
	return c, nil
}
