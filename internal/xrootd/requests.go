package xrootd

import (
	"bytes"
	"fmt"
	"strings"
)

// Request is a typed client request (section 4 of the
// specification, one subsection per request). ParseRequest decodes one
// from a frame; EncodeRequest encodes one. The set of implementations is
// closed: the structs of this file and RawRequest.
type Request interface {
	// RequestID returns the request code.
	RequestID() RequestID
	// marshal fills the 16 parameter bytes and returns the payload.
	marshal(params *[16]byte) []byte
}

// EncodeRequest builds the frame that carries req on stream sid.
func EncodeRequest(sid StreamID, req Request) *RequestFrame {
	f := &RequestFrame{StreamID: sid, ID: req.RequestID()}
	f.Payload = req.marshal(&f.Params)
	return f
}

// ParseRequest decodes the typed request carried by f. Requests this
// package has no type for are returned as *RawRequest. An error wraps
// ErrMalformed; the returned Request never aliases f.Payload's backing
// array beyond the byte slices it documents.
func ParseRequest(f *RequestFrame) (Request, error) {
	p := &f.Params
	pl := f.Payload
	switch f.ID {
	case ReqProtocol:
		return &ProtocolRequest{ClientVersion: int32(getU32(p[0:])), Flags: p[4], Expect: p[5]}, nil
	case ReqLogin:
		r := &LoginRequest{PID: int32(getU32(p[0:])), Ability2: p[12], Ability: p[13], CapVer: p[14], Token: string(pl)}
		r.Username = string(bytes.TrimRight(p[4:12], "\x00"))
		return r, nil
	case ReqAuth:
		r := &AuthRequest{Credentials: pl}
		copy(r.CredType[:], p[12:16])
		return r, nil
	case ReqPing:
		return &PingRequest{}, nil
	case ReqStat:
		r := &StatRequest{Options: p[0], Path: cstring(pl)}
		copy(r.Handle[:], p[12:16])
		return r, nil
	case ReqStatx:
		paths, err := splitList(pl)
		if err != nil {
			return nil, err
		}
		return &StatxRequest{Paths: paths}, nil
	case ReqOpen:
		return &OpenRequest{Mode: getU16(p[0:]), Options: OpenFlags(getU16(p[2:])), Path: cstring(pl)}, nil
	case ReqClose:
		return &CloseRequest{Handle: handleAt(p, 0)}, nil
	case ReqRead:
		return parseRead(p, pl)
	case ReqPgRead:
		r := &PgReadRequest{Handle: handleAt(p, 0), Offset: int64(getU64(p[4:])), Length: int32(getU32(p[12:]))}
		switch len(pl) {
		case 0:
		case 1:
			r.PathID, r.HasArgs = pl[0], true
		default:
			if len(pl) != 2 {
				return nil, fmt.Errorf("%w: pgread arguments of %d bytes", ErrMalformed, len(pl))
			}
			r.PathID, r.Flags, r.HasArgs = pl[0], pl[1], true
		}
		return r, nil
	case ReqReadV:
		if len(pl)%readVItemLen != 0 {
			return nil, fmt.Errorf("%w: readv list of %d bytes is not a multiple of %d", ErrMalformed, len(pl), readVItemLen)
		}
		if n := len(pl) / readVItemLen; n > MaxReadVItems {
			return nil, fmt.Errorf("%w: readv list of %d elements exceeds %d", ErrMalformed, n, MaxReadVItems)
		}
		r := &ReadVRequest{PathID: p[15], Segments: make([]ReadSegment, len(pl)/readVItemLen)}
		for i := range r.Segments {
			r.Segments[i] = parseSegment(pl[i*readVItemLen:])
		}
		return r, nil
	case ReqWrite:
		return &WriteRequest{Handle: handleAt(p, 0), Offset: int64(getU64(p[4:])), PathID: p[12], Data: pl}, nil
	case ReqPgWrite:
		return &PgWriteRequest{Handle: handleAt(p, 0), Offset: int64(getU64(p[4:])), PathID: p[12], Flags: p[13], Pages: pl}, nil
	case ReqSync:
		return &SyncRequest{Handle: handleAt(p, 0)}, nil
	case ReqTruncate:
		return &TruncateRequest{Handle: handleAt(p, 0), Size: int64(getU64(p[4:])), Path: cstring(pl)}, nil
	case ReqDirlist:
		return &DirlistRequest{Options: p[15], Path: cstring(pl)}, nil
	case ReqMkdir:
		return &MkdirRequest{Options: p[0], Mode: getU16(p[14:]), Path: cstring(pl)}, nil
	case ReqRmdir:
		return &RmdirRequest{Path: cstring(pl)}, nil
	case ReqRm:
		return &RmRequest{Path: cstring(pl)}, nil
	case ReqMv:
		return parseMv(p, pl)
	case ReqQuery:
		return &QueryRequest{InfoType: getU16(p[0:]), Handle: handleAt(p, 4), Args: pl}, nil
	case ReqLocate:
		return &LocateRequest{Options: getU16(p[0:]), Path: cstring(pl)}, nil
	case ReqEndsess:
		r := &EndsessRequest{}
		copy(r.SessionID[:], p[:])
		return r, nil
	case ReqBind:
		if len(pl) != 0 {
			return nil, fmt.Errorf("%w: bind with %d bytes of payload", ErrMalformed, len(pl))
		}
		r := &BindRequest{}
		copy(r.SessionID[:], p[:])
		return r, nil
	case ReqSet:
		return &SetRequest{Modifier: p[15], Data: cstring(pl)}, nil
	case ReqPrepare:
		paths, err := splitList(pl)
		if err != nil {
			return nil, err
		}
		return &PrepareRequest{Options: p[0], Priority: p[1], Port: getU16(p[2:]), OptionsX: getU16(p[4:]), Paths: paths}, nil
	case ReqChmod:
		return &ChmodRequest{Mode: getU16(p[14:]), Path: cstring(pl)}, nil
	case ReqFattr:
		return parseFattr(p, pl)
	}
	return &RawRequest{ID: f.ID, Params: f.Params, Payload: pl}, nil
}

// cstring converts a payload to a string, dropping trailing NUL bytes
// (xrdfs terminates some arguments with one).
func cstring(b []byte) string { return string(bytes.TrimRight(b, "\x00")) }

// maxListItems bounds the paths of a kXR_statx or kXR_prepare: a list
// of short items costs many times its bytes once split (a 16 MiB list of
// one-character paths: 8 million strings).
const maxListItems = 4096

// splitList splits a NUL-terminated, newline-separated list, dropping
// empty items; more than maxListItems is an error.
func splitList(pl []byte) ([]string, error) {
	pl = bytes.TrimRight(pl, "\x00")
	if n := bytes.Count(pl, []byte("\n")) + 1; n > maxListItems {
		return nil, fmt.Errorf("%w: a list of %d paths, at most %d", ErrMalformed, n, maxListItems)
	}
	var out []string
	for _, item := range bytes.Split(pl, []byte("\n")) {
		if len(item) > 0 {
			out = append(out, string(item))
		}
	}
	return out, nil
}

func handleAt(p *[16]byte, off int) FileHandle {
	var h FileHandle
	copy(h[:], p[off:off+4])
	return h
}

func parseSegment(b []byte) ReadSegment {
	var s ReadSegment
	copy(s.Handle[:], b[0:4])
	s.Length = int32(getU32(b[4:]))
	s.Offset = int64(getU64(b[8:]))
	return s
}

func appendSegment(b []byte, s ReadSegment) []byte {
	b = append(b, s.Handle[:]...)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	putU32(b[len(b)-12:], uint32(s.Length))
	putU64(b[len(b)-8:], uint64(s.Offset))
	return b
}

func parseRead(p *[16]byte, pl []byte) (Request, error) {
	r := &ReadRequest{Handle: handleAt(p, 0), Offset: int64(getU64(p[4:])), Length: int32(getU32(p[12:]))}
	if len(pl) == 0 {
		return r, nil
	}
	// read_args: pathid and 7 reserved bytes, optionally followed by a
	// readahead_list. Some clients send only the pathid byte.
	r.PathID, r.HasArgs = pl[0], true
	if len(pl) == 1 {
		return r, nil
	}
	if len(pl) < 8 || (len(pl)-8)%readVItemLen != 0 {
		return nil, fmt.Errorf("%w: read arguments of %d bytes", ErrMalformed, len(pl))
	}
	n := (len(pl) - 8) / readVItemLen
	if n > MaxReadVItems {
		return nil, fmt.Errorf("%w: %d read-ahead elements exceed %d", ErrMalformed, n, MaxReadVItems)
	}
	if n > 0 {
		r.ReadAhead = make([]ReadSegment, n)
		for i := range r.ReadAhead {
			r.ReadAhead[i] = parseSegment(pl[8+i*readVItemLen:])
		}
	}
	return r, nil
}

func parseMv(p *[16]byte, pl []byte) (Request, error) {
	s := cstring(pl)
	n := int(int16(getU16(p[14:])))
	if n == 0 {
		// Old clients leave arg1len zero: the arguments are separated by
		// the first blank.
		n = strings.IndexByte(s, ' ')
	}
	if n <= 0 || n >= len(s) || s[n] != ' ' {
		return nil, fmt.Errorf("%w: mv arguments %q with arg1len %d", ErrMalformed, s, n)
	}
	return &MvRequest{Source: s[:n], Target: s[n+1:]}, nil
}

// ProtocolRequest is kXR_protocol: the client's protocol version and what
// it wants to learn about the server (section 4.19).
type ProtocolRequest struct {
	ClientVersion int32 // clientpv
	Flags         uint8 // ProtoSecReqs, ProtoAbleTLS, ...
	Expect        uint8 // what the client does next, e.g. ProtoExpectLogin
}

// RequestID returns ReqProtocol.
func (*ProtocolRequest) RequestID() RequestID { return ReqProtocol }

func (r *ProtocolRequest) marshal(p *[16]byte) []byte {
	putU32(p[0:], uint32(r.ClientVersion))
	p[4], p[5] = r.Flags, r.Expect
	return nil
}

// LoginRequest is kXR_login (section 4.11). Token carries the client's
// CGI, such as "xrd.appname=xrdcp&xrd.rn=v5.5.3".
type LoginRequest struct {
	PID      int32  // client process id
	Username string // at most 8 bytes are sent
	Ability2 uint8  // XLoginAbility2 flags
	Ability  uint8  // XLoginAbility flags
	CapVer   uint8  // XLoginCapVer: capabilities and client version
	Token    string // login CGI, e.g. xrd.appname=...
}

// RequestID returns ReqLogin.
func (*LoginRequest) RequestID() RequestID { return ReqLogin }

func (r *LoginRequest) marshal(p *[16]byte) []byte {
	putU32(p[0:], uint32(r.PID))
	copy(p[4:12], r.Username)
	p[12], p[13], p[14] = r.Ability2, r.Ability, r.CapVer
	return []byte(r.Token)
}

// AuthRequest is kXR_auth. The server refuses it: it offers no security
// protocol.
type AuthRequest struct {
	CredType    [4]byte // credtype, e.g. "gsi"
	Credentials []byte  // cred
}

// RequestID returns ReqAuth.
func (*AuthRequest) RequestID() RequestID { return ReqAuth }

func (r *AuthRequest) marshal(p *[16]byte) []byte {
	copy(p[12:16], r.CredType[:])
	return r.Credentials
}

// PingRequest is kXR_ping.
type PingRequest struct{}

// RequestID returns ReqPing.
func (*PingRequest) RequestID() RequestID { return ReqPing }

func (*PingRequest) marshal(*[16]byte) []byte { return nil }

// StatRequest is kXR_stat. With an empty Path it stats the
// open file Handle; with Options&StatVFS it asks for file system space.
type StatRequest struct {
	Options uint8      // StatVFS for file system information
	Handle  FileHandle // fhandle, used when Path is empty
	Path    string     // path; empty to stat Handle
}

// RequestID returns ReqStat.
func (*StatRequest) RequestID() RequestID { return ReqStat }

func (r *StatRequest) marshal(p *[16]byte) []byte {
	p[0] = r.Options
	copy(p[12:16], r.Handle[:])
	return []byte(r.Path)
}

// StatxRequest is kXR_statx: the flags of several paths at once.
type StatxRequest struct {
	Paths []string // newline-separated on the wire
}

// RequestID returns ReqStatx.
func (*StatxRequest) RequestID() RequestID { return ReqStatx }

func (r *StatxRequest) marshal(*[16]byte) []byte { return []byte(strings.Join(r.Paths, "\n")) }

// OpenRequest is kXR_open (section 4.14). Path may carry CGI after "?".
type OpenRequest struct {
	Mode    uint16    // permission bits; kXR_ur.. equal the Unix 0400..
	Options OpenFlags // kXR_open options
	Path    string    // path, optionally followed by ?CGI
}

// RequestID returns ReqOpen.
func (*OpenRequest) RequestID() RequestID { return ReqOpen }

func (r *OpenRequest) marshal(p *[16]byte) []byte {
	putU16(p[0:], r.Mode)
	putU16(p[2:], uint16(r.Options))
	return []byte(r.Path)
}

// CloseRequest is kXR_close.
type CloseRequest struct {
	Handle FileHandle // fhandle of the open file
}

// RequestID returns ReqClose.
func (*CloseRequest) RequestID() RequestID { return ReqClose }

func (r *CloseRequest) marshal(p *[16]byte) []byte {
	copy(p[0:4], r.Handle[:])
	return nil
}

// ReadSegment is one element of a kXR_readv list or of the read-ahead
// list of kXR_read (readahead_list / read_list).
type ReadSegment struct {
	Handle FileHandle // fhandle of the open file
	Length int32      // rlen: bytes to read (answered: bytes read)
	Offset int64      // file offset
}

// ReadRequest is kXR_read. When HasArgs is set, the
// read_args (path id and any read-ahead hints) follow the header.
type ReadRequest struct {
	Handle    FileHandle    // fhandle of the open file
	Offset    int64         // file offset
	Length    int32         // rlen: bytes to read
	HasArgs   bool          // the optional arguments are present
	PathID    uint8         // pathid: data sub-stream, 0 for the main one
	ReadAhead []ReadSegment // read-ahead hints (readahead_list)
}

// RequestID returns ReqRead.
func (*ReadRequest) RequestID() RequestID { return ReqRead }

func (r *ReadRequest) marshal(p *[16]byte) []byte {
	copy(p[0:4], r.Handle[:])
	putU64(p[4:], uint64(r.Offset))
	putU32(p[12:], uint32(r.Length))
	if !r.HasArgs && len(r.ReadAhead) == 0 {
		return nil
	}
	b := make([]byte, 8, 8+readVItemLen*len(r.ReadAhead))
	b[0] = r.PathID
	for _, s := range r.ReadAhead {
		b = appendSegment(b, s)
	}
	return b
}

// PgReadRequest is kXR_pgread: a read whose answer carries a
// CRC32C per page.
type PgReadRequest struct {
	Handle  FileHandle // fhandle of the open file
	Offset  int64      // file offset
	Length  int32      // rlen: bytes to read
	HasArgs bool       // the optional arguments are present
	PathID  uint8      // pathid: data sub-stream, 0 for the main one
	Flags   uint8      // kXR_pgRetry
}

// RequestID returns ReqPgRead.
func (*PgReadRequest) RequestID() RequestID { return ReqPgRead }

func (r *PgReadRequest) marshal(p *[16]byte) []byte {
	copy(p[0:4], r.Handle[:])
	putU64(p[4:], uint64(r.Offset))
	putU32(p[12:], uint32(r.Length))
	if !r.HasArgs {
		return nil
	}
	return []byte{r.PathID, r.Flags}
}

// ReadVRequest is kXR_readv: a list of reads answered in one
// response.
type ReadVRequest struct {
	PathID   uint8         // pathid: data sub-stream, 0 for the main one
	Segments []ReadSegment // read_list, at most MaxReadVItems
}

// RequestID returns ReqReadV.
func (*ReadVRequest) RequestID() RequestID { return ReqReadV }

func (r *ReadVRequest) marshal(p *[16]byte) []byte {
	p[15] = r.PathID
	b := make([]byte, 0, readVItemLen*len(r.Segments))
	for _, s := range r.Segments {
		b = appendSegment(b, s)
	}
	return b
}

// WriteRequest is kXR_write. Data aliases the frame payload.
type WriteRequest struct {
	Handle FileHandle // fhandle of the open file
	Offset int64      // file offset
	PathID uint8      // pathid: data sub-stream, 0 for the main one
	Data   []byte     // payload; aliases the frame on decode
}

// RequestID returns ReqWrite.
func (*WriteRequest) RequestID() RequestID { return ReqWrite }

func (r *WriteRequest) marshal(p *[16]byte) []byte {
	copy(p[0:4], r.Handle[:])
	putU64(p[4:], uint64(r.Offset))
	p[12] = r.PathID
	return r.Data
}

// PgWriteRequest is kXR_pgwrite. Pages is the raw payload:
// CRC32C-prefixed pages as AppendPages builds them; DecodePages checks
// and extracts the data. Pages aliases the frame payload.
type PgWriteRequest struct {
	Handle FileHandle // fhandle of the open file
	Offset int64      // file offset
	PathID uint8      // pathid: data sub-stream, 0 for the main one
	Flags  uint8      // kXR_pgRetry
	Pages  []byte     // CRC32C-prefixed pages; aliases the frame on decode
}

// RequestID returns ReqPgWrite.
func (*PgWriteRequest) RequestID() RequestID { return ReqPgWrite }

func (r *PgWriteRequest) marshal(p *[16]byte) []byte {
	copy(p[0:4], r.Handle[:])
	putU64(p[4:], uint64(r.Offset))
	p[12], p[13] = r.PathID, r.Flags
	return r.Pages
}

// SyncRequest is kXR_sync.
type SyncRequest struct {
	Handle FileHandle // fhandle of the open file
}

// RequestID returns ReqSync.
func (*SyncRequest) RequestID() RequestID { return ReqSync }

func (r *SyncRequest) marshal(p *[16]byte) []byte {
	copy(p[0:4], r.Handle[:])
	return nil
}

// TruncateRequest is kXR_truncate: by Path when it is set, otherwise the
// open file Handle.
type TruncateRequest struct {
	Handle FileHandle // fhandle, used when Path is empty
	Size   int64      // new file size
	Path   string     // path; empty to truncate Handle
}

// RequestID returns ReqTruncate.
func (*TruncateRequest) RequestID() RequestID { return ReqTruncate }

func (r *TruncateRequest) marshal(p *[16]byte) []byte {
	copy(p[0:4], r.Handle[:])
	putU64(p[4:], uint64(r.Size))
	return []byte(r.Path)
}

// DirlistRequest is kXR_dirlist.
type DirlistRequest struct {
	Options uint8  // DirlistStat, DirlistCksum, DirlistOnline
	Path    string // path, optionally followed by ?CGI
}

// RequestID returns ReqDirlist.
func (*DirlistRequest) RequestID() RequestID { return ReqDirlist }

func (r *DirlistRequest) marshal(p *[16]byte) []byte {
	p[15] = r.Options
	return []byte(r.Path)
}

// MkdirRequest is kXR_mkdir.
type MkdirRequest struct {
	Options uint8  // MkdirPath
	Mode    uint16 // permission bits; kXR_ur..kXR_ox equal Unix 0400..0001
	Path    string // path, optionally followed by ?CGI
}

// RequestID returns ReqMkdir.
func (*MkdirRequest) RequestID() RequestID { return ReqMkdir }

func (r *MkdirRequest) marshal(p *[16]byte) []byte {
	p[0] = r.Options
	putU16(p[14:], r.Mode)
	return []byte(r.Path)
}

// RmdirRequest is kXR_rmdir.
type RmdirRequest struct {
	Path string // path, optionally followed by ?CGI
}

// RequestID returns ReqRmdir.
func (*RmdirRequest) RequestID() RequestID { return ReqRmdir }

func (r *RmdirRequest) marshal(*[16]byte) []byte { return []byte(r.Path) }

// RmRequest is kXR_rm.
type RmRequest struct {
	Path string // path, optionally followed by ?CGI
}

// RequestID returns ReqRm.
func (*RmRequest) RequestID() RequestID { return ReqRm }

func (r *RmRequest) marshal(*[16]byte) []byte { return []byte(r.Path) }

// MvRequest is kXR_mv. On the wire the two paths are separated by a blank
// and arg1len gives the length of the first.
type MvRequest struct {
	Source string // path renamed
	Target string // new path
}

// RequestID returns ReqMv.
func (*MvRequest) RequestID() RequestID { return ReqMv }

func (r *MvRequest) marshal(p *[16]byte) []byte {
	putU16(p[14:], uint16(len(r.Source)))
	return []byte(r.Source + " " + r.Target)
}

// QueryRequest is kXR_query (section 4.20). Args is the raw argument,
// typically a path with CGI or a list of configuration names; xrdfs ends
// it with a NUL byte.
type QueryRequest struct {
	InfoType uint16     // QueryCksum, QuerySpace, QueryConfig, QueryStats, ...
	Handle   FileHandle // fhandle, for queries about an open file
	Args     []byte     // raw argument bytes
}

// RequestID returns ReqQuery.
func (*QueryRequest) RequestID() RequestID { return ReqQuery }

func (r *QueryRequest) marshal(p *[16]byte) []byte {
	putU16(p[0:], r.InfoType)
	copy(p[4:8], r.Handle[:])
	return r.Args
}

// LocateRequest is kXR_locate.
type LocateRequest struct {
	Options uint16 // Locate* and kXR_open options
	Path    string // path, optionally followed by ?CGI
}

// RequestID returns ReqLocate.
func (*LocateRequest) RequestID() RequestID { return ReqLocate }

func (r *LocateRequest) marshal(p *[16]byte) []byte {
	putU16(p[0:], r.Options)
	return []byte(r.Path)
}

// EndsessRequest is kXR_endsess.
type EndsessRequest struct {
	SessionID [16]byte // sessid of the session to end
}

// RequestID returns ReqEndsess.
func (*EndsessRequest) RequestID() RequestID { return ReqEndsess }

func (r *EndsessRequest) marshal(p *[16]byte) []byte {
	*p = r.SessionID
	return nil
}

// BindRequest is kXR_bind: a new connection asks to become a data
// sub-stream of the logged-in session whose kXR_login answer carried
// SessionID. It has no payload.
type BindRequest struct {
	SessionID [16]byte // sessid from the main connection's login answer
}

// RequestID returns ReqBind.
func (*BindRequest) RequestID() RequestID { return ReqBind }

func (r *BindRequest) marshal(p *[16]byte) []byte {
	*p = r.SessionID
	return nil
}

// SetRequest is kXR_set (e.g. "appid ..." or "monitor ...").
type SetRequest struct {
	Modifier uint8  // should be zero
	Data     string // e.g. "appid name"
}

// RequestID returns ReqSet.
func (*SetRequest) RequestID() RequestID { return ReqSet }

func (r *SetRequest) marshal(p *[16]byte) []byte {
	p[15] = r.Modifier
	return []byte(r.Data)
}

// PrepareRequest is kXR_prepare.
type PrepareRequest struct {
	Options  uint8    // XPrepRequestOption flags
	Priority uint8    // prty
	Port     uint16   // port for notifications
	OptionsX uint16   // optionX: extended options such as kXR_evict
	Paths    []string // newline-separated on the wire
}

// RequestID returns ReqPrepare.
func (*PrepareRequest) RequestID() RequestID { return ReqPrepare }

func (r *PrepareRequest) marshal(p *[16]byte) []byte {
	p[0], p[1] = r.Options, r.Priority
	putU16(p[2:], r.Port)
	putU16(p[4:], r.OptionsX)
	return []byte(strings.Join(r.Paths, "\n"))
}

// ChmodRequest is kXR_chmod.
type ChmodRequest struct {
	Mode uint16 // permission bits; kXR_ur..kXR_ox equal Unix 0400..0001
	Path string // path, optionally followed by ?CGI
}

// RequestID returns ReqChmod.
func (*ChmodRequest) RequestID() RequestID { return ReqChmod }

func (r *ChmodRequest) marshal(p *[16]byte) []byte {
	putU16(p[14:], r.Mode)
	return []byte(r.Path)
}

// RawRequest is a request this package has no type for (kXR_writev, unknown codes, ...), kept as it arrived.
type RawRequest struct {
	ID      RequestID // request code
	Params  [16]byte  // the 16 parameter bytes
	Payload []byte    // the dlen bytes after the header
}

// RequestID returns the raw request code.
func (r *RawRequest) RequestID() RequestID { return r.ID }

func (r *RawRequest) marshal(p *[16]byte) []byte {
	*p = r.Params
	return r.Payload
}
