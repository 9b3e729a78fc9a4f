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
	"sync"
	"sync/atomic"
	"time"

	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/node/xrdnode"
)

// MarkerName is the file at the top of every node's root (a local node
// directory, or a remote node's prefix directory, checked on each new
// connection: remoteRoots) that says which node of the cluster the
// directory is: object.NodeMarker, reserved (object.Reserved), so that
// listings hide it and no object can be stored there.
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

// markerContent is the marker of node id.
func markerContent(id string) string {
	return fmt.Sprintf("# ecstore node directory: this directory is node %s of its cluster.\n"+
		"# Do not copy it to another node's directory.\nnode = %s\n", id, id)
}

// writeMarker marks dir as node id's, durably: a temporary file, fsynced,
// renamed over the marker, and the directory fsynced.
func writeMarker(dir, id string) error {
	content := markerContent(id)
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

// decide says whether node id may use the directory (or remote root)
// where, found in state m, and whether to mark it first. A directory
// that holds data but no marker (written before markers existed) is
// marked and used; so is an empty one in a cluster not in use yet (a new
// cluster, its directories empty), or adopted.
func (r markerRule) decide(where, id string, m markerState) (mark bool, refusal error) {
	switch {
	case m.marked && m.node != id:
		return false, fmt.Errorf("%s: %w (node %s's), not node %s's (disks mounted at each other's places, or a reordered node list?)", where, ErrWrongNode, m.node, id)
	case m.marked:
		return false, nil
	case m.empty && r.inUse && !r.adopting(id):
		return false, fmt.Errorf("%s: %w; if it is meant to be empty (a node just added, a new disk), run 'ecstore adopt %s' (for a new disk, 'ecstore repair --adopt %s' also rebuilds its archives)", where, ErrUnmarked, id, id)
	}
	return true, nil
}

func (r markerRule) adopting(id string) bool { return slices.Contains(r.adopt, id) }

// apply decides whether node id may use directory dir, found in state
// m (see check): it returns why not, or nil after marking the directory
// where it was not marked (a failure to mark is logged).
func (r markerRule) apply(dir, id string, m markerState, log *slog.Logger) error {
	mark, refusal := r.decide(dir, id, m)
	if refusal != nil {
		return refusal
	}
	if mark {
		if err := writeMarker(dir, id); err != nil {
			log.Warn("node directory could not be marked; it is used unmarked", "node", id, "dir", dir, "err", err)
		}
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

// remoteRoots applies the marker rule to the roots of a cluster's remote
// nodes, as xrdnode.Options.CheckRoot: every new connection to a node
// checks its root before it is used. Whether the cluster is in use is
// decided once, when every remote node has reported its root or after a
// grace period (half of remoteGrace), from them and the local directories; a
// check made before then waits for the decision. A node whose marker a
// connection has seen is refused when a later connection finds its root
// empty and unmarked, whatever was decided: its server restarted without
// its disk.
type remoteRoots struct {
	mu         sync.Mutex
	rule       markerRule // inUse final once decided is closed
	pending    map[string]bool
	decided    chan struct{}
	decideOnce sync.Once
}

func newRemoteRoots(rule markerRule, ids []string) *remoteRoots {
	rr := &remoteRoots{rule: rule, pending: map[string]bool{}, decided: make(chan struct{})}
	for _, id := range ids {
		rr.pending[id] = true
	}
	if len(ids) == 0 {
		rr.decide()
	}
	return rr
}

// decide ends the start-up: checks no longer wait, and the rule is final.
func (rr *remoteRoots) decide() { rr.decideOnce.Do(func() { close(rr.decided) }) }

// report records node id's root state m at start-up.
func (rr *remoteRoots) report(id string, m markerState) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if !rr.pending[id] {
		return
	}
	delete(rr.pending, id)
	if m.inUse() {
		rr.rule.inUse = true
	}
	if len(rr.pending) == 0 {
		rr.decide()
	}
}

// check returns the CheckRoot function of node id at where (its URL).
func (rr *remoteRoots) check(id, where string) func(context.Context, xrdnode.RootState) ([]byte, error) {
	var seen atomic.Bool // a connection found the node marked, or marked it
	return func(ctx context.Context, st xrdnode.RootState) ([]byte, error) {
		m := markerState{marked: st.Marker != nil, empty: st.Empty}
		if m.marked {
			var err error
			if m.node, err = parseMarker(st.Marker); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
		}
		rr.report(id, m)
		select {
		case <-rr.decided:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		rr.mu.Lock()
		rule := rr.rule
		rr.mu.Unlock()
		if seen.Load() {
			rule.inUse = true
		}
		mark, err := rule.decide(where, id, m)
		if err != nil {
			return nil, err
		}
		seen.Store(true)
		if mark {
			return []byte(markerContent(id)), nil
		}
		return nil, nil
	}
}
