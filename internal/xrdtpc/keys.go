package xrdtpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/ecstore/ecstore/internal/xrootd"
)

// Key lifetimes: a registration not given a tpc.ttl waits DefaultTTL for
// its pull, one given a longer one at most MaxTTL; a pull waits up to
// MaxTTL for its registration.
const (
	DefaultTTL = 15 * time.Second
	MaxTTL     = 60 * time.Second
)

// ErrNotAuthorized is the error of a pull that no registration lets in.
var ErrNotAuthorized = errors.New("tpc authorization")

// Keys holds a source's registrations: the keys that clients gave, each
// letting one pull in. The zero value is not usable; use NewKeys.
type Keys struct {
	// Resolve looks up a host name; net.DefaultResolver's by default.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Now is the clock; time.Now by default.
	Now func() time.Time
	// Wait bounds how long a pull waits for its registration. Default
	// MaxTTL.
	Wait time.Duration

	mu      sync.Mutex
	regs    map[string]*registration
	changed chan struct{} // closed and replaced when a key is registered
}

type registration struct {
	user    string
	pid     int32
	client  netip.Addr
	path    string
	dst     string
	expires time.Time
}

// NewKeys returns an empty registry.
func NewKeys() *Keys {
	return &Keys{regs: make(map[string]*registration), changed: make(chan struct{})}
}

func (k *Keys) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

// Register records that the client id lets the destination dst pull
// path with key, for ttl (DefaultTTL when zero, at most MaxTTL).
// Release (the registering file's close) removes the registration if no
// pull used it.
func (k *Keys) Register(id xrootd.Identity, key, path, dst string, ttl time.Duration) (release func()) {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	r := &registration{
		user: id.User, pid: id.PID, client: id.Remote.Addr(),
		path: path, dst: dst, expires: k.now().Add(min(ttl, MaxTTL)),
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.expireLocked()
	k.regs[key] = r
	close(k.changed)
	k.changed = make(chan struct{})
	return func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.regs[key] == r {
			delete(k.regs, key)
		}
	}
}

// expireLocked drops the registrations past their time. k.mu is held.
func (k *Keys) expireLocked() {
	now := k.now()
	for key, r := range k.regs {
		if now.After(r.expires) {
			delete(k.regs, key)
		}
	}
}

// Claim lets in the pull of path with key by the destination at puller
// on behalf of origin (tpc.org), using the key up; it waits for the
// registration when it has not come yet. The error wraps
// ErrNotAuthorized and says what did not match.
func (k *Keys) Claim(ctx context.Context, key, origin, path string, puller netip.Addr) error {
	user, pid, host, err := parseOrigin(origin)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotAuthorized, err)
	}
	wait := k.Wait
	if wait <= 0 {
		wait = MaxTTL
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		k.mu.Lock()
		k.expireLocked()
		r, changed := k.regs[key], k.changed
		k.mu.Unlock()
		if r != nil {
			if err := k.match(ctx, r, user, pid, host, path, puller); err != nil {
				return fmt.Errorf("%w: %w", ErrNotAuthorized, err)
			}
			k.mu.Lock()
			defer k.mu.Unlock()
			if k.regs[key] != r {
				return fmt.Errorf("%w: key already used or released", ErrNotAuthorized)
			}
			delete(k.regs, key)
			return nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return fmt.Errorf("%w expired: no client registered this key (open the source with tpc.key and tpc.dst) within %v", ErrNotAuthorized, wait)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// match checks a pull against its registration.
func (k *Keys) match(ctx context.Context, r *registration, user string, pid int32, host, path string, puller netip.Addr) error {
	switch {
	case path != r.path:
		return fmt.Errorf("the key was given for %s, not %s", r.path, path)
	case user != r.user || pid != r.pid:
		return fmt.Errorf("the key was given by client %s.%d, not %s.%d", r.user, r.pid, user, pid)
	}
	if err := k.sameHost(ctx, host, r.client); err != nil {
		return fmt.Errorf("the key was given by a client at %s, not %s: %w", r.client, host, err)
	}
	if err := k.sameHost(ctx, r.dst, puller.Unmap()); err != nil {
		return fmt.Errorf("the key was given for destination %s, not %s: %w", r.dst, puller, err)
	}
	return nil
}

// errOtherHost is the reason of a host that is not the address asked.
var errOtherHost = errors.New("another host")

// sameHost returns nil when host (an address, or a name to resolve) is
// addr.
func (k *Keys) sameHost(ctx context.Context, host string, addr netip.Addr) error {
	ok, err := k.isHost(ctx, host, addr)
	if err == nil && !ok {
		err = errOtherHost
	}
	return err
}

// isHost reports whether host (an address, or a name to resolve) is addr.
func (k *Keys) isHost(ctx context.Context, host string, addr netip.Addr) (bool, error) {
	if a, ok := literalAddr(host); ok {
		return a == addr, nil
	}
	resolve := k.Resolve
	if resolve == nil {
		resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	addrs, err := resolve(ctx, host)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(addrs, func(a netip.Addr) bool { return a.Unmap() == addr }), nil
}
