package object

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ecstore/ecstore/internal/archive"
	"github.com/ecstore/ecstore/internal/bufpool"
	"github.com/ecstore/ecstore/internal/erasure"
	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/placement"
	"github.com/ecstore/ecstore/internal/workers"
)

// Writer streams one new object version into K+M archives. Bytes are
// appended with Write; nothing is visible at the object's path until Close
// returns nil. Abort (or cancelling the context given to Create) discards
// the write and leaves nothing visible. Memory is bounded by InFlight+1
// blocks (each with its parity). A Writer is not safe for concurrent use.
type Writer struct {
	s      *Store
	path   string
	geo    layout.Geometry
	quorum int // archives that must be durable
	codec  *erasure.Codec
	user   map[string]string
	// precondition is CreateOptions.Precondition.
	precondition func(current *Info) error
	// floor is the version of the object the write replaces, found when
	// it was created (or ""): the new version is made newer than it even
	// when this gateway's clock is behind the one that wrote it.
	floor  archive.Version
	ctx    context.Context // governs the whole write; see Create
	cancel context.CancelFunc

	slots     []*slotWriter
	nodeIDs   []string
	inflight  chan struct{} // one token per block queued or being written
	order     chan *blockJob
	wg        sync.WaitGroup // the dispatcher (slot writers: slotWriter.exited)
	stopWatch chan struct{}  // closed to stop watch
	watchDone chan struct{}  // closed when watch has returned
	failed    atomic.Int32   // slots that failed
	err       atomic.Pointer[error]

	buf  []byte // block being filled
	fill int
	// firstBuf is the size of the first block's buffer when the object
	// is announced smaller than a block (0: a whole block): a small
	// object's write then holds a buffer of its size, not of a block's.
	firstBuf int
	block    int64
	size     int64
	sums     *erasure.ObjectSums
	done     bool
}

// blockJob is one block travelling through the pipeline.
type blockJob struct {
	block   int64
	data    []byte // the block's bytes, zero-padded to K*chunkLen
	n       int    // object bytes in data
	chunks  [][]byte
	crcs    []uint32
	pages   [][]byte // each chunk's page checksums (archive.AppendPageCRCs)
	adlers  []uint32 // each chunk's adler32 of its object bytes (erasure.ChunkSummer)
	encoded chan struct{}
	refs    atomic.Int32 // slot writers still using the job
}

type slotWriter struct {
	slot   int
	node   node.Node
	up     node.Upload
	aw     *archive.Writer
	ch     chan *blockJob
	upload uploadWriter
	// dropped is set when the slot failed; err holds why (written once,
	// by whoever sets dropped, and read after the pipeline stopped).
	dropped atomic.Bool
	err     error
	// sent counts the blocks queued for the slot, done those it has
	// written (or skipped, once dropped): equal when it is idle.
	sent, done atomic.Int64
	// droppedC is closed when dropped is set; exited when the slot's
	// writer goroutine has returned. Close does not wait for the writer
	// of a dropped slot, which may be stuck in a write to a hung node;
	// the upload's abort does.
	droppedC, exited chan struct{}
}

func newSlotWriter(slot int, n node.Node, up node.Upload, depth int) *slotWriter {
	return &slotWriter{slot: slot, node: n, up: up, ch: make(chan *blockJob, depth),
		droppedC: make(chan struct{}), exited: make(chan struct{})}
}

// wait waits until the slot's writer has returned or the slot is dropped.
func (sw *slotWriter) wait() {
	select {
	case <-sw.exited:
	case <-sw.droppedC:
	}
}

// uploadWriter adapts an Upload to io.Writer for archive.Writer, with the
// writer's context and a deadline per append.
type uploadWriter struct {
	ctx     context.Context
	up      node.Upload
	timeout time.Duration
	// node and progress, when progress is set, make the deadline patient
	// with a node that is busy (see Write).
	node     string
	progress *nodeProgress
}

// Write appends p. An append still running after timeout fails with
// context.DeadlineExceeded, unless its node completed another append
// (for another write) within the last timeout: the node is busy, not
// hung, and the append is given up to busyWait timeouts. Under 8
// streams of 256 MiB on one slow disk, appends took over 3 s where
// the disk was only saturated, and the writes failed.
func (u *uploadWriter) Write(p []byte) (int, error) {
	ctx := newAppendContext(u.ctx)
	defer ctx.release()
	start := time.Now()
	var (
		mu       sync.Mutex
		finished bool
		timer    *time.Timer
	)
	var check func()
	check = func() {
		mu.Lock()
		defer mu.Unlock()
		if finished {
			return
		}
		now := time.Now()
		if u.progress != nil && now.Sub(start) < busyWait*u.timeout && u.progress.since(u.node, now) < u.timeout {
			timer = time.AfterFunc(u.timeout/4, check)
			return
		}
		ctx.end(context.DeadlineExceeded)
	}
	mu.Lock()
	timer = time.AfterFunc(u.timeout, check)
	mu.Unlock()
	err := u.up.Write(ctx, p)
	mu.Lock()
	finished = true
	timer.Stop()
	mu.Unlock()
	if err != nil {
		return 0, err
	}
	if u.progress != nil {
		u.progress.done(u.node, time.Now())
	}
	return len(p), nil
}

// CreateOptions are per-object settings for Create.
type CreateOptions struct {
	// Geometry overrides the store's default geometry when non-zero.
	Geometry layout.Geometry
	// User is user metadata stored with the object. Create fails with
	// ErrMetadataTooLarge when the object's metadata with it would pass
	// the 1 MiB the archive format holds (docs/FORMAT.md).
	User map[string]string
	// SizeHint is the object's expected size (0: unknown), such as an
	// HTTP Content-Length or xrdcp's oss.asize. Objects announced at no
	// more than Options.SmallObjectSize are stored as 1+M. A wrong hint
	// costs space or speed, never correctness.
	SizeHint int64
	// Exclusive makes Create fail with ErrExist when path holds a readable
	// object (xrootd's kXR_new without kXR_delete). The check and the
	// commit are not atomic: two exclusive writers racing for one path may
	// both succeed, the later commit winning.
	Exclusive bool
	// Precondition, when set, is shown at commit what path holds then
	// (nil when nothing): after this gateway's other commits and
	// removals of the path (pathLocks) and before any archive is renamed,
	// so that two conditional writes through one gateway cannot both
	// pass. An error from it aborts the write and is Close's error. S3's
	// conditional writes (If-Match, If-None-Match) use it.
	Precondition func(current *Info) error
}

// Create starts writing a new version of the object at path, replacing
// any current version when the write is committed. ctx governs the whole
// write, not just the call: cancelling it aborts the write. Archives are
// opened on the placement's nodes in parallel; a node that fails to open
// is replaced by a spare.
func (s *Store) Create(ctx context.Context, path string, opt *CreateOptions) (*Writer, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	if path == "/" {
		return nil, fmt.Errorf("object: create /: %w", ErrIsDir)
	}
	geo := s.opts.Geometry
	var user map[string]string
	if opt != nil {
		if opt.Geometry != (layout.Geometry{}) {
			geo = opt.Geometry
		} else if opt.SizeHint > 0 && opt.SizeHint <= s.opts.SmallObjectSize {
			geo = layout.Geometry{K: 1, M: geo.M, ChunkSize: geo.ChunkSize}
		}
		user = maps.Clone(opt.User)
	}
	var precondition func(*Info) error
	if opt != nil {
		precondition = opt.Precondition
	}
	if err := geo.Validate(); err != nil {
		return nil, err
	}
	codec, err := erasure.New(geo.K, geo.M)
	if err != nil {
		return nil, err
	}
	// Place the object (from the nodes' free space, usually cached), then
	// open its archives while checking what path holds: the temporary
	// files are invisible at path, and a new object's open waits for one
	// round trip to the nodes, not two.
	spaces := s.spaces(ctx)
	down := make(map[string]bool)
	for _, sp := range spaces {
		down[sp.ID] = sp.Down
	}
	primary, spare, err := placement.Choose(path, spaces, geo.Width(), s.opts.Spares, s.opts.MinFree)
	if errors.Is(err, placement.ErrNotEnoughNodes) && upCount(spaces) >= s.quorum(geo) {
		// Fewer nodes are up than the object has slots, but enough for the
		// write quorum: down nodes keep their slots; their archives will be
		// missing (a degraded write, for repair to complete).
		for i := range spaces {
			spaces[i].Down = false
		}
		primary, spare, err = placement.Choose(path, spaces, geo.Width(), 0, s.opts.MinFree)
	}
	if err != nil {
		if _, cerr := s.checkCreate(ctx, path, opt != nil && opt.Exclusive); cerr != nil {
			err = cerr // the path's own error first
		}
		return nil, fmt.Errorf("object: create %s: %w", path, err)
	}
	// User metadata past what the format holds fails now, not at Close
	// once the whole body was sent (SetUser's entries are checked there).
	if err := archive.WidestMetadata(path, geo.K, geo.M, geo.ChunkSize, primary, user).CheckSize(); err != nil {
		if r := refusal(err); r != nil {
			err = r
		}
		return nil, fmt.Errorf("object: create %s: %w", path, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	w := &Writer{s: s, path: path, geo: geo, quorum: s.quorum(geo), codec: codec, user: user, precondition: precondition, ctx: wctx, cancel: cancel,
		inflight: make(chan struct{}, s.opts.InFlight), order: make(chan *blockJob, s.opts.InFlight),
		sums: erasure.NewObjectSums()}
	if opt != nil && opt.SizeHint > 0 && opt.SizeHint < geo.BlockSize() {
		// A multiple of K with room for one byte more than announced: an
		// object of the announced size fills neither the buffer (no
		// growing for a read that finds the end) nor, when encoded, more
		// than the buffer holds (K chunks of the same length).
		k := int64(geo.K)
		w.firstBuf = int(min((opt.SizeHint+k)/k*k, geo.BlockSize()))
	}
	checked := make(chan error, 1)
	workers.Go(func() {
		floor, err := s.checkCreate(ctx, path, opt != nil && opt.Exclusive)
		if err != nil {
			cancel() // the opens still under way give up
		}
		w.floor = floor
		checked <- err
	})
	err = w.open(primary, spare, down)
	if cerr := <-checked; cerr != nil {
		if err == nil {
			w.abortOpened()
		}
		cancel()
		return nil, fmt.Errorf("object: create %s: %w", path, cerr)
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("object: create %s: %w", path, err)
	}
	w.wg.Add(1)
	workers.Go(w.dispatch)
	for _, sw := range w.slots {
		workers.Go(func() { w.writeSlot(sw) })
	}
	w.stopWatch, w.watchDone = make(chan struct{}), make(chan struct{})
	workers.Go(func() {
		defer close(w.watchDone)
		w.watch(w.stopWatch)
	})
	s.transfer(1, w.blockBuf())
	return w, nil
}

// checkCreate fails with ErrIsDir when path is a directory, with
// ErrNotDir when one of its parents is an object (checkParents, asked
// only when a node holds a file where a parent would be) and, when
// exclusive, with ErrExist when it holds a readable object. When path
// holds an object, it returns its version: the new one is made newer
// (Writer.floor).
func (s *Store) checkCreate(ctx context.Context, path string, exclusive bool) (archive.Version, error) {
	if !exclusive {
		k, err := s.statKinds(ctx, path)
		switch {
		case k.dir:
			return "", ErrIsDir
		case k.belowFile:
			return "", s.checkParents(ctx, path)
		case k.file:
			// An overwrite: one more round trip, while the archives
			// open.
			if info, err := s.Stat(ctx, path); err == nil && !info.IsDir {
				return info.Version, nil
			}
		case err != nil:
			return "", nil // the nodes that fail are the write's to meet
		}
		return "", nil
	}
	// Probing for the object also finds a directory: nodes refuse to open
	// one as a file.
	loc, err := s.locate(ctx, path, forEveryNode)
	switch {
	case err == nil:
		loc.close()
		return "", ErrExist
	case errors.Is(err, ErrIsDir):
		return "", ErrIsDir
	case errors.Is(err, errBelowFile):
		return "", s.checkParents(ctx, path)
	}
	return "", nil // absent, or unreadable: a new version replaces it
}

// open creates an upload for every slot, in parallel, falling back to
// spares in order for slots whose node fails. A node in down (found down
// when placing, yet kept for a slot because too few nodes are up) is not
// asked at all: its slot goes to a spare or starts out dropped.
func (w *Writer) open(primary, spare []string, down map[string]bool) error {
	width := w.geo.Width()
	w.slots = make([]*slotWriter, width)
	errs := make([]error, width)
	var (
		mu     sync.Mutex
		spares = spare
		wg     sync.WaitGroup
	)
	nextSpare := func() (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		if len(spares) == 0 {
			return "", false
		}
		id := spares[0]
		spares = spares[1:]
		return id, true
	}
	modTime := w.s.opts.Now()
	for i := range width {
		wg.Add(1)
		workers.Go(func() {
			defer wg.Done()
			id := primary[i]
			for {
				n := w.s.byID[id]
				if down[id] {
					errs[i] = fmt.Errorf("node %s: %w", id, errNodeDown)
					var err error
					if id, err = nextSpareOr(nextSpare); err != nil || w.ctx.Err() != nil {
						return
					}
					continue
				}
				cctx, cancel := context.WithTimeout(w.ctx, w.s.nodeTimeout(id, w.s.opts.MetadataTimeout))
				up, err := n.Create(cctx, w.path)
				hung := err != nil && cctx.Err() != nil && w.ctx.Err() == nil
				cancel()
				if hung {
					w.s.markSuspect(id, true)
				}
				if err == nil {
					sw := newSlotWriter(i, n, up, w.s.opts.InFlight)
					sw.upload = uploadWriter{ctx: w.ctx, up: up, timeout: w.s.opts.WriteTimeout, node: id, progress: &w.s.progress}
					sw.aw = archive.NewWriter(&sw.upload, modTime)
					w.slots[i] = sw
					return
				}
				if w.ctx.Err() != nil {
					// The create was given up (the path's check refused
					// it, or the client went away): not the node's fault.
					errs[i] = err
					return
				}
				w.s.space.forget() // the node may be full or down
				w.s.warns.log(w.ctx, w.s.opts.Logger, "archive open failed", []string{id}, "obj", w.path, "node", id, "err", err)
				w.s.opts.Events.nodeError(id, "open", err)
				errs[i] = err
				if id, err = nextSpareOr(nextSpare); err != nil || w.ctx.Err() != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	var (
		first  error
		failed int
	)
	for i, sw := range w.slots {
		if sw == nil {
			failed++
			if first == nil {
				first = fmt.Errorf("slot %d: %w", i, errs[i])
			}
		}
	}
	if width-failed < w.quorum || w.ctx.Err() != nil {
		w.abortOpened()
		return fmt.Errorf("%w: %d of %d archives could be opened: %w", ErrQuorum, width-failed, width, first)
	}
	// Slots that could not be opened anywhere stay in the placement with
	// their intended node and start out dropped.
	for i, sw := range w.slots {
		if sw == nil {
			sw = newSlotWriter(i, w.s.byID[primary[i]], nil, w.s.opts.InFlight)
			sw.dropped.Store(true)
			sw.err = fmt.Errorf("slot %d: %w", i, errs[i])
			w.failed.Add(1)
			w.slots[i] = sw
		}
	}
	w.nodeIDs = make([]string, width)
	for i, sw := range w.slots {
		w.nodeIDs[i] = sw.node.ID()
	}
	return nil
}

// abortOpened aborts, in the background, the uploads open opened, before
// any writer goroutine runs (as for dropped slots in commit).
func (w *Writer) abortOpened() {
	for _, sw := range w.slots {
		if sw != nil && sw.up != nil {
			ctx := context.WithoutCancel(w.ctx)
			w.s.inBackground(func() { w.s.discard(ctx, sw.node.ID(), sw.up) })
		}
	}
}

func upCount(nodes []placement.Node) int {
	n := 0
	for _, nd := range nodes {
		if !nd.Down {
			n++
		}
	}
	return n
}

// errNodeDown is the error of a slot whose node was down when the write
// was placed.
var errNodeDown = errors.New("down when the write was placed")

// nextSpareOr returns the next spare, or an error when none is left.
func nextSpareOr(next func() (string, bool)) (string, error) {
	if id, ok := next(); ok {
		return id, nil
	}
	return "", errors.New("no spare left")
}

// Write appends p to the object. It blocks while InFlight blocks are
// queued (backpressure) and returns the write's first error, if any.
func (w *Writer) Write(p []byte) (int, error) {
	if w.done {
		return 0, ErrClosed
	}
	if err := w.stickyErr(); err != nil {
		return 0, err
	}
	written := 0
	bs := int(w.geo.BlockSize())
	for len(p) > 0 {
		if err := w.room(); err != nil {
			return written, err
		}
		n := copy(w.buf[w.fill:], p)
		w.fill += n
		written += n
		p = p[n:]
		if w.fill == bs {
			w.submit()
		}
	}
	return written, nil
}

// ReadFrom copies r into the object, reading straight into block buffers.
func (w *Writer) ReadFrom(r io.Reader) (int64, error) {
	if w.done {
		return 0, ErrClosed
	}
	var total int64
	bs := int(w.geo.BlockSize())
	for {
		if err := w.stickyErr(); err != nil {
			return total, err
		}
		if err := w.room(); err != nil {
			return total, err
		}
		n, err := r.Read(w.buf[w.fill:])
		w.fill += n
		total += int64(n)
		if w.fill == bs {
			w.submit()
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return total, nil
			}
			return total, err
		}
	}
}

// room makes sure the block being filled has a buffer with room left:
// a new block's (after an in-flight token), or, when the announced size
// turns out short, a whole block's in place of the first block's smaller
// one.
func (w *Writer) room() error {
	if w.buf == nil {
		if err := w.acquire(); err != nil {
			return err
		}
		size := int(w.geo.BlockSize())
		if w.block == 0 && w.firstBuf > 0 {
			size = w.firstBuf
		}
		w.buf = bufpool.Get(size)
		return nil
	}
	if bs := int(w.geo.BlockSize()); w.fill == len(w.buf) && len(w.buf) < bs {
		grown := bufpool.Get(bs)
		copy(grown, w.buf[:w.fill])
		bufpool.Put(w.buf)
		w.buf = grown
		w.s.transferMemory(int64(bs - w.firstBuf))
		w.firstBuf = 0
	}
	return nil
}

// blockBuf is how much of a block the writer's buffers hold: the first
// block's buffer of an object announced smaller than a block, else a
// whole block (counted in Store.transfer).
func (w *Writer) blockBuf() int64 {
	if w.firstBuf > 0 {
		return int64(w.firstBuf)
	}
	return w.geo.BlockSize()
}

// acquire takes an in-flight token, waiting for the pipeline.
func (w *Writer) acquire() error {
	select {
	case w.inflight <- struct{}{}:
		return nil
	case <-w.ctx.Done():
		return w.abortErr()
	}
}

// submit hands the filled buffer to an encoding worker and the dispatcher.
func (w *Writer) submit() {
	job := &blockJob{block: w.block, data: w.buf, n: w.fill, encoded: make(chan struct{})}
	w.size += int64(w.fill)
	w.block++
	w.buf, w.fill = nil, 0
	workers.Go(func() { w.encode(job) })
	w.order <- job // cannot block for long: capacity equals the in-flight bound
}

// encode computes the chunks, parity and CRCs of a block.
func (w *Writer) encode(job *blockJob) {
	defer close(job.encoded)
	select {
	case w.s.workers <- struct{}{}:
		defer func() { <-w.s.workers }()
	case <-w.ctx.Done():
		return
	}
	k, width := w.geo.K, w.geo.Width()
	var cl int
	if job.n == int(w.geo.BlockSize()) {
		cl = int(w.geo.ChunkSize)
	} else {
		cl = (job.n + k - 1) / k
		clear(job.data[job.n : k*cl])
	}
	job.chunks = make([][]byte, width)
	for s := 0; s < k; s++ {
		job.chunks[s] = job.data[s*cl : (s+1)*cl]
	}
	for s := k; s < width; s++ {
		job.chunks[s] = bufpool.Get(cl)
	}
	// Parity and every checksum of a chunk are taken here, of the same
	// bytes, a row of pieces at a time: each piece is read from memory
	// once and from the cache by the rest (the adler32 of the object
	// bytes too, for the whole-object adler32 that dispatch combines in
	// order). Damage to a buffer between now and its write then fails
	// the page checksums as it fails the chunk's CRC-32.
	summers := make([]*erasure.ChunkSummer, width)
	for s := range summers {
		n := 0
		if s < k {
			n = min(cl, max(0, job.n-s*cl))
		}
		summers[s] = erasure.NewChunkSummer(n, make([]byte, 0, (cl+erasure.PagedSize-1)/erasure.PagedSize*4))
	}
	row := make([][]byte, width)
	for off := 0; off < cl; off += erasure.SumPiece {
		end := min(off+erasure.SumPiece, cl)
		for s, c := range job.chunks {
			row[s] = c[off:end]
		}
		if err := w.codec.Encode(row); err != nil {
			w.fail(fmt.Errorf("encode block %d: %w", job.block, err))
			return
		}
		for s, piece := range row {
			summers[s].Write(piece)
		}
	}
	crcs, pages, adlers := make([]uint32, width), make([][]byte, width), make([]uint32, width)
	for s, c := range summers {
		sums := c.Sums()
		crcs[s], pages[s], adlers[s] = sums.CRC32, sums.Pages, sums.Adler32
	}
	job.crcs, job.pages, job.adlers = crcs, pages, adlers
}

// dispatch feeds blocks, in order, to every slot writer and computes the
// whole-object checksums (which need the bytes in order).
func (w *Writer) dispatch() {
	defer w.wg.Done()
	defer func() {
		for _, sw := range w.slots {
			close(sw.ch)
		}
	}()
	for job := range w.order {
		<-job.encoded
		if job.crcs == nil { // encoding failed or aborted
			w.release(job, true)
			continue
		}
		// The object's CRC-32C comes from the data chunks' page CRCs,
		// which encode took for the archives, and its adler32 from the
		// chunks' own.
		cl := len(job.chunks[0])
		for s := 0; s < w.geo.K && s*cl < job.n; s++ {
			w.sums.AddChunk(job.chunks[s], min(cl, job.n-s*cl), erasure.ChunkSums{Adler32: job.adlers[s], Pages: job.pages[s]})
		}
		job.refs.Store(int32(len(w.slots)))
		for _, sw := range w.slots {
			w.send(sw, job)
		}
	}
}

// send queues job for a slot writer. A slot that has failed, or that does
// not take the job within WriteTimeout (its node hangs), is dropped from
// the write rather than stalling every other slot (watch drops one
// sooner when it alone holds the write up).
func (w *Writer) send(sw *slotWriter, job *blockJob) {
	if !sw.dropped.Load() {
		timeout := w.s.opts.WriteTimeout
		t := time.NewTimer(timeout)
		defer t.Stop()
		start := time.Now()
		sw.sent.Add(1) // before the send: a queued job never looks idle
	wait:
		select {
		case sw.ch <- job:
			if sw.dropped.Load() {
				w.drain(sw) // dropped meanwhile: the job may sit there
			}
			return
		case now := <-t.C:
			// as an append's deadline (uploadWriter.Write): patient with
			// a node that is busy with other writes, not with one hung
			if now.Sub(start) < busyWait*timeout && w.s.progress.since(sw.node.ID(), now) < timeout {
				t.Reset(timeout / 4)
				goto wait
			}
			w.slotFailed(sw, fmt.Errorf("node did not take a chunk within %v", now.Sub(start).Round(time.Millisecond)))
			w.drain(sw)
		case <-sw.droppedC:
		case <-w.ctx.Done():
		}
		sw.sent.Add(-1)
	}
	w.unref(job)
}

// watch drops from the write the slots that alone hold it up: those
// that have written nothing for WriteLag while they have chunks to write,
// once every other slot has written all of its own (their nodes hang, or
// crawl far behind the others). The write then goes on without them
// after WriteLag rather than WriteTimeout, with their queued chunks given
// back at once (drain). Several such slots are dropped only if the write
// keeps its quorum without them. It returns when stop is closed.
func (w *Writer) watch(stop <-chan struct{}) {
	tick := time.NewTicker(w.s.opts.WriteLag / 4)
	defer tick.Stop()
	last := make([]int64, len(w.slots))
	since := make([]time.Time, len(w.slots))
	var stuck []*slotWriter
	for i := range since {
		since[i] = time.Now()
	}
	for {
		select {
		case <-stop:
			return
		case <-w.ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		stuck = stuck[:0]
		for i, sw := range w.slots {
			done := sw.done.Load()
			if done != last[i] || done == sw.sent.Load() || sw.dropped.Load() {
				last[i], since[i] = done, now // progressing, idle or gone
				continue
			}
			// A node that completes appends of other writes meanwhile is
			// busy, not hung (its disk serves the others first): its
			// appends run out of time as WriteTimeout says.
			if now.Sub(since[i]) >= w.s.opts.WriteLag && w.s.progress.since(sw.node.ID(), now) >= w.s.opts.WriteLag {
				stuck = append(stuck, sw)
			}
		}
		// The stuck slots go together, once every other one has written
		// all it was sent: two nodes that hang at once would otherwise
		// each keep the other in the write until WriteTimeout. Several go
		// only if the write keeps its quorum without them: when most
		// nodes stall at once (a disk they share, the gateway's own
		// network), that is a pause to wait out, not nodes to drop.
		if len(stuck) > 1 && int(w.failed.Load())+len(stuck) > w.geo.Width()-w.quorum {
			continue
		}
		if len(stuck) > 0 && w.othersIdle(stuck) {
			for _, sw := range stuck {
				w.slotFailed(sw, fmt.Errorf("node wrote nothing for %v while the other nodes had written all they were sent", w.s.opts.WriteLag))
				w.drain(sw)
			}
		}
	}
}

// othersIdle reports whether every slot still in the write, but those
// of stuck, has written every chunk sent to it.
func (w *Writer) othersIdle(stuck []*slotWriter) bool {
	for _, o := range w.slots {
		if !slices.Contains(stuck, o) && !o.dropped.Load() && o.done.Load() != o.sent.Load() {
			return false
		}
	}
	return true
}

// drain takes the jobs queued for a dropped slot, whose writer is stuck
// in a write to its node, so that their buffers and in-flight tokens go
// back at once rather than when that write times out.
func (w *Writer) drain(sw *slotWriter) {
	for {
		select {
		case job, ok := <-sw.ch:
			if !ok {
				return
			}
			w.unref(job)
		default:
			return
		}
	}
}

// unref drops a slot's reference to job; the last one releases it.
func (w *Writer) unref(job *blockJob) {
	if job.refs.Add(-1) == 0 {
		w.release(job, false)
	}
}

// writeSlot appends each block's chunk for one slot to its archive.
func (w *Writer) writeSlot(sw *slotWriter) {
	defer close(sw.exited)
	for job := range sw.ch {
		if !sw.dropped.Load() && w.ctx.Err() == nil {
			s := w.geo.Stripe(job.block, sw.slot)
			if err := sw.aw.WriteChunkPages(job.block, s, job.chunks[s], job.crcs[s], job.pages[s]); err != nil {
				w.slotFailed(sw, err)
			}
		}
		sw.done.Add(1)
		w.unref(job)
	}
}

// release returns a job's buffers and its in-flight token.
func (w *Writer) release(job *blockJob, failed bool) {
	for s := w.geo.K; s < len(job.chunks); s++ {
		if job.chunks[s] != nil {
			bufpool.Put(job.chunks[s])
		}
	}
	bufpool.Put(job.data)
	<-w.inflight
	_ = failed
}

// slotFailed drops a slot from the write (once); the write fails when
// fewer than WriteQuorum slots remain. An error that every slot gets
// alike (refusal) fails the write at once instead, blaming no node.
func (w *Writer) slotFailed(sw *slotWriter, err error) {
	if r := refusal(err); r != nil {
		w.fail(r)
		return
	}
	if !sw.dropped.CompareAndSwap(false, true) {
		return
	}
	sw.err = fmt.Errorf("slot %d on node %s: %w", sw.slot, sw.node.ID(), err)
	// Counted, and the write failed if that loses the quorum, before
	// droppedC lets Close stop waiting for the slot: Close would
	// otherwise commit with the slot neither written nor counted.
	if int(w.failed.Add(1)) > w.geo.Width()-w.quorum {
		w.fail(fmt.Errorf("%w: %d of %d archives failed: %w", ErrQuorum, w.failed.Load(), w.geo.Width(), sw.err))
	}
	close(sw.droppedC)
	w.s.space.forget() // the node may be full or down
	w.s.opts.Events.nodeError(sw.node.ID(), "write", err)
	w.s.warns.log(w.ctx, w.s.opts.Logger, "archive write failed", []string{sw.node.ID()}, "obj", w.path, "node", sw.node.ID(), "slot", sw.slot, "err", err)
}

// refusal is the write's error when err is one that the archive writer
// gives every archive of the write alike (the object or its metadata is
// more than the format holds): the request's fault, which fails the write
// without blaming the node. It is nil for any other error.
func refusal(err error) error {
	switch {
	case errors.Is(err, archive.ErrMetadataTooLarge):
		return fmt.Errorf("%w: %w", ErrMetadataTooLarge, err)
	case errors.Is(err, archive.ErrTooLarge):
		return fmt.Errorf("%w: %w", ErrTooLarge, err)
	}
	return nil
}

// fail records the write's first error and stops the pipeline.
func (w *Writer) fail(err error) {
	if w.err.CompareAndSwap(nil, &err) {
		w.cancel()
	}
}

func (w *Writer) stickyErr() error {
	if p := w.err.Load(); p != nil {
		return fmt.Errorf("object: write %s: %w", w.path, *p)
	}
	if w.ctx.Err() != nil {
		return w.abortErr()
	}
	return nil
}

func (w *Writer) abortErr() error {
	if p := w.err.Load(); p != nil {
		return fmt.Errorf("object: write %s: %w", w.path, *p)
	}
	return fmt.Errorf("object: write %s: aborted: %w", w.path, context.Cause(w.ctx))
}

// SetUser sets a user metadata entry (such as an S3 ETag computed while
// streaming) to be stored with the object. It must be called before Close.
func (w *Writer) SetUser(key, value string) {
	if w.user == nil {
		w.user = map[string]string{}
	}
	w.user[key] = value
}

// Err returns the error that has doomed the write (lost write quorum,
// abort), or nil while it can still succeed.
func (w *Writer) Err() error { return w.stickyErr() }

// Unwrite takes back the last n bytes written while they are still in the
// block being filled (nothing of them encoded or sent), and reports
// whether it could: bytes that turn out not to be the object's, such as
// the part of a page whose checksum never came.
func (w *Writer) Unwrite(n int64) bool {
	if w.done || n < 0 || n > int64(w.fill) {
		return false
	}
	w.fill -= int(n)
	return true
}

// Size is the number of bytes written so far.
func (w *Writer) Size() int64 { return w.size + int64(w.fill) }

// Close completes the write: it flushes the last block, writes every
// archive's metadata and central directory, makes the archives durable and,
// if at least WriteQuorum of them are, renames them into place. On error
// nothing new is visible at the path (except when renames fail midway,
// which is reported and left for fsck). The write is committed when Close
// returns nil. A write that the archive format cannot hold fails with
// ErrTooLarge or ErrMetadataTooLarge (and Write may fail with ErrTooLarge
// before Close), not ErrQuorum.
func (w *Writer) Close() error {
	if w.done {
		return ErrClosed
	}
	w.done = true
	defer func() { w.s.transfer(-1, w.blockBuf()) }()
	defer w.cancel()
	if w.fill > 0 && w.stickyErr() == nil {
		w.submit()
	} else if w.buf != nil {
		bufpool.Put(w.buf)
		w.buf = nil
		<-w.inflight
	}
	close(w.order)
	w.wait()
	if err := w.stickyErr(); err != nil {
		w.abortAll()
		return err
	}
	return w.commit()
}

func (w *Writer) commit() error {
	// Commits and removals of the path through this gateway take their
	// turns, so that their renames and removals do not interleave node by
	// node; the version is chosen in turn, so that the newest commit is
	// the one renamed last.
	unlock, err := w.s.paths.lock(w.ctx, w.path)
	if err != nil {
		w.abortAll()
		return fmt.Errorf("object: write %s: %w", w.path, err)
	}
	defer unlock()
	if w.precondition != nil {
		current, err := w.s.Stat(w.ctx, w.path)
		switch {
		case errors.Is(err, ErrNotExist):
			current, err = nil, nil
		case err != nil:
			err = fmt.Errorf("object: write %s: checking its precondition: %w", w.path, err)
		}
		if err == nil {
			err = w.precondition(current)
		}
		if err != nil {
			w.abortAll()
			return err
		}
	}
	now := w.s.opts.Now()
	if t := w.floor.Time(); w.floor != "" && !now.After(t) {
		// The object replaced is newer by this gateway's clock: another
		// gateway's runs ahead. Versions order the writes of a path
		// (readers, tombstones and repair take the newest), so the new
		// one must be newer than what it replaces, whatever the clocks.
		now = t.Add(time.Nanosecond)
	}
	meta := archive.Metadata{
		Path: w.path, Version: archive.NewVersion(now), Size: w.size,
		K: w.geo.K, M: w.geo.M, ChunkSize: w.geo.ChunkSize,
		Placement: w.nodeIDs, MTime: now.UTC().Truncate(time.Microsecond),
		Adler32: erasure.FormatSum(w.sums.Adler32()), CRC32C: erasure.FormatSum(w.sums.CRC32C()),
		User: w.user,
	}
	// Finish every healthy archive in parallel.
	finished := w.eachSlot(w.ctx, w.finishBound(), func(ctx context.Context, sw *slotWriter) bool {
		m := meta
		m.Slot = sw.slot
		if err := sw.aw.Close(&m); err != nil {
			w.slotFailed(sw, err)
			return false
		}
		if a, ok := sw.up.(node.Attributes); ok {
			if err := a.SetAttrs(ctx, summaryAttrs(&m)); err != nil {
				w.slotFailed(sw, w.straggled(ctx, err))
				return false
			}
		}
		if err := sw.up.Finish(ctx); err != nil {
			w.slotFailed(sw, w.straggled(ctx, err))
			return false
		}
		return true
	})
	if err := w.stickyErr(); err == nil && w.ctx.Err() != nil {
		w.fail(fmt.Errorf("object: write %s: %w", w.path, w.ctx.Err()))
	}
	if finished < w.quorum {
		// Every failure is counted (slotFailed) before it shows; this
		// only keeps a slip there from committing a write short of its
		// quorum.
		w.fail(fmt.Errorf("%w: %d of %d archives finished, %d needed", ErrQuorum, finished, w.geo.Width(), w.quorum))
	}
	if err := w.stickyErr(); err != nil {
		w.abortAll()
		return err
	}
	// Commit: rename into place. Once a rename may have landed, the
	// commit is seen through even if the client goes away: renames cut
	// short would leave the new version on some nodes and the old one's
	// archives replaced there, neither whole. A client gone leaves the
	// renames still running WriteTimeout to end.
	renames, stopRenames := context.WithCancel(context.WithoutCancel(w.ctx))
	defer stopRenames()
	stopGrace := context.AfterFunc(w.ctx, func() { time.AfterFunc(w.s.opts.WriteTimeout, stopRenames) })
	defer stopGrace()
	var renameFailed sync.Map // slot -> true
	committed := w.eachSlot(renames, 4*w.s.opts.WriteTimeout, func(ctx context.Context, sw *slotWriter) bool {
		if err := sw.up.Commit(ctx); err != nil {
			if w.s.holdsVersion(ctx, sw.node, w.path, meta.Version) {
				// A reader completed this commit, taking us for dead.
				return true
			}
			err = w.straggled(ctx, err)
			renameFailed.Store(sw.slot, true)
			sw.dropped.Store(true)
			sw.err = err
			w.s.warns.log(ctx, w.s.opts.Logger, "archive commit failed", []string{sw.node.ID()}, "obj", w.path, "node", sw.node.ID(), "err", err)
			return false
		}
		return true
	})
	// More than M archives renamed but fewer than K: the path's older
	// version, if any, has lost those archives and may no longer be
	// readable. The archives whose rename failed are finished and
	// durable under their temporary names: they are kept, so that a read
	// (rollForward) or repair completes the commit once their nodes
	// answer, rather than removed with the last whole version.
	keepTemps := committed > w.geo.M && committed < w.geo.K
	var missing []int
	var missingNodes []string
	for _, sw := range w.slots {
		if sw.dropped.Load() {
			missing = append(missing, sw.slot)
			missingNodes = append(missingNodes, sw.node.ID())
			if _, ok := renameFailed.Load(sw.slot); ok && keepTemps {
				continue
			}
			if sw.up != nil {
				// In the background: a dropped node may be one that
				// hangs, and its abort waits for it up to the node's
				// cleanup timeout; the client need not (what an abort
				// does not remove, repair does).
				ctx := context.WithoutCancel(w.ctx)
				w.s.inBackground(func() {
					<-sw.exited // not while its writer may still write to it
					w.s.discard(ctx, sw.node.ID(), sw.up)
				})
			}
		}
	}
	// Every archive was durable before the renames began (Finish). Once K
	// of them are renamed into place the new version is what readers see,
	// so the write has happened: report success (degraded) rather than a
	// failure that the visible object would contradict. Below K the new
	// version is invisible and the write failed.
	if c := committed; c < w.geo.K {
		if keepTemps {
			return fmt.Errorf("object: write %s: %w: only %d of %d archives committed; %w: the others are finished under temporary names, and a read or repair completes the commit once their nodes answer", w.path, ErrQuorum, c, w.geo.Width(), ErrInDoubt)
		}
		return fmt.Errorf("object: write %s: %w: only %d of %d archives committed; run fsck", w.path, ErrQuorum, c, w.geo.Width())
	}
	if len(missing) > 0 {
		w.s.warns.log(w.ctx, w.s.opts.Logger, "object written degraded", missingNodes, "obj", w.path, "missing_slots", missing, "nodes", missingNodes)
		if f := w.s.opts.Events.DegradedWrite; f != nil {
			f(w.path, missing)
		}
	}
	var at []string
	for _, sw := range w.slots {
		if !sw.dropped.Load() {
			at = append(at, sw.node.ID())
		}
	}
	w.s.clearReplaced(w.ctx, w.path, meta.Version, w.geo.K, at, missingNodes)
	return nil
}

// clearReplaced keeps readers from finding an older version of path
// first. A reader asks the nodes ranked first for the path in growing
// windows (probeWindows) and stops at the first window holding a whole
// readable version; it takes the newest version with K archives there. A
// version committed mostly outside a window (placed there because the
// nodes ranked first were full or down, or because the window is smaller
// than the version's width) could then lose to an older one whole in it.
// So for every window holding fewer than K of the new version's archives
// (on nodes at), archives of older versions are removed from the rest of
// the window: the older version is then incomplete there, and readers
// look further. Best effort: a node that cannot be reached keeps its
// archive (the older version then needs every node of its placement
// back, and more than M of them missed this write). In the usual case,
// every node of the windows too small for the new version holds one of
// its archives, and nothing is asked. Nodes known to hang are not asked
// (see forEachAnswering): each would hold the client's close for its
// shortened deadline (HedgeDelay), and the path's next write for as long
// if asked in the background. Nodes the write dropped (listed in
// dropped) are asked in the background, in the path's turn: the write
// has just found them hung or failing, and the client need not wait for
// their lookup to time out. A reader meanwhile does not read an archive
// from a node that does not answer either.
func (s *Store) clearReplaced(ctx context.Context, path string, v archive.Version, k int, at, dropped []string) {
	ranked := s.rank(path)
	var others []node.Node
	for _, upTo := range s.probeWindows(len(ranked)) {
		window := ranked[:upTo]
		in := 0
		for _, n := range window {
			if slices.Contains(at, n.ID()) {
				in++
			}
		}
		if in >= k || upTo == len(ranked) {
			continue // the new version wins in the window, or it is the last
		}
		for _, n := range window {
			if !slices.Contains(at, n.ID()) && !slices.ContainsFunc(others, func(o node.Node) bool { return o.ID() == n.ID() }) {
				others = append(others, n)
			}
		}
	}
	if len(others) == 0 {
		return
	}
	clear := func(ctx context.Context, n node.Node) error {
		r := probeOne(ctx, path, n)
		if r.ref == nil {
			return r.err
		}
		older := r.ref.idx.Meta.Version < v
		r.ref.file.Close()
		if !older {
			return nil
		}
		if err := n.Remove(ctx, path); err != nil && !errors.Is(err, node.ErrNotExist) {
			s.opts.Logger.Warn("replaced version left where readers look first", "obj", path, "node", n.ID(), "err", err)
			return err
		}
		return nil
	}
	var later []node.Node
	hung := s.skippedHung()
	others = slices.DeleteFunc(others, func(n node.Node) bool {
		if hung[n.ID()] {
			return true // as if it had timed out at once: it keeps its archive
		}
		if slices.Contains(dropped, n.ID()) {
			later = append(later, n)
			return true
		}
		return false
	})
	if len(later) > 0 {
		ctx := context.WithoutCancel(ctx)
		s.inBackground(func() {
			// In the path's turn: a commit of a newer version landing
			// between the lookup and the removal would lose an archive.
			unlock, err := s.paths.lock(ctx, path)
			if err != nil {
				return
			}
			defer unlock()
			s.forNodes(ctx, later, clear)
		})
	}
	if len(others) > 0 {
		s.forNodes(ctx, others, clear)
	}
}

// eachSlot runs fn for every slot still in the write, in parallel, and
// returns how many succeeded. Once the write quorum has succeeded, the
// slots still running get as long again as the quorum took, and at least
// WriteLag, before their context is cancelled: a node that stops
// answering between its last chunk and its sync or rename (after the
// write's watch has stopped) would otherwise hold the client's close for
// as long as it hangs, while a disk that syncs a little slower than the
// others is waited for. No slot runs past bound, quorum or not. fn's
// contexts derive from parent; fn reports success.
func (w *Writer) eachSlot(parent context.Context, bound time.Duration, fn func(ctx context.Context, sw *slotWriter) bool) int {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	start := time.Now()
	// However the quorum fares, no slot runs past bound: a node that
	// hangs in its sync or rename while the quorum needs it would hold
	// the client's close (and the path's turn) for as long as it hangs.
	limit := time.NewTimer(bound)
	defer limit.Stop()
	results := make(chan bool, len(w.slots))
	running := 0
	for _, sw := range w.slots {
		if sw.dropped.Load() {
			continue
		}
		running++
		workers.Go(func() { results <- fn(ctx, sw) })
	}
	ok := 0
	var lag <-chan time.Time
	for running > 0 {
		select {
		case r := <-results:
			running--
			if r {
				ok++
			}
			if lag == nil && ok >= w.quorum && running > 0 {
				t := time.NewTimer(max(w.s.opts.WriteLag, time.Since(start)))
				defer t.Stop()
				lag = t.C
			}
		case <-lag:
			cancel() // the slots still running hang; fn returns promptly
		case <-limit.C:
			cancel()
		}
	}
	return ok
}

// finishBound is how long the archives' Finish (their sync) may take
// at most: 4 WriteTimeouts, and a second more per 10 MB of each archive
// (a sync that a plain xrootd node makes of a page-cached archive writes
// it all then).
func (w *Writer) finishBound() time.Duration {
	perArchive := w.size / int64(w.geo.K)
	return 4*w.s.opts.WriteTimeout + time.Duration(perArchive/10e6)*time.Second
}

// straggled wraps err, a slot's failure in eachSlot, with why when the
// slot was cut off for lagging behind the quorum.
func (w *Writer) straggled(ctx context.Context, err error) error {
	if ctx.Err() != nil && w.ctx.Err() == nil {
		return fmt.Errorf("node lagged the write quorum (its sync or rename) by as long as the quorum took, and at least %v: %w", w.s.opts.WriteLag, err)
	}
	return err
}

// Abort discards the write; nothing becomes visible. It is safe to call
// after Close (then it does nothing).
func (w *Writer) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	defer func() { w.s.transfer(-1, w.blockBuf()) }()
	w.fail(fmt.Errorf("aborted"))
	if w.buf != nil {
		bufpool.Put(w.buf)
		w.buf = nil
		<-w.inflight
	}
	close(w.order)
	w.wait()
	w.abortAll()
	return nil
}

// wait waits for the pipeline to end: the dispatcher, and the writers of
// the slots not dropped (watch may drop one meanwhile). Then it stops
// watch.
func (w *Writer) wait() {
	w.wg.Wait()
	for _, sw := range w.slots {
		sw.wait()
	}
	close(w.stopWatch)
	<-w.watchDone // no slot is dropped from here on (commit handles failures)
}

func (w *Writer) abortAll() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), 10*time.Second)
	var wg sync.WaitGroup
	for _, sw := range w.slots {
		if sw.up == nil {
			continue // never opened
		}
		wg.Add(1)
		// In the background (Drain waits for it): the caller waits for
		// the aborts for WriteLag at most, not for a node that hangs.
		w.s.inBackground(func() {
			defer wg.Done()
			select {
			case <-sw.exited: // not while its writer may still write to it
			case <-ctx.Done():
				// Stuck in a write to its node: remove the file once
				// the node answers (an unlinked file takes the rest).
				w.s.leftovers.add(sw.node.ID(), sw.up.TempPath(), ctx.Err())
				return
			}
			w.s.discard(ctx, sw.node.ID(), sw.up)
		})
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		cancel()
		close(done)
	}()
	t := time.NewTimer(w.s.opts.WriteLag)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
