package xrdnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// RootState is what a new connection found at the node's root (its
// prefix directory) for Options.CheckRoot.
type RootState struct {
	// Marker is the content of the file Options.MarkerPath, nil when
	// there is none.
	Marker []byte
	// Empty: the root holds nothing but that file (or a temporary copy
	// of it) and a lost+found. Looked at only when Marker is nil.
	Empty bool
}

// maxMarker bounds the marker file read.
const maxMarker = 4096

// refusalRetry is how long a node whose root check refused it fails its
// calls at once before a new connection checks it again.
var refusalRetry = 5 * time.Second

// refused is a root check's refusal and when it was made.
type refused struct {
	err error
	at  time.Time
}

// refusedErr returns the node's refusal while it is recent.
func (n *Node) refusedErr() error {
	if r := n.refused.Load(); r != nil && time.Since(r.at) < refusalRetry {
		return r.err
	}
	return nil
}

// checkRoot runs Options.CheckRoot on a new connection c: it reads the
// marker file (and, when there is none, lists the root), asks CheckRoot,
// and writes the marker it returns (failing to write it is logged, not
// fatal: a racing connection or gateway may have written it first).
func (n *Node) checkRoot(ctx context.Context, c *xrootd.Client) error {
	var st RootState
	path := n.remote(n.opts.MarkerPath)
	content, err := readSmall(ctx, c, path)
	switch {
	case err == nil:
		st.Marker = content
	case errors.Is(err, fs.ErrNotExist):
		fis, err := c.Dirlist(ctx, n.remote("/"), false)
		if err != nil {
			return fmt.Errorf("list the root to check it: %w", err)
		}
		_, base := node.Split(n.opts.MarkerPath)
		st.Empty = true
		for _, fi := range fis {
			if fi.Name != base && fi.Name != "lost+found" && !strings.HasPrefix(fi.Name, base+".") {
				st.Empty = false
				break
			}
		}
	default:
		return fmt.Errorf("read %s to check the root: %w", n.opts.MarkerPath, err)
	}
	mark, err := n.opts.CheckRoot(ctx, st)
	if err != nil && ctx.Err() != nil {
		return err // the dial gave up (or the node closed): not a refusal
	}
	if err != nil {
		if n.refused.Swap(&refused{err, time.Now()}) == nil {
			n.log.Error("node root refused; the node is down until it is fixed", "node", n.id, "err", err)
		}
		return err
	}
	if n.refused.Swap(nil) != nil {
		n.log.Warn("node root accepted; the node is up", "node", n.id)
	}
	if mark != nil {
		if err := writeSmall(ctx, c, path, mark); err != nil && !errors.Is(err, fs.ErrExist) {
			n.log.Warn("node root could not be marked; it is used unmarked", "node", n.id, "err", err)
		}
	}
	return nil
}

// readSmall reads a file of at most maxMarker bytes.
func readSmall(ctx context.Context, c *xrootd.Client, path string) ([]byte, error) {
	f, err := c.Open(ctx, path, xrootd.OpenRead, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close(ctx)
	buf := make([]byte, maxMarker)
	m, err := f.ReadAt(ctx, buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:m], nil
}

// writeSmall creates the file at path, which must not exist, with
// content, and syncs it.
func writeSmall(ctx context.Context, c *xrootd.Client, path string, content []byte) error {
	f, err := c.Open(ctx, path, xrootd.OpenNew, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(ctx, content)
	if err == nil {
		err = f.Sync(ctx)
	}
	if cerr := f.Close(ctx); err == nil {
		err = cerr
	}
	return err
}
