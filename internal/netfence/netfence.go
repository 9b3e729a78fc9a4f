// Package netfence keeps the connections a client directs, the sources
// and destinations of third-party copies, away from the addresses that
// only the gateway itself should reach: its storage nodes, which serve
// whoever reaches them on their private network (a copy from one would
// hand a client the raw archives of objects it may not read), and
// link-local, unspecified and multicast addresses (a cloud's metadata
// service at 169.254.169.254). The check is made on the address a dialer
// connects to, after name resolution and on every redirect, so that a
// name or a redirect that leads to a fenced address is refused too.
package netfence

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// ErrFenced is the error of a connection to a fenced address.
var ErrFenced = errors.New("netfence: address not reachable by client-directed transfers")

// Fence refuses connections to the storage nodes' addresses and to
// link-local, unspecified and multicast ones. The zero Fence, and a nil
// one, fence only the latter. It is safe for concurrent use.
type Fence struct {
	nodes []string // host:port of every node

	mu       sync.Mutex
	resolved map[netip.AddrPort]bool // the nodes' addresses, as last resolved
	at       time.Time               // when
	lookup   func(ctx context.Context, host string) ([]netip.Addr, error)
	// interfaces lists this host's addresses (net.InterfaceAddrs).
	interfaces func() ([]net.Addr, error)
}

// resolveEvery is how long the nodes' resolved addresses are used before
// their names are resolved again.
const resolveEvery = time.Minute

// New returns a fence around the nodes at addrs (host:port each).
func New(addrs []string) *Fence {
	return &Fence{nodes: addrs, interfaces: net.InterfaceAddrs, lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
		return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	}}
}

// localAddrs is this host's addresses, loopback ones always included.
func (f *Fence) localAddrs() map[netip.Addr]bool {
	local := map[netip.Addr]bool{netip.MustParseAddr("127.0.0.1"): true, netip.IPv6Loopback(): true}
	if f.interfaces == nil {
		return local
	}
	addrs, _ := f.interfaces()
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			local[p.Addr().Unmap()] = true
		}
	}
	return local
}

// Check refuses address, a literal ip:port as a dialer is about to
// connect to.
func (f *Fence) Check(address string) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %q is not an ip:port", ErrFenced, address)
	}
	ip := ap.Addr().Unmap()
	if ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() ||
		ip.IsMulticast() || ip.IsUnspecified() {
		return fmt.Errorf("%w: %s", ErrFenced, address)
	}
	if f != nil && f.nodeAddrs()[netip.AddrPortFrom(ip, ap.Port())] {
		return fmt.Errorf("%w: %s is a storage node", ErrFenced, address)
	}
	return nil
}

// Control is a net.Dialer Control hook that applies Check.
func (f *Fence) Control(_, address string, _ syscall.RawConn) error { return f.Check(address) }

// DialContext dials addr as a net.Dialer with the fence as its Control.
func (f *Fence) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 30 * time.Second, Control: f.Control}
	return d.DialContext(ctx, network, addr)
}

// nodeAddrs returns the nodes' addresses, resolving their names when the
// last resolution is older than resolveEvery. A name that does not
// resolve now fences nothing until it does.
func (f *Fence) nodeAddrs() map[netip.AddrPort]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.resolved != nil && time.Since(f.at) < resolveEvery {
		return f.resolved
	}
	m := make(map[netip.AddrPort]bool)
	local := f.localAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, hp := range f.nodes {
		host, portText, err := net.SplitHostPort(hp)
		if err != nil {
			continue
		}
		port, err := net.LookupPort("tcp", portText)
		if err != nil {
			continue
		}
		var ips []netip.Addr
		if ip, err := netip.ParseAddr(host); err == nil {
			ips = []netip.Addr{ip}
		} else if ips, err = f.lookup(ctx, host); err != nil {
			continue
		}
		for _, ip := range ips {
			ip = ip.Unmap()
			m[netip.AddrPortFrom(ip, uint16(port))] = true
			if ip.IsUnspecified() || ip.IsLoopback() || local[ip] {
				// A node on this host may listen on every address: it is
				// fenced on all of this host's addresses.
				for l := range local {
					m[netip.AddrPortFrom(l, uint16(port))] = true
				}
			}
		}
	}
	f.resolved, f.at = m, time.Now()
	return m
}
