// Package object is the erasure-coding engine: it stores objects as K+M
// archives on a set of storage nodes and reads them back.
//
// A Writer buffers user bytes into blocks, encodes full blocks on a
// bounded pool of goroutines (parity and per-chunk CRC-32), and appends
// each block's chunks in order to one archive per placement slot. Archives
// are written under temporary names and renamed into place only when the
// write closes successfully on at least WriteQuorum nodes.
//
// A Reader locates an object's archives, picks the newest version with at
// least K consistent archives, and fetches only the data chunks that cover
// a requested range, verifying every chunk's CRC. A chunk that is missing,
// unreadable or corrupt is rebuilt from parity; bytes that did not verify
// are never returned. Sequential reads are served with read-ahead.
//
// The namespace operations (List, Stat, Remove, Rename, Mkdir, Rmdir) act
// on every node. See DESIGN.md sections 3 and 4.
package object

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ecstore/ecstore/internal/archive"
	"github.com/ecstore/ecstore/internal/erasure"
	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/placement"
	"github.com/ecstore/ecstore/internal/workers"
)

// Errors of the engine; test with errors.Is. ErrNotExist and ErrExist wrap
// the io/fs sentinels.
var (
	ErrNotExist      = fmt.Errorf("object: %w", fs.ErrNotExist)
	ErrExist         = fmt.Errorf("object: %w", fs.ErrExist)
	ErrIsDir         = errors.New("object: is a directory")
	ErrNotDir        = errors.New("object: not a directory")
	ErrNotEmpty      = errors.New("object: directory not empty")
	ErrUnrecoverable = errors.New("object: unrecoverable")
	ErrQuorum        = errors.New("object: quorum not reached") // too few nodes took a write or listed a directory
	// ErrInDoubt comes with ErrQuorum from a commit that renamed more
	// than M archives but fewer than K: the write failed for now, and a
	// read or repair completes it once the nodes of its other archives
	// (finished under temporary names) answer.
	ErrInDoubt = errors.New("object: outcome in doubt")
	ErrClosed  = errors.New("object: use of closed writer or reader")
	// ErrTooLarge and ErrMetadataTooLarge fail a write that the archive
	// format cannot hold: an object too large for its chunk size (its
	// archives' central directories would pass what readers take), or
	// metadata (user metadata above all) whose entry would pass 1 MiB.
	// Every node refuses such a write alike: it is the request's fault,
	// not an outage, and trying again fails again. No node is blamed.
	ErrTooLarge         = errors.New("object: too large for its chunk size")
	ErrMetadataTooLarge = errors.New("object: metadata too large")
)

// UnrecoverableError reports a block of which fewer than K verified chunks
// could be read, or (Block -1) an object of which fewer than K archives
// exist. It unwraps to ErrUnrecoverable.
type UnrecoverableError struct {
	Path      string
	Block     int64 // -1: too few archives
	Available int   // verified chunks found
	Need      int   // K
	Causes    []error
}

func (e *UnrecoverableError) Error() string {
	s := fmt.Sprintf("object %s: unrecoverable: %d of %d chunks of block %d available", e.Path, e.Available, e.Need, e.Block)
	if e.Block < 0 {
		s = fmt.Sprintf("object %s: unrecoverable: %d of %d archives found", e.Path, e.Available, e.Need)
	}
	if len(e.Causes) > 0 {
		s += fmt.Sprintf(" (first failure: %v)", e.Causes[0])
	}
	return s
}

// Unwrap returns ErrUnrecoverable and the individual chunk failures.
func (e *UnrecoverableError) Unwrap() []error { return append([]error{ErrUnrecoverable}, e.Causes...) }

// Options configure a Store. Zero values take the documented defaults.
type Options struct {
	// Geometry of new objects. Default 8+2 with 1 MiB chunks.
	Geometry layout.Geometry
	// Spares is how many extra nodes a write may fall back on when a
	// placement node fails at open. Default 2; negative means none.
	Spares int
	// WriteQuorum is how many archives must be durable for a write to
	// succeed. Default K+1 (K when M is 0); at most K+M.
	WriteQuorum int
	// Workers bounds the goroutines encoding blocks, shared by all writers
	// of the store. Default GOMAXPROCS.
	Workers int
	// InFlight is how many full blocks a writer may have queued for
	// encoding and writing besides the one it is filling. Default 2.
	InFlight int
	// ReadAhead is how many blocks a sequential reader fetches ahead.
	// Default 1: clients such as xrdcp keep several block-sized requests
	// in flight, which is read-ahead already.
	ReadAhead int
	// LoneReadAhead is how many blocks a sequential reader fetches ahead,
	// and how many more than one it fetches at once for a client's
	// requests, when it opens as the only transfer of the store (a lone
	// get on a fast disk reads about a fifth faster three blocks ahead);
	// a reader opened beside others uses ReadAhead, which keeps the
	// memory of many concurrent transfers bounded. Default 3; never
	// below ReadAhead.
	LoneReadAhead int
	// HedgeDelay is how long a read waits for a data chunk before it also
	// reads parity chunks and reconstructs from whichever K arrive first.
	// Default 250ms.
	HedgeDelay time.Duration
	// ChunkTimeout bounds one chunk read from a node. Default 2s.
	ChunkTimeout time.Duration
	// WriteTimeout bounds one append to a node's archive; a node slower
	// than that is dropped from the write (which still needs WriteQuorum).
	// Default 3s.
	WriteTimeout time.Duration
	// WriteLag is how long a write waits for a node that has not taken
	// the next chunk while every other node of the write has written all
	// it was sent, before it drops the node (as after WriteTimeout): a
	// node that hangs in the middle of a write then stalls it for
	// WriteLag, not WriteTimeout. Default 1s; it is never more than
	// WriteTimeout.
	WriteLag time.Duration
	// ProbeTimeout bounds opening an archive while locating an object.
	// Default 2s.
	ProbeTimeout time.Duration
	// MetadataTimeout bounds one namespace operation on one node (stat,
	// list, create, rename, remove, mkdir): a hung node is left out of
	// the answer instead of stalling it. Default 2s.
	MetadataTimeout time.Duration
	// SuspectFor is how long a node that timed out or failed is skipped
	// by reads (parity is read instead) before it is tried again.
	// Default 10s.
	SuspectFor time.Duration
	// MinFree is the free space below which a node is used for new
	// archives only as a last resort. Default 64 MiB.
	MinFree int64
	// SpaceTTL is how long the nodes' free space, asked before placing a
	// new object, is reused by later writes. A node that fails an open or
	// a write makes the next write ask again. Default 100ms; negative asks
	// on every write.
	SpaceTTL time.Duration
	// SmallObjectSize is the largest object, by the size announced at
	// Create (CreateOptions.SizeHint), that is stored with geometry 1+M —
	// M+1 archives each holding the whole object (an RS code with one
	// data chunk) — instead of K+M: the same M failures tolerated, with
	// far fewer files to create, sync and remove. Default 128 KiB;
	// negative disables it.
	SmallObjectSize int64
	// PageChecksumCache is how many bytes of archives' page checksums
	// (archive.PageEntry) the store keeps for random reads, so that a
	// read of a few pages costs its node one request, not two: 1 KiB per
	// MiB of chunk, so the default, 8 MiB, holds those of 8 GiB of
	// objects read at random. Negative keeps none.
	PageChecksumCache int64
	// Retired lists node ids that receive no new archives (neither new
	// objects nor rebuilt slots) but are still read: nodes being drained
	// before they leave the cluster.
	Retired []string
	// Logger receives request-level logs. Default: discard.
	Logger *slog.Logger
	// Events receives notable engine events (degraded reads and writes).
	Events Events
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Events are callbacks for engine events, for metrics and repair queues.
// Nil fields are skipped. Callbacks must be fast and must not call back
// into the Store.
type Events struct {
	// DegradedRead is called when a read needed parity for a block.
	DegradedRead func(path string, block int64, failed []int)
	// DegradedWrite is called when a write committed with fewer than K+M
	// archives; failed lists the slots that are missing.
	DegradedWrite func(path string, failed []int)
	// NodeError is called when an operation on a node fails or times out
	// (op is "read", "write", "open" or "probe"). Checksum mismatches are
	// reported too: the node returned wrong bytes.
	NodeError func(nodeID, op string, err error)
	// HedgedRead is called when a block's chunks were not all back
	// within HedgeDelay and the read started more of them, to decode the
	// block without the late ones.
	HedgedRead func(path string, block int64)
	// NodeSlow is called when a node becomes suspect of being slow: it
	// kept a chunk read waiting past HedgeDelay while other nodes of the
	// block answered. Reads avoid it until one to it succeeds. (A node
	// that fails or times out is reported by NodeError instead.)
	NodeSlow func(nodeID string)
	// Transfers is called with the number of open readers and writers
	// each time one opens or closes (calls may race; the count each
	// carries is current when it is taken).
	Transfers func(open int)
	// TransferMemory is called, as Transfers, with the bytes of block
	// buffers the open readers and writers hold at most, in all: a
	// block's each, or a small object's size for one announced (or
	// found) smaller than a block. The gateway's memory limit follows it.
	TransferMemory func(bytes int64)
	// PendingTempRemovals is called with the number of temporary archives
	// kept for removal each time it changes: aborted uploads whose node
	// did not answer the abort, removed once it answers again.
	PendingTempRemovals func(pending int)
	// NodeStuckCalls is not called by the engine but by the guard of a
	// local node (node.Guard, set up by package cluster): it is given the
	// node's count of calls stuck in its file system each time the count
	// changes.
	NodeStuckCalls func(nodeID string, stuck int)
	// NodeOperation is not called by the engine either but by the nodes
	// that package cluster sets up: it is told of every request to a
	// remote node and every call into a local node directory once it has
	// ended (see node.Operation).
	NodeOperation func(nodeID string, op node.Operation)
	// DamagedArchive is called when a read found bytes of an archive that
	// fail their checksum: a chunk's CRC-32 or its local header (block b's
	// chunk in slot's archive of the object's version), or a page's
	// CRC-32C or a page checksum entry's CRC-32 (the chunk itself may be
	// sound). The read
	// itself goes on from other chunks; the archive needs a rebuild, which
	// a shallow inspection, seeing it present, would not ask for.
	DamagedArchive func(path string, version archive.Version, slot int, block int64)
	// PageChecksums is called for each random read of a chunk's pages
	// whose checksums may be cached (see Options.PageChecksumCache): hit
	// says whether they were.
	PageChecksums func(hit bool)
}

func (e *Events) nodeError(id, op string, err error) {
	if e.NodeError != nil {
		e.NodeError(id, op, err)
	}
}

func (e *Events) damagedArchive(path string, version archive.Version, slot int, block int64) {
	if e.DamagedArchive != nil {
		e.DamagedArchive(path, version, slot, block)
	}
}

func (e *Events) pageChecksums(hit bool) {
	if e.PageChecksums != nil {
		e.PageChecksums(hit)
	}
}

// DefaultPageChecksumCache is Options.PageChecksumCache's default.
const DefaultPageChecksumCache = 8 << 20

// DefaultGeometry is the geometry of new objects unless configured.
var DefaultGeometry = layout.Geometry{K: 8, M: 2, ChunkSize: 1 << 20}

func (o *Options) withDefaults() error {
	if o.Geometry == (layout.Geometry{}) {
		o.Geometry = DefaultGeometry
	}
	if err := o.Geometry.Validate(); err != nil {
		return err
	}
	if o.Spares == 0 {
		o.Spares = 2
	}
	o.Spares = max(o.Spares, 0)
	if o.WriteQuorum == 0 {
		o.WriteQuorum = o.Geometry.K + min(1, o.Geometry.M)
	}
	if o.WriteQuorum < o.Geometry.K || o.WriteQuorum > o.Geometry.Width() {
		return fmt.Errorf("object: write quorum %d outside [%d, %d]", o.WriteQuorum, o.Geometry.K, o.Geometry.Width())
	}
	if o.SmallObjectSize == 0 {
		o.SmallObjectSize = DefaultSmallObjectSize
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.InFlight <= 0 {
		o.InFlight = 2
	}
	if o.ReadAhead <= 0 {
		o.ReadAhead = 1
	}
	if o.LoneReadAhead <= 0 {
		o.LoneReadAhead = 3
	}
	o.LoneReadAhead = max(o.LoneReadAhead, o.ReadAhead)
	if o.HedgeDelay <= 0 {
		o.HedgeDelay = 250 * time.Millisecond
	}
	if o.ChunkTimeout <= 0 {
		o.ChunkTimeout = 2 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 3 * time.Second
	}
	if o.WriteLag <= 0 {
		o.WriteLag = time.Second
	}
	o.WriteLag = min(o.WriteLag, o.WriteTimeout)
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = 2 * time.Second
	}
	if o.MetadataTimeout <= 0 {
		o.MetadataTimeout = 2 * time.Second
	}
	if o.SuspectFor <= 0 {
		o.SuspectFor = 10 * time.Second
	}
	if o.MinFree == 0 {
		o.MinFree = 64 << 20
	}
	if o.SpaceTTL == 0 {
		o.SpaceTTL = 100 * time.Millisecond
	}
	if o.PageChecksumCache == 0 {
		o.PageChecksumCache = DefaultPageChecksumCache
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// Store is an erasure-coded object namespace over a fixed set of nodes. It
// is safe for concurrent use and holds no per-object state.
type Store struct {
	opts    Options
	nodes   []node.Node
	byID    map[string]node.Node
	workers chan struct{}  // encoding slots
	suspect sync.Map       // node id -> suspicion
	cleanup sync.WaitGroup // background closes and aborts (see inBackground)
	space   spaceCache     // the nodes' free space, for placement
	// leftovers are temporary archives that aborts could not remove.
	leftovers  leftovers
	open       atomic.Int64 // readers and writers open
	openMemory atomic.Int64 // bytes of block buffers they hold at most (see transfer)
	// chunkLatency follows chunk read times, for hedgeDelay.
	chunkLatency latencyEstimate
	// probeLatency follows lookup probe times, for windowPatience.
	probeLatency latencyEstimate
	// pageSums holds page checksums for random reads; nil for none.
	pageSums *pageSums
	// paths orders this gateway's commits and removals of a path.
	paths pathLocks
	// transferMu orders the Transfers and TransferMemory events.
	transferMu sync.Mutex
	// warns spaces the warnings an outage repeats for every request.
	warns warnings
	// progress tells busy nodes from hung ones, for writes.
	progress nodeProgress
}

// transfer counts a reader or writer opening (delta 1) or closing (-1),
// holding blocks of blockBuf bytes.
func (s *Store) transfer(delta, blockBuf int64) {
	s.open.Add(delta)
	if f := s.opts.Events.Transfers; f != nil {
		// The count is read under the lock, so that the last call
		// made tells the count as it is, whatever order the adds and the
		// calls of two transfers closing at once came in (a gauge was
		// left at 1 with nothing open).
		s.transferMu.Lock()
		f(int(s.open.Load()))
		s.transferMu.Unlock()
	}
	s.transferMemory(delta * blockBuf)
}

// transferMemory adds delta bytes to the block buffers of open transfers.
func (s *Store) transferMemory(delta int64) {
	s.openMemory.Add(delta)
	if f := s.opts.Events.TransferMemory; f != nil {
		s.transferMu.Lock()
		f(s.openMemory.Load())
		s.transferMu.Unlock()
	}
}

// OpenTransfers returns the number of readers and writers open.
func (s *Store) OpenTransfers() int { return int(s.open.Load()) }

// inBackground runs fn, a clean-up the client need not wait for (the
// close of an archive that was only read, the abort of one a write
// dropped), on a kept goroutine; Drain waits for it.
func (s *Store) inBackground(fn func()) {
	s.cleanup.Add(1)
	workers.Go(func() {
		defer s.cleanup.Done()
		fn()
	})
}

// Background runs fn, a clean-up of the store's user that a client need
// not wait for (the S3 gateway's removal of a completed upload's parts),
// as the store runs its own: Drain waits for it.
func (s *Store) Background(fn func()) { s.inBackground(fn) }

// Drain waits for the clean-ups started in the background: closes of
// archives that were read, aborts of archives a write dropped. Each is
// bounded by its node's own timeouts. Then it stops retrying the removal
// of temporary archives that aborts could not remove (repair removes
// them as debris). Call it before closing the nodes.
func (s *Store) Drain() {
	s.cleanup.Wait()
	s.leftovers.stop()
}

// suspicion is why and until when reads avoid a node.
type suspicion struct {
	until time.Time
	hung  bool // a call ran out of time (rather than failing)
	slow  bool // only: a chunk read was still out when its block's hedge fired
	// byBeat: missed heartbeats alone set it (no request's suspicion was
	// in force), so that the node's next answered beat ends it
	byBeat bool
}

// markSuspect makes reads avoid node id for SuspectFor; hung says that a
// call to it ran out of time. A node stays hung until its suspicion
// expires.
func (s *Store) markSuspect(id string, hung bool) {
	if v, ok := s.suspect.Load(id); ok && v.(suspicion).hung && s.opts.Now().Before(v.(suspicion).until) {
		hung = true
	}
	s.suspect.Store(id, suspicion{until: s.opts.Now().Add(s.opts.SuspectFor), hung: hung})
}

// MarkHung makes the store treat node id as one whose call ran out of
// time: it is not asked (reads, lookups, new archives) until its
// suspicion expires (Options.SuspectFor) or it answers a call. For a node
// known not to answer before the store made any call to it, such as one
// that did not answer when the cluster was opened.
func (s *Store) MarkHung(id string) { s.markSuspect(id, true) }

// markSlow makes reads avoid node id, which has kept a chunk read
// waiting for HedgeDelay: the blocks read next take parity from the
// other nodes at once instead of each waiting for the hedge, as they
// would until the read timed out (ChunkTimeout) and marked the node
// hung. The node's first successful read ends it (clearSlow), so a node
// that was only busy is not avoided for long. An existing suspicion is
// left as it is.
func (s *Store) markSlow(id string) {
	slow := suspicion{until: s.opts.Now().Add(s.opts.SuspectFor), slow: true}
	for {
		v, loaded := s.suspect.LoadOrStore(id, slow)
		if !loaded {
			break
		}
		if s.opts.Now().Before(v.(suspicion).until) {
			return // suspect already, perhaps for worse
		}
		if s.suspect.CompareAndSwap(id, v, slow) {
			break // replaced an expired suspicion, nothing newer
		}
	}
	if f := s.opts.Events.NodeSlow; f != nil {
		f(id)
	}
}

// clearHung ends the suspicion of node id if it was of hanging: a call to
// it has just been answered.
func (s *Store) clearHung(id string) {
	if v, ok := s.suspect.Load(id); ok && v.(suspicion).hung {
		s.suspect.CompareAndDelete(id, v)
	}
}

// clearSlow ends the suspicion of node id if it was only slow: a read
// from it has just succeeded.
func (s *Store) clearSlow(id string) {
	if v, ok := s.suspect.Load(id); ok && v.(suspicion).slow {
		s.suspect.CompareAndDelete(id, v)
	}
}

// isHung reports whether a call to node id ran out of time recently.
func (s *Store) isHung(id string) bool {
	v, ok := s.suspect.Load(id)
	return ok && v.(suspicion).hung && s.opts.Now().Before(v.(suspicion).until)
}

// hungSkippable reports whether listings and directory stats may leave
// out the nodes known to hang (isHung), as lookups do: at most M of them
// (a listing tolerates M nodes unlisted), so that each such call does not
// wait its deadline for them. With more, they are asked.
func (s *Store) hungSkippable() bool {
	n := 0
	for _, nd := range s.nodes {
		if s.isHung(nd.ID()) {
			n++
		}
	}
	return n <= s.opts.Geometry.M
}

// suspectReason says why reads avoid node id now: "hung", "slow",
// "failing", or "" when they do not.
func (s *Store) suspectReason(id string) string {
	v, ok := s.suspect.Load(id)
	if !ok || !s.opts.Now().Before(v.(suspicion).until) {
		return ""
	}
	switch sp := v.(suspicion); {
	case sp.hung:
		return "hung"
	case sp.slow:
		return "slow"
	}
	return "failing"
}

// nodeTimeout is the deadline for one call to node id: base, or only
// HedgeDelay for a node that recently failed or hung, so that a hung node
// costs its full timeout once and then almost nothing. A node that was
// only slow keeps base: shortening its deadlines would turn slow into
// failed.
func (s *Store) nodeTimeout(id string, base time.Duration) time.Duration {
	if s.isSuspect(id) && !s.isSlowOnly(id) {
		return min(base, s.opts.HedgeDelay)
	}
	return base
}

// isSlowOnly reports whether node id is suspect only for being slow.
func (s *Store) isSlowOnly(id string) bool {
	v, ok := s.suspect.Load(id)
	return ok && v.(suspicion).slow
}

// isSuspect reports whether reads should avoid node id for now.
func (s *Store) isSuspect(id string) bool {
	v, ok := s.suspect.Load(id)
	if !ok {
		return false
	}
	if s.opts.Now().After(v.(suspicion).until) {
		s.suspect.CompareAndDelete(id, v) // not a newer suspicion stored meanwhile
		return false
	}
	return true
}

// New returns a Store over nodes, whose ids must be unique. The erasure
// codec's self-test runs once per process before the first Store.
func New(nodes []node.Node, opts Options) (*Store, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	if err := selfTest(); err != nil {
		return nil, err
	}
	if len(nodes) < opts.Geometry.Width() {
		return nil, fmt.Errorf("object: %d nodes cannot hold %s objects", len(nodes), opts.Geometry)
	}
	s := &Store{opts: opts, nodes: nodes, byID: make(map[string]node.Node, len(nodes)),
		workers: make(chan struct{}, opts.Workers), pageSums: newPageSums(opts.PageChecksumCache)}
	for _, n := range nodes {
		if _, dup := s.byID[n.ID()]; dup {
			return nil, fmt.Errorf("object: duplicate node id %q", n.ID())
		}
		s.byID[n.ID()] = n
	}
	s.leftovers.s = s
	for _, id := range opts.Retired {
		if _, ok := s.byID[id]; !ok {
			return nil, fmt.Errorf("object: retired node %q is not a node of the cluster", id)
		}
	}
	if len(nodes)-len(slices.Compact(slices.Sorted(slices.Values(opts.Retired)))) < opts.Geometry.Width() {
		return nil, fmt.Errorf("object: %d nodes, %d of them retired, cannot hold %s objects", len(nodes), len(opts.Retired), opts.Geometry)
	}
	return s, nil
}

var selfTest = sync.OnceValue(erasure.SelfTest)

// DefaultSmallObjectSize is the default of Options.SmallObjectSize.
const DefaultSmallObjectSize = 128 << 10

// quorum is the write quorum for an object of geometry g: it tolerates as
// many failed archives as the configured quorum does for the store's
// geometry (one, by default), within [K, K+M].
func (s *Store) quorum(g layout.Geometry) int {
	slack := s.opts.Geometry.Width() - s.opts.WriteQuorum
	return min(g.Width(), max(g.K, g.Width()-slack))
}

// WriteQuorum is how many archives of a new object must be written for
// the write to succeed.
func (s *Store) WriteQuorum() int { return s.quorum(s.opts.Geometry) }

// Geometry is the geometry of new objects.
func (s *Store) Geometry() layout.Geometry { return s.opts.Geometry }

// Nodes returns the store's nodes.
func (s *Store) Nodes() []node.Node { return s.nodes }

// Node returns the node with the given id.
func (s *Store) Node(id string) (node.Node, bool) {
	n, ok := s.byID[id]
	return n, ok
}

// rank returns all nodes in probe order for path.
func (s *Store) rank(path string) []node.Node {
	ps := make([]placement.Node, len(s.nodes))
	for i, n := range s.nodes {
		ps[i] = placement.Node{ID: n.ID()}
	}
	ranked := placement.Rank(path, ps)
	out := make([]node.Node, len(ranked))
	for i, p := range ranked {
		out[i] = s.byID[p.ID]
	}
	return out
}

// retired reports whether node id takes no new archives.
func (s *Store) retired(id string) bool { return slices.Contains(s.opts.Retired, id) }

// checkPath validates an object path. The tombstone area and the node
// marker are reserved (see Reserved).
func checkPath(p string) error {
	if err := node.CheckPath(p); err != nil {
		return fmt.Errorf("object: %w", err)
	}
	if Reserved(p) {
		return fmt.Errorf("object: %w: %s is reserved", node.ErrPath, p)
	}
	return nil
}
