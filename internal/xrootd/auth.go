package xrootd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// Token authentication (the "ztn" security protocol of XRootD 5).
//
// A server that takes tokens ends its kXR_login answer, after the session
// id, with the protocols it offers: "&P=ztn,0:4096:" (ztn, option word 0,
// tokens up to 4096 bytes) and, when clients without a token may still
// log in, "&P=unix" after it, which such a client falls back to. The
// client then sends kXR_auth with credtype "ztn" and a credential of
// 12 bytes or more:
//
//	0  "ztn\0"       protocol id
//	4  0             version
//	5  'T'           the credential is a token ('S' would ask for the
//	                 server's accepted issuers, which is not offered)
//	6  2 bytes       reserved
//	8  uint16 BE     n: the token's length plus its NUL
//	10 token, NUL    n bytes
//	   (padding)
//
// It is answered kXR_ok (an empty body) or kXR_error kXR_AuthFailed; ztn
// has a single round. The XRootD client sends a token only under TLS.

// ztnParams is what the login answer offers for ztn: version 0, tokens of
// up to maxTokenLen bytes (the client refuses longer ones itself).
const (
	maxTokenLen = 4096
	ztnParams   = "&P=ztn,0:4096:"
	unixParams  = "&P=unix"
)

// ErrBadCredential is the error of a credential that cannot be parsed.
var ErrBadCredential = errors.New("xrootd: malformed credential")

// ParseZtnCredential returns the token of a ztn credential (the payload
// of kXR_auth with credtype "ztn").
func ParseZtnCredential(b []byte) (string, error) {
	if len(b) < 12 || string(b[:4]) != "ztn\x00" {
		return "", fmt.Errorf("%w: not a ztn credential", ErrBadCredential)
	}
	if b[4] != 0 {
		return "", fmt.Errorf("%w: ztn version %d", ErrBadCredential, b[4])
	}
	if b[5] != 'T' {
		return "", fmt.Errorf("%w: ztn operation %q is not a token", ErrBadCredential, b[5])
	}
	n := int(binary.BigEndian.Uint16(b[8:10]))
	if n < 2 || 10+n > len(b) || n-1 > maxTokenLen {
		return "", fmt.Errorf("%w: ztn token length %d in %d bytes", ErrBadCredential, n, len(b))
	}
	tok := b[10 : 10+n-1]
	if b[10+n-1] != 0 {
		return "", fmt.Errorf("%w: ztn token not NUL-terminated", ErrBadCredential)
	}
	for _, c := range tok {
		if c == 0 {
			return "", fmt.Errorf("%w: NUL inside the ztn token", ErrBadCredential)
		}
	}
	return string(tok), nil
}

// AppendZtnCredential appends the ztn credential carrying token to b, as
// the XRootD client builds it (two bytes of padding after the NUL).
func AppendZtnCredential(b []byte, token string) []byte {
	b = append(b, "ztn\x00"...)
	b = append(b, 0, 'T', 0, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(len(token)+1))
	b = append(b, token...)
	return append(b, 0, 0, 0)
}

// Identity is who a connection's client is.
type Identity struct {
	// Holder is the name of the token's holder when Authenticated, else
	// the user name the client gave at login (not verified).
	Holder string
	// Authenticated is set once the client has presented a valid token.
	Authenticated bool
	// TLS is set when the connection is under TLS.
	TLS bool
	// TokenRefused is set when the client presented a token that was not
	// accepted (it may then go on anonymously).
	TokenRefused bool
	// Grant is what the token allows, as Server.Tokens returned it; nil:
	// everything.
	Grant any
	// User and PID are what the client gave at login (not verified):
	// with Remote they name the client process, as XRootD's third-party
	// copy does ("user.pid@host").
	User string
	PID  int32
	// Remote is the client's address.
	Remote netip.AddrPort
}

type identityKey struct{}

// identityOf holds a session's identity for the contexts of its requests.
type identityOf func() Identity

// PeerIdentity returns the identity of the client whose request ctx is
// (the context a FileSystem method receives); the zero Identity outside a
// request.
func PeerIdentity(ctx context.Context) Identity {
	if f, ok := ctx.Value(identityKey{}).(identityOf); ok {
		return f()
	}
	return Identity{}
}
