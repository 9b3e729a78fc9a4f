// Package cluster resolves how a command names a cluster — --data DIR,
// --nodes LIST, --config FILE — into storage nodes and engine options.
//
// There are three ways to name a cluster:
//
//   - An embedded cluster in a directory (--data DIR, default
//     ./ecstore-data). Its first use (by a command that writes) creates
//     DIR/nodes/00 … DIR/nodes/NN, one local node per directory (K+M plus
//     spares of them), and the config file DIR/ecstore.conf, which records
//     the geometry and lists the node directories. Later runs read it.
//   - A config file (--config FILE) in the same format, listing the nodes
//     (one directory per disk, for instance) under "nodes".
//   - A node list on the command line (--nodes LIST), with the geometry
//     taken from flags or the defaults. Nothing is recorded.
//
// The geometry (ec, chunk-size) and the spares are fixed when a cluster
// is created: a flag that contradicts the config is an error, never
// silently ignored. fsync and write-quorum are per-run settings that flags
// may override.
//
// Node ids are the zero-padded positions of the nodes in the list ("00",
// "01", …), which for an embedded cluster are also the directory names.
// Archives record the ids of their placement, so the order of a node list
// is part of the cluster's identity: append new nodes at the end and
// replace a dead disk's entry in place; never reorder or delete entries.
//
// A node directory that cannot be opened (a missing disk) is reported and
// treated as a node that is down, so that reads can still reconstruct
// from the others; it is tried again every few seconds while in use, and
// used once it opens (a disk mounted late). It is never created, and it
// is not used when it is empty and lacks its marker while the cluster is
// in use, or carries another node's marker (see MarkerName); nor is a
// remote node's root in those states. Entries
// of the form root://host:port//prefix are remote data servers (a real
// xrootd, or ecstore node) reached with xrdnode.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/node/xrdnode"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// DefaultDataDir is the embedded cluster's directory when a command names
// no cluster.
const DefaultDataDir = "ecstore-data"

// ConfigName is the config file of an embedded cluster, inside its
// directory.
const ConfigName = "ecstore.conf"

// Errors of Open; test with errors.Is.
var (
	// ErrNoCluster means the embedded cluster does not exist and the
	// command may not create it.
	ErrNoCluster = errors.New("cluster: not created yet")
	// ErrUsage means the options name a cluster in contradictory ways.
	ErrUsage = errors.New("cluster: bad usage")
	// ErrNodeDown is returned by every call on a node that could not be
	// opened.
	ErrNodeDown = errors.New("cluster: node is down")
	// ErrNotSupported is returned for node kinds that do not exist yet.
	ErrNotSupported = errors.New("cluster: not supported")
)

// Options name a cluster and carry the settings given on the command line.
type Options struct {
	// DataDir is the directory of an embedded cluster. Empty means
	// DefaultDataDir, unless ConfigFile or Nodes is given.
	DataDir string
	// ConfigFile names a config file that lists the nodes.
	ConfigFile string
	// Nodes lists node directories directly (no config file).
	Nodes []string
	// Flags are the settings given as flags (Config.Set with the flag
	// names). ec, chunk-size and spares must agree with an existing
	// config; fsync and write-quorum override it. Its nodes key is not
	// used: see Nodes.
	Flags Config
	// Create allows Open to create the embedded cluster when DataDir holds
	// none. Commands that only read leave it false.
	Create bool
	// Logger receives the cluster's and the engine's logs. Default:
	// discard.
	Logger *slog.Logger
	// Events are passed to the engine (metrics, repair queues).
	Events object.Events
	// Adopt lists ids of local nodes whose directory, empty and without
	// its marker (MarkerName), is a new disk for the node: it is marked
	// and used, where otherwise a cluster in use leaves it down (as the
	// empty mount point of a disk that is not mounted).
	Adopt []string
	// PageChecksumCache is the engine's Options.PageChecksumCache: 0 for
	// its default, negative for none.
	PageChecksumCache int64
}

// NodeInfo describes one node of a cluster.
type NodeInfo struct {
	ID   string
	Path string // absolute local directory
	Node node.Node
	// Err is why the node was down when the cluster was opened (its
	// directory could not be opened, its URL is malformed), or why a
	// remote node did not answer then; nil when the node was up. Remote
	// nodes and local directories that open later are used all the same
	// (they are tried again when used); a malformed URL stays down.
	Err error
}

// Cluster is an opened cluster: its nodes and the engine over them.
type Cluster struct {
	store   *object.Store
	nodes   []NodeInfo
	config  *Config
	file    string
	created bool
}

// Store returns the engine over the cluster's nodes.
func (c *Cluster) Store() *object.Store { return c.store }

// Nodes returns the cluster's nodes in id order, including those down.
func (c *Cluster) Nodes() []NodeInfo { return c.nodes }

// Config returns the effective settings (config file plus flags).
func (c *Cluster) Config() *Config { return c.config }

// ConfigFile returns the path of the config file read or written, or ""
// for a cluster named by --nodes.
func (c *Cluster) ConfigFile() string { return c.file }

// Created reports whether Open created the embedded cluster.
func (c *Cluster) Created() bool { return c.created }

// Close waits for the store's background clean-up (see object.Store.Drain)
// and releases the node directories.
func (c *Cluster) Close() error {
	if c.store != nil {
		c.store.Drain()
	}
	var errs []error
	for _, n := range c.nodes {
		switch l := n.Node.(type) {
		case *node.Local:
			errs = append(errs, l.Close())
		case *lateLocal:
			errs = append(errs, l.Close())
		}
	}
	return errors.Join(errs...)
}

// Open resolves opts into a cluster. See the package documentation for
// the rules.
func Open(opts Options) (*Cluster, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	named := 0
	for _, b := range []bool{opts.DataDir != "", opts.ConfigFile != "", len(opts.Nodes) > 0} {
		if b {
			named++
		}
	}
	if named > 1 {
		return nil, fmt.Errorf("%w: name the cluster with one of --data, --config and --nodes", ErrUsage)
	}
	if opts.Flags.IsSet(KeyNodes) {
		return nil, fmt.Errorf("%w: nodes go in Options.Nodes", ErrUsage)
	}
	switch {
	case len(opts.Nodes) > 0:
		cfg := opts.Flags
		cfg.nodes = opts.Nodes
		cfg.set = withKey(cfg.set, KeyNodes)
		if err := cfg.validate(); err != nil {
			return nil, err
		}
		return build(&cfg, "", "", opts)
	case opts.ConfigFile != "":
		cfg, err := readConfig(opts.ConfigFile)
		if err != nil {
			return nil, err
		}
		return openConfig(cfg, opts.ConfigFile, opts)
	}
	dir := opts.DataDir
	if dir == "" {
		dir = DefaultDataDir
	}
	file := filepath.Join(dir, ConfigName)
	cfg, err := readConfig(file)
	if errors.Is(err, fs.ErrNotExist) {
		if !opts.Create {
			return nil, fmt.Errorf("%w: %s does not exist (the first put or mkdir creates the cluster)", ErrNoCluster, file)
		}
		cfg, err = create(dir, &opts.Flags, opts.Logger)
		if err != nil {
			return nil, err
		}
		c, err := openConfig(cfg, file, opts)
		if c != nil {
			c.created = true
		}
		return c, err
	}
	if err != nil {
		return nil, err
	}
	return openConfig(cfg, file, opts)
}

func withKey(set map[string]bool, key string) map[string]bool {
	out := map[string]bool{key: true}
	for k, v := range set {
		out[k] = v
	}
	return out
}

func readConfig(file string) (*Config, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("cluster: config: %w", err)
	}
	defer f.Close()
	return ParseConfig(f, file)
}

// openConfig merges the flags into a stored config and opens its nodes.
func openConfig(stored *Config, file string, opts Options) (*Cluster, error) {
	if len(stored.Nodes()) == 0 {
		return nil, fmt.Errorf("%s: %w: no nodes listed", file, ErrConfig)
	}
	cfg := *stored
	cfg.set = withKey(stored.set, KeyNodes)
	for _, key := range []string{KeyEC, KeyChunkSize, KeySpares} {
		if opts.Flags.IsSet(key) && opts.Flags.value(key) != stored.value(key) {
			return nil, fmt.Errorf("%w: --%s=%s contradicts %s = %s in %s (fixed when the cluster was created)",
				ErrUsage, key, opts.Flags.value(key), key, stored.value(key), file)
		}
	}
	if opts.Flags.IsSet(KeyFsync) {
		cfg.fsync = opts.Flags.fsync
		cfg.set[KeyFsync] = true
	}
	if opts.Flags.IsSet(KeyWriteQuorum) {
		cfg.writeQuorum = opts.Flags.writeQuorum
		cfg.set[KeyWriteQuorum] = true
	}
	if opts.Flags.IsSet(KeySmallSize) {
		cfg.smallSize = opts.Flags.smallSize
		cfg.set[KeySmallSize] = true
	}
	if opts.Flags.IsSet(KeyRetired) {
		cfg.retired = opts.Flags.retired
		cfg.set[KeyRetired] = true
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return build(&cfg, file, filepath.Dir(file), opts)
}

// idWidth is the width node ids are padded to: 2 ("00".."99", then
// "100", "101"...), so that a node's id, which archives record in their
// placements and node directories in their markers, never changes as
// nodes are appended. Earlier versions padded every id to the width of
// the list's last index, so that the 101st node renamed the 100 before it
// ("05" became "005") and the cluster opened no node: a cluster of more
// than 100 nodes made so keeps that width, which the marker of its first
// local directory shows ("000").
func idWidth(paths []string, base string) int {
	if len(paths) <= 100 {
		return 2
	}
	legacy := len(strconv.Itoa(len(paths) - 1))
	for _, p := range paths[:100] {
		if strings.Contains(p, "://") {
			continue
		}
		dir, err := localDir(p, base)
		if err != nil {
			return 2
		}
		read := make(chan markerState, 1)
		go func() {
			m, _ := readMarker(dir)
			read <- m
		}()
		select {
		case m := <-read:
			if n, err := strconv.Atoi(m.node); m.marked && err == nil && n < 100 && len(m.node) > 2 {
				return legacy
			}
		case <-time.After(localOpenTimeout):
		}
		return 2
	}
	return 2
}

// build opens the nodes of cfg (relative paths against base) and the
// engine over them.
func build(cfg *Config, file, base string, opts Options) (*Cluster, error) {
	g := cfg.Geometry()
	paths := cfg.Nodes()
	width := idWidth(paths, base)
	c := &Cluster{config: cfg, file: file}
	var (
		nodes  []node.Node
		remote []int // indexes in c.nodes of the root:// nodes opened
		up     = 0
		dirs   = map[string]string{} // local node directories by id
	)
	nodeID := func(i int) string { return fmt.Sprintf("%0*d", width, i) }
	for i, p := range paths {
		if !strings.Contains(p, "://") {
			dir, err := localDir(p, base)
			if err != nil {
				return nil, fmt.Errorf("cluster: node %s: %w", nodeID(i), err)
			}
			dirs[nodeID(i)] = dir
		}
	}
	var remoteIDs []string
	for i, p := range paths {
		if isRemote(p) {
			remoteIDs = append(remoteIDs, nodeID(i))
		}
	}
	for _, id := range opts.Adopt {
		if _, ok := dirs[id]; !ok && !slices.Contains(remoteIDs, id) {
			return nil, fmt.Errorf("%w: adopt: %q is not the id of a node of the cluster", ErrUsage, id)
		}
	}
	// Every local directory is looked at once, all at once, before any
	// is opened: whether one that is empty and unmarked may be used
	// depends on the others (see MarkerName).
	found := inspectDirs(dirs, localOpenTimeout)
	rule := markerRule{inUse: inUse(found), adopt: opts.Adopt}
	// Remote roots wait for one another (see remoteRoots) for at most
	// half the start-up grace: the nodes that answer then still finish
	// their checks well within the grace that checkRemotes gives them.
	roots := newRemoteRoots(rule, remoteIDs)
	if len(remoteIDs) > 0 {
		time.AfterFunc(remoteGrace/2, roots.decide)
	}
	// Remote nodes that take tokens (an ecstore node with --token-file, an
	// xrootd with ztn) are given the cluster's node token, under TLS.
	// Never the token of whoever runs the command (BEARER_TOKEN).
	tok := cfg.NodeToken()
	if tok == "" {
		tok = os.Getenv("ECSTORE_NODE_TOKEN")
	}
	nodeClient := &xrootd.DialOptions{Token: tok, NoTokenSearch: true}
	for i, p := range paths {
		id := nodeID(i)
		if isRemote(p) {
			info := NodeInfo{ID: id, Path: p}
			// The store asks every node whether a path is a directory
			// before it writes there (Store.checkCreate).
			n, err := xrdnode.Open(p, xrdnode.Options{ID: id, Fsync: cfg.Fsync(), Logger: opts.Logger, NoDirCheck: true,
				Observe:   observer(opts.Events, id),
				CheckRoot: roots.check(id, p), MarkerPath: object.NodeMarker, Client: nodeClient})
			if err != nil { // a malformed URL
				info.Err = err
				info.Node = &downNode{id: id, err: downError(id, p, err)}
				opts.Logger.Warn("node is down", "node", id, "url", p, "err", err)
			} else {
				info.Node = n
				remote = append(remote, len(c.nodes))
			}
			c.nodes = append(c.nodes, info)
			nodes = append(nodes, info.Node)
			continue
		}
		if strings.Contains(p, "://") {
			return nil, fmt.Errorf("%w: node %s: %q: only local directories are supported", ErrNotSupported, id, p)
		}
		abs := dirs[id]
		info := NodeInfo{ID: id, Path: abs}
		var l *node.Local
		err := found[id].err
		if err == nil {
			l, err = openLocalWithin(id, abs, cfg.Fsync(), rule, found[id].m, opts.Logger, localOpenTimeout)
		}
		if err != nil {
			info.Err = err
			info.Node = newLateLocal(id, abs, cfg.Fsync(), rule, err, opts.Logger)
			if errors.Is(err, ErrUnmarked) || errors.Is(err, ErrWrongNode) {
				opts.Logger.Error("node directory refused; the node is down until it is fixed", "node", id, "dir", abs, "err", err)
			} else {
				opts.Logger.Warn("node is down; it is used once its directory can be opened", "node", id, "dir", abs, "err", err)
			}
		} else {
			info.Node = l
			up++
		}
		c.nodes = append(c.nodes, info)
		// The engine bounds every node call by a deadline; a local
		// directory's system calls ignore it, and one on a file system
		// that stopped answering (a network or FUSE mount whose server
		// is gone, a disk stuck in its controller) would block the
		// call, and every transfer and listing waiting on it, for good.
		nodes = append(nodes, node.Guard(info.Node, node.GuardOptions{
			Logger: opts.Logger, Stuck: opts.Events.NodeStuckCalls, Observe: observer(opts.Events, id)}))
	}
	answered, pending := c.checkRemotes(remote, opts.Logger)
	up += answered
	if up == 0 && len(pending) == 0 {
		return nil, fmt.Errorf("cluster: none of the %d nodes can be opened: %w", len(paths), c.nodes[0].Err)
	}
	store, err := object.New(nodes, object.Options{
		Geometry:          g,
		Spares:            sparesOption(cfg.Spares()),
		WriteQuorum:       cfg.WriteQuorum(),
		Retired:           cfg.Retired(),
		SmallObjectSize:   cfg.SmallObjectSize(),
		PageChecksumCache: opts.PageChecksumCache,
		Logger:            opts.Logger,
		Events:            opts.Events,
	})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	for _, id := range pending {
		store.MarkHung(id) // so that the first calls do not wait for it
	}
	c.store = store
	return c, nil
}

// sparesOption maps a spare count to object.Options.Spares, where 0 means
// the default and a negative value means none.
func sparesOption(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// localOpenTimeout bounds the opening of a node directory when the
// cluster opens: one on a mount that does not answer is down meanwhile.
var localOpenTimeout = 5 * time.Second

// openLocalWithin is openLocal bounded by d: a directory on a file system
// that does not answer (a network mount whose server is gone) blocks the
// stat and the open in the kernel, and the gateway would never start.
// The open is left running; a node it opens late is closed (the node is
// used as a lateLocal, which opens it again when it answers).
func openLocalWithin(id, dir string, fsync bool, rule markerRule, m markerState, log *slog.Logger, d time.Duration) (*node.Local, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	l, err := node.Within(ctx, func() (*node.Local, error) { return openLocal(id, dir, fsync, rule, m, log) }, nil,
		func(l *node.Local, err error) {
			if err == nil {
				l.Close()
			}
		})
	if errors.Is(err, node.ErrLeftRunning) {
		return nil, fmt.Errorf("%s did not answer within %v (a mount whose server is gone?)", dir, d)
	}
	return l, err
}

// openLocal opens node directory dir, found in marker state m (so it
// exists and is a directory), if it passes the marker check of rule (see
// MarkerName).
func openLocal(id, dir string, fsync bool, rule markerRule, m markerState, log *slog.Logger) (*node.Local, error) {
	if err := rule.apply(dir, id, m, log); err != nil {
		return nil, err
	}
	return node.NewLocal(id, dir, node.LocalOptions{Fsync: fsync})
}

// isRemote reports whether a node entry is a root:// URL.
func isRemote(p string) bool {
	for _, scheme := range []string{"root://", "xroot://", "roots://", "xroots://"} {
		if strings.HasPrefix(p, scheme) {
			return true
		}
	}
	return false
}

// localDir returns the absolute directory of node entry p, relative to
// base when p is relative and base is set.
func localDir(p, base string) (string, error) {
	if base != "" && !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	return filepath.Abs(p)
}

// remoteDialTimeout bounds connecting to a remote node at start-up.
const remoteDialTimeout = 10 * time.Second

// remoteGrace is how long opening a cluster waits for its remote nodes to
// answer. A node that has not answered by then (hung, or slow to connect)
// does not hold up the command or the gateway: it is used as soon as it
// answers, and its fate at start-up is logged when it is known.
const remoteGrace = time.Second

// checkRemotes contacts the remote nodes at idx in c.nodes, in parallel,
// and waits for them up to remoteGrace. It returns how many answered and
// the ids of those that had not by then. A node that failed (refused,
// unreachable, unusable) keeps its xrdnode.Node, which reconnects when
// used, so that a node down while the gateway starts is used once it is
// back; its Err says what happened at start-up.
func (c *Cluster) checkRemotes(idx []int, log *slog.Logger) (answered int, pending []string) {
	type result struct {
		i   int
		err error
	}
	results := make(chan result, len(idx))
	for _, i := range idx {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), remoteDialTimeout)
			defer cancel()
			results <- result{i, c.nodes[i].Node.(*xrdnode.Node).Check(ctx)}
		}()
	}
	report := func(r result) bool {
		info := c.nodes[r.i]
		switch {
		case errors.Is(r.err, ErrUnmarked) || errors.Is(r.err, ErrWrongNode):
			return false // logged by the node (xrdnode.Options.CheckRoot)
		case r.err != nil:
			log.Warn("node does not answer; it is used once it does", "node", info.ID, "url", info.Path, "err", r.err)
			return false
		}
		return true
	}
	timer := time.NewTimer(remoteGrace)
	defer timer.Stop()
	done := make(map[int]bool, len(idx))
	for range idx {
		select {
		case r := <-results:
			done[r.i] = true
			if report(r) {
				answered++
			} else {
				c.nodes[r.i].Err = r.err
			}
		case <-timer.C:
			for _, i := range idx {
				if !done[i] {
					pending = append(pending, c.nodes[i].ID)
				}
			}
			go func() {
				for range pending {
					report(<-results)
				}
			}()
			return answered, pending
		}
	}
	return answered, nil
}

// create makes a new embedded cluster in dir from the flags and returns
// its config. dir must not exist, be empty, or hold only the node
// directories of an earlier creation that did not finish.
func create(dir string, flags *Config, log *slog.Logger) (*Config, error) {
	if err := checkFresh(dir); err != nil {
		return nil, err
	}
	cfg := *flags
	cfg.set = withKey(flags.set, KeyEC)
	for _, k := range []string{KeyChunkSize, KeySpares, KeyFsync} {
		cfg.set[k] = true
	}
	cfg.k, cfg.m, cfg.chunkSize = flags.Geometry().K, flags.Geometry().M, flags.Geometry().ChunkSize
	cfg.spares, cfg.fsync = flags.Spares(), flags.Fsync()
	n := cfg.Geometry().Width() + cfg.Spares()
	width := max(2, len(strconv.Itoa(n-1)))
	cfg.nodes = make([]string, n)
	for i := range n {
		rel := filepath.Join("nodes", fmt.Sprintf("%0*d", width, i))
		if err := os.MkdirAll(filepath.Join(dir, rel), 0o755); err != nil {
			return nil, fmt.Errorf("cluster: create %s: %w", dir, err)
		}
		cfg.nodes[i] = rel
	}
	cfg.set[KeyNodes] = true
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	const header = "ecstore embedded cluster.\n" +
		"ec, chunk-size and spares are fixed at creation. Node ids are the positions\n" +
		"in the nodes list (00, 01, ...): never reorder or delete entries."
	file := filepath.Join(dir, ConfigName)
	if err := writeFileOnce(file, cfg.Format(header), cfg.Fsync()); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Another process created the cluster first: use its config.
			return readConfig(file)
		}
		return nil, fmt.Errorf("cluster: create %s: %w", dir, err)
	}
	if cfg.Fsync() {
		for _, d := range []string{filepath.Join(dir, "nodes"), dir} {
			if err := syncDir(d); err != nil {
				return nil, fmt.Errorf("cluster: create %s: %w", dir, err)
			}
		}
	}
	log.Info("created embedded cluster", "dir", dir, "geometry", cfg.Geometry().String(), "nodes", n)
	return &cfg, nil
}

// checkFresh reports whether a cluster may be created in dir.
func checkFresh(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cluster: create %s: %w", dir, err)
	}
	for _, e := range ents {
		switch {
		case strings.HasPrefix(e.Name(), "."+ConfigName+".tmp"):
		case e.Name() == "nodes" && e.IsDir():
			sub, err := os.ReadDir(filepath.Join(dir, "nodes"))
			if err != nil {
				return fmt.Errorf("cluster: create %s: %w", dir, err)
			}
			for _, s := range sub {
				if inner, err := os.ReadDir(filepath.Join(dir, "nodes", s.Name())); err != nil || len(inner) > 0 {
					return notFresh(dir, filepath.Join("nodes", s.Name()))
				}
			}
		default:
			return notFresh(dir, e.Name())
		}
	}
	return nil
}

func notFresh(dir, what string) error {
	return fmt.Errorf("%w: %s has no %s but is not empty (it holds %s); refusing to create a cluster in it",
		ErrNoCluster, dir, ConfigName, what)
}

// writeFileOnce writes data to file through a temporary file, failing with
// fs.ErrExist if file exists. The link is atomic: no reader ever sees a
// observer is the Observe function of node id's layer: it passes the
// node's operations to events.NodeOperation, or nil when that is unset.
func observer(events object.Events, id string) func(node.Operation) {
	if events.NodeOperation == nil {
		return nil
	}
	return func(op node.Operation) { events.NodeOperation(id, op) }
}

// partial file.
func writeFileOnce(file string, data []byte, fsync bool) error {
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if fsync {
		if err := tmp.Sync(); err != nil {
			tmp.Close()
			return err
		}
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Link(tmp.Name(), file)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// lateLocal is a local node whose directory could not be opened when the
// cluster was (missing, because its disk was not mounted yet, say). Its
// calls fail with ErrNodeDown, as a downNode's, until the directory can
// be opened: a call made at least localRetry after the last attempt
// tries again, so that a disk mounted later is used without a restart.
// The directory is never created: a missing one stays down.
type lateLocal struct {
	id, dir string
	fsync   bool
	rule    markerRule
	log     *slog.Logger
	up      atomic.Pointer[node.Local]
	err     atomic.Pointer[error] // why it is down, wrapping ErrNodeDown
	closed  atomic.Bool

	mu    sync.Mutex // held by the attempt to open; guards tried
	tried time.Time
}

// localRetry is how often a lateLocal tries to open its directory again.
var localRetry = 5 * time.Second

var (
	_ node.Node       = (*lateLocal)(nil)
	_ node.AttrReader = (*lateLocal)(nil)
)

func newLateLocal(id, dir string, fsync bool, rule markerRule, err error, log *slog.Logger) *lateLocal {
	n := &lateLocal{id: id, dir: dir, fsync: fsync, rule: rule, log: log, tried: time.Now()}
	n.setErr(err)
	return n
}

func (n *lateLocal) setErr(err error) {
	err = downError(n.id, n.dir, err)
	n.err.Store(&err)
}

func downError(id, where string, err error) error {
	return fmt.Errorf("node %s (%s): %w: %v", id, where, ErrNodeDown, err)
}

// node returns the opened directory, or why the node is down. An attempt
// in progress (a stat that hangs on a dead mount, say) is not waited
// for: the callers meanwhile get the last error.
func (n *lateLocal) node() (*node.Local, error) {
	if l := n.up.Load(); l != nil {
		return l, nil
	}
	if n.closed.Load() || !n.mu.TryLock() {
		return nil, *n.err.Load()
	}
	defer n.mu.Unlock()
	if l := n.up.Load(); l != nil {
		return l, nil
	}
	if time.Since(n.tried) < localRetry {
		return nil, *n.err.Load()
	}
	n.tried = time.Now()
	m, err := readMarker(n.dir)
	var l *node.Local
	if err == nil {
		l, err = openLocal(n.id, n.dir, n.fsync, n.rule, m, n.log)
	}
	if err != nil {
		n.setErr(err)
		return nil, *n.err.Load()
	}
	n.up.Store(l)
	if n.closed.Load() {
		// Close ran meanwhile: whichever of the two takes l closes it.
		if l := n.up.Swap(nil); l != nil {
			l.Close()
		}
		return nil, *n.err.Load()
	}
	n.log.Warn("node is up", "node", n.id, "dir", n.dir)
	return l, nil
}

// Close closes the directory if it was opened; no attempt follows, and
// an attempt in progress is not waited for.
func (n *lateLocal) Close() error {
	n.closed.Store(true)
	if l := n.up.Swap(nil); l != nil {
		return l.Close()
	}
	return nil
}

func (n *lateLocal) ID() string { return n.id }

func (n *lateLocal) Create(ctx context.Context, path string) (node.Upload, error) {
	l, err := n.node()
	if err != nil {
		return nil, err
	}
	return l.Create(ctx, path)
}

func (n *lateLocal) Open(ctx context.Context, path string) (node.File, error) {
	l, err := n.node()
	if err != nil {
		return nil, err
	}
	return l.Open(ctx, path)
}

func (n *lateLocal) Stat(ctx context.Context, path string) (node.FileInfo, error) {
	l, err := n.node()
	if err != nil {
		return node.FileInfo{}, err
	}
	return l.Stat(ctx, path)
}

func (n *lateLocal) List(ctx context.Context, dir string) ([]node.FileInfo, error) {
	l, err := n.node()
	if err != nil {
		return nil, err
	}
	return l.List(ctx, dir)
}

// ListNames implements node.NameLister.
func (n *lateLocal) ListNames(ctx context.Context, dir string) ([]node.FileInfo, error) {
	l, err := n.node()
	if err != nil {
		return nil, err
	}
	return l.ListNames(ctx, dir)
}

func (n *lateLocal) Remove(ctx context.Context, path string) error {
	l, err := n.node()
	if err != nil {
		return err
	}
	return l.Remove(ctx, path)
}

func (n *lateLocal) Rename(ctx context.Context, oldPath, newPath string) error {
	l, err := n.node()
	if err != nil {
		return err
	}
	return l.Rename(ctx, oldPath, newPath)
}

func (n *lateLocal) Mkdir(ctx context.Context, path string) error {
	l, err := n.node()
	if err != nil {
		return err
	}
	return l.Mkdir(ctx, path)
}

// ReadAttrs implements node.AttrReader.
func (n *lateLocal) ReadAttrs(ctx context.Context, path string) (map[string]string, error) {
	l, err := n.node()
	if err != nil {
		return nil, err
	}
	return l.ReadAttrs(ctx, path)
}

// KeepsAttrs implements node.AttrReader: false while the node is down.
func (n *lateLocal) KeepsAttrs() bool {
	l := n.up.Load()
	return l != nil && l.KeepsAttrs()
}

func (n *lateLocal) Space(ctx context.Context) (node.Space, error) {
	l, err := n.node()
	if err != nil {
		return node.Space{}, err
	}
	return l.Space(ctx)
}

// downNode stands for a node that cannot be used at all (its URL is
// malformed): every call fails with ErrNodeDown, so that the engine
// treats it as unreachable (reads reconstruct, writes fall back on
// spares).
type downNode struct {
	id  string
	err error
}

var _ node.Node = (*downNode)(nil)

func (d *downNode) ID() string { return d.id }
func (d *downNode) Create(context.Context, string) (node.Upload, error) {
	return nil, d.err
}
func (d *downNode) Open(context.Context, string) (node.File, error) { return nil, d.err }
func (d *downNode) Stat(context.Context, string) (node.FileInfo, error) {
	return node.FileInfo{}, d.err
}
func (d *downNode) List(context.Context, string) ([]node.FileInfo, error) { return nil, d.err }
func (d *downNode) Remove(context.Context, string) error                  { return d.err }
func (d *downNode) Rename(context.Context, string, string) error          { return d.err }
func (d *downNode) Mkdir(context.Context, string) error                   { return d.err }
func (d *downNode) Space(context.Context) (node.Space, error)             { return node.Space{}, d.err }
