//go:build linux && (amd64 || arm64)

package main

import (
	"os"
	"syscall"
)

// posixFadvDontNeed is POSIX_FADV_DONTNEED on Linux.
const posixFadvDontNeed = 4

// dropCache asks the kernel to drop f's clean pages from the page cache
// (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)).
func dropCache(f *os.File) error {
	_, _, errno := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, posixFadvDontNeed, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
