package xrootd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"strconv"
	"strings"
	"syscall"
)

// ErrorCode is the errnum of a kXR_error response (XErrorCode).
type ErrorCode int32

// kXR_error codes with their XProtocol.hh values (section 2.4.4.1).
const (
	ErrArgInvalid     ErrorCode = 3000 // kXR_ArgInvalid
	ErrArgMissing     ErrorCode = 3001 // kXR_ArgMissing
	ErrArgTooLong     ErrorCode = 3002 // kXR_ArgTooLong
	ErrFileLocked     ErrorCode = 3003 // kXR_FileLocked
	ErrFileNotOpen    ErrorCode = 3004 // kXR_FileNotOpen
	ErrFSError        ErrorCode = 3005 // kXR_FSError
	ErrInvalidRequest ErrorCode = 3006 // kXR_InvalidRequest
	ErrIOError        ErrorCode = 3007 // kXR_IOError
	ErrNoMemory       ErrorCode = 3008 // kXR_NoMemory
	ErrNoSpace        ErrorCode = 3009 // kXR_NoSpace
	ErrNotAuthorized  ErrorCode = 3010 // kXR_NotAuthorized
	ErrNotFound       ErrorCode = 3011 // kXR_NotFound
	ErrServerError    ErrorCode = 3012 // kXR_ServerError
	ErrUnsupported    ErrorCode = 3013 // kXR_Unsupported
	ErrNoServer       ErrorCode = 3014 // kXR_noserver
	ErrNotFile        ErrorCode = 3015 // kXR_NotFile
	ErrIsDirectory    ErrorCode = 3016 // kXR_isDirectory
	ErrCancelled      ErrorCode = 3017 // kXR_Cancelled
	ErrItExists       ErrorCode = 3018 // kXR_ItExists
	ErrChkSumErr      ErrorCode = 3019 // kXR_ChkSumErr
	ErrInProgress     ErrorCode = 3020 // kXR_inProgress
	ErrOverQuota      ErrorCode = 3021 // kXR_overQuota
	ErrSigVerErr      ErrorCode = 3022 // kXR_SigVerErr
	ErrDecryptErr     ErrorCode = 3023 // kXR_DecryptErr
	ErrOverloaded     ErrorCode = 3024 // kXR_Overloaded
	ErrFSReadOnly     ErrorCode = 3025 // kXR_fsReadOnly
	ErrBadPayload     ErrorCode = 3026 // kXR_BadPayload
	ErrAttrNotFound   ErrorCode = 3027 // kXR_AttrNotFound
	ErrTLSRequired    ErrorCode = 3028 // kXR_TLSRequired
	ErrNoReplicas     ErrorCode = 3029 // kXR_noReplicas
	ErrAuthFailed     ErrorCode = 3030 // kXR_AuthFailed
	ErrImpossible     ErrorCode = 3031 // kXR_Impossible
	ErrConflict       ErrorCode = 3032 // kXR_Conflict
	ErrTooManyErrs    ErrorCode = 3033 // kXR_TooManyErrs
	ErrReqTimedOut    ErrorCode = 3034 // kXR_ReqTimedOut
)

var errorNames = [...]string{
	"ArgInvalid", "ArgMissing", "ArgTooLong", "FileLocked", "FileNotOpen",
	"FSError", "InvalidRequest", "IOError", "NoMemory", "NoSpace",
	"NotAuthorized", "NotFound", "ServerError", "Unsupported", "noserver",
	"NotFile", "isDirectory", "Cancelled", "ItExists", "ChkSumErr",
	"inProgress", "overQuota", "SigVerErr", "DecryptErr", "Overloaded",
	"fsReadOnly", "BadPayload", "AttrNotFound", "TLSRequired", "noReplicas",
	"AuthFailed", "Impossible", "Conflict", "TooManyErrs", "ReqTimedOut",
}

// String returns the code's name without the kXR_ prefix ("NotFound").
func (c ErrorCode) String() string {
	if c >= ErrArgInvalid && int(c-ErrArgInvalid) < len(errorNames) {
		return errorNames[c-ErrArgInvalid]
	}
	return "error(" + strconv.Itoa(int(c)) + ")"
}

// Error is a kXR_error response: the server's error code and message. The
// Server sends handler errors of this type as they are; the Client
// returns one for every kXR_error it receives.
//
// errors.Is(err, fs.ErrNotExist) holds for kXR_NotFound, fs.ErrExist for
// kXR_ItExists, fs.ErrPermission for kXR_NotAuthorized and kXR_fsReadOnly,
// fs.ErrInvalid for kXR_ArgInvalid and errors.ErrUnsupported for
// kXR_Unsupported.
type Error struct {
	Code    ErrorCode // errnum
	Message string    // errmsg, without the terminating NUL
}

// Error formats the error as "xrootd: [3011 NotFound] message".
func (e *Error) Error() string {
	return fmt.Sprintf("xrootd: [%d %s] %s", int32(e.Code), e.Code, e.Message)
}

// Is maps protocol error codes onto the io/fs and errors sentinels.
func (e *Error) Is(target error) bool {
	switch target {
	case fs.ErrNotExist:
		return e.Code == ErrNotFound
	case fs.ErrExist:
		return e.Code == ErrItExists
	case fs.ErrPermission:
		return e.Code == ErrNotAuthorized || e.Code == ErrFSReadOnly
	case fs.ErrInvalid:
		return e.Code == ErrArgInvalid
	case errors.ErrUnsupported:
		return e.Code == ErrUnsupported
	}
	return false
}

// Errorf returns an *Error with code and a formatted message, for handlers
// that want to choose the code sent to the client.
func Errorf(code ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Sentinel errors of the codec and of the client. Test with errors.Is.
var (
	// ErrFrameTooLarge reports a frame whose declared length exceeds the
	// configured limit.
	ErrFrameTooLarge = errors.New("xrootd: frame too large")
	// ErrTruncated reports a frame that ended before its declared length.
	ErrTruncated = errors.New("xrootd: truncated frame")
	// ErrMalformed reports a frame or body that does not follow the
	// protocol.
	ErrMalformed = errors.New("xrootd: malformed message")
	// ErrBadHandshake reports an initial handshake that is not XRootD's.
	ErrBadHandshake = errors.New("xrootd: bad handshake")
	// ErrChecksum reports a pgread or pgwrite page whose CRC32C does not
	// match its data, or a kXR_status body with a bad CRC32C.
	ErrChecksum = errors.New("xrootd: page checksum mismatch")
	// ErrClosed reports use of a closed Client or ClientFile.
	ErrClosed = errors.New("xrootd: connection closed")
	// ErrNotSent reports a request that never left the client: its
	// connection had failed (the error wraps ErrClosed too) before the
	// request was written to it. It may be sent again on another
	// connection, even if it is not idempotent (a kXR_mv, a kXR_rm).
	ErrNotSent = errors.New("xrootd: request not sent")
	// ErrSlowCaller reports an answer given up because its caller did
	// not take its parts (a ListAttrEach callback that blocks) while
	// the connection's other requests waited behind it.
	ErrSlowCaller = errors.New("xrootd: caller too slow to take its answer")
	// ErrServerClosed is returned by Server.Serve after Shutdown.
	ErrServerClosed = errors.New("xrootd: server closed")
)

// RedirectError is returned by the Client when a server answers
// kXR_redirect and the Client does not follow it (see Client).
type RedirectError struct {
	Host string // host name, possibly followed by "?opaque[?token]"
	// Port is the port to connect to: 0 for the default, 1094; < 0
	// when Host is a URL.
	Port int32
}

// Error formats the redirect target, host:port (or the URL), without
// the opaque CGI.
func (e *RedirectError) Error() string {
	if e.Port < 0 {
		if u, err := url.Parse(e.Host); err == nil {
			u.RawQuery = ""
			return "xrootd: redirected to " + u.String()
		}
		return fmt.Sprintf("xrootd: redirected to %q", e.Host)
	}
	host, _, _ := strings.Cut(e.Host, "?")
	port := int(e.Port)
	if port == 0 {
		port = 1094
	}
	return fmt.Sprintf("xrootd: redirected to %s", net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(port)))
}

// errnoCodes is XProtocol::mapError, the official errno → error code map.
var errnoCodes = map[syscall.Errno]ErrorCode{
	syscall.ENOENT:        ErrNotFound,
	syscall.EINVAL:        ErrArgInvalid,
	syscall.EPERM:         ErrNotAuthorized,
	syscall.EACCES:        ErrNotAuthorized,
	syscall.EIO:           ErrIOError,
	syscall.ENOMEM:        ErrNoMemory,
	syscall.ENOBUFS:       ErrNoMemory,
	syscall.ENOSPC:        ErrNoSpace,
	syscall.ENAMETOOLONG:  ErrArgTooLong,
	syscall.ENETUNREACH:   ErrNoServer,
	syscall.ENOTBLK:       ErrNotFile,
	syscall.ENOTSUP:       ErrUnsupported,
	syscall.EISDIR:        ErrIsDirectory,
	syscall.EEXIST:        ErrItExists,
	syscall.ETXTBSY:       ErrInProgress,
	syscall.ENODEV:        ErrFSError,
	syscall.EFAULT:        ErrServerError,
	syscall.EDOM:          ErrChkSumErr,
	syscall.EDQUOT:        ErrOverQuota,
	syscall.EILSEQ:        ErrSigVerErr,
	syscall.ERANGE:        ErrDecryptErr,
	syscall.EUSERS:        ErrOverloaded,
	syscall.EROFS:         ErrFSReadOnly,
	syscall.EPROTOTYPE:    ErrTLSRequired,
	syscall.EADDRNOTAVAIL: ErrNoReplicas,
	syscall.EIDRM:         ErrImpossible,
	syscall.ENOTTY:        ErrConflict,
	syscall.ETOOMANYREFS:  ErrTooManyErrs,
	syscall.ETIMEDOUT:     ErrReqTimedOut,
	syscall.EBADF:         ErrFileNotOpen,
	syscall.ECANCELED:     ErrCancelled,
}

// toProtocolError converts a handler error into the code and message sent
// in a kXR_error response. Unknown errors become kXR_ServerError.
func toProtocolError(err error) *Error {
	var xe *Error
	if errors.As(err, &xe) {
		return xe
	}
	msg := err.Error()
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if c, ok := errnoCodes[errno]; ok {
			return &Error{Code: c, Message: msg}
		}
		return &Error{Code: ErrFSError, Message: msg}
	}
	code := ErrServerError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		code = ErrNotFound
	case errors.Is(err, fs.ErrExist):
		code = ErrItExists
	case errors.Is(err, fs.ErrPermission):
		code = ErrNotAuthorized
	case errors.Is(err, fs.ErrInvalid):
		code = ErrArgInvalid
	case errors.Is(err, fs.ErrClosed):
		code = ErrFileNotOpen
	case errors.Is(err, errors.ErrUnsupported):
		code = ErrUnsupported
	case errors.Is(err, ErrChecksum):
		code = ErrChkSumErr
	case errors.Is(err, context.Canceled):
		code = ErrCancelled
	case errors.Is(err, context.DeadlineExceeded):
		code = ErrReqTimedOut
	}
	return &Error{Code: code, Message: msg}
}
