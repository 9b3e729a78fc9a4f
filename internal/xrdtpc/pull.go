package xrdtpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ecstore/ecstore/internal/erasure"
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
	// Chunk is the buffer of a destination that does not read for
	// itself (not an io.ReaderFrom); Depth is how many reads are in
	// flight at once, each of a part of what the destination asks for
	// (at least 1 MiB). Default 8 MiB and 4.
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
// bytes copied. A w that is an io.ReaderFrom reads the bytes into its
// own buffers. It checks that they are as many as the source's open
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
	sum := erasure.NewAdler32() // (hash/adler32 took a sixth of a pull's CPU)
	n, err := copyFile(ctx, f, size, w, sum, o)
	if err != nil {
		return n, fmt.Errorf("pull %s from %s: %w", src.Path, src.Addr, err)
	}
	f.Close(ctx)
	if err := verifyAdler32(ctx, c, src.Path, sum.Sum32()); err != nil {
		return n, fmt.Errorf("pull %s from %s: %w", src.Path, src.Addr, err)
	}
	return n, nil
}

// copyFile writes the size bytes of f to w and checks that the file
// ends there. A w that reads for itself (io.ReaderFrom: the object
// writer, which reads into its block buffers) gets the bytes straight
// from the connection, without a copy; others through one buffer of
// o.Chunk bytes.
func copyFile(ctx context.Context, f *xrootd.ClientFile, size int64, w io.Writer, sum io.Writer, o PullOptions) (int64, error) {
	r := &sourceReader{ctx: ctx, f: f, size: size, sum: sum, depth: o.Depth, moved: o.Moved}
	n, err := io.CopyBuffer(w, r, make([]byte, min(int64(o.Chunk), max(size, 1))))
	if err != nil {
		return n, err
	}
	if r.off != size {
		return n, fmt.Errorf("the destination took %d of the %d bytes", r.off, size)
	}
	return n, nil
}

// minPart is the smallest read a sourceReader splits a buffer into.
const minPart = 1 << 20

// sourceReader reads the source file in order. Each Read fills its
// buffer (up to the file's announced end) with up to depth reads in
// flight at once, each of a part of it: the bytes land where the caller
// wants them. At the announced end it checks that the file ends there.
type sourceReader struct {
	ctx   context.Context
	f     *xrootd.ClientFile
	size  int64
	off   int64
	sum   io.Writer
	depth int
	moved *atomic.Int64
}

func (r *sourceReader) Read(p []byte) (int, error) {
	if r.off >= r.size {
		// The file must end where its open said.
		var probe [1]byte
		if n, err := r.f.ReadAt(r.ctx, probe[:], r.size); n != 0 || err != io.EOF {
			if err != nil && err != io.EOF {
				return 0, err
			}
			return 0, fmt.Errorf("the file is longer than the %d bytes its open announced (it changed during the copy?)", r.size)
		}
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.size-r.off)]
	parts := max(min(r.depth, len(p)/minPart), 1)
	part := (len(p) + parts - 1) / parts
	type result struct {
		i, n int
		err  error
	}
	done := make(chan result, parts)
	for i := range parts {
		lo := i * part
		hi := min(lo+part, len(p))
		go func() {
			n, err := r.f.ReadAt(r.ctx, p[lo:hi], r.off+int64(lo))
			done <- result{i, n, err}
		}()
	}
	got := make([]int, parts)
	var first error
	for range parts {
		res := <-done
		got[res.i] = res.n
		if res.err != nil && (first == nil || res.err != io.EOF) {
			first = res.err
		}
	}
	// The bytes read in order, up to the first part that came short.
	n := 0
	for i := range parts {
		n += got[i]
		if lo := i * part; n < min(lo+part, len(p)) {
			break
		}
	}
	if n > 0 {
		watchdog.Progress(r.ctx)
		r.sum.Write(p[:n])
		r.off += int64(n)
		if r.moved != nil {
			r.moved.Store(r.off)
		}
	}
	if n < len(p) {
		if first == nil || first == io.EOF {
			first = fmt.Errorf("the file ended at %d of the %d bytes its open announced: %w", r.off, r.size, io.ErrUnexpectedEOF)
		}
		return n, first
	}
	return n, nil
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
