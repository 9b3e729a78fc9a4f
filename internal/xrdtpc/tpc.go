// Package xrdtpc implements both ends of XRootD's native third-party copy
// ("xrdcp --tpc only root://src//f root://dst//g") for a server: the
// source, which lets a pull in on a key that the client registered, and
// the destination, which pulls the file from the source itself.
//
// The client (xrdcp) drives a copy with opens that carry "tpc." CGI:
//
//  1. it opens the destination for writing with tpc.key, tpc.src (the
//     source's host:port), tpc.lfn (the source path) and tpc.stage=copy;
//  2. it sends kXR_sync on that handle: the destination starts pulling,
//     opening tpc.lfn on the source with tpc.key and tpc.org (the client
//     process as "user.pid@host", as the destination saw it);
//  3. it opens the source for reading with tpc.key and tpc.dst (the
//     destination's host): the source now lets the pull in, once, if its
//     key, path and client process match and it comes from tpc.dst;
//  4. it sends kXR_sync again, answered when the pull has ended, and
//     closes both handles.
//
// The pull's open may reach the source before the client's registering
// open does (it usually does): the source waits for the registration.
// Keys live in one process: behind a load balancer, the pull must reach
// the gateway that the client registered its key with.
package xrdtpc

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ecstore/ecstore/internal/xrootd"
)

// Role is what an open does in a third-party copy, from its CGI.
type Role int

const (
	// RoleNone: a plain open (or the client asking the source for its size
	// with tpc.stage=placement, which is served as one).
	RoleNone Role = iota
	// RoleRegister: the client lets the destination pull from this source.
	RoleRegister
	// RolePull: the destination pulls from this source.
	RolePull
	// RoleDestination: the client asks this server to pull the file.
	RoleDestination
)

// Open is the third-party copy part of an open's CGI.
type Open struct {
	Role Role
	// Key is the copy's key (tpc.key), chosen by the client.
	Key string
	// Origin is the client process as the destination saw it (tpc.org,
	// Pull).
	Origin string
	// Dst is the destination's host (tpc.dst, Register).
	Dst string
	// TTL is how long a registration may wait for its pull (tpc.ttl,
	// Register); zero for the default.
	TTL time.Duration
	// Src is the source's host:port, Path the file there and SrcTLS
	// whether to reach it with TLS (tpc.src, tpc.lfn, tpc.spr;
	// Destination).
	Src    string
	Path   string
	SrcTLS bool
}

// ErrConflict is the error of an open whose tpc CGI does not describe one
// role.
var ErrConflict = errors.New("conflicting tpc cgi")

// ParseOpen finds the third-party copy role of an open from its CGI.
func ParseOpen(cgi url.Values) (Open, error) {
	for _, name := range []string{"tpc.key", "tpc.org", "tpc.dst", "tpc.src", "tpc.lfn", "tpc.spr", "tpc.ttl"} {
		if len(cgi[name]) > 1 {
			return Open{}, fmt.Errorf("%w: %s given twice", ErrConflict, name)
		}
	}
	key := cgi.Get("tpc.key")
	org, dst, src := cgi.Get("tpc.org"), cgi.Get("tpc.dst"), cgi.Get("tpc.src")
	if key == "" {
		if src != "" {
			return Open{}, fmt.Errorf("%w: tpc.src without tpc.key", ErrConflict)
		}
		return Open{}, nil // tpc.dst or tpc.org alone: a plain open
	}
	if len(key) > 256 || !plainCGIValue(key) {
		return Open{}, fmt.Errorf("%w: malformed tpc.key", ErrConflict)
	}
	o := Open{Key: key}
	switch {
	case src != "" && org == "" && dst == "":
		o.Role, o.Src, o.Path = RoleDestination, src, cgi.Get("tpc.lfn")
		if _, _, err := net.SplitHostPort(src); err != nil {
			return Open{}, fmt.Errorf("%w: tpc.src %q is not host:port", ErrConflict, src)
		}
		// The path goes before the pull's own CGI: a "?" or "&" in it
		// would let the client write the key and origin the source sees.
		if o.Path == "" || o.Path[0] != '/' || !plainPath(o.Path) {
			return Open{}, fmt.Errorf("%w: tpc.lfn %q is not an absolute path without CGI", ErrConflict, o.Path)
		}
		switch spr := cgi.Get("tpc.spr"); spr {
		case "", "root", "xroot":
		case "roots", "xroots":
			o.SrcTLS = true
		default:
			return Open{}, fmt.Errorf("%w: source protocol %q is not root or roots", ErrConflict, spr)
		}
	case dst != "" && org == "" && src == "":
		o.Role, o.Dst = RoleRegister, dst
		if s := cgi.Get("tpc.ttl"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return Open{}, fmt.Errorf("%w: tpc.ttl %q", ErrConflict, s)
			}
			o.TTL = time.Duration(min(n, int(MaxTTL/time.Second))) * time.Second
		}
	case org != "" && dst == "" && src == "":
		o.Role, o.Origin = RolePull, org
	default:
		return Open{}, ErrConflict
	}
	return o, nil
}

// Origin names the client of id as XRootD's third-party copy does:
// "user.pid@host", the host as an address in brackets (IPv4 addresses
// mapped into IPv6, as xrootd writes them).
func Origin(id xrootd.Identity) string {
	return fmt.Sprintf("%s.%d@%s", id.User, id.PID, hostOf(id.Remote.Addr()))
}

// hostOf writes addr as xrootd names an address it does not resolve.
func hostOf(addr netip.Addr) string {
	if addr.Is4() {
		addr = netip.AddrFrom16(addr.As16())
	}
	return "[" + addr.String() + "]"
}

// parseOrigin splits "user.pid@host".
func parseOrigin(s string) (user string, pid int32, host string, err error) {
	who, host, ok := strings.Cut(s, "@")
	i := strings.LastIndexByte(who, '.')
	if !ok || i < 0 || host == "" {
		return "", 0, "", fmt.Errorf("tpc.org %q is not user.pid@host", s)
	}
	n, err := strconv.ParseInt(who[i+1:], 10, 32)
	if err != nil {
		return "", 0, "", fmt.Errorf("tpc.org %q is not user.pid@host", s)
	}
	return who[:i], int32(n), host, nil
}

// literalAddr parses host as an address, in brackets or not; ok false
// for a name.
func literalAddr(host string) (netip.Addr, bool) {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// plainCGIValue reports whether v can stand in a CGI string as it is:
// printable ASCII without the characters that separate or escape CGI.
func plainCGIValue(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("?&=#%+", c) >= 0 {
			return false
		}
	}
	return true
}

// plainPath reports whether p can stand before a CGI string: no control
// characters and none of "?", "&", "#".
func plainPath(p string) bool {
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < ' ' || c == 0x7f || c == '?' || c == '&' || c == '#' {
			return false
		}
	}
	return true
}
