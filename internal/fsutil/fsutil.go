// Package fsutil holds the few file-system helpers shared by the drivers
// that store plain files under an os.Root (node.Local, dataserver),
// among them Beneath, which opens a path under the directory in one
// openat2 call instead of os.Root's walk of one component at a time.
package fsutil

import (
	"os"
	"syscall"
)

// Rel turns a canonical slash path ("/a/b", "/") into the name os.Root
// expects ("a/b", ".").
func Rel(path string) string {
	if path == "/" || path == "" {
		return "."
	}
	return path[1:]
}

// SyncDir fsyncs directory dir (a canonical slash path) under root, which
// makes renames and creations in it durable. The error is not wrapped.
func SyncDir(root *os.Root, dir string) error {
	f, err := root.OpenFile(Rel(dir), os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
