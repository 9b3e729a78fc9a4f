package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ecstore/ecstore/internal/xrootd"
)

// dialTimeout bounds one connection attempt.
const dialTimeout = 15 * time.Second

// maxBackoff caps the wait between failed connection attempts.
const maxBackoff = time.Second

// objRef names an object written by a worker in the timed phase.
type objRef struct {
	w   int
	seq int64
}

// opStats are one worker's statistics of one operation type.
type opStats struct {
	hist     histogram // latencies of successful operations
	errors   int64
	bytes    int64
	firstErr error
	firstAt  time.Time
}

func (s *opStats) fail(err error) {
	s.errors++
	if s.firstErr == nil {
		s.firstErr, s.firstAt = err, time.Now()
	}
}

// worker runs operations one at a time over its own connection. Its
// fields are used by its own goroutine only, except that a get with
// parallel reads shares the connection and the read buffer (disjoint
// parts of it) with helper goroutines for the duration of the get.
type worker struct {
	r       *runner
	id      int
	c       *xrootd.Client // nil once dropped, until ensureConn dials again
	rng     *rand.Rand
	buf     []byte // read buffer
	seq     int64  // next object of this worker
	written []objRef
	backoff time.Duration
	stats   [numOps]opStats
	// random mode: the prepared object open for reading (nil until the
	// first read, and after the connection was dropped) and its number
	rf    *xrootd.ClientFile
	rfObj int
}

func newWorker(r *runner, id int) *worker {
	return &worker{r: r, id: id, rng: rand.New(rand.NewPCG(r.cfg.Seed, uint64(id)))}
}

// dial connects the worker.
func (w *worker) dial(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c, err := xrootd.Dial(dctx, w.r.cfg.Addr, w.r.cfg.DialOptions)
	if err != nil {
		return err
	}
	w.c = c
	return nil
}

// drop closes the connection; the next operation dials again. Closing a
// connection with a file open for writing abandons that upload.
func (w *worker) drop() {
	if w.c != nil {
		w.c.Close()
		w.c = nil
	}
	w.rf = nil
}

// ensureConn dials again after the connection was dropped, waiting first
// when the previous attempt failed.
func (w *worker) ensureConn(ctx context.Context) error {
	if w.c != nil {
		return nil
	}
	wait := w.backoff
	if dl := w.r.deadline; !dl.IsZero() {
		wait = min(wait, time.Until(dl)) // do not hold the phase past its end
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	if err := w.dial(ctx); err != nil {
		w.backoff = min(max(2*w.backoff, 10*time.Millisecond), maxBackoff)
		return err
	}
	w.backoff = 0
	w.r.reconnects.Add(1)
	return nil
}

// afterError drops a connection that err shows to be broken.
func (w *worker) afterError(err error) {
	if errors.Is(err, xrootd.ErrClosed) {
		w.drop()
	}
}

// do runs one operation of type op with fn and records its outcome.
// Operations that fail because ctx ended are not counted.
func (w *worker) do(ctx context.Context, op Op, fn func() (int64, error)) bool {
	s := &w.stats[opIndex(op)]
	if err := w.ensureConn(ctx); err != nil {
		if ctx.Err() == nil {
			s.fail(err)
		}
		return false
	}
	start := time.Now()
	n, err := fn()
	d := time.Since(start)
	if err != nil {
		w.afterError(err)
		if ctx.Err() == nil {
			s.fail(err)
		}
		return false
	}
	s.hist.record(d)
	s.bytes += n
	return true
}

// putNew writes a new object of this worker (put and mixed modes).
func (w *worker) putNew(ctx context.Context, _ int64) {
	seq := w.seq
	w.seq++
	w.do(ctx, OpPut, func() (int64, error) {
		return w.put(ctx, w.r.workerName(w.id, seq), workerKey(w.id, seq))
	})
}

// getPrepared reads prepared object n modulo their number.
func (w *worker) getPrepared(ctx context.Context, n int64) {
	i := int(n % int64(w.r.cfg.Objects))
	w.do(ctx, OpGet, func() (int64, error) { return w.get(ctx, w.r.preparedName(i), preparedKey(i)) })
}

// mixed is a get or a put, drawn with the worker's generator.
func (w *worker) mixed(ctx context.Context, n int64) {
	if w.rng.Float64() < w.r.cfg.ReadFraction {
		w.getPrepared(ctx, n)
	} else {
		w.putNew(ctx, n)
	}
}

// randomRead makes one read request of random mode on the prepared
// object the worker keeps open (opened at its first read, not timed): a
// kXR_read of ReadSize bytes at a random offset, or a kXR_readv of
// Vector such reads, sorted by offset as ROOT sends them.
func (w *worker) randomRead(ctx context.Context, _ int64) {
	if w.rf == nil {
		if err := w.openRandom(ctx); err != nil {
			if ctx.Err() == nil {
				w.stats[opIndex(OpRead)].fail(err)
			}
			return
		}
	}
	size, n := w.r.cfg.Size, w.r.cfg.ReadSize
	offs := make([]int64, w.r.cfg.Vector)
	for i := range offs {
		offs[i] = w.rng.Int64N(size - int64(n) + 1)
	}
	slices.Sort(offs)
	w.do(ctx, OpRead, func() (int64, error) {
		if len(offs) == 1 {
			if len(w.buf) < n {
				w.buf = make([]byte, n)
			}
			got, err := w.rf.ReadAt(ctx, w.buf[:n], offs[0])
			if err != nil && !errors.Is(err, io.EOF) {
				return 0, err
			}
			if got != n {
				return 0, fmt.Errorf("%w: %s: %d bytes at %d, want %d", ErrSize, w.rf.Name(), got, offs[0], n)
			}
			return int64(n), w.checkRange(offs[0], w.buf[:n])
		}
		segs := make([]xrootd.ReadSegment, len(offs))
		for i, off := range offs {
			segs[i] = xrootd.ReadSegment{Offset: off, Length: int32(n)}
		}
		got, err := w.rf.ReadV(ctx, segs)
		if err != nil {
			return 0, err
		}
		var total int64
		for i, b := range got {
			if len(b) != n {
				return 0, fmt.Errorf("%w: %s: %d bytes at %d, want %d", ErrSize, w.rf.Name(), len(b), offs[i], n)
			}
			if err := w.checkRange(offs[i], b); err != nil {
				return 0, err
			}
			total += int64(n)
		}
		return total, nil
	})
}

// openRandom opens the random mode's object of the worker, dialling
// first if the connection was dropped.
func (w *worker) openRandom(ctx context.Context) error {
	if err := w.ensureConn(ctx); err != nil {
		return err
	}
	w.rfObj = w.id % w.r.cfg.Objects
	f, err := w.c.Open(ctx, w.r.preparedName(w.rfObj), xrootd.OpenRead, 0)
	if err != nil {
		w.afterError(err)
		return err
	}
	w.rf = f
	return nil
}

// checkRange compares b, read at off of the random mode's object, with
// what was written, when Verify is set.
func (w *worker) checkRange(off int64, b []byte) error {
	if !w.r.cfg.Verify {
		return nil
	}
	key := preparedKey(w.rfObj)
	for len(b) > 0 {
		i, in := off/PieceSize, off%PieceSize
		n := min(int64(len(b)), PieceSize-in)
		piece := w.r.gen.piece(key, i, int(min(w.r.cfg.Size-i*PieceSize, PieceSize)))
		if !bytes.Equal(b[:n], piece[in:in+n]) {
			return fmt.Errorf("%w: %s, %d bytes at %d", ErrContent, w.rf.Name(), n, off)
		}
		b, off = b[n:], off+n
	}
	return nil
}

// closeRandom closes the random mode's object.
func (w *worker) closeRandom(ctx context.Context) {
	if w.rf != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dialTimeout)
		defer cancel()
		_ = w.rf.Close(cctx)
		w.rf = nil
	}
}

// putSmall writes a new object and remembers it for the later phases.
func (w *worker) putSmall(ctx context.Context, _ int64) {
	o := objRef{w.id, w.seq}
	w.seq++
	if w.do(ctx, OpPut, func() (int64, error) { return w.put(ctx, w.r.workerName(o.w, o.seq), workerKey(o.w, o.seq)) }) {
		w.written = append(w.written, o)
	}
}

// statSmall stats an object and checks its size.
func (w *worker) statSmall(ctx context.Context, o objRef) {
	w.do(ctx, OpStat, func() (int64, error) {
		name := w.r.workerName(o.w, o.seq)
		fi, err := w.c.Stat(ctx, name)
		if err == nil && fi.Size != w.r.cfg.Size {
			err = fmt.Errorf("%w: stat %s: %d bytes, want %d", ErrSize, name, fi.Size, w.r.cfg.Size)
		}
		return 0, err
	})
}

// getSmall reads an object written in the put phase.
func (w *worker) getSmall(ctx context.Context, o objRef) {
	w.do(ctx, OpGet, func() (int64, error) { return w.get(ctx, w.r.workerName(o.w, o.seq), workerKey(o.w, o.seq)) })
}

// rmSmall removes an object written in the put phase.
func (w *worker) rmSmall(ctx context.Context, o objRef) {
	w.do(ctx, OpRm, func() (int64, error) { return 0, w.c.Rm(ctx, w.r.workerName(o.w, o.seq)) })
}

// put creates object name with the content of key: open with
// kXR_new|kXR_mkpath, sequential writes of at most PieceSize bytes, an
// optional sync, close. Like xrdcp, it announces the size in the open
// (oss.asize). It returns the bytes written.
func (w *worker) put(ctx context.Context, name string, key uint64) (int64, error) {
	f, err := w.c.Open(ctx, name+"?oss.asize="+strconv.FormatInt(w.r.cfg.Size, 10), xrootd.OpenNew|xrootd.OpenMkpath, 0o644)
	if err != nil {
		return 0, err
	}
	size := w.r.cfg.Size
	for off := int64(0); off < size; off += PieceSize {
		n := int(min(size-off, PieceSize))
		if _, err := f.WriteAt(ctx, w.r.gen.piece(key, off/PieceSize, n), off); err != nil {
			w.drop() // abandon the upload rather than commit part of it
			return 0, err
		}
	}
	if w.r.cfg.Fsync {
		if err := f.Sync(ctx); err != nil {
			w.drop()
			return 0, err
		}
	}
	if err := f.Close(ctx); err != nil {
		return 0, err
	}
	return size, nil
}

// get reads object name whole, checking its size and, with Verify, its
// content against key. It returns the bytes read.
func (w *worker) get(ctx context.Context, name string, key uint64) (int64, error) {
	f, err := w.c.Open(ctx, name, xrootd.OpenRead, 0)
	if err != nil {
		return 0, err
	}
	n, err := w.read(ctx, f, key)
	if cerr := f.Close(ctx); err == nil {
		err = cerr
	}
	return n, err
}

// read reads every piece of f, ParallelReads at a time.
func (w *worker) read(ctx context.Context, f *xrootd.ClientFile, key uint64) (int64, error) {
	size := w.r.cfg.Size
	if got := f.OpenInfo().Size; got != size {
		return 0, fmt.Errorf("%w: %s has %d bytes, want %d", ErrSize, f.Name(), got, size)
	}
	pieces := (size + PieceSize - 1) / PieceSize
	pieceLen := min(size, PieceSize)
	par := max(min(int64(w.r.cfg.ParallelReads), pieces), 1)
	if int64(len(w.buf)) < par*pieceLen {
		w.buf = make([]byte, par*pieceLen)
	}
	if par == 1 {
		for i := range pieces {
			if err := w.readPiece(ctx, f, key, i, w.buf[:pieceLen]); err != nil {
				return 0, err
			}
		}
		return size, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		errs = make([]error, par)
	)
	for g := range par {
		buf := w.buf[g*pieceLen : (g+1)*pieceLen]
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= pieces {
					return
				}
				if err := w.readPiece(ctx, f, key, i, buf); err != nil {
					errs[g] = err
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	// Report the failure that stopped the others, not their cancellation.
	var first error
	for _, err := range errs {
		if err != nil && (first == nil || errors.Is(first, context.Canceled) && !errors.Is(err, context.Canceled)) {
			first = err
		}
	}
	if first != nil {
		return 0, first
	}
	return size, nil
}

// readPiece reads piece i of f into buf and checks it.
func (w *worker) readPiece(ctx context.Context, f *xrootd.ClientFile, key uint64, i int64, buf []byte) error {
	off := i * PieceSize
	p := buf[:min(w.r.cfg.Size-off, PieceSize)]
	n, err := f.ReadAt(ctx, p, off)
	switch {
	case n < len(p) && (err == nil || errors.Is(err, io.EOF)):
		return fmt.Errorf("%w: %s: %d bytes at %d, want %d", ErrSize, f.Name(), n, off, len(p))
	case err != nil && !errors.Is(err, io.EOF):
		return err
	}
	if w.r.cfg.Verify && !bytes.Equal(p, w.r.gen.piece(key, i, len(p))) {
		return fmt.Errorf("%w: %s, piece at %d", ErrContent, f.Name(), off)
	}
	return nil
}
