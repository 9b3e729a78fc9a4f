// Package node defines the storage node contract — a vanilla store of
// plain files that knows nothing about erasure coding — and its drivers:
// a local directory (Local) and, in later packages, remote data servers.
// Faulty wraps any Node to inject failures in tests.
//
// Paths are slash-separated, absolute and canonical ("/a/b"); see
// CheckPath. A file becomes visible at its path only when its Upload is
// committed; until then it lives under a temporary name in the same
// directory (see IsTemp) that listings report but callers hide.
//
// Every method that does I/O takes a context; drivers must return promptly
// once it is done, with an error wrapping ctx.Err().
package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ecstore/ecstore/internal/directio"
)

// Errors common to all drivers. Drivers wrap them with the operation, node
// and path; test with errors.Is. ErrNotExist and ErrExist wrap the io/fs
// sentinels, so errors.Is(err, fs.ErrNotExist) also holds.
var (
	ErrNotExist = fmt.Errorf("node: %w", fs.ErrNotExist)
	ErrExist    = fmt.Errorf("node: %w", fs.ErrExist)
	ErrNotEmpty = errors.New("node: directory not empty")
	ErrIsDir    = errors.New("node: is a directory")
	ErrNotDir   = errors.New("node: not a directory")
	ErrPath     = errors.New("node: invalid path")
	ErrNoSpace  = errors.New("node: no space left")
)

// Node is one storage node. Implementations are safe for concurrent use.
type Node interface {
	// ID is the node's stable name, recorded in object placements.
	ID() string

	// Create starts a new file for path under a temporary name in path's
	// directory (creating parent directories). Nothing is visible at path
	// until the Upload is committed. The caller must call Commit or Abort.
	Create(ctx context.Context, path string) (Upload, error)
	// Open opens the committed file at path for reading.
	Open(ctx context.Context, path string) (File, error)
	// Stat describes the file or directory at path.
	Stat(ctx context.Context, path string) (FileInfo, error)
	// List returns the entries of directory dir, in no particular order,
	// including temporary files of uploads in progress or abandoned.
	List(ctx context.Context, dir string) ([]FileInfo, error)
	// Remove deletes a file or an empty directory. The last element may
	// be a temporary name (see CheckDebrisPath), to clean up debris.
	Remove(ctx context.Context, path string) error
	// Rename moves a file or directory, replacing an existing file at
	// newPath and creating newPath's parent directories. Renaming onto an
	// existing directory fails with ErrExist. The last element of oldPath
	// may be a temporary name (see CheckDebrisPath), to complete a commit
	// whose writer died.
	Rename(ctx context.Context, oldPath, newPath string) error
	// Mkdir creates directory path and any missing parents; an existing
	// directory is not an error.
	Mkdir(ctx context.Context, path string) error
	// Space reports the capacity of the node's storage.
	Space(ctx context.Context) (Space, error)
}

// Upload is a file being written. Bytes are appended in order. Durability:
// nothing is guaranteed durable until Finish returns nil, and nothing is
// visible at the final path until Commit returns nil. Every Upload ends
// with a successful Commit or with Abort: Abort removes the temporary file
// (also after Finish or Commit failed), must work with a cancelled context,
// and does nothing after a successful Commit. Commit without Finish
// finishes first. Attributes may be set until Commit. An Upload is not
// safe for concurrent use.
type Upload interface {
	// Write appends p. It honours ctx for remote drivers.
	Write(ctx context.Context, p []byte) error
	// Finish flushes and (when the node is configured to) fsyncs the
	// temporary file. No Write may follow.
	Finish(ctx context.Context) error
	// Commit renames the finished file to its final path, replacing any
	// file there, and makes the rename durable (directory fsync).
	Commit(ctx context.Context) error
	// Abort discards the upload. It is safe to call after Commit failed.
	Abort(ctx context.Context) error
	// TempPath is the node path of the temporary file. An Abort that
	// failed (the node did not answer) leaves it there; Node.Remove of
	// that path removes it later.
	TempPath() string
}

// File is an open, committed file. Safe for concurrent ReadAt.
type File interface {
	// ReadAt reads len(p) bytes at off; it returns io.EOF only when fewer
	// than len(p) bytes are available there. After an error wrapping
	// ErrLeftRunning (a guarded local node whose file system did not
	// answer in time) the read may still write into p: the caller must
	// not reuse p. The same holds for SpanReader's buf.
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
	// Size is the file's size when it was opened.
	Size() int64
	// Close releases the file.
	Close() error
}

// ContentsFile is a File whose whole content its open read into memory
// (Local does so for small files, and xrdnode where the server offers
// it). Contents returns it; the caller must
// not change it. Reads from a ContentsFile cost no request.
type ContentsFile interface {
	File
	Contents() []byte
}

// NewContentsFile returns the ContentsFile of content, which the caller
// must not change afterwards: a node driver's file read whole by its open.
func NewContentsFile(content []byte) ContentsFile { return &contentsFile{b: content} }

// contentsFile is a ContentsFile.
type contentsFile struct {
	b      []byte
	closed atomic.Bool
}

func (f *contentsFile) Contents() []byte { return f.b }

func (f *contentsFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, fmt.Errorf("read at negative offset %d", off)
	}
	n := copy(p, f.b[min(off, int64(len(f.b))):])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *contentsFile) Size() int64 { return int64(len(f.b)) }

func (f *contentsFile) Close() error {
	if f.closed.Swap(true) {
		return fs.ErrClosed
	}
	return nil
}

// SpanReader is a File that can read a span into a buffer of its own
// choosing within buf, such as an O_DIRECT read from the aligned offset
// before the span. ReadSpan returns the n bytes at off, a part of buf, or
// an error wrapping io.ErrUnexpectedEOF if the file ends before them.
// buf must hold n bytes; with n+SpanSlack, a span of DirectSpan bytes or
// more may skip the page cache.
type SpanReader interface {
	File
	ReadSpan(ctx context.Context, buf []byte, off int64, n int) ([]byte, error)
}

// SpanSlack is the room beyond a span that lets ReadSpan read it with
// O_DIRECT; DirectSpan the smallest span read so.
const (
	SpanSlack  = directio.ReadSlack
	DirectSpan = 128 << 10
)

// Operation describes one operation on a node once it has ended, for
// metrics (GuardOptions.Observe, xrdnode.Options.Observe): a request to
// a remote node's data server, named after its XRootD request ("open",
// "read", "write", "sync", "close", "mv", "fattr", ...), or a call into a
// local directory's file system, named after the Node, File or Upload
// method ("open", "read", "create", "write", "finish", "commit",
// "remove", "readattrs", ...).
type Operation struct {
	Name     string
	Duration time.Duration
	// Read and Written are the data bytes the operation moved from and
	// to the node (chunk and archive bytes, not paths or headers).
	Read, Written int64
	// Err is the operation's error, nil when it succeeded: one that
	// wraps ErrNotExist is a path the node does not have, the answer of
	// most lookups of a path that is not stored there.
	Err error
}

// FileInfo describes a file or directory.
type FileInfo struct {
	Name    string // base name
	Size    int64
	ModTime time.Time
	IsDir   bool
	// Attrs are the extended attributes the node keeps for the file
	// (see Attributes), when the listing or stat could read them cheaply.
	Attrs map[string]string
}

// Space is the capacity of a node.
type Space struct {
	Total int64
	Free  int64
}

// Attributes is implemented by uploads on nodes that keep extended
// attributes. SetAttrs attaches attrs to the upload's file before it is
// committed; they survive the rename. Keys are short ASCII names without
// the "user." prefix.
type Attributes interface {
	SetAttrs(ctx context.Context, attrs map[string]string) error
}

// AttrReader is implemented by nodes that read the attributes of a file
// (see Attributes) by its path, in one request and without opening it:
// cheaper than reading the file when the attributes say enough.
type AttrReader interface {
	// ReadAttrs returns the attributes kept for the file at path (nil
	// when it has none), an error wrapping ErrNotExist when there is no
	// file, or ErrNoAttrs when the node keeps no attributes.
	ReadAttrs(ctx context.Context, path string) (map[string]string, error)
	// KeepsAttrs reports whether the node may keep attributes: false
	// once it was found not to (ReadAttrs would fail with ErrNoAttrs).
	KeepsAttrs() bool
}

// NameLister is implemented by nodes that list a directory more cheaply
// when they need not describe its files: ListNames is List whose
// FileInfos of files need carry only the name (Attrs is nil, Size and
// ModTime may be zero; directories are described in full). Listings
// that describe only some of their entries (an S3 page) use it, and read
// the attributes of the files they describe by path (AttrReader).
type NameLister interface {
	ListNames(ctx context.Context, dir string) ([]FileInfo, error)
}

// AttrsLister is implemented by nodes whose List can carry the
// attributes of every file (an empty set for a file without any) in one
// request per directory, however many files it holds; ListsAttrs
// reports whether List does so now. A caller that wants the attributes
// of a good part of a directory's files lists it again rather than ask
// for them one request per file.
type AttrsLister interface {
	ListsAttrs() bool
}

// PartLister is implemented by nodes whose listings arrive in parts (a
// remote node's answer in several frames): ListParts is List handing
// the entries to fn part by part as they arrive, so that a listing of a
// large directory is reduced as it comes rather than held whole. fn must
// not keep the slice. An error may come after some parts were handed
// over; no entry is handed over twice.
type PartLister interface {
	ListParts(ctx context.Context, dir string, fn func(part []FileInfo) error) error
}

// AttrRemover is implemented by nodes that can remove a file and say
// which attributes (see Attributes) it had in one request, where a
// ReadAttrs and a Remove are two requests and two round trips.
type AttrRemover interface {
	// RemoveWithAttrs removes the file at path, as Remove does, and
	// returns the attributes it had (nil when none). A directory at path
	// is left alone and fails with ErrIsDir, no file with ErrNotExist. It
	// fails with ErrUnsupported, having removed nothing, when the node
	// cannot do it for now (its server does not offer it).
	RemoveWithAttrs(ctx context.Context, path string) (map[string]string, error)
}

// ErrUnsupported means that a node cannot carry out an optional
// operation (one of the interfaces a driver may implement) and did
// nothing: the caller does it another way.
var ErrUnsupported = errors.New("node: operation not supported")

// ErrNoAttrs means that a node keeps no attributes.
var ErrNoAttrs = errors.New("node: attributes not kept")

// EncodeAttrs and DecodeAttrs convert attributes to and from the one
// value that keeps them all (a URL query: "k=v&k2=v2"), as Local keeps
// them in its user.ecstore extended attribute and remote nodes in their
// "ecstore" file attribute. A value that does not decode yields what
// decodes of it (nil for nothing).
func EncodeAttrs(attrs map[string]string) []byte {
	v := make(url.Values, len(attrs))
	for k, val := range attrs {
		v.Set(k, val)
	}
	return []byte(v.Encode())
}

// DecodeAttrs is the inverse of EncodeAttrs. It reads the pairs as
// url.ParseQuery does (the last value of a key wins; a pair with a
// semicolon or a bad escape is skipped), with no intermediate url.Values:
// a listing decodes one per archive.
func DecodeAttrs(b []byte) map[string]string {
	var attrs map[string]string
	for q := string(b); q != ""; {
		var pair string
		pair, q, _ = strings.Cut(q, "&")
		if pair == "" || strings.Contains(pair, ";") {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		k, kerr := queryUnescape(k)
		v, verr := queryUnescape(v)
		if kerr != nil || verr != nil || !ValidAttrKey(k) {
			continue
		}
		if attrs == nil {
			attrs = make(map[string]string, 8)
		}
		attrs[k] = v
	}
	return attrs
}

// queryUnescape is url.QueryUnescape, which it calls only when s holds
// something to unescape.
func queryUnescape(s string) (string, error) {
	if !strings.ContainsAny(s, "%+") {
		return s, nil
	}
	return url.QueryUnescape(s)
}

// ValidAttrKey reports whether k is an acceptable attribute key: 1 to
// 200 ASCII letters, digits, '.', '_' and '-'.
func ValidAttrKey(k string) bool {
	if k == "" || len(k) > 200 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// tempMarker is embedded in every temporary file name.
const tempMarker = ".ecstore-tmp."

// TempName returns a temporary name for an upload of base name base, with
// a random suffix. Temporary names begin with a dot.
func TempName(base, suffix string) string {
	return "." + base + tempMarker + suffix
}

// IsTemp reports whether a base name is a temporary upload name.
func IsTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, tempMarker)
}

// TempTarget returns the base name a temporary file was created for.
func TempTarget(name string) (string, bool) {
	if !IsTemp(name) {
		return "", false
	}
	i := strings.LastIndex(name, tempMarker)
	return name[1:i], true
}

// MaxPathLen bounds the length of a path.
const MaxPathLen = 4096

// MaxNameLen bounds one path element. It is below the usual 255-byte file
// name limit so that the temporary name of an upload (TempName adds a dot,
// the marker and a suffix of up to 32 bytes) still fits.
const MaxNameLen = 200

// CheckPath reports whether p is a canonical absolute path: it starts with
// "/", has no empty, "." or ".." elements, no trailing slash (except the
// root "/"), no NUL or control bytes, no element longer than MaxNameLen,
// and no element that looks like a temporary name.
func CheckPath(p string) error { return checkPath(p, false) }

// CheckDebrisPath is CheckPath except that the last element may be a
// temporary name, so that leftover temporary files can be inspected and
// removed or, by renaming, committed (Stat, Open, Remove and the source
// of Rename accept such paths; Create does not).
func CheckDebrisPath(p string) error { return checkPath(p, true) }

func checkPath(p string, tempLast bool) error {
	if p == "/" {
		return nil
	}
	if len(p) == 0 || p[0] != '/' || len(p) > MaxPathLen {
		return fmt.Errorf("%w: %q: must be absolute and at most %d bytes", ErrPath, p, MaxPathLen)
	}
	els := strings.Split(p[1:], "/")
	for i, el := range els {
		temp := IsTemp(el) && !(tempLast && i == len(els)-1)
		switch {
		case el == "":
			return fmt.Errorf("%w: %q: empty element", ErrPath, p)
		case el == "." || el == "..":
			return fmt.Errorf("%w: %q: %q element", ErrPath, p, el)
		case len(el) > MaxNameLen && !IsTemp(el):
			return fmt.Errorf("%w: %q: element longer than %d bytes", ErrPath, p, MaxNameLen)
		case temp:
			return fmt.Errorf("%w: %q: reserved temporary name", ErrPath, p)
		}
		for i := 0; i < len(el); i++ {
			if el[i] < 0x20 || el[i] == 0x7f {
				return fmt.Errorf("%w: %q: control character", ErrPath, p)
			}
		}
	}
	return nil
}

// Split returns the parent directory and base name of a canonical path.
func Split(p string) (dir, base string) {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/", p[i+1:]
	}
	return p[:i], p[i+1:]
}

// Join joins a canonical directory and a base name.
func Join(dir, base string) string {
	if dir == "/" {
		return "/" + base
	}
	return dir + "/" + base
}
