// Package xrdnode is a node.Node driver for a remote data server reached
// over root:// — a real xrootd ("all.export /", "oss.localroot DIR") or
// `ecstore node` (package dataserver) — through the client of package
// xrootd. Nothing but plain files is asked of the server: open, write,
// read, stat, dirlist, mv, rm, rmdir, mkdir and a space query.
//
// A node is named by a URL "root://host[:port]//prefix": every node path
// p lives at prefix+p on the server ("root://h:1094//" or no path at all
// for the server's root). The single slash form "root://h:1094/prefix"
// means the same prefix.
//
// # Uploads
//
// Create writes a temporary file (node.TempName) in the target's
// directory; Write copies the bytes into a buffer that a background
// goroutine sends in order with kXR_write, one buffer in flight (as up
// to four pipelined requests) while the next fills; Finish sends the
// rest, kXR_sync when Options.Fsync is set, and closes the file; Commit
// renames it over the target with kXR_mv. Durability is the server's: a
// real xrootd fsyncs on kXR_sync but not the directory on kXR_mv;
// `ecstore node` run durable fsyncs both.
//
// Reads and writes use kXR_read and kXR_write unless
// Options.PageChecksums selects kXR_pgread and kXR_pgwrite, which carry
// a CRC32C per 4 KiB page. On loopback the page checksums cost about
// half the throughput (see BenchmarkThroughput), and ecstore verifies
// the checksum of every chunk it reads from an archive anyway.
//
// # Deviations from the node contract
//
//   - Attributes are not supported (uploads do not implement
//     node.Attributes and FileInfo.Attrs is always empty): a vanilla
//     server has no extended attributes through this path, so readers
//     get the metadata from the archives.
//   - Paths may not contain '?', which root:// reserves for CGI; such
//     paths fail with node.ErrPath.
//   - Rename checks that newPath is not a directory before sending
//     kXR_mv (rename(2), which xrootd uses, replaces an empty directory
//     with a directory); a directory created at newPath between the two
//     requests may still be replaced.
//   - Modification times have a resolution of one second.
//   - Commit's rename is as durable as the server makes it: a real xrootd
//     does not fsync the directory; `ecstore node` does when durable.
//   - Upload.Abort and File.Close talk to the server even after the
//     caller's context is done, for up to Options.CleanupTimeout.
//
// # Connections
//
// A Node keeps a small pool of connections (Options.Conns): New opens
// one, the others are dialled on first use, and any is replaced when it
// fails; an upload or an open file stays
// on the connection it was opened on, and fails if that connection does.
// Every call is bounded by its context, also against a server that
// accepts connections but never answers.
package xrdnode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// ErrClosed is returned by calls on a closed Node.
var ErrClosed = errors.New("xrdnode: node closed")

// ErrRedirector reports a node whose address is that of a redirector (an
// XRootD manager, xrootd + cmsd, which answers kXR_protocol with
// kXR_isManager), or whose server redirected a request. A node is one
// data server: its archives must be read back from where they were
// written, so redirects are not followed.
var ErrRedirector = errors.New("configure the data server, not a redirector")

// Options configure a Node. The zero value of each field selects its
// default.
type Options struct {
	// ID is the node's name, recorded in placements. Default: the
	// server's host:port followed by the prefix ("h1:1094/data"), or
	// host:port alone for the root.
	ID string
	// Fsync makes Finish send kXR_sync before closing the file, so the
	// server fsyncs it. Default off.
	Fsync bool
	// Conns is the number of connections kept to the server. Default 2;
	// at most 64.
	Conns int
	// WriteBuffer is the size of the two buffers of an upload, which
	// gather small writes (archive headers, small objects): Write
	// returns once its bytes are copied into one, and a full buffer is
	// sent while the other fills. A write of at least WriteBuffer bytes
	// (a chunk) is sent without a copy and acknowledged before Write
	// returns. Default 256 KiB; at least 64 KiB, at most 16 MiB.
	WriteBuffer int
	// PageChecksums makes reads and writes use kXR_pgread and
	// kXR_pgwrite, which protect every 4 KiB page with a CRC32C checked
	// at the other end. Default off (kXR_read and kXR_write).
	PageChecksums bool
	// DialTimeout bounds connecting and logging in, and the ping that
	// decides whether a connection whose request ran out of time is
	// still alive. Default 10 s.
	DialTimeout time.Duration
	// CleanupTimeout bounds the requests of Upload.Abort and File.Close,
	// which run even when the caller's context is done. Default 10 s.
	CleanupTimeout time.Duration
	// Logger receives connection events (Debug), dropped connections
	// (Warn) and CheckRoot's refusals (Error, once until the root is
	// accepted again). Nil discards them.
	Logger *slog.Logger
	// Client tunes the xrootd client (chunk sizes, windows, a custom
	// dialer). Its Logger defaults to Logger. Nil selects the defaults.
	Client *xrootd.DialOptions
	// NoDirCheck leaves out the kXR_stat of the path that Create sends
	// with its open, to fail at once when a directory is there: the
	// Commit then fails on it instead (node.ErrIsDir). For callers that
	// look at the path themselves before they write, as the object store
	// does (every create asks all nodes whether the path is a
	// directory): one request less per upload.
	NoDirCheck bool
	// CheckRoot, when set, is asked on every new connection, before the
	// connection is used, whether the node's root may be: it gets what
	// the root holds (RootState: the file MarkerPath, or whether the
	// root is empty) and returns an error to refuse the node, or nil
	// and a marker to write at MarkerPath when it should be (nil: none).
	// A refused node's calls fail with that error, at once, for a few
	// seconds; then a new connection checks again. The cluster uses it
	// to keep a data server whose disk is not mounted (an empty export)
	// from taking the node's archives.
	CheckRoot func(ctx context.Context, st RootState) (mark []byte, err error)
	// MarkerPath is the node path of the marker file CheckRoot looks at.
	MarkerPath string
	// Observe, if set, is told of every request sent to the server
	// once it has ended, named as xrootd.Observation.Name names it
	// ("open", "read", "write", "sync", "close", "mv", "fattr", "stat",
	// "open_whole", "query_space", ...). Read and Written count
	// the data of kXR_read, kXR_pgread and kXR_readv answers and of
	// small files read whole at their open, and of kXR_write,
	// kXR_pgwrite and kXR_writev requests.
	Observe func(node.Operation)
}

// Default option values.
const (
	DefaultConns          = 2
	DefaultWriteBuffer    = 256 << 10
	DefaultDialTimeout    = 10 * time.Second
	DefaultCleanupTimeout = 10 * time.Second
)

// Node is a node.Node on a remote data server. It is safe for concurrent
// use.
type Node struct {
	id       string
	addr     string // host:port
	prefix   string // "/" or "/a/b"
	opts     Options
	dialOpts xrootd.DialOptions
	log      *slog.Logger
	pool     pool
	pages    bool // Options.PageChecksums
	closed   atomic.Bool
	// noAttrs: the server answered a file attribute request with
	// kXR_Unsupported; none are sent while it is remembered.
	noAttrs refusal
	// noAttrList: the server answered a listing with attributes
	// (xrootd.AttrLister) with kXR_Unsupported; listings are kXR_dirlists
	// while it is remembered.
	noAttrList refusal
	// noOpenWhole: the server answered an open that reads small files
	// whole (xrootd.WholeOpener) with kXR_Unsupported; opens are
	// kXR_opens while it is remembered.
	noOpenWhole refusal
	// noRemoveAttr: the server answered a removal that says what it
	// removed (xrootd.AttrRemover) with kXR_Unsupported; RemoveWithAttrs
	// fails with node.ErrUnsupported while it is remembered.
	noRemoveAttr refusal
	// prefixMade: the prefix directory is known to exist on the server
	// (made by Check, or by the first connection that could).
	prefixMade atomic.Bool
	// refused is the last refusal of Options.CheckRoot, if any.
	refused atomic.Pointer[refused]
	// base bounds background work (dials, pings, upload writes); Close
	// cancels it.
	base   context.Context
	cancel context.CancelFunc
}

var (
	_ node.Node        = (*Node)(nil)
	_ node.AttrReader  = (*Node)(nil)
	_ node.NameLister  = (*Node)(nil)
	_ node.AttrsLister = (*Node)(nil)
	_ node.AttrRemover = (*Node)(nil)
)

// New returns a node for the data server at rawURL (see the package
// doc). It connects within ctx, logs in and creates the prefix directory
// if it is missing, so that a wrong address or an unusable server is
// reported here; later calls reconnect as needed. Call Close to release
// the connections.
func New(ctx context.Context, rawURL string, opts Options) (*Node, error) {
	n, err := Open(rawURL, opts)
	if err != nil {
		return nil, err
	}
	if err := n.Check(ctx); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// Open returns a node for the data server at rawURL without contacting
// it: it connects at its first call, and whenever it has no live
// connection, and creates the prefix directory if it is missing on its
// first connection. A server that is down or hung when the node is opened
// is used once it answers. Only a malformed URL is an error. Call Close to
// release the connections.
func Open(rawURL string, opts Options) (*Node, error) {
	addr, prefix, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if opts.ID == "" {
		opts.ID = addr
		if prefix != "/" {
			opts.ID += prefix
		}
	}
	if opts.Conns <= 0 {
		opts.Conns = DefaultConns
	}
	opts.Conns = min(opts.Conns, 64)
	if opts.WriteBuffer <= 0 {
		opts.WriteBuffer = DefaultWriteBuffer
	}
	opts.WriteBuffer = min(max(opts.WriteBuffer, 64<<10), 16<<20)
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	if opts.CleanupTimeout <= 0 {
		opts.CleanupTimeout = DefaultCleanupTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	n := &Node{
		id:     opts.ID,
		addr:   addr,
		prefix: prefix,
		opts:   opts,
		log:    opts.Logger,
		pages:  opts.PageChecksums,
	}
	if opts.Client != nil {
		n.dialOpts = *opts.Client
	}
	if strings.HasPrefix(rawURL, "roots://") || strings.HasPrefix(rawURL, "xroots://") {
		n.dialOpts.WantTLS = true // the server must offer TLS
	}
	if n.dialOpts.Logger == nil {
		n.dialOpts.Logger = opts.Logger
	}
	if opts.Observe != nil && n.dialOpts.Observe == nil {
		n.dialOpts.Observe = func(o xrootd.Observation) { opts.Observe(operation(o)) }
	}
	if n.dialOpts.WriteChunk <= 0 {
		// A chunk written directly goes as pipelined requests of this
		// size (DialOptions.WriteWindow of them in flight): a 1 MiB
		// chunk as one request, which cost the gateway 10-20% less CPU
		// per GiB put than four of 256 KiB.
		n.dialOpts.WriteChunk = 1 << 20
	}
	if n.dialOpts.Dial == nil {
		var d net.Dialer
		n.dialOpts.Dial = d.DialContext
	}
	n.pool = pool{n: n, slots: make([]slot, opts.Conns)}
	n.base, n.cancel = context.WithCancel(context.Background())
	n.prefixMade.Store(prefix == "/")
	return n, nil
}

// Check connects to the server within ctx, unless a connection is up,
// and asks it for an answer (a ping, or making the prefix directory): an
// error says the server is unreachable, hung or unusable now.
func (n *Node) Check(ctx context.Context) error {
	err := n.pool.call(ctx, true, func(c *xrootd.Client) error {
		if n.prefix == "/" {
			return c.Ping(ctx)
		}
		return c.Mkdir(ctx, n.prefix, 0o755, true)
	})
	if err != nil {
		return fmt.Errorf("xrdnode: %s (%s%s): %w", n.id, n.addr, n.prefix, mapErr(err))
	}
	n.prefixMade.Store(true)
	return nil
}

// parseURL splits "root://host[:port][/[/]prefix]" into host:port (port
// 1094 by default) and a canonical prefix.
func parseURL(raw string) (addr, prefix string, err error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("xrdnode: node URL %q: %s", raw, fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", fmt.Errorf("xrdnode: node URL %q: %w", raw, err)
	}
	switch {
	case u.Scheme != "root" && u.Scheme != "xroot" && u.Scheme != "roots" && u.Scheme != "xroots":
		return "", "", bad("scheme must be root:// or roots://")
	case u.Host == "":
		return "", "", bad("no host")
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return "", "", bad("user, query and fragment are not supported")
	}
	addr = u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(strings.Trim(u.Host, "[]"), "1094")
	}
	// The first slash separates the host from the path; the path is
	// absolute either way.
	p := strings.TrimPrefix(u.Path, "/")
	p = "/" + strings.TrimPrefix(p, "/")
	if len(p) > 1 {
		p = strings.TrimSuffix(p, "/")
	}
	if err := node.CheckPath(p); err != nil {
		return "", "", bad("prefix: %v", err)
	}
	if strings.ContainsRune(p, '?') {
		return "", "", bad("prefix contains '?'")
	}
	return addr, p, nil
}

// ID returns the node's name.
func (n *Node) ID() string { return n.id }

// Addr returns the server's host:port.
func (n *Node) Addr() string { return n.addr }

// Prefix returns the directory on the server that holds the node's tree.
func (n *Node) Prefix() string { return n.prefix }

// Close closes the connections and cancels background work; uploads
// and files still open fail. Later calls fail with ErrClosed.
func (n *Node) Close() error {
	if n.closed.Swap(true) {
		return nil
	}
	n.cancel()
	n.pool.close()
	return nil
}

// remote maps a node path to the server's path.
func (n *Node) remote(p string) string {
	switch {
	case n.prefix == "/":
		return p
	case p == "/":
		return n.prefix
	}
	return n.prefix + p
}

// Create implements node.Node. The temporary file is created with
// kXR_new|kXR_mkpath while the target is looked at (kXR_stat, unless
// Options.NoDirCheck), in one round trip; a directory at path fails the
// create with node.ErrIsDir, and a file in the way of path's directory
// with node.ErrNotDir.
func (n *Node) Create(ctx context.Context, path string) (node.Upload, error) {
	if err := n.check(ctx, "create", path); err != nil {
		return nil, err
	}
	if path == "/" {
		return nil, n.wrap("create", path, node.ErrIsDir)
	}
	dir, base := node.Split(path)

	// The temporary file is opened (with its missing parents) while path
	// is looked at, in one round trip: a directory at path fails the
	// create before any byte is written. Each attempt opens a name of
	// its own, so that the call may be retried on a new connection when
	// a pooled one died with a restarted server (what an attempt cut
	// short may have created is debris, which repair removes).
	var (
		f     *xrootd.ClientFile
		cn    *conn
		tmp   string
		isDir bool
	)
	err := n.pool.callConn(ctx, true, func(c *conn) error {
		var sfx [8]byte
		_, _ = rand.Read(sfx[:]) // never fails (crypto/rand docs)
		tmp = node.Join(dir, node.TempName(base, hex.EncodeToString(sfx[:])))
		stat := make(chan struct{})
		if n.opts.NoDirCheck {
			close(stat)
		} else {
			go func() {
				defer close(stat)
				fi, err := c.c.Stat(ctx, n.remote(path))
				isDir = err == nil && fi.IsDir()
			}()
		}
		var err error
		f, err = c.c.Open(ctx, n.remote(tmp), n.createFlags(), 0o644)
		cn = c
		<-stat
		switch {
		case err == nil:
			// A directory at path is handled below. A stat that failed
			// otherwise is no reason to fail: committing onto a
			// directory fails anyway.
			return nil
		case isDir:
			return node.ErrIsDir
		case ctx.Err() == nil && !errors.Is(err, fs.ErrExist):
			// Say why: a file in the way of a parent directory?
			if merr := c.c.Mkdir(ctx, n.remote(dir), 0o755, true); errors.Is(merr, fs.ErrExist) {
				return fmt.Errorf("%w: %w", node.ErrNotDir, merr)
			}
		}
		return err
	})
	if err != nil {
		return nil, n.fail("create", path, err)
	}
	u := newUpload(n, cn, f, path, tmp)
	if isDir {
		_ = u.Abort(ctx)
		return nil, n.wrap("create", path, node.ErrIsDir)
	}
	return u, nil
}

// createFlags are the open flags of an upload's temporary file: new, with
// its missing parents, and open for update where the node may keep file
// attributes, as a plain xrootd sets them on an open file only then.
func (n *Node) createFlags() xrootd.OpenFlags {
	f := xrootd.OpenNew | xrootd.OpenMkpath
	if n.KeepsAttrs() {
		f |= xrootd.OpenUpdate
	}
	return f
}

// attrName is the file attribute that keeps a file's attributes (see
// node.Attributes), encoded by node.EncodeAttrs. A plain xrootd keeps it
// on disk as the extended attribute user.U.ecstore.
const attrName = "ecstore"

// KeepsAttrs implements node.AttrReader: true unless the server answered
// a file attribute request with kXR_Unsupported less than refusalMemory
// ago.
func (n *Node) KeepsAttrs() bool { return !n.noAttrs.active() }

// refusalMemory is how long a node remembers that its server refused a
// kind of request (kXR_Unsupported) before asking again: a server
// replaced behind the same address, a plain xrootd by an `ecstore node`
// or one upgraded, is then used in full without a gateway restart, at
// the cost of one refused request per period where it is not.
const refusalMemory = 10 * time.Minute

// A refusal remembers, for refusalMemory, that the server refused a kind
// of request.
type refusal struct {
	until atomic.Int64 // unix nanoseconds; 0: not refused
}

// active reports whether a refusal is remembered.
func (r *refusal) active() bool {
	u := r.until.Load()
	return u != 0 && time.Now().UnixNano() < u
}

// note remembers a refusal and reports whether it is news (none was
// remembered).
func (r *refusal) note() bool {
	news := !r.active()
	r.until.Store(time.Now().Add(refusalMemory).UnixNano())
	return news
}

// attrsSet notes how setting a file's attributes fared: a server that
// does not support them is not asked for refusalMemory. Other failures leave the file
// without attributes, which only costs its readers the cheap lookup.
func (n *Node) attrsSet(err error) {
	if isUnsupported(err) && n.noAttrs.note() {
		n.log.Info("node keeps no file attributes: objects on it are looked up by reading their archives",
			"node", n.id, "err", err)
	}
}

// isRefusedQuery reports whether err is an answer by which a server
// whose file system plugin takes opaque queries (xrootd's ofs.ctllib)
// may refuse one it does not know: kXR_ArgInvalid or kXR_InvalidRequest.
func isRefusedQuery(err error) bool {
	var xe *xrootd.Error
	return errors.As(err, &xe) && (xe.Code == xrootd.ErrArgInvalid || xe.Code == xrootd.ErrInvalidRequest)
}

// isServerFailure reports whether err is an answer other than one that
// says what the path is (not there, not a directory, not allowed): the
// server's own failure to carry a request out.
func isServerFailure(err error) bool {
	var xe *xrootd.Error
	if !errors.As(err, &xe) || xe.Code == xrootd.ErrNotAuthorized || xe.Code == xrootd.ErrNotFile {
		return false
	}
	mapped := mapErr(err)
	for _, s := range nodeErrors {
		if errors.Is(mapped, s) {
			return false
		}
	}
	return true
}

// isUnsupported reports whether err is a kXR_Unsupported answer.
func isUnsupported(err error) bool {
	var xe *xrootd.Error
	return errors.As(err, &xe) && xe.Code == xrootd.ErrUnsupported
}

// ReadAttrs implements node.AttrReader with one kXR_fattr get of attrName
// by path. A missing file is node.ErrNotExist; a file without the
// attribute has none (nil).
func (n *Node) ReadAttrs(ctx context.Context, path string) (map[string]string, error) {
	if err := n.check(ctx, "readattrs", path); err != nil {
		return nil, err
	}
	if !n.KeepsAttrs() {
		return nil, n.wrap("readattrs", path, node.ErrNoAttrs)
	}
	var got []xrootd.Attr
	err := n.pool.call(ctx, true, func(c *xrootd.Client) error {
		var err error
		got, err = c.GetAttrs(ctx, n.remote(path), attrName)
		return err
	})
	if isUnsupported(err) {
		n.attrsSet(err)
		return nil, n.wrap("readattrs", path, node.ErrNoAttrs)
	}
	if err != nil {
		return nil, n.fail("readattrs", path, err)
	}
	var xe *xrootd.Error
	switch a := got[0]; {
	case a.Err == nil:
		return node.DecodeAttrs(a.Value), nil
	case errors.As(a.Err, &xe) && xe.Code == xrootd.ErrAttrNotFound:
		return nil, nil
	default:
		return nil, n.wrap("readattrs", path, mapErr(a.Err))
	}
}

// Open implements node.Node. Size is the size the server reported with
// the open. A server that offers it (xrootd.WholeOpener) is asked to send
// a file of at most WholeRead bytes whole: the File is then a
// node.ContentsFile, open on no connection.
func (n *Node) Open(ctx context.Context, path string) (node.File, error) {
	if err := n.check(ctx, "open", path); err != nil {
		return nil, err
	}
	var (
		f   *xrootd.ClientFile
		cn  *conn
		err error
	)
	whole := !n.noOpenWhole.active()
	if whole {
		var content []byte
		err = n.pool.callConn(ctx, true, func(c *conn) error {
			var err error
			content, f, err = c.c.OpenWhole(ctx, n.remote(path), WholeRead)
			cn = c
			return err
		})
		switch {
		case err == nil && f == nil:
			return node.NewContentsFile(content), nil
		case isUnsupported(err) || isRefusedQuery(err):
			if n.noOpenWhole.note() {
				n.log.Debug("node reads no file whole on open: opens read archives as usual", "node", n.id, "err", err)
			}
			whole = false
		}
	}
	if !whole {
		err = n.pool.callConn(ctx, true, func(c *conn) error {
			var err error
			f, err = c.c.Open(ctx, n.remote(path), xrootd.OpenRead, 0)
			cn = c
			return err
		})
	}
	if err != nil {
		return nil, n.fail("open", path, err)
	}
	return &file{n: n, cn: cn, f: f, path: path, size: f.OpenInfo().Size}, nil
}

// WholeRead bounds the files that Open reads whole from a server that
// offers it (xrootd.WholeOpener, as `ecstore node` does): the archives
// of small objects (128 KiB at most by default) and of objects whose
// chunks are that small come in one request, and their reads cost none,
// where a kXR_open, kXR_read and kXR_close were three.
const WholeRead = 256 << 10

// Stat implements node.Node.
func (n *Node) Stat(ctx context.Context, path string) (node.FileInfo, error) {
	if err := n.check(ctx, "stat", path); err != nil {
		return node.FileInfo{}, err
	}
	var fi xrootd.FileInfo
	err := n.pool.call(ctx, true, func(c *xrootd.Client) error {
		var err error
		fi, err = c.Stat(ctx, n.remote(path))
		return err
	})
	if err != nil {
		return node.FileInfo{}, n.fail("stat", path, err)
	}
	_, name := node.Split(path)
	if path == "/" {
		name = "/"
	}
	return node.FileInfo{Name: name, Size: fi.Size, ModTime: fi.ModTime, IsDir: fi.IsDir()}, nil
}

// List implements node.Node; every entry is reported, temporary files
// included. A server that lists with attributes (`ecstore node`, see
// xrootd.AttrLister) is asked for every entry with its attribute in one
// request, and every file comes with its attributes (an empty set when
// it has none); any other server is sent one kXR_dirlist with kXR_dstat,
// and files come without attributes.
func (n *Node) List(ctx context.Context, dir string) ([]node.FileInfo, error) {
	var out []node.FileInfo
	err := n.ListParts(ctx, dir, func(part []node.FileInfo) error {
		out = append(out, part...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListParts implements node.PartLister: List, each part of the server's
// answer parsed and handed over as it arrives. A retry on another
// connection (after the first found its connection closed) is made only
// while nothing was handed over.
func (n *Node) ListParts(ctx context.Context, dir string, fn func(part []node.FileInfo) error) error {
	if err := n.check(ctx, "list", dir); err != nil {
		return err
	}
	if n.ListsAttrs() {
		var (
			handed  bool
			lastErr error
			part    []node.FileInfo
		)
		err := n.pool.call(ctx, true, func(c *xrootd.Client) error {
			if handed {
				return lastErr // a retry would hand the first parts over again
			}
			lastErr = c.ListAttrEach(ctx, n.remote(dir), attrName, func(ents []xrootd.AttrEntry) error {
				handed = true
				part = part[:0]
				for _, e := range ents {
					fi := node.FileInfo{Name: e.Name, Size: e.Size, ModTime: e.ModTime, IsDir: e.IsDir()}
					if !fi.IsDir {
						if fi.Attrs = node.DecodeAttrs(e.Value); fi.Attrs == nil {
							fi.Attrs = map[string]string{} // listed: it has none
						}
					}
					part = append(part, fi)
				}
				return fn(part)
			})
			return lastErr
		})
		switch {
		case err == nil:
			return nil
		case handed:
			return n.fail("list", dir, err)
		case isUnsupported(err) || isRefusedQuery(err):
			if n.noAttrList.note() {
				n.log.Debug("node lists no attributes: listings read the attribute of each file", "node", n.id, "err", err)
			}
		case errors.Is(err, xrootd.ErrFrameTooLarge):
			// An entry too long with its attributes: a kXR_dirlist is shorter.
		case isServerFailure(err):
			// The server could not answer the query (a file system
			// plugin's own failure, say) but is there: a kXR_dirlist
			// may still list the directory, and tells what is wrong
			// with it if not.
			n.log.Debug("node failed a listing with attributes; listing names", "node", n.id, "dir", dir, "err", err)
		default:
			return n.fail("list", dir, err)
		}
	}
	fis, err := n.ListNames(ctx, dir)
	if err != nil {
		return err
	}
	return fn(fis)
}

// ListsAttrs implements node.AttrsLister: true while the server may
// list with attributes (no kXR_Unsupported of it remembered).
func (n *Node) ListsAttrs() bool { return n.KeepsAttrs() && !n.noAttrList.active() }

// ListNames implements node.NameLister with one kXR_dirlist with
// kXR_dstat: the files come without attributes. Where the server lists
// with attributes, this is the cheaper listing for a caller that wants
// the attributes of a few files of a large directory.
func (n *Node) ListNames(ctx context.Context, dir string) ([]node.FileInfo, error) {
	if err := n.check(ctx, "list", dir); err != nil {
		return nil, err
	}
	var ents []xrootd.FileInfo
	err := n.pool.call(ctx, true, func(c *xrootd.Client) error {
		var err error
		ents, err = c.Dirlist(ctx, n.remote(dir), true)
		return err
	})
	if err != nil {
		return nil, n.fail("list", dir, err)
	}
	out := make([]node.FileInfo, 0, len(ents))
	for _, e := range ents {
		out = append(out, node.FileInfo{Name: e.Name, Size: e.Size, ModTime: e.ModTime, IsDir: e.IsDir()})
	}
	return out, nil
}

// Remove implements node.Node: kXR_rm, then kXR_rmdir if the server
// says the path is a directory.
func (n *Node) Remove(ctx context.Context, path string) error {
	if err := n.check(ctx, "remove", path); err != nil {
		return err
	}
	if path == "/" {
		return n.wrap("remove", path, fmt.Errorf("%w: cannot remove the root", node.ErrPath))
	}
	err := n.pool.call(ctx, false, func(c *xrootd.Client) error {
		err := c.Rm(ctx, n.remote(path))
		if errors.Is(mapErr(err), node.ErrIsDir) {
			err = c.Rmdir(ctx, n.remote(path))
		}
		return err
	})
	if err != nil {
		return n.fail("remove", path, err)
	}
	return nil
}

// RemoveWithAttrs implements node.AttrRemover with ecstore's removal
// that says what it removed (xrootd.AttrRemover: one kXR_query), the
// attributes decoded from attrName's value. A server that does not offer
// it, or keeps no attributes, is not asked (node.ErrUnsupported) for
// refusalMemory after it refused once.
func (n *Node) RemoveWithAttrs(ctx context.Context, path string) (map[string]string, error) {
	if err := n.check(ctx, "remove", path); err != nil {
		return nil, err
	}
	if path == "/" {
		return nil, n.wrap("remove", path, fmt.Errorf("%w: cannot remove the root", node.ErrPath))
	}
	if n.noRemoveAttr.active() || !n.KeepsAttrs() {
		return nil, n.wrap("remove", path, node.ErrUnsupported)
	}
	var (
		value []byte
		had   bool
	)
	err := n.pool.call(ctx, false, func(c *xrootd.Client) error {
		var err error
		value, had, err = c.RemoveWithAttr(ctx, n.remote(path), attrName)
		return err
	})
	switch {
	case isUnsupported(err) || isRefusedQuery(err):
		if n.noRemoveAttr.note() {
			n.log.Debug("node does not say what it removes: removals read attributes first", "node", n.id, "err", err)
		}
		return nil, n.wrap("remove", path, node.ErrUnsupported)
	case err != nil:
		return nil, n.fail("remove", path, err)
	case !had:
		return nil, nil
	}
	return node.DecodeAttrs(value), nil
}

// Rename implements node.Node. Renaming onto a directory fails with
// node.ErrExist (see the package doc for the check); newPath's parent is
// created when the server reports it missing.
func (n *Node) Rename(ctx context.Context, oldPath, newPath string) error {
	if err := n.check(ctx, "rename", oldPath); err != nil {
		return err
	}
	if err := n.checkPath(newPath, false); err != nil {
		return n.wrap("rename", newPath, err)
	}
	what := oldPath + " -> " + newPath
	if oldPath == "/" || newPath == "/" {
		return n.wrap("rename", what, fmt.Errorf("%w: cannot rename the root", node.ErrPath))
	}
	err := n.pool.call(ctx, false, func(c *xrootd.Client) error {
		fi, err := c.Stat(ctx, n.remote(newPath))
		switch {
		case err == nil && fi.IsDir():
			return fmt.Errorf("%w: %s is a directory", node.ErrExist, newPath)
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return err
		}
		err = c.Mv(ctx, n.remote(oldPath), n.remote(newPath))
		if errors.Is(err, fs.ErrNotExist) {
			// Either oldPath is missing or newPath's parent is (a server
			// that does not create it).
			if _, serr := c.Stat(ctx, n.remote(oldPath)); serr != nil {
				return serr
			}
			newDir, _ := node.Split(newPath)
			if merr := c.Mkdir(ctx, n.remote(newDir), 0o755, true); merr != nil {
				return merr
			}
			err = c.Mv(ctx, n.remote(oldPath), n.remote(newPath))
		}
		return err
	})
	if err != nil {
		err = mapErr(err)
		if errors.Is(err, node.ErrIsDir) || errors.Is(err, node.ErrNotEmpty) {
			// A file or directory renamed onto a directory.
			err = fmt.Errorf("%w: %w", node.ErrExist, err)
		}
		return n.wrap("rename", what, err)
	}
	return nil
}

// Mkdir implements node.Node. A file in the way fails with
// node.ErrNotDir.
func (n *Node) Mkdir(ctx context.Context, path string) error {
	if err := n.check(ctx, "mkdir", path); err != nil {
		return err
	}
	err := n.pool.call(ctx, true, func(c *xrootd.Client) error {
		return c.Mkdir(ctx, n.remote(path), 0o755, true)
	})
	if err != nil {
		err = mapErr(err)
		if errors.Is(err, node.ErrExist) {
			err = fmt.Errorf("%w: %w", node.ErrNotDir, err)
		}
		return n.wrap("mkdir", path, err)
	}
	return nil
}

// Space implements node.Node with kXR_query kXR_Qspace of the prefix. A
// server that does not answer space queries gives an error wrapping
// errors.ErrUnsupported.
func (n *Node) Space(ctx context.Context) (node.Space, error) {
	if err := ctx.Err(); err != nil {
		return node.Space{}, fmt.Errorf("node %s: space: %w", n.id, err)
	}
	var sp xrootd.Space
	err := n.pool.call(ctx, true, func(c *xrootd.Client) error {
		var err error
		sp, err = c.Space(ctx, n.remote("/"))
		return err
	})
	if err != nil {
		return node.Space{}, fmt.Errorf("node %s: space: %w", n.id, mapErr(err))
	}
	if sp.Total <= 0 {
		return node.Space{}, fmt.Errorf("node %s: space: %w: server reported no capacity", n.id, errors.ErrUnsupported)
	}
	return node.Space{Total: sp.Total, Free: sp.Free}, nil
}

// check validates path and ctx for operation op, like node.Local: stat,
// open and remove accept a temporary name as the last element.
func (n *Node) check(ctx context.Context, op, path string) error {
	debris := op == "stat" || op == "open" || op == "remove" || op == "rename"
	if err := n.checkPath(path, debris); err != nil {
		return n.wrap(op, path, err)
	}
	if err := ctx.Err(); err != nil {
		return n.wrap(op, path, err)
	}
	return nil
}

// checkPath applies node.CheckPath (or CheckDebrisPath) and refuses '?',
// which the protocol reserves for CGI.
func (n *Node) checkPath(path string, debris bool) error {
	valid := node.CheckPath
	if debris {
		valid = node.CheckDebrisPath
	}
	if err := valid(path); err != nil {
		return err
	}
	if strings.ContainsRune(path, '?') {
		return fmt.Errorf("%w: %q: '?' cannot be sent over root://", node.ErrPath, path)
	}
	return nil
}

// wrap adds the node, operation and path to err.
func (n *Node) wrap(op, path string, err error) error {
	return fmt.Errorf("node %s: %s %s: %w", n.id, op, path, err)
}

// fail maps a protocol error to the node sentinels and wraps it.
func (n *Node) fail(op, path string, err error) error {
	return n.wrap(op, path, mapErr(err))
}

// nodeErrors are the node errors that mapErr recognizes in a server's
// answers.
var nodeErrors = []error{node.ErrNotExist, node.ErrExist, node.ErrNotEmpty, node.ErrIsDir, node.ErrNotDir, node.ErrPath, node.ErrNoSpace}

// mapErr adds the node sentinel that matches a kXR_error, keeping the
// original error in the chain. "Not a directory" and "directory not
// empty" have no protocol code (xrootd sends kXR_FSError), so the end of
// a kXR_FSError's message decides: the error text, which both xrootd and
// ecstore's node put after the path (a path may hold those words; an
// I/O error on it is no namespace answer). Errors that already carry a
// sentinel, and those with none, are returned as they are.
func mapErr(err error) error {
	var re *xrootd.RedirectError
	if errors.As(err, &re) && !errors.Is(err, ErrRedirector) {
		return fmt.Errorf("%w: %w", err, ErrRedirector)
	}
	var xe *xrootd.Error
	if err == nil || !errors.As(err, &xe) {
		return err
	}
	for _, s := range nodeErrors {
		if errors.Is(err, s) {
			return err
		}
	}
	var sentinel error
	msg := strings.ToLower(strings.TrimSpace(xe.Message))
	says := func(text string) bool { return xe.Code == xrootd.ErrFSError && strings.HasSuffix(msg, text) }
	switch {
	case xe.Code == xrootd.ErrNotFound:
		sentinel = node.ErrNotExist
	case xe.Code == xrootd.ErrIsDirectory:
		sentinel = node.ErrIsDir
	case xe.Code == xrootd.ErrNoSpace, xe.Code == xrootd.ErrOverQuota:
		sentinel = node.ErrNoSpace
	case xe.Code == xrootd.ErrArgTooLong:
		sentinel = node.ErrPath
	case says("directory not empty"):
		sentinel = node.ErrNotEmpty
	case says("not a directory"):
		sentinel = node.ErrNotDir
	case xe.Code == xrootd.ErrItExists:
		sentinel = node.ErrExist
	case says("is a directory"):
		sentinel = node.ErrIsDir
	case says("no space left on device"):
		sentinel = node.ErrNoSpace
	default:
		return err
	}
	return fmt.Errorf("%w: %w", sentinel, err)
}

// operation is the node.Operation of a request the client observed.
func operation(o xrootd.Observation) node.Operation {
	op := node.Operation{Name: o.Name, Duration: o.Duration, Err: mapErr(o.Err)}
	switch {
	case o.Request == xrootd.ReqRead, o.Request == xrootd.ReqPgRead, o.Request == xrootd.ReqReadV, o.Name == "open_whole":
		op.Read = o.Received
	case o.Request == xrootd.ReqWrite, o.Request == xrootd.ReqPgWrite, o.Request == xrootd.ReqWriteV:
		op.Written = int64(o.Sent)
	}
	return op
}
