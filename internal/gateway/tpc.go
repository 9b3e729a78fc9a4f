package gateway

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ecstore/ecstore/internal/jwtauth"
	"github.com/ecstore/ecstore/internal/xrdtpc"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// XRootD's native third-party copy (xrdcp --tpc), both ends; see package
// xrdtpc for the protocol. As a source, the gateway lets in the pull of
// an object on the key that a client who may read it registered (the
// pull itself brings no credentials). As a destination, a client who may
// write the object opens it with the source's address, and its kXR_sync
// starts the pull: the object is stored when the client closes it after
// the pull succeeded, and not at all otherwise.

// ConfigValue implements xrootd.ConfigReporter: "tpc" says that
// third-party copies are served (XRootD's delegation, "tpcdlg", is not).
func (f *FS) ConfigValue(key string) (string, bool) {
	if key == "tpc" {
		return "1", true
	}
	return "", false
}

// openTPCSource serves the opens for reading that take part in a
// third-party copy: a client's registration of a key, or the pull of a
// destination that brings one.
func (f *FS) openTPCSource(ctx context.Context, name string, t xrdtpc.Open) (xrootd.File, error) {
	id := xrootd.PeerIdentity(ctx)
	if t.Role == xrdtpc.RolePull {
		if err := f.tpcKeys.Claim(ctx, t.Key, t.Origin, name, id.Remote.Addr()); err != nil {
			if errors.Is(err, xrdtpc.ErrNotAuthorized) {
				f.hooks.AuthFailed("root", "credentials")
				return nil, xrootd.Errorf(xrootd.ErrNotAuthorized, "%s: %v", name, err)
			}
			return nil, err
		}
		r, err := f.store.Open(ctx, name)
		if err != nil {
			return nil, mapErr(err)
		}
		f.log.Info("third-party pull", "obj", name, "puller", id.Remote.String(), "origin", t.Origin)
		return &readFile{r: r, hooks: &f.hooks}, nil
	}
	if err := f.allow(ctx, jwtauth.Read, "read", name); err != nil {
		return nil, err
	}
	r, err := f.store.Open(ctx, name)
	if err != nil {
		return nil, mapErr(err)
	}
	release, err := f.tpcKeys.Register(id, t.Key, name, t.Dst, t.TTL)
	if err != nil {
		r.Close()
		return nil, xrootd.Errorf(xrootd.ErrNotAuthorized, "%s: %v", name, err)
	}
	return &tpcSource{readFile: &readFile{r: r, hooks: &f.hooks}, release: release}, nil
}

// tpcSource is an object opened by a client that registered a key: the
// registration ends with it.
type tpcSource struct {
	*readFile
	release func()
}

func (s *tpcSource) Close(ctx context.Context) error {
	s.release()
	return s.readFile.Close(ctx)
}

// tpcDestination is an object that a third-party copy writes: the first
// kXR_sync starts the pull from the source, a later one waits for its
// end, and the close stores the object if it succeeded.
type tpcDestination struct {
	*writeFile
	fs  *FS
	src xrdtpc.Source

	mu      sync.Mutex
	started bool
	closing bool // the client's close has arrived (CloseComing)
	early   bool // ... before the pull ended
	cancel  context.CancelFunc
	done    chan struct{} // closed when the pull has ended, with err set
	err     error
	moved   atomic.Int64
}

var (
	_ xrootd.FileSyncer   = (*tpcDestination)(nil)
	_ xrootd.FileAborter  = (*tpcDestination)(nil)
	_ xrootd.CloseNoticer = (*tpcDestination)(nil)
)

// CloseComing ends a pull that is still running when the client's close
// arrives (it would otherwise wait behind the sync that waits for the
// pull); nothing is stored then.
func (d *tpcDestination) CloseComing() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closing = true
	if d.started && !isClosed(d.done) {
		d.early = true
		d.cancel()
	}
}

// errTPCWrite refuses the client's own writes to a copy's destination.
func (d *tpcDestination) errTPCWrite() error {
	return xrootd.Errorf(xrootd.ErrNotAuthorized, "%s is written by a third-party copy from %s", d.name, d.src.Addr)
}

func (d *tpcDestination) WriteAt(context.Context, []byte, int64) (int, error) {
	return 0, d.errTPCWrite()
}

func (d *tpcDestination) WriteFrom(context.Context, io.Reader, int64, int64) (int64, error) {
	return 0, d.errTPCWrite()
}

// Stat reports the bytes pulled so far (xrdcp polls it for progress).
func (d *tpcDestination) Stat(context.Context) (xrootd.FileInfo, error) {
	return xrootd.FileInfo{Size: d.moved.Load(), Mode: 0o644}, nil
}

// Sync starts the pull, the first time; afterwards it waits for its end.
func (d *tpcDestination) Sync(ctx context.Context) error {
	d.mu.Lock()
	if d.closing {
		d.mu.Unlock()
		return xrootd.Errorf(xrootd.ErrFileNotOpen, "%s is being closed", d.name)
	}
	if !d.started {
		d.started = true
		pctx, cancel := context.WithCancel(ctx)
		d.cancel = cancel
		d.done = make(chan struct{})
		d.mu.Unlock()
		go d.pull(pctx)
		return nil
	}
	d.mu.Unlock()
	select {
	case <-d.done:
		return d.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// pull copies the source into the object, once one of the gateway's
// pull slots is free.
func (d *tpcDestination) pull(ctx context.Context) {
	defer close(d.done)
	select {
	case d.fs.tpcPulls <- struct{}{}:
		defer func() { <-d.fs.tpcPulls }()
	default:
		d.fs.log.Info("third-party copy waits for one of the pulls in progress to end", "obj", d.name, "pulls", cap(d.fs.tpcPulls))
		select {
		case d.fs.tpcPulls <- struct{}{}:
			defer func() { <-d.fs.tpcPulls }()
		case <-ctx.Done():
			d.err = ctx.Err()
			return
		}
	}
	start := time.Now()
	d.fs.log.Info("third-party copy started", "obj", d.name, "src", d.src.Addr, "src_path", d.src.Path, "tls", d.src.TLS)
	n, err := xrdtpc.Pull(ctx, d.src, objectWriter{d.writeFile}, xrdtpc.PullOptions{
		Dial:  xrootd.DialOptions{Logger: d.fs.log, AppName: "ecstore-tpc", Dial: d.fs.fence.DialContext},
		Moved: &d.moved,
	})
	d.fs.hooks.done("tpc_pull", start, err)
	if err != nil {
		d.fs.log.Warn("third-party copy failed", "obj", d.name, "src", d.src.Addr, "src_path", d.src.Path, "bytes", n, "err", err)
		d.err = xrootd.Errorf(xrootd.ErrFSError, "third-party copy of %s from %s failed: %v", d.src.Path, d.src.Addr, err)
	} else {
		d.fs.log.Info("third-party copy pulled", "obj", d.name, "src", d.src.Addr, "bytes", n, "took", time.Since(start).Round(time.Millisecond))
	}
}

// stop ends a pull that is still running and waits for it. It reports
// whether a pull was started.
func (d *tpcDestination) stop() bool {
	d.mu.Lock()
	started := d.started
	d.started = true // no pull starts after this
	d.mu.Unlock()
	if !started {
		return false
	}
	d.cancel()
	<-d.done
	return true
}

// Close stores the object once the pull has succeeded. Nothing is stored
// after a failed pull, nor when no pull was started (the client gave up
// on the copy), nor when the close arrived while the pull ran (it was
// cancelled then, by CloseComing).
func (d *tpcDestination) Close(ctx context.Context) error {
	d.mu.Lock()
	running := d.early || d.started && !isClosed(d.done)
	d.mu.Unlock()
	if !d.stop() {
		d.fs.log.Info("third-party copy not started; nothing stored", "obj", d.name)
		return d.w.Abort()
	}
	switch {
	case running:
		d.w.Abort()
		return xrootd.Errorf(xrootd.ErrFSError, "%s closed before its third-party copy ended: nothing stored", d.name)
	case d.err != nil:
		d.w.Abort()
		return d.err
	}
	return d.writeFile.Close(ctx)
}

// Abort discards the object of a client that went away, ending its pull:
// a pull is judged whole only by the close that waits for it, never by
// its size alone (writeFile.Abort).
func (d *tpcDestination) Abort(context.Context) error {
	d.stop()
	return d.w.Abort()
}

func isClosed(c chan struct{}) bool {
	if c == nil {
		return false
	}
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// objectWriter writes the pulled bytes into the object as a client's
// writes would be.
type objectWriter struct{ wf *writeFile }

func (o objectWriter) Write(p []byte) (int, error) {
	return o.wf.WriteAt(context.Background(), p, o.wf.w.Size())
}

// ReadFrom lets the pull read into the object's block buffers (a copy
// through the pull's own buffers cost a quarter of its CPU).
func (o objectWriter) ReadFrom(r io.Reader) (int64, error) {
	wf := o.wf
	if _, err := wf.check(wf.w.Size(), 0); err != nil {
		return 0, err
	}
	start := time.Now()
	n, err := wf.w.ReadFrom(r)
	if err != nil {
		wf.err = err
	}
	wf.hooks.done("write", start, err)
	wf.hooks.bytes("write", int(n))
	return n, mapErr(err)
}

// tpcDestinationOf wraps wf, opened with t's CGI, as a copy's destination.
func (f *FS) tpcDestinationOf(ctx context.Context, wf *writeFile, t xrdtpc.Open) *tpcDestination {
	return &tpcDestination{writeFile: wf, fs: f, src: xrdtpc.Source{
		Addr: t.Src, TLS: t.SrcTLS, Path: t.Path, Key: t.Key,
		Origin: xrdtpc.Origin(xrootd.PeerIdentity(ctx)),
	}}
}

// tpcRoleErr refuses an open whose tpc role does not fit its mode.
func tpcRoleErr(name string, writable bool) error {
	mode := "reading"
	if writable {
		mode = "writing"
	}
	return xrootd.Errorf(xrootd.ErrArgInvalid, "%s: %v: this tpc cgi does not fit an open for %s", name, xrdtpc.ErrConflict, mode)
}
