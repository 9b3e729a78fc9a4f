// Package fsutil holds the few file-system helpers shared by the drivers
// that store plain files under an os.Root (node.Local, dataserver),
// among them Beneath, which opens a path under the directory in one
// openat2 call instead of os.Root's walk of one component at a time.
package fsutil

// Rel turns a canonical slash path ("/a/b", "/") into the name os.Root
// expects ("a/b", ".").
func Rel(path string) string {
	if path == "/" || path == "" {
		return "."
	}
	return path[1:]
}
