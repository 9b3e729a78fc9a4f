package xrdnode

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/dataserver"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// eioFS fails every open with EIO.
type eioFS struct{ *dataserver.FS }

func (eioFS) Open(context.Context, string, xrootd.OpenOptions) (xrootd.File, error) {
	return nil, syscall.EIO
}

// Regression (found by review): an error whose message held "not a
// directory", "is a directory" or "no space left" anywhere, the path
// included, was taken for that namespace answer: an I/O error on
// "/reports/not a directory.txt" said the node holds no archive there.
// Only a kXR_FSError's closing error text decides.
func TestIOErrorIsNoNamespaceAnswer(t *testing.T) {
	s := startServing(t, "", "127.0.0.1:0", func(fsys *dataserver.FS) xrootd.FileSystem { return eioFS{fsys} })
	n := newNode(t, "root://"+s.addr, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for path, wrong := range map[string]error{
		"/reports/not a directory.txt":    node.ErrNotDir,
		"/docs/why it is a directory.pdf": node.ErrIsDir,
		"/logs/no space left on device":   node.ErrNoSpace,
		"/dirs/directory not empty":       node.ErrNotEmpty,
	} {
		_, err := n.Open(ctx, path)
		if err == nil || errors.Is(err, wrong) {
			t.Errorf("an EIO on %q: %v; must not be %v", path, err, wrong)
		}
	}
	// The answers themselves still map.
	for msg, want := range map[string]error{
		"rmdir /a: directory not empty":                 node.ErrNotEmpty,
		"Unable to create /a/b; not a directory":        node.ErrNotDir,
		"Unable to write /a; No space left on device\n": node.ErrNoSpace,
	} {
		if err := mapErr(&xrootd.Error{Code: xrootd.ErrFSError, Message: msg}); !errors.Is(err, want) {
			t.Errorf("kXR_FSError %q maps to %v; want %v", msg, err, want)
		}
	}
}
