package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ecstore/ecstore/internal/node"
)

// MarkerName is the file at the top of every local node directory that
// says which node of the cluster the directory is: object.NodeMarker,
// reserved (object.Reserved), so that listings hide it and no object can
// be stored there.
//
// A node directory is usually the mount point of a disk. When the disk
// is not mounted (it failed, or the boot did not mount it), the directory
// is an empty one on the root file system; used as the node, it would
// have every archive of that node missing, and the healer would rebuild
// them all onto the root file system until it filled. A directory without
// the marker, empty, in a cluster whose other directories hold data or
// the marker, is therefore not used (ErrUnmarked); nor is one marked as
// another node's (ErrWrongNode: disks mounted at each other's places, or
// a reordered node list).
const MarkerName = ".ecstore-node"

var (
	// ErrUnmarked is why an empty node directory without its marker is
	// not used in a cluster that is in use.
	ErrUnmarked = errors.New("empty and without the node marker while the cluster's other node directories are in use (is its disk mounted?)")
	// ErrWrongNode is why a node directory marked as another node's is
	// not used.
	ErrWrongNode = errors.New("marked as another node's directory")
)

// markerState is what a node directory holds besides its archives.
type markerState struct {
	marked bool   // the marker is there, naming node
	node   string // the id in the marker
	empty  bool   // no entry but the marker and lost+found
}

// inUse reports whether the directory shows that the cluster has been
// used: it carries a marker or holds anything.
func (m markerState) inUse() bool { return m.marked || !m.empty }

// readMarker inspects node directory dir.
func readMarker(dir string) (markerState, error) {
	var m markerState
	b, err := os.ReadFile(filepath.Join(dir, MarkerName))
	switch {
	case err == nil:
		m.marked = true
		if m.node, err = parseMarker(b); err != nil {
			return m, fmt.Errorf("%s: %w", filepath.Join(dir, MarkerName), err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return m, err
	}
	m.empty, err = emptyNodeDir(dir)
	return m, err
}

// parseMarker returns the node id of a marker's "node = ID" line.
func parseMarker(b []byte) (string, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok && strings.TrimSpace(k) == "node" {
			if id := strings.TrimSpace(v); id != "" {
				return id, nil
			}
		}
	}
	return "", errors.New("node marker names no node (no \"node = ID\" line)")
}

// emptyNodeDir reports whether dir holds nothing but its marker and a
// file system's lost+found.
func emptyNodeDir(dir string) (bool, error) {
	d, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer d.Close()
	for {
		names, err := d.Readdirnames(8)
		for _, name := range names {
			if name != MarkerName && name != "lost+found" && !strings.HasPrefix(name, MarkerName+".") {
				return false, nil
			}
		}
		if errors.Is(err, io.EOF) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
	}
}

// writeMarker marks dir as node id's, durably: a temporary file, fsynced,
// renamed over the marker, and the directory fsynced.
func writeMarker(dir, id string) error {
	content := fmt.Sprintf("# ecstore node directory: this directory is node %s of its cluster.\n"+
		"# Do not copy it to another node's directory.\nnode = %s\n", id, id)
	// A name of its own: two processes opening a new cluster at once
	// both mark it, with the same content.
	f, err := os.CreateTemp(dir, MarkerName+".*.tmp")
	if err != nil {
		return fmt.Errorf("mark %s as node %s: %w", dir, id, err)
	}
	tmp := f.Name()
	_, err = f.WriteString(content)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, MarkerName))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("mark %s as node %s: %w", dir, id, err)
	}
	return nil
}

// markerRule decides, for the local node directories of one cluster,
// which may be used and marks those that may.
type markerRule struct {
	// inUse: when the cluster was opened, some node directory carried a
	// marker or held data.
	inUse bool
	// adopt lists node ids whose empty, unmarked directory is a new disk
	// for the node (Options.Adopt), to be marked and used.
	adopt []string
}

// check decides whether node id may use directory dir, found in state
// m, and marks it when it may and is not marked yet. A directory that
// holds data but no marker (written before markers existed) is marked
// and used; so is an empty one in a cluster not in use yet (a new
// cluster, its directories empty). Failing to write the marker is
// logged by the caller and not fatal: the directory is used.
func (r markerRule) check(dir, id string, m markerState) (usable bool, markErr, refusal error) {
	switch {
	case m.marked && m.node != id:
		return false, nil, fmt.Errorf("%s: %w (node %s's), not node %s's (disks mounted at each other's places, or a reordered node list?)", dir, ErrWrongNode, m.node, id)
	case m.marked:
		return true, nil, nil
	case m.empty && r.inUse && !r.adopting(id):
		return false, nil, fmt.Errorf("%s: %w; if it is a new disk for node %s, run 'ecstore repair --adopt %s' to use it and rebuild its archives", dir, ErrUnmarked, id, id)
	}
	return true, writeMarker(dir, id), nil
}

func (r markerRule) adopting(id string) bool { return slices.Contains(r.adopt, id) }

// apply decides whether node id may use directory dir, found in state
// m (see check): it returns why not, or nil after marking the directory
// where it was not marked (a failure to mark is logged).
func (r markerRule) apply(dir, id string, m markerState, log *slog.Logger) error {
	usable, markErr, refusal := r.check(dir, id, m)
	if !usable {
		return refusal
	}
	if markErr != nil {
		log.Warn("node directory could not be marked; it is used unmarked", "node", id, "dir", dir, "err", markErr)
	}
	return nil
}

// inspection is what reading a local node directory's marker state
// found, or why it could not be read.
type inspection struct {
	m   markerState
	err error
}

// inspectDirs reads the marker state of the local node directories dirs
// (by node id) at once, each within d: a directory on a file system that
// does not answer (a network mount whose server is gone) blocks in the
// kernel, and the read is left running.
func inspectDirs(dirs map[string]string, d time.Duration) map[string]inspection {
	type result struct {
		id string
		inspection
	}
	results := make(chan result, len(dirs))
	for id, dir := range dirs {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			m, err := node.Within(ctx, func() (markerState, error) { return readMarker(dir) }, nil, nil)
			if errors.Is(err, node.ErrLeftRunning) {
				err = fmt.Errorf("%s did not answer within %v (a mount whose server is gone?)", dir, d)
			}
			results <- result{id, inspection{m, err}}
		}()
	}
	out := make(map[string]inspection, len(dirs))
	for range dirs {
		r := <-results
		out[r.id] = r.inspection
	}
	return out
}

// inUse reports whether any directory inspected carries a marker or holds
// data: the cluster has been used.
func inUse(found map[string]inspection) bool {
	for _, f := range found {
		if f.err == nil && f.m.inUse() {
			return true
		}
	}
	return false
}
