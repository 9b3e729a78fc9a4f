// Package gateway binds the erasure-coding engine (internal/object) to the
// user-facing frontends. FS serves an object.Store's namespace through the
// XRootD protocol server (internal/xrootd): objects are written
// sequentially and become visible when the client closes them, reads may
// be at any offset, and checksums come from the objects' stored metadata,
// as do extended attributes, which are set while an object is written
// (attrs.go).
package gateway

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"iter"
	"log/slog"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ecstore/ecstore/internal/archive"
	"github.com/ecstore/ecstore/internal/jwtauth"
	"github.com/ecstore/ecstore/internal/netfence"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/xrdtpc"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// FS is the EC namespace as an xrootd.FileSystem. It is safe for
// concurrent use and keeps no per-object state, beyond the keys of the
// third-party copies it is the source of (tpc.go).
type FS struct {
	store    *object.Store
	log      *slog.Logger
	hooks    Hooks
	tpcKeys  *xrdtpc.Keys
	tpcPulls chan struct{} // a slot per pull in progress
	// fence keeps pulls off the storage nodes (NodeFence).
	fence    *netfence.Fence
	readOnly bool
	// tokenRequired: reads need a token too (see access.go).
	tokenRequired bool
	// uploads are kept for their clients' write recovery (resume.go).
	uploads uploads
}

// ReadOnly makes every write, remove, rename and mkdir of a client that
// has not authenticated (see xrootd.PeerIdentity) fail with
// kXR_NotAuthorized: for listeners that anonymous users can reach.
func (f *FS) ReadOnly() *FS { f.readOnly = true; return f }

// ReadDone implements xrootd.ReadObserver: read requests are counted
// once each (a kXR_readv of 100 segments counted 100 "read" requests,
// each with a segment's latency).
func (f *FS) ReadDone(op string, start time.Time, err error) { f.hooks.done(op, start, err) }

// Hooks observe the requests a frontend handles, for metrics. Nil fields
// are skipped; callbacks must be fast.
type Hooks struct {
	// Request is called when a request completes: op is the operation
	// ("open", "stat", "list", "read", "write", "close", "rm", ...).
	Request func(op string, took time.Duration, err error)
	// Bytes is called with the object bytes moved ("read" or "write").
	Bytes func(direction string, n int)
	// AuthFailure is called when a frontend ("root", "s3", "http")
	// refuses a request for its credentials: "credentials" when those
	// presented are wrong (an unknown key, a bad signature or token),
	// "permission" when they are valid but do not allow the request,
	// "anonymous" when a request without any is refused (over root://;
	// HTTP and S3 clients that send none are asked for them, which is
	// not counted).
	AuthFailure func(frontend, reason string)
	// BrokenUpload is called for an upload whose root:// connection
	// ended before its close (resume.go), with what became of it:
	// "committed" (it held every byte announced), "kept" (for its
	// client to take up again), "resumed", "expired" (not taken up in
	// time) or "discarded".
	BrokenUpload func(outcome string)
}

func (h *Hooks) broken(outcome string) {
	if h.BrokenUpload != nil {
		h.BrokenUpload(outcome)
	}
}

// AuthFailed calls the AuthFailure hook, if any.
func (h *Hooks) AuthFailed(frontend, reason string) {
	if h.AuthFailure != nil {
		h.AuthFailure(frontend, reason)
	}
}

func (h *Hooks) done(op string, start time.Time, err error) {
	if h.Request != nil {
		h.Request(op, time.Since(start), err)
	}
}

func (h *Hooks) bytes(direction string, n int) {
	if h.Bytes != nil && n > 0 {
		h.Bytes(direction, n)
	}
}

// MaxPulls bounds the third-party copies a gateway pulls at once (each
// holds up to 32 MiB of reads besides its object's blocks); more wait.
const MaxPulls = 16

// NewFS returns an FS over store. A nil logger discards.
func NewFS(store *object.Store, log *slog.Logger, hooks Hooks) *FS {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	keys := xrdtpc.NewKeys()
	keys.Refused = func(_, origin, path string, puller netip.Addr, reason error) {
		log.Warn("third-party pull refused", "obj", path, "puller", puller.String(), "origin", origin, "reason", reason)
	}
	return &FS{store: store, log: log, hooks: hooks, tpcKeys: keys, tpcPulls: make(chan struct{}, MaxPulls),
		fence: NodeFence(store), uploads: uploads{parkFor: ParkFor}}
}

// NodeFence returns the fence (netfence) that keeps the transfers a
// client directs, third-party copies, off store's remote nodes.
func NodeFence(store *object.Store) *netfence.Fence {
	var addrs []string
	for _, n := range store.Nodes() {
		if a, ok := n.(interface{ Addr() string }); ok {
			addrs = append(addrs, a.Addr())
		}
	}
	return netfence.New(addrs)
}

// Compile-time checks of the optional capabilities FS offers.
var (
	_ xrootd.FileSystem     = (*FS)(nil)
	_ xrootd.Remover        = (*FS)(nil)
	_ xrootd.Renamer        = (*FS)(nil)
	_ xrootd.DirMaker       = (*FS)(nil)
	_ xrootd.DirRemover     = (*FS)(nil)
	_ xrootd.Checksummer    = (*FS)(nil)
	_ xrootd.ChecksumLister = (*FS)(nil)
	_ xrootd.WriteReporter  = (*FS)(nil)
	_ xrootd.SpaceReporter  = (*FS)(nil)
	_ xrootd.FileSlicer     = (*readFile)(nil)
)

// Open opens an object for reading, or starts writing a new version of it
// when the client opens for writing with kXR_new or kXR_delete (what
// xrdcp sends). Updating an existing object in place is not supported:
// an open for writing without either takes up the client's upload that
// a broken connection left (resume.go), if there is one.
func (f *FS) Open(ctx context.Context, name string, opts xrootd.OpenOptions) (_ xrootd.File, err error) {
	defer func(start time.Time) { f.hooks.done("open", start, err) }(time.Now())
	tpc, err := xrdtpc.ParseOpen(opts.CGI)
	if err != nil {
		return nil, xrootd.Errorf(xrootd.ErrArgInvalid, "%s: %v", name, err)
	}
	if !opts.Flags.Writable() {
		switch tpc.Role {
		case xrdtpc.RoleRegister, xrdtpc.RolePull:
			return f.openTPCSource(ctx, name, tpc)
		case xrdtpc.RoleDestination:
			return nil, tpcRoleErr(name, false)
		}
		if err := f.allow(ctx, jwtauth.Read, "read", name); err != nil {
			return nil, err
		}
		r, err := f.store.Open(ctx, name)
		if err != nil {
			return nil, mapErr(err)
		}
		return &readFile{r: r, hooks: &f.hooks}, nil
	}
	if tpc.Role == xrdtpc.RoleRegister || tpc.Role == xrdtpc.RolePull {
		return nil, tpcRoleErr(name, true)
	}
	createOnly, err := f.allowWrite(ctx, name)
	if err != nil {
		return nil, err
	}
	if !opts.Flags.Create() {
		if tpc.Role == xrdtpc.RoleNone {
			wf, err := f.uploads.resume(ctx, keyOf(ctx, name))
			if err == nil {
				return wf, nil
			}
			if !errors.Is(err, errNoUpload) {
				return nil, xrootd.Errorf(xrootd.ErrFileLocked, "%s: %v", name, err)
			}
		}
		return nil, xrootd.Errorf(xrootd.ErrUnsupported,
			"%s: objects are written once, sequentially: open with kXR_new or kXR_delete to replace one", name)
	}
	// xrdcp announces the file's size as oss.asize: small objects are
	// stored as 1+M replicas, and an upload that reached it is whole
	// (writeFile.Abort).
	hint, err := strconv.ParseInt(opts.CGI.Get("oss.asize"), 10, 64)
	if err != nil || hint < 0 {
		hint = -1
	}
	posc := opts.Flags&xrootd.OpenPOSC != 0
	co := &object.CreateOptions{
		SizeHint:  max(hint, 0),
		Exclusive: createOnly || opts.Flags&xrootd.OpenNew != 0 && opts.Flags&xrootd.OpenDelete == 0,
	}
	if createOnly {
		// A write that storage.create alone allows must not replace an
		// object written meanwhile (the exclusive check is made at the
		// open): it is checked again when it commits.
		co.Precondition = func(cur *object.Info) error {
			if cur != nil && !cur.IsDir {
				return xrootd.Errorf(xrootd.ErrNotAuthorized, "%s: written meanwhile, and your token allows creating it only", name)
			}
			return nil
		}
	}
	// An upload outlives its connection (writeFile.Abort): its writer's
	// context does not end with it. A third-party copy's pull ends with
	// its client's connection.
	wctx := ctx
	if tpc.Role != xrdtpc.RoleDestination {
		wctx = context.WithoutCancel(ctx)
	}
	w, err := f.store.Create(wctx, name, co)
	if errors.Is(err, object.ErrExist) {
		return nil, xrootd.Errorf(xrootd.ErrItExists, "%s exists", name)
	}
	if err != nil {
		return nil, mapErr(err)
	}
	wf := &writeFile{w: w, name: name, hooks: &f.hooks, announced: hint, posc: posc, log: f.log}
	if tpc.Role == xrdtpc.RoleDestination {
		return f.tpcDestinationOf(ctx, wf, tpc), nil
	}
	wf.key, wf.uploads = keyOf(ctx, name), &f.uploads
	f.uploads.add(wf)
	return wf, nil
}

// Stat describes an object or directory.
func (f *FS) Stat(ctx context.Context, name string) (_ xrootd.FileInfo, err error) {
	defer func(start time.Time) { f.hooks.done("stat", start, err) }(time.Now())
	if err := f.allow(ctx, jwtauth.Read, "stat", name); err != nil {
		return xrootd.FileInfo{}, err
	}
	// A stat says size, time and the version's id: the summaries tell
	// them, without an archive read.
	info, err := f.store.StatBrief(ctx, name)
	if err != nil {
		return xrootd.FileInfo{}, mapErr(err)
	}
	return fileInfo(info), nil
}

// List lists a directory: one entry per object, with its real size.
func (f *FS) List(ctx context.Context, dir string) iter.Seq2[xrootd.FileInfo, error] {
	return func(yield func(xrootd.FileInfo, error) bool) {
		f.listEach(ctx, dir, func(infos []object.Info) bool {
			for i := range infos {
				fi := fileInfo(&infos[i])
				fi.Name = infos[i].Name
				if !yield(fi, nil) {
					return false
				}
			}
			return true
		}, func(err error) { yield(xrootd.FileInfo{}, err) })
	}
}

// ListChecksums lists a directory as List does, with each object's
// whole-object checksum of algorithm (xrootd.ChecksumLister: xrdfs ls
// -C). The checksums are in the objects' metadata, which the archives'
// summaries that a listing reads do not hold: the metadata of each
// object is read from one of its archives (object.Store.Describe,
// describeAtOnce at a time), no object data. An object whose metadata
// cannot be read, or that was replaced since it was listed, is listed
// without a checksum ("none"), as directories are.
func (f *FS) ListChecksums(ctx context.Context, dir, algorithm string) iter.Seq2[xrootd.ChecksumEntry, error] {
	return func(yield func(xrootd.ChecksumEntry, error) bool) {
		f.listEach(ctx, dir, func(infos []object.Info) bool {
			sums := f.listedChecksums(ctx, infos, algorithm)
			for i := range infos {
				e := xrootd.ChecksumEntry{FileInfo: fileInfo(&infos[i]), Checksum: sums[i]}
				e.Name = infos[i].Name
				if !yield(e, nil) {
					return false
				}
			}
			return true
		}, func(err error) { yield(xrootd.ChecksumEntry{}, err) })
	}
}

// listEach lists dir for a client that may read it, handing each batch
// of entries to each until it returns false (the consumer stopped), and
// a failure to fail (once, after any batch).
func (f *FS) listEach(ctx context.Context, dir string, each func([]object.Info) bool, fail func(error)) {
	start := time.Now()
	if err := f.allow(ctx, jwtauth.Read, "list", dir); err != nil {
		fail(err)
		return
	}
	err := f.store.ListEach(ctx, dir, func(infos []object.Info) error {
		if !each(infos) {
			return errListingStopped
		}
		return nil
	})
	if errors.Is(err, errListingStopped) {
		err = nil // the caller's own stop: not a failed request
	}
	f.hooks.done("list", start, err)
	if err != nil {
		fail(mapErr(err))
	}
}

// describeAtOnce bounds the metadata reads of a listing with checksums.
const describeAtOnce = 16

// listedChecksums returns the checksums of algorithm of the listed
// objects infos, by index: from their Info where it has them, else from
// their metadata (object.Store.Describe); "" for directories and for
// objects not described.
func (f *FS) listedChecksums(ctx context.Context, infos []object.Info, algorithm string) []string {
	sums := make([]string, len(infos))
	var wg sync.WaitGroup
	sem := make(chan struct{}, describeAtOnce)
	for i := range infos {
		info := &infos[i]
		if info.IsDir {
			continue
		}
		if sums[i] = checksumOf(info, algorithm); sums[i] != "" {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			d, err := f.store.Describe(ctx, info)
			if err == nil && !d.IsDir && d.Version == info.Version {
				sums[i] = checksumOf(d, algorithm)
			}
		}()
	}
	wg.Wait()
	return sums
}

// checksumOf returns info's whole-object checksum of algorithm, "" when
// it has none.
func checksumOf(info *object.Info, algorithm string) string {
	switch algorithm {
	case "adler32":
		return info.Adler32
	case "crc32c":
		return info.CRC32C
	}
	return ""
}

// errListingStopped ends a listing whose consumer stopped taking entries.
var errListingStopped = errors.New("gateway: listing stopped")

// Remove deletes an object.
func (f *FS) Remove(ctx context.Context, name string) (err error) {
	defer func(start time.Time) { f.hooks.done("rm", start, err) }(time.Now())
	if err := f.allow(ctx, jwtauth.Modify, "rm", name); err != nil {
		return err
	}
	return mapErr(f.store.Remove(ctx, name))
}

// Rename moves an object or directory.
func (f *FS) Rename(ctx context.Context, oldName, newName string) (err error) {
	defer func(start time.Time) { f.hooks.done("mv", start, err) }(time.Now())
	if err := f.allow(ctx, jwtauth.Modify, "mv", oldName); err != nil {
		return err
	}
	if err := f.allow(ctx, jwtauth.Modify, "mv", newName); err != nil {
		return err
	}
	return mapErr(f.store.Rename(ctx, oldName, newName))
}

// Mkdir creates a directory; without parents, its parent must exist and
// the directory must not. With parents, the client must be allowed to
// create each directory that is missing, not only the last.
func (f *FS) Mkdir(ctx context.Context, name string, _ fs.FileMode, parents bool) (err error) {
	defer func(start time.Time) { f.hooks.done("mkdir", start, err) }(time.Now())
	if err := f.allow(ctx, jwtauth.Create, "mkdir", name); err != nil {
		return err
	}
	if parents {
		if err := f.allowParents(ctx, name); err != nil {
			return err
		}
	} else {
		if _, err := f.store.StatBrief(ctx, name); err == nil {
			return xrootd.Errorf(xrootd.ErrItExists, "%s exists", name)
		}
		if dir, _ := node.Split(name); dir != "/" {
			info, err := f.store.StatBrief(ctx, dir)
			if err != nil {
				return mapErr(err)
			}
			if !info.IsDir {
				return mapErr(fmt.Errorf("%s: %w", dir, object.ErrNotDir))
			}
		}
	}
	return mapErr(f.store.Mkdir(ctx, name))
}

// allowParents checks that the client of ctx may create the parents of
// name that are missing: a storage.create scope for /a/b lets its holder
// make /a/b/c, not /a when it is missing. A scope that allows a
// directory allows everything below it, so only the lowest parent it
// does not allow is looked up: if it exists, so do those above it.
func (f *FS) allowParents(ctx context.Context, name string) error {
	for dir, _ := node.Split(name); dir != "/"; dir, _ = node.Split(dir) {
		if f.decide(ctx, jwtauth.Create, "mkdir", dir) == nil {
			continue
		}
		_, err := f.store.StatBrief(ctx, dir)
		switch {
		case err == nil:
			return nil // an object there fails the mkdir itself
		case errors.Is(err, object.ErrNotExist):
			return f.allow(ctx, jwtauth.Create, "create missing parent", dir)
		}
		return mapErr(err)
	}
	return nil
}

// Rmdir removes an empty directory.
func (f *FS) Rmdir(ctx context.Context, name string) (err error) {
	defer func(start time.Time) { f.hooks.done("rmdir", start, err) }(time.Now())
	if err := f.allow(ctx, jwtauth.Modify, "rmdir", name); err != nil {
		return err
	}
	return mapErr(f.store.Rmdir(ctx, name))
}

// ChecksumAlgorithms lists the whole-object checksums kept in metadata.
func (f *FS) ChecksumAlgorithms() []string { return []string{"adler32", "crc32c"} }

// Checksum returns a whole-object checksum from the object's metadata; no
// data is read.
func (f *FS) Checksum(ctx context.Context, name, algorithm string) (_ string, err error) {
	defer func(start time.Time) { f.hooks.done("checksum", start, err) }(time.Now())
	if err := f.allow(ctx, jwtauth.Read, "checksum", name); err != nil {
		return "", err
	}
	info, err := f.store.Stat(ctx, name)
	if err != nil {
		return "", mapErr(err)
	}
	if info.IsDir {
		return "", xrootd.Errorf(xrootd.ErrIsDirectory, "%s is a directory", name)
	}
	switch algorithm {
	case "adler32", "crc32c":
		return checksumOf(info, algorithm), nil
	}
	return "", xrootd.Errorf(xrootd.ErrUnsupported, "checksum %q not supported (adler32, crc32c)", algorithm)
}

// Space reports the usable capacity: the nodes' space times K/(K+M).
func (f *FS) Space(ctx context.Context, _ string) (xrootd.Space, error) {
	total, free, largest := f.store.Capacity(ctx)
	g := f.store.Geometry()
	scale := func(v int64) int64 { return v / int64(g.Width()) * int64(g.K) }
	return xrootd.Space{Total: scale(total), Free: scale(free), Used: scale(total - free),
		LargestFree: largest * int64(g.K)}, nil
}

func fileInfo(info *object.Info) xrootd.FileInfo {
	fi := xrootd.FileInfo{ID: versionID(info.Version), Size: info.Size, ModTime: info.MTime, Mode: 0o644}
	if info.IsDir {
		fi.Mode = fs.ModeDir | 0o755
		fi.Size = 4096
	}
	return fi
}

// versionID is the stat "id" of an object version: what an inode number
// is to a POSIX file. An overwrite changes it, so a client that compares
// the id it opened with a fresh stat can tell that the object was
// replaced. Kept within 63 bits for clients that parse it as signed.
func versionID(v archive.Version) uint64 {
	if v == "" {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(v))
	return h.Sum64() >> 1
}

// readFile is an object open for reading.
type readFile struct {
	r     *object.Reader
	hooks *Hooks
}

func (rf *readFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	n, err := rf.r.ReadAt(ctx, p, off)
	return n, rf.account(n, err)
}

// ReadSlices implements xrootd.FileSlicer: reads are answered from the
// object reader's block buffers, without a copy.
func (rf *readFile) ReadSlices(ctx context.Context, off int64, n int) ([][]byte, func(), error) {
	bufs, release, err := rf.r.ReadSlices(ctx, off, n)
	got := 0
	for _, b := range bufs {
		got += len(b)
	}
	return bufs, release, rf.account(got, err)
}

// account reports the n bytes of a read to the hooks, and maps err for
// the client. The request is counted once it is answered (FS.ReadDone).
func (rf *readFile) account(n int, err error) error {
	rf.hooks.bytes("read", n)
	return mapErr(err)
}

func (rf *readFile) Stat(context.Context) (xrootd.FileInfo, error) {
	return fileInfo(rf.r.Info()), nil
}

func (rf *readFile) Close(context.Context) error { return rf.r.Close() }

// writeFile is a new object version being written.
type writeFile struct {
	w     *object.Writer
	name  string
	hooks *Hooks
	err   error // the first write failure, repeated to later writes
	// written is the bytes written, for a kXR_stat of the handle, which
	// runs beside the writes (the Writer's own count is not to be read
	// while it writes).
	written atomic.Int64
	// attrs are the extended attributes set on the handle (attrs.go).
	attrs pendingAttrs
	// announced is the size the client announced at the open (xrdcp's
	// oss.asize), or -1.
	announced int64
	// posc: the client asked for the object to be kept only if it
	// closes it (kXR_posc).
	posc bool
	log  *slog.Logger

	// For its client's recovery (resume.go; nil uploads for a
	// third-party copy's pull):
	uploads *uploads
	key     uploadKey
	// parked is closed when the upload's connection ended and it was
	// kept; expiry discards it then.
	parked chan struct{}
	expiry *time.Timer
	// resumed: taken up again after a broken connection; its client
	// sends again writes the gateway took before the break.
	resumed bool
	// cut: err is the break of the connection inside a write's payload
	// (what came before is written).
	cut bool
	// committed: the upload held every byte announced when its
	// connection broke, and was committed then. Kept for its client,
	// it answers the writes sent again and the close.
	committed bool
	// replay tells the writes a resumed upload's client sends again
	// (replay.go).
	replay replay
}

var (
	_ xrootd.FileAborter      = (*writeFile)(nil)
	_ xrootd.FileStreamWriter = (*writeFile)(nil)
)

// check is what every write does first: a failed write explains itself
// to every later request (clients pipeline writes, and the failure is
// what they must see, not the offset gap it left); objects are written
// in order.
//
// It returns how many bytes of a write at off are written already: none,
// but for a resumed upload (resume.go), whose client sends again writes
// the gateway took before its connection broke.
func (wf *writeFile) check(off, n int64) (int64, error) {
	if wf.committed {
		if off < 0 || off+n > wf.announced {
			return 0, xrootd.Errorf(xrootd.ErrUnsupported,
				"%s: committed at the %d bytes announced; a write of %d bytes at %d is past them", wf.name, wf.announced, n, off)
		}
		return n, nil
	}
	if wf.err != nil {
		return 0, mapErr(wf.err)
	}
	if err := wf.w.Err(); err != nil {
		wf.err = err
		return 0, mapErr(err)
	}
	if size := wf.w.Size(); wf.resumed && off >= 0 && off != size {
		if off > size {
			return 0, errAfterGap
		}
		k := min(n, size-off)
		if !wf.replay.tookBefore(off, k) {
			// As a write out of order below: the object would not be
			// what the client meant, so it is never committed.
			wf.err = xrootd.Errorf(xrootd.ErrUnsupported,
				"%s: objects are written sequentially: a write at offset %d, below the %d bytes written, is not one sent before the connection broke",
				wf.name, off, size)
			return 0, wf.err
		}
		return k, nil
	}
	if off != wf.w.Size() {
		err := xrootd.Errorf(xrootd.ErrUnsupported,
			"%s: objects are written sequentially: write at offset %d, expected %d", wf.name, off, wf.w.Size())
		if wf.w.Size() > 0 {
			// Bytes the client meant to follow what was written are
			// refused: the object would be cut short, so it is never
			// committed (Close fails). Before any byte, the client may
			// still start at offset 0.
			wf.err = err
		}
		return 0, err
	}
	return 0, nil
}

func (wf *writeFile) WriteAt(_ context.Context, p []byte, off int64) (int, error) {
	done, err := wf.check(off, int64(len(p)))
	if err == errAfterGap {
		if err := wf.keep(off, p, nil, int64(len(p))); err != nil {
			return 0, mapErr(err)
		}
		return len(p), nil
	}
	if err != nil {
		return 0, err
	}
	if done >= int64(len(p)) {
		return len(p), nil
	}
	start := time.Now()
	n, err := wf.w.Write(p[done:])
	wf.written.Add(int64(n))
	wf.replay.took(off, done+int64(n))
	if err != nil {
		wf.err = err
	} else {
		err = wf.join()
	}
	wf.hooks.done("write", start, err)
	wf.hooks.bytes("write", n)
	return int(done) + n, mapErr(err)
}

// WriteFrom takes a large write straight from the client's connection
// into the object's block buffers. If r fails part-way (connection lost,
// page checksum mismatch), the object holds a partial write and is never
// committed: Close then fails. (A connection that broke is not there to
// close it: its client may take the upload up again, resume.go.)
func (wf *writeFile) WriteFrom(_ context.Context, r io.Reader, off, n int64) (int64, error) {
	done, err := wf.check(off, n)
	if err == errAfterGap {
		if err := wf.keep(off, nil, r, n); err != nil {
			return 0, mapErr(err)
		}
		return n, nil
	}
	if err != nil {
		return 0, err
	}
	if done > 0 {
		// Sent again after a broken connection: the bytes written
		// already are passed over.
		skipped, err := io.CopyN(io.Discard, r, min(done, n))
		if err != nil || done >= n {
			return skipped, err
		}
		n -= done
	}
	start := time.Now()
	lr := &io.LimitedReader{R: r, N: n}
	got, err := wf.w.ReadFrom(lr)
	wf.written.Add(got)
	if err == nil && got < n {
		err = fmt.Errorf("%s: write payload ended after %d of %d bytes: %w", wf.name, got, n, io.ErrUnexpectedEOF)
	}
	if err != nil {
		wf.err = err
		// The connection broke inside the payload, the writer being
		// sound: what came before is written, and the client may send
		// the write again on a new connection. A page that failed its
		// checksum is not that.
		var pe *xrootd.PageError
		wf.cut = wf.w.Err() == nil && !errors.As(err, &pe)
		if u, ok := r.(xrootd.UncheckedReader); ok && wf.cut {
			// The part of a page whose checksum never came is taken
			// back, if it can be, and sent again.
			if k := u.Unchecked(); k > 0 && wf.w.Unwrite(k) {
				got -= k
				wf.written.Add(-k)
			} else if k > 0 {
				wf.cut = false
			}
		}
	}
	wf.replay.took(off, done+got)
	if err == nil {
		err = wf.join()
	}
	wf.hooks.done("write", start, err)
	wf.hooks.bytes("write", int(got))
	return done + got, mapErr(err)
}

func (wf *writeFile) ReadAt(context.Context, []byte, int64) (int, error) {
	return 0, xrootd.Errorf(xrootd.ErrUnsupported, "%s is open for writing", wf.name)
}

func (wf *writeFile) Stat(context.Context) (xrootd.FileInfo, error) {
	return xrootd.FileInfo{Size: wf.written.Load(), Mode: 0o644}, nil
}

// Close commits the object, with the attributes set on the handle: the
// client hears "closed" only once it is durable on at least the write
// quorum of nodes.
func (wf *writeFile) Close(context.Context) (err error) {
	if wf.uploads != nil {
		defer wf.uploads.remove(wf)
	}
	if wf.committed {
		return nil
	}
	defer func(start time.Time) { wf.hooks.done("close", start, err) }(time.Now())
	if len(wf.replay.pending) > 0 && wf.err == nil {
		wf.err = fmt.Errorf("writes from offset %d never joined the %d bytes before them", wf.replay.pending[0].off, wf.w.Size())
	}
	wf.dropPending()
	if wf.err != nil {
		wf.w.Abort()
		return mapErr(fmt.Errorf("%s not stored: an earlier write failed: %w", wf.name, wf.err))
	}
	wf.commitAttrs()
	return mapErr(wf.w.Close())
}

// Discard drops an upload its client never saw (its open refused after
// the fact): there is nothing to keep it for.
func (wf *writeFile) Discard(context.Context) error {
	wf.dropPending()
	if wf.uploads != nil {
		wf.uploads.remove(wf)
	}
	return wf.w.Abort()
}

// Abort ends an upload whose client went away without closing it. One
// that holds every byte its client announced (oss.asize), each written
// and answered, is committed as Close would: XrdCl (5.5) reports a
// Close as done, without sending it, when it finds the connection
// already gone, taking the server to have closed the file, as a plain
// xrootd does at a disconnect. Discarding the upload then would lose a
// file that xrdcp reported copied. Any other upload is kept for its
// client to take up again (resume.go), or discarded when it may not be.
func (wf *writeFile) Abort(context.Context) (err error) {
	whole := wf.err == nil && !wf.posc && wf.announced > 0 && wf.w.Size() == wf.announced && wf.w.Err() == nil
	switch {
	case wf.committed || !whole && wf.resumable():
		wf.uploads.park(wf)
		return nil
	case !whole:
		wf.dropPending()
		if wf.uploads != nil {
			wf.uploads.remove(wf)
		}
		wf.hooks.broken("discarded")
		return wf.w.Abort()
	}
	defer func(start time.Time) { wf.hooks.done("close", start, err) }(time.Now())
	wf.commitAttrs()
	err = wf.w.Close()
	if err != nil {
		if wf.uploads != nil {
			wf.uploads.remove(wf)
		}
		wf.log.Warn("an upload whose client went away after writing all of it could not be committed",
			"path", wf.name, "size", wf.announced, "err", err)
		wf.hooks.broken("discarded")
		return mapErr(err)
	}
	wf.log.Info("an upload whose client went away after writing all of it was committed",
		"path", wf.name, "size", wf.announced)
	wf.hooks.broken("committed")
	if wf.uploads != nil {
		// Its client may not have had the answers to its last writes:
		// its recovery sends them again, and then the close.
		wf.committed = true
		wf.uploads.park(wf)
	}
	return nil
}

// mapErr turns engine errors into the XRootD error codes clients expect.
// Errors wrapping io/fs sentinels are mapped by the server itself.
func mapErr(err error) error {
	var ue *object.UnrecoverableError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, object.ErrIsDir), errors.Is(err, node.ErrIsDir):
		return xrootd.Errorf(xrootd.ErrIsDirectory, "%v", err)
	case errors.Is(err, object.ErrNotDir), errors.Is(err, node.ErrNotDir):
		return fmt.Errorf("%v: %w", err, syscall.ENOTDIR)
	case errors.Is(err, object.ErrNotEmpty):
		return fmt.Errorf("%v: %w", err, syscall.ENOTEMPTY)
	case errors.Is(err, node.ErrPath):
		return xrootd.Errorf(xrootd.ErrArgInvalid, "%v", err)
	case errors.Is(err, object.ErrMetadataTooLarge), errors.Is(err, object.ErrTooLarge):
		// The request's fault, which every node refuses alike.
		return xrootd.Errorf(xrootd.ErrArgTooLong, "%v", err)
	case errors.As(err, &ue), errors.Is(err, object.ErrQuorum):
		return xrootd.Errorf(xrootd.ErrIOError, "%v", err)
	case errors.Is(err, node.ErrNoSpace):
		return xrootd.Errorf(xrootd.ErrNoSpace, "%v", err)
	}
	return err
}
