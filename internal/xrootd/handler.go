package xrootd

import (
	"context"
	"io"
	"io/fs"
	"iter"
	"net/url"
	"os"
	"time"
)

// FileSystem is what a Server serves. Paths are absolute, slash-separated
// and cleaned (no "." or ".." elements, no trailing slash except "/"); any
// CGI ("?key=value") is split off before the handler sees a path.
//
// Methods may be called concurrently from many connections. Every method
// gets a context that is cancelled when the client's connection goes away
// or the server is stopped; it must return promptly after that.
//
// Errors become kXR_error responses: an *Error is sent as it is; otherwise
// fs.ErrNotExist becomes kXR_NotFound, fs.ErrExist kXR_ItExists,
// fs.ErrPermission kXR_NotAuthorized, fs.ErrInvalid kXR_ArgInvalid,
// errors.ErrUnsupported kXR_Unsupported, a syscall.Errno follows
// XProtocol::mapError, and anything else is kXR_ServerError. The error
// text is sent to the client, so it should not hold secrets.
//
// Namespace operations beyond Open, Stat and List are optional
// interfaces (Remover, Renamer, DirMaker, DirRemover, Truncater, Chmoder,
// Checksummer, ChecksumLister, SpaceReporter): the server tests for them
// at run time and answers kXR_Unsupported when they are missing.
type FileSystem interface {
	// Open opens or creates the file at name.
	Open(ctx context.Context, name string, opts OpenOptions) (File, error)
	// Stat describes the file or directory at name.
	Stat(ctx context.Context, name string) (FileInfo, error)
	// List returns the entries of directory dir in any order. The
	// sequence may be consumed lazily; the server stops it early when the
	// client goes away. An error yielded before any entry (such as
	// fs.ErrNotExist) fails the request; an error after some entries
	// ends the listing with kXR_error.
	List(ctx context.Context, dir string) iter.Seq2[FileInfo, error]
}

// OpenOptions are the parameters of a kXR_open request.
type OpenOptions struct {
	// Flags are the request's kXR_open options. Flags.Writable tells
	// whether the file is opened for writing, Flags.Create whether it may
	// be created; OpenNew fails when the file exists, OpenDelete
	// truncates an existing file, OpenPOSC asks for
	// persist-on-successful-close. OpenMkpath asks for missing parent
	// directories to be created, but xrdcp does not set it and expects
	// xrootd's behaviour, which creates them for every create anyway.
	Flags OpenFlags
	// Perm holds the permission bits for a created file.
	Perm fs.FileMode
	// CGI holds the opaque information after "?" in the path, such as
	// oss.asize (the expected file size that xrdcp announces).
	CGI url.Values
}

// File is an open file. The server calls ReadAt and Stat concurrently with
// each other and with the write-side methods, but calls the write-side
// methods (FileWriter.WriteAt, FileSyncer.Sync, FileTruncater.Truncate)
// one at a time, in the order the client sent them. Close (or
// FileAborter.Abort) is called exactly once, after every other call on
// the file has returned.
type File interface {
	// ReadAt reads len(p) bytes at off, like io.ReaderAt: when fewer
	// bytes are available it returns them with io.EOF. The server may
	// pass a p that extends past the end of the file.
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
	// Stat describes the open file.
	Stat(ctx context.Context) (FileInfo, error)
	// Close releases the file. For a file opened for writing, a nil
	// return is the durability point: the client is told the file is
	// complete only after Close succeeds.
	Close(ctx context.Context) error
}

// FileSlicer is implemented by files that can lend the bytes of a range
// instead of copying them: kXR_read is then answered by writing the
// slices to the connection as they are. ReadSlices returns up to n bytes
// at off, in order, and fewer only at the end of the file, with io.EOF
// (as ReadAt does); release, nil only with an error other than io.EOF,
// is called once the slices have been sent.
type FileSlicer interface {
	ReadSlices(ctx context.Context, off int64, n int) (bufs [][]byte, release func(), err error)
}

// ReadObserver is implemented by file systems that count read requests:
// the server calls ReadDone once per kXR_read, kXR_pgread or kXR_readv
// (op "read", "pgread" or "readv") when it has been answered, with the
// time it arrived and the error it was answered with (nil when it
// succeeded). A read request makes several File calls (one per readv
// segment, per frame of a long read): counting those would count
// segments and frames, not requests.
type ReadObserver interface {
	ReadDone(op string, start time.Time, err error)
}

// FileSender is implemented by files whose bytes are in an operating-system
// file: kXR_read is then answered with sendfile(2), the bytes going from
// the page cache to the socket without a copy through the process.
// SendSource readies up to n bytes at off (writing out whatever the file
// buffers) and returns the file to send them from and how many bytes it
// holds there: fewer than n only where the file ends. A nil file means
// this range cannot be sent that way and the server uses ReadAt. The
// server uses the returned file only until the reply is written, and not
// at all when the connection is not a plain socket.
type FileSender interface {
	SendSource(ctx context.Context, off int64, n int) (src *os.File, avail int, err error)
}

// FileWriter is implemented by files that accept kXR_write and
// kXR_pgwrite. Writes arrive in the order the client sent them; a file
// that supports only sequential writes returns an error (for example
// Errorf(ErrUnsupported, ...)) for an offset other than its current size.
// The server keeps no reference to p after WriteAt returns.
type FileWriter interface {
	WriteAt(ctx context.Context, p []byte, off int64) (int, error)
}

// FileStreamWriter is implemented by files that take a large write
// straight from the connection: the server then does not buffer the
// payload (for kXR_pgwrite, r yields the data with the page checksums
// verified and stripped). WriteFrom reads the n data bytes for offset off
// from r; it may stop early only with an error, and the server discards
// what it left unread. An error from r (a broken connection, a page
// checksum mismatch) leaves the file with a partial write: the file must
// then refuse to commit, as after any failed write.
type FileStreamWriter interface {
	WriteFrom(ctx context.Context, r io.Reader, off, n int64) (int64, error)
}

// FileSyncer is implemented by files that can flush written data to
// stable storage on kXR_sync. Without it, kXR_sync succeeds and does
// nothing.
type FileSyncer interface {
	Sync(ctx context.Context) error
}

// CloseNoticer is implemented by files that want to hear of a kXR_close
// as soon as it arrives, before the write-side requests queued ahead of
// it have run: a file whose kXR_sync waits for a long job (the pull of a
// third-party copy) ends that job, as xrootd does, instead of keeping
// the close waiting behind it. CloseComing runs on the connection's
// reading goroutine: it must not block. Close is still called, in turn.
type CloseNoticer interface {
	CloseComing()
}

// FileTruncater is implemented by files that support kXR_truncate on an
// open handle.
type FileTruncater interface {
	Truncate(ctx context.Context, size int64) error
}

// FileAborter is implemented by files that can discard an incomplete
// write. When a client's connection ends while a file is still open (the
// client died or was cancelled), the server calls Abort instead of Close,
// so that a partial upload is not committed.
type FileAborter interface {
	Abort(ctx context.Context) error
}

// FileDiscarder is implemented by files that are discarded otherwise
// than Abort does when their client never saw them (an open refused
// after the handler opened the file): Abort may keep an upload for its
// client to take up again, which such a file has none to.
type FileDiscarder interface {
	Discard(ctx context.Context) error
}

// UncheckedReader is implemented by the payload reader of a kXR_pgwrite
// that FileStreamWriter.WriteFrom receives: it hands out each page's
// bytes before it has the checksum of the whole page. When the payload
// breaks off inside a page, Unchecked is how many of the bytes read are
// of that page, never checked.
type UncheckedReader interface {
	io.Reader
	Unchecked() int64
}

// PersistOnCloser is implemented by file systems that honour kXR_posc
// (OpenPOSC, persist on successful close): a file opened with it is kept
// only if it is closed successfully, and removed when its client goes
// away without closing it (FileAborter.Abort) or its close fails. The
// server announces kXR_supposc when PersistOnClose reports true.
type PersistOnCloser interface {
	PersistOnClose() bool
}

// ConfigReporter is implemented by file systems that answer kXR_query
// config keys of their own (such as "tpc", third-party copy support),
// beyond those the server answers; ok false leaves the key unknown.
type ConfigReporter interface {
	ConfigValue(key string) (value string, ok bool)
}

// WriteReporter is implemented by file systems that refuse writes to
// some clients or paths (a listener that serves anonymous clients
// read-only, say): kXR_locate then answers "r" (read-only) where
// MayWrite reports false for the client of ctx (PeerIdentity) and the
// path located, as xrootd answers for a path it exports read-only, and
// "w" where it reports true. Without it, kXR_locate answers "w". The
// answer is a hint for the client; the writes themselves are still
// checked when they come.
type WriteReporter interface {
	MayWrite(ctx context.Context, name string) bool
}

// Remover is implemented by file systems that support kXR_rm.
type Remover interface {
	Remove(ctx context.Context, name string) error
}

// Renamer is implemented by file systems that support kXR_mv.
type Renamer interface {
	Rename(ctx context.Context, oldName, newName string) error
}

// DirMaker is implemented by file systems that support kXR_mkdir. With
// parents set, missing parent directories are created and an existing
// directory is not an error.
type DirMaker interface {
	Mkdir(ctx context.Context, name string, perm fs.FileMode, parents bool) error
}

// DirRemover is implemented by file systems that support kXR_rmdir.
type DirRemover interface {
	Rmdir(ctx context.Context, name string) error
}

// Truncater is implemented by file systems that support kXR_truncate by
// path.
type Truncater interface {
	Truncate(ctx context.Context, name string, size int64) error
}

// Chmoder is implemented by file systems that support kXR_chmod.
type Chmoder interface {
	Chmod(ctx context.Context, name string, perm fs.FileMode) error
}

// AttrKeeper is implemented by file systems that keep extended attributes
// of files (kXR_fattr get, set and del, by path; xrdfs xattr). Each
// method answers one Attr per attribute asked, in order, with its own
// error (ErrAttrNotFound for a missing one, ErrItExists for one set with
// onlyNew that exists): one attribute's failure does not fail the
// others. An error returned for the whole call (the file is missing,
// say) is the error of every attribute, which tells the client its code
// only; a *Refusal fails the request instead, with its message (the
// client may not, the file cannot change).
type AttrKeeper interface {
	GetAttrs(ctx context.Context, name string, names []string) ([]Attr, error)
	SetAttrs(ctx context.Context, name string, attrs []Attr, onlyNew bool) ([]Attr, error)
	DelAttrs(ctx context.Context, name string, names []string) ([]Attr, error)
}

// FileAttrKeeper is implemented by open files that keep extended
// attributes (kXR_fattr get, set and del on a file handle), answering as
// AttrKeeper does. Set and del come only on files open for writing.
type FileAttrKeeper interface {
	GetAttrs(ctx context.Context, names []string) ([]Attr, error)
	SetAttrs(ctx context.Context, attrs []Attr, onlyNew bool) ([]Attr, error)
	DelAttrs(ctx context.Context, names []string) ([]Attr, error)
}

// AttrEnumerator is implemented by file systems that list the extended
// attributes of a file (kXR_fattr list by path; xrdfs xattr PATH list):
// AllAttrs answers every attribute with its value, in the order to list
// them. An error fails the request.
type AttrEnumerator interface {
	AllAttrs(ctx context.Context, name string) ([]Attr, error)
}

// FileAttrEnumerator is implemented by open files that list their
// extended attributes (kXR_fattr list on a file handle), as
// AttrEnumerator does.
type FileAttrEnumerator interface {
	AllAttrs(ctx context.Context) ([]Attr, error)
}

// AttrLister is implemented by file systems that list a directory with
// one extended attribute of each entry in one request: ecstore's own
// kXR_query kXR_Qopaquf on "DIR?ecstore.listattr=NAME" (Client.ListAttr;
// the answer's format is AppendAttrListEntry's). It saves a client that
// wants the attribute of every file a kXR_fattr get per file after the
// kXR_dirlist; other servers answer kXR_Unsupported. Entries are
// described as kXR_dirlist with kXR_dstat describes them.
type AttrLister interface {
	ListAttr(ctx context.Context, dir, attr string) iter.Seq2[AttrEntry, error]
}

// WholeOpener is implemented by file systems that offer ecstore's open
// that reads small files whole: kXR_query kXR_Qopaquf on
// "PATH?ecstore.open=MAX" (Client.OpenWhole) answers a regular file of
// at most MAX bytes with its content, leaving it closed, and opens any
// other for reading as kXR_open with kXR_retstat does. A client that
// reads small files whole (the archives of small objects) saves the
// kXR_read and kXR_close of each; other servers answer kXR_Unsupported.
// OpenWholeMax bounds MAX, whatever the client asks.
type WholeOpener interface {
	OpenWholeMax() int64
}

// AttrRemover is implemented by file systems that offer ecstore's
// removal that says what it removed: kXR_query kXR_Qopaquf on
// "PATH?ecstore.rmattr=NAME" (Client.RemoveWithAttr) removes the file at
// PATH as kXR_rm does and answers with the value its extended attribute
// NAME had (or that it had none). A client that must know what it
// removes (a gateway removing an object's archives, whose attributes say
// which version each holds) saves a kXR_fattr get per file and a round
// trip; other servers answer kXR_Unsupported. A directory is refused
// with kXR_isDirectory and left alone, as by kXR_rm.
type AttrRemover interface {
	RemoveWithAttr(ctx context.Context, name, attr string) (value []byte, had bool, err error)
}

// AttrEntry is a directory entry with the value of the attribute asked
// for (AttrLister); HasValue is false when the entry has none.
type AttrEntry struct {
	FileInfo
	Value    []byte
	HasValue bool
}

// Checksummer is implemented by file systems that answer kXR_query
// kXR_Qcksum (xrdfs query checksum, xrdcp --cksum).
type Checksummer interface {
	// ChecksumAlgorithms lists the supported algorithm names, such as
	// "adler32"; the first is used when the client names none.
	ChecksumAlgorithms() []string
	// Checksum returns the checksum of the file at name as the lower-case
	// hex string the protocol carries (8 digits for adler32).
	Checksum(ctx context.Context, name, algorithm string) (string, error)
}

// ChecksumLister is implemented by file systems that list a directory
// with the checksum of each entry (kXR_dirlist with kXR_dcksm; xrdfs ls
// -C) from checksums they keep, as xrootd answers it from the checksums
// it has stored, never computing one. It is used only by a Checksummer,
// whose ChecksumAlgorithms name what a client may ask for: algorithm is
// one of them (the client's cks.type, else the first). Entries are
// listed as List lists them; an entry whose Checksum is empty (a
// directory, a file whose checksum is not kept or could not be read) is
// sent with "none", as xrootd sends it.
//
// A Checksummer that is not a ChecksumLister answers kXR_dcksm with
// "none" for every entry rather than compute checksums in a listing; a
// file system that is no Checksummer answers it as kXR_dstat, as xrootd
// without xrootd.chksum does.
type ChecksumLister interface {
	ListChecksums(ctx context.Context, dir, algorithm string) iter.Seq2[ChecksumEntry, error]
}

// ChecksumEntry is a directory entry with its checksum (ChecksumLister,
// Client.DirlistChecksums): lower-case hex as Checksummer returns it, or
// empty for none.
type ChecksumEntry struct {
	FileInfo
	Checksum string
}

// Space describes the capacity behind a path, in bytes.
type Space struct {
	Total       int64 // capacity
	Free        int64 // bytes available
	Used        int64 // bytes in use
	LargestFree int64 // largest free extent; Free when unknown
}

// SpaceReporter is implemented by file systems that answer kXR_query
// kXR_Qspace and kXR_stat with kXR_vfs (xrdfs spaceinfo, statvfs).
type SpaceReporter interface {
	Space(ctx context.Context, name string) (Space, error)
}
