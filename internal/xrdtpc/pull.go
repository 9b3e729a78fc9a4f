package xrdtpc

import (
	"context"
	"errors"
	"fmt"
	"hash/adler32"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ecstore/ecstore/internal/watchdog"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// Source is the file a destination pulls.
type Source struct {
	Addr   string // host:port
	TLS    bool   // reach it with roots://
	Path   string
	Key    string // tpc.key
	Origin string // tpc.org: the client process, Origin of its identity
}

// PullOptions configure Pull.
type PullOptions struct {
	// Dial holds the connection's options (TLS roots, logger). The pull
	// never presents a token: the source is the client's choice.
	Dial xrootd.DialOptions
	// Chunk is the size of one read, Depth how many are outstanding.
	// Default 8 MiB and 4: the memory of one pull is Chunk × Depth.
	Chunk, Depth int
	// Moved, if set, counts the bytes written to w so far.
	Moved *atomic.Int64
	// Idle ends a pull whose source sends nothing for this long.
	// Default 2 minutes.
	Idle time.Duration
}

// ErrChecksum is the error of a pull whose bytes do not have the adler32
// checksum the source gives for its file.
var ErrChecksum = errors.New("checksum mismatch")

// Pull copies src into w with reads kept in flight, and returns the
// bytes copied. It checks that they are as many as the source's open
// announced and, when the source answers adler32 queries, that their
// checksum is the source's.
func Pull(ctx context.Context, src Source, w io.Writer, o PullOptions) (int64, error) {
	if o.Chunk <= 0 {
		o.Chunk = 8 << 20
	}
	if o.Depth <= 0 {
		o.Depth = 4
	}
	if o.Idle <= 0 {
		o.Idle = 2 * time.Minute
	}
	parent := ctx
	ctx, stop := watchdog.WithIdleTimeout(ctx, o.Idle)
	defer stop()
	n, err := pull(ctx, src, w, o)
	if err != nil && parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("no data from the source for %v: %w", o.Idle, err)
	}
	return n, err
}

// pull is Pull under the idle watchdog ctx.
func pull(ctx context.Context, src Source, w io.Writer, o PullOptions) (int64, error) {
	if !plainCGIValue(src.Key) || !plainCGIValue(src.Origin) || !plainPath(src.Path) {
		return 0, fmt.Errorf("pull from %s: the key, origin (%q) or path cannot be sent as CGI", src.Addr, src.Origin)
	}
	dial := o.Dial
	dial.Token, dial.NoTokenSearch = "", true
	scheme := "root://"
	if src.TLS {
		scheme = "roots://"
	}
	c, err := xrootd.Dial(ctx, scheme+src.Addr, &dial)
	if err != nil {
		return 0, fmt.Errorf("pull from %s: %w", src.Addr, err)
	}
	defer c.Close()
	f, err := c.Open(ctx, src.Path+"?tpc.key="+src.Key+"&tpc.org="+src.Origin, xrootd.OpenRead, 0)
	if err != nil {
		return 0, fmt.Errorf("pull from %s: %w", src.Addr, err)
	}
	// After a failure the file is left to the connection's close: a
	// source whose read hangs would hang its close too.
	size := f.OpenInfo().Size
	sum := adler32.New()
	n, err := readAll(ctx, f, size, io.MultiWriter(w, sum), o)
	if err != nil {
		return n, fmt.Errorf("pull %s from %s: %w", src.Path, src.Addr, err)
	}
	f.Close(ctx)
	if err := verifyAdler32(ctx, c, src.Path, sum.Sum32()); err != nil {
		return n, fmt.Errorf("pull %s from %s: %w", src.Path, src.Addr, err)
	}
	return n, nil
}

// readAll writes the size bytes of f to w, keeping o.Depth reads of
// o.Chunk bytes in flight, and checks that the file ends there.
func readAll(ctx context.Context, f *xrootd.ClientFile, size int64, w io.Writer, o PullOptions) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type read struct {
		buf []byte
		n   int
		err error
	}
	// Buffers as the file needs them, up to Depth of Chunk bytes.
	chunk := int(min(int64(o.Chunk), max(size, 1)))
	depth := int(min(int64(o.Depth), (size+int64(chunk)-1)/int64(chunk)))
	free := make(chan []byte, max(depth, 1))
	for range max(depth, 1) {
		free <- make([]byte, chunk)
	}
	o.Chunk = chunk
	// Reads are started in offset order; their results are taken in the
	// same order, so w sees the file from its start.
	inFlight := make(chan chan read, cap(free))
	go func() {
		defer close(inFlight)
		for off := int64(0); off < size; off += int64(o.Chunk) {
			var buf []byte
			select {
			case buf = <-free:
			case <-ctx.Done():
				return
			}
			buf = buf[:min(int64(o.Chunk), size-off)]
			done := make(chan read, 1)
			inFlight <- done
			go func() {
				n, err := f.ReadAt(ctx, buf, off)
				done <- read{buf, n, err}
			}()
		}
	}()
	var total int64
	for done := range inFlight {
		r := <-done
		if r.err == io.EOF && r.n < len(r.buf) || r.err != nil && r.err != io.EOF {
			if r.err == io.EOF {
				r.err = fmt.Errorf("the file ended at %d of the %d bytes its open announced: %w", total+int64(r.n), size, io.ErrUnexpectedEOF)
			}
			return total, r.err
		}
		watchdog.Progress(ctx)
		// The destination's own slowness is not the source's silence.
		busy := watchdog.Busy(ctx)
		_, err := w.Write(r.buf[:r.n])
		busy()
		if err != nil {
			return total, err
		}
		total += int64(r.n)
		if o.Moved != nil {
			o.Moved.Store(total)
		}
		free <- r.buf[:cap(r.buf)]
	}
	if err := ctx.Err(); err != nil {
		return total, err
	}
	// The file must end where its open said.
	var probe [1]byte
	if n, err := f.ReadAt(ctx, probe[:], size); n != 0 || err != io.EOF {
		if err != nil && err != io.EOF {
			return total, err
		}
		return total, fmt.Errorf("the file is longer than the %d bytes its open announced (it changed during the copy?)", size)
	}
	return total, nil
}

// verifyAdler32 compares sum with the source's adler32 of path, when the
// source gives one.
func verifyAdler32(ctx context.Context, c *xrootd.Client, path string, sum uint32) error {
	alg, value, err := c.Checksum(ctx, path, "adler32")
	var xe *xrootd.Error
	switch {
	case errors.As(err, &xe) && (xe.Code == xrootd.ErrUnsupported || xe.Code == xrootd.ErrNotAuthorized):
		return nil // the source keeps no adler32, or does not tell it to us
	case err != nil:
		return fmt.Errorf("asking the source for its adler32: %w", err)
	case !strings.EqualFold(alg, "adler32"):
		return nil
	}
	if want := fmt.Sprintf("%08x", sum); !strings.EqualFold(strings.TrimSpace(value), want) {
		return fmt.Errorf("%w: the source's adler32 is %s, the bytes pulled have %s", ErrChecksum, value, want)
	}
	return nil
}
