package xrootd

import (
	"encoding/binary"
	"strconv"
)

// Protocol version and server kind values exchanged at connection setup
// (XProtocol.hh, section 2.1 and 4.19).
const (
	// ProtocolVersion is the protocol version this package speaks, 5.1.0.
	ProtocolVersion int32 = 0x00000511
	// ProtocolVersionNoPgRW is the version a server without page
	// checksums reports (Server.NoPageChecksums): XRootD clients use
	// kXR_pgread and kXR_pgwrite with servers of ProtocolVersion and
	// later (kXR_PROTPGRWVERSION), and nothing else differs.
	ProtocolVersionNoPgRW int32 = 0x00000510
	// DataServer is the server type sent in the handshake response
	// (kXR_DataServer).
	DataServer int32 = 1
	// LoadBalancer is the server type a redirector (an XRootD
	// manager) sends in the handshake response (kXR_LBalServer).
	LoadBalancer int32 = 0
)

// Sizes of the fixed parts of frames.
const (
	// HandshakeLen is the length of the client's initial handshake.
	HandshakeLen = 20
	// RequestHeaderLen is the length of a request header: streamid[2],
	// requestid, 16 bytes of parameters and dlen.
	RequestHeaderLen = 24
	// ResponseHeaderLen is the length of a response header: streamid[2],
	// status and dlen.
	ResponseHeaderLen = 8
	// StatusBodyLen is the minimum body of a kXR_status response
	// (ServerResponseBody_Status).
	StatusBodyLen = 16
)

// StreamID identifies one outstanding request on a connection; the server
// echoes it in every response frame for that request.
type StreamID [2]byte

// String formats the stream id as four hex digits.
func (s StreamID) String() string {
	return strconv.FormatUint(uint64(binary.BigEndian.Uint16(s[:])), 16)
}

// FileHandle is the opaque 4-byte handle the server returns from kXR_open.
type FileHandle [4]byte

// RequestID is a client request code (XRequestTypes).
type RequestID uint16

// Client request codes.
const (
	ReqAuth     RequestID = 3000 // kXR_auth
	ReqQuery    RequestID = 3001 // kXR_query
	ReqChmod    RequestID = 3002 // kXR_chmod
	ReqClose    RequestID = 3003 // kXR_close
	ReqDirlist  RequestID = 3004 // kXR_dirlist
	ReqGPFile   RequestID = 3005 // kXR_gpfile
	ReqProtocol RequestID = 3006 // kXR_protocol
	ReqLogin    RequestID = 3007 // kXR_login
	ReqMkdir    RequestID = 3008 // kXR_mkdir
	ReqMv       RequestID = 3009 // kXR_mv
	ReqOpen     RequestID = 3010 // kXR_open
	ReqPing     RequestID = 3011 // kXR_ping
	ReqChkPoint RequestID = 3012 // kXR_chkpoint
	ReqRead     RequestID = 3013 // kXR_read
	ReqRm       RequestID = 3014 // kXR_rm
	ReqRmdir    RequestID = 3015 // kXR_rmdir
	ReqSync     RequestID = 3016 // kXR_sync
	ReqStat     RequestID = 3017 // kXR_stat
	ReqSet      RequestID = 3018 // kXR_set
	ReqWrite    RequestID = 3019 // kXR_write
	ReqFattr    RequestID = 3020 // kXR_fattr
	ReqPrepare  RequestID = 3021 // kXR_prepare
	ReqStatx    RequestID = 3022 // kXR_statx
	ReqEndsess  RequestID = 3023 // kXR_endsess
	ReqBind     RequestID = 3024 // kXR_bind
	ReqReadV    RequestID = 3025 // kXR_readv
	ReqPgWrite  RequestID = 3026 // kXR_pgwrite
	ReqLocate   RequestID = 3027 // kXR_locate
	ReqTruncate RequestID = 3028 // kXR_truncate
	ReqSigver   RequestID = 3029 // kXR_sigver
	ReqPgRead   RequestID = 3030 // kXR_pgread
	ReqWriteV   RequestID = 3031 // kXR_writev
)

var requestNames = [...]string{
	"auth", "query", "chmod", "close", "dirlist", "gpfile", "protocol",
	"login", "mkdir", "mv", "open", "ping", "chkpoint", "read", "rm",
	"rmdir", "sync", "stat", "set", "write", "fattr", "prepare", "statx",
	"endsess", "bind", "readv", "pgwrite", "locate", "truncate", "sigver",
	"pgread", "writev",
}

// String returns the request name without the kXR_ prefix ("open"), or
// the number for unknown codes.
func (r RequestID) String() string {
	if r >= ReqAuth && int(r-ReqAuth) < len(requestNames) {
		return requestNames[r-ReqAuth]
	}
	return "request(" + strconv.Itoa(int(r)) + ")"
}

// Status is a server response status code (XResponseType).
type Status uint16

// Response status codes (section 2.4.1).
const (
	StatusOK       Status = 0    // kXR_ok
	StatusOKSoFar  Status = 4000 // kXR_oksofar
	StatusAttn     Status = 4001 // kXR_attn
	StatusAuthMore Status = 4002 // kXR_authmore
	StatusError    Status = 4003 // kXR_error
	StatusRedirect Status = 4004 // kXR_redirect
	StatusWait     Status = 4005 // kXR_wait
	StatusWaitResp Status = 4006 // kXR_waitresp
	StatusStatus   Status = 4007 // kXR_status
)

// String returns the status name without the kXR_ prefix.
func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusOKSoFar:
		return "oksofar"
	case StatusAttn:
		return "attn"
	case StatusAuthMore:
		return "authmore"
	case StatusError:
		return "error"
	case StatusRedirect:
		return "redirect"
	case StatusWait:
		return "wait"
	case StatusWaitResp:
		return "waitresp"
	case StatusStatus:
		return "status"
	}
	return "status(" + strconv.Itoa(int(s)) + ")"
}

// Response types carried in a kXR_status body (XrdProto::RespType).
const (
	RespFinal    uint8 = 0 // kXR_FinalResult
	RespPartial  uint8 = 1 // kXR_PartialResult
	RespProgress uint8 = 2 // kXR_ProgressInfo
)

// kXR_attn action codes.
const (
	attnAsyncMsg  int32 = 5002 // kXR_asyncms
	attnAsyncResp int32 = 5008 // kXR_asynresp
)

// Flags of the kXR_protocol request (ClientProtocolRequest::RequestFlags).
const (
	ProtoSecReqs uint8 = 0x01 // kXR_secreqs: return security requirements
	ProtoAbleTLS uint8 = 0x02 // kXR_ableTLS
	ProtoWantTLS uint8 = 0x04 // kXR_wantTLS
	ProtoBifReqs uint8 = 0x08 // kXR_bifreqs

	ProtoExpectLogin uint8 = 0x03 // kXR_ExpLogin
)

// Flags of the kXR_protocol response.
const (
	FlagIsServer  uint32 = 0x00000001 // kXR_isServer
	FlagIsManager uint32 = 0x00000002 // kXR_isManager
	FlagSupPgRW   uint32 = 0x00200000 // kXR_suppgrw: pgread/pgwrite supported
	FlagSupPOSC   uint32 = 0x00100000 // kXR_supposc
	FlagHaveTLS   uint32 = 0x80000000 // kXR_haveTLS
	FlagGotoTLS   uint32 = 0x40000000 // kXR_gotoTLS
	FlagTLSLogin  uint32 = 0x04000000 // kXR_tlsLogin: the login must be under TLS
)

// Login capability bits (XLoginCapVer, XLoginVersion).
const (
	loginAsyncCap uint8 = 128
	loginVer005   uint8 = 5
)

// OpenFlags are the options of a kXR_open request (XOpenRequestOption).
type OpenFlags uint16

// kXR_open options.
const (
	OpenCompress  OpenFlags = 0x0001 // kXR_compress
	OpenDelete    OpenFlags = 0x0002 // kXR_delete: create, truncating an existing file
	OpenForce     OpenFlags = 0x0004 // kXR_force
	OpenNew       OpenFlags = 0x0008 // kXR_new: create, failing if the file exists
	OpenRead      OpenFlags = 0x0010 // kXR_open_read
	OpenUpdate    OpenFlags = 0x0020 // kXR_open_updt: read and write
	OpenAsync     OpenFlags = 0x0040 // kXR_async
	OpenRefresh   OpenFlags = 0x0080 // kXR_refresh
	OpenMkpath    OpenFlags = 0x0100 // kXR_mkpath: create missing parent directories
	OpenAppend    OpenFlags = 0x0200 // kXR_open_apnd
	OpenRetStat   OpenFlags = 0x0400 // kXR_retstat: return stat information
	OpenReplica   OpenFlags = 0x0800 // kXR_replica
	OpenPOSC      OpenFlags = 0x1000 // kXR_posc: persist on successful close
	OpenNoWait    OpenFlags = 0x2000 // kXR_nowait
	OpenSeqIO     OpenFlags = 0x4000 // kXR_seqio
	OpenWriteOnly OpenFlags = 0x8000 // kXR_open_wrto
)

// Writable reports whether the flags open the file for writing.
func (f OpenFlags) Writable() bool {
	return f&(OpenDelete|OpenNew|OpenUpdate|OpenAppend|OpenWriteOnly) != 0
}

// Create reports whether the flags ask for the file to be created when it
// does not exist (kXR_new or kXR_delete).
func (f OpenFlags) Create() bool { return f&(OpenNew|OpenDelete) != 0 }

// Locate options that share bits with OpenFlags.
const (
	LocateNoWait   uint16 = 0x2000 // kXR_nowait
	LocateRefresh  uint16 = 0x0080 // kXR_refresh
	LocatePrefName uint16 = 0x0100 // kXR_prefname
	LocateDirlist  uint16 = 0x0400 // kXR_4dirlist
)

// Dirlist options (XDirlistRequestOption).
const (
	DirlistOnline uint8 = 1 // kXR_online
	DirlistStat   uint8 = 2 // kXR_dstat: return stat information per entry
	DirlistCksum  uint8 = 4 // kXR_dcksm: implies kXR_dstat
)

// Mkdir options.
const (
	MkdirPath uint8 = 1 // kXR_mkdirpath: create missing parents
)

// Stat options.
const (
	StatVFS uint8 = 1 // kXR_vfs: file system information
)

// StatFlags are the flags token of a stat response (XStatRespFlags).
type StatFlags uint32

// Stat response flags.
const (
	StatFile     StatFlags = 0   // kXR_file
	StatXset     StatFlags = 1   // kXR_xset: executable or searchable
	StatIsDir    StatFlags = 2   // kXR_isDir
	StatOther    StatFlags = 4   // kXR_other: neither file nor directory
	StatOffline  StatFlags = 8   // kXR_offline
	StatReadable StatFlags = 16  // kXR_readable
	StatWritable StatFlags = 32  // kXR_writable
	StatPOSCPend StatFlags = 64  // kXR_poscpend
	StatBkpExist StatFlags = 128 // kXR_bkpexist
)

// Query info types (XQueryType).
const (
	QueryStats  uint16 = 1 // kXR_QStats
	QueryPrep   uint16 = 2 // kXR_QPrep
	QueryCksum  uint16 = 3 // kXR_Qcksum
	QueryXattr  uint16 = 4 // kXR_Qxattr
	QuerySpace  uint16 = 5 // kXR_Qspace
	QueryCkscan uint16 = 6 // kXR_Qckscan
	QueryConfig uint16 = 7 // kXR_Qconfig
	QueryVisa   uint16 = 8 // kXR_Qvisa
	QueryOpaque uint16 = 16
	// QueryOpaqueFile is kXR_Qopaquf: an implementation's own query on a
	// path, which xrootd hands to its file system plugin (answering
	// kXR_Unsupported without one). ecstore's listing with attributes
	// (AttrLister) is one.
	QueryOpaqueFile uint16 = 32
)

// Page geometry of kXR_pgread and kXR_pgwrite (XrdProto namespace).
const (
	// PageSize is kXR_pgPageSZ, the unit covered by one CRC32C.
	PageSize = 4096
	// PageCRCLen is the length of the CRC32C that precedes every page on
	// the wire.
	PageCRCLen = 4
	// pgRetry is kXR_pgRetry in pgread/pgwrite reqflags.
	pgRetry uint8 = 0x01
)

// ReadV limits from XProtocol.hh: one readv element descriptor is 16
// bytes and a request carries at most maxRvecln bytes of descriptors.
const (
	readVItemLen    = 16
	MaxReadVItems   = 16384 / readVItemLen // XrdProto::maxRvecsz, 1024
	MaxReadVItemLen = 2097136              // readv_ior_max advertised by xrootd 5.5
)
