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
// DefaultWait for its registration (xrootd's own bound: XRootD clients
// give up on a request the server has been silent about for a minute).
const (
	DefaultTTL  = 15 * time.Second
	MaxTTL      = 60 * time.Second
	DefaultWait = 15 * time.Second
)

// MaxWaiting bounds the pulls that wait for their registration at once,
// by default; more are refused at once.
const MaxWaiting = 1024

// ErrNotAuthorized is the error of a pull that no registration lets in.
// Its message says no more than that: what did not match goes to
// Keys.Refused, for the log, not to whoever tried.
var ErrNotAuthorized = errors.New("tpc authorization failed: no client registered this key for this file and destination (or it expired)")

// ErrKeyInUse is the error of a registration of a key that another
// client registered.
var ErrKeyInUse = errors.New("tpc key in use by another client")

// Keys holds a source's registrations: the keys that clients gave, each
// letting one pull in. The zero value is not usable; use NewKeys.
type Keys struct {
	// Resolve looks up a host name; net.DefaultResolver's by default.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Now is the clock; time.Now by default.
	Now func() time.Time
	// Wait bounds how long a pull waits for its registration. Default
	// DefaultWait.
	Wait time.Duration
	// MaxWaiting bounds the pulls waiting at once. Default MaxWaiting.
	MaxWaiting int
	// Refused, if set, is told why a pull was refused (for the log).
	Refused func(key, origin, path string, puller netip.Addr, reason error)

	mu      sync.Mutex
	regs    map[string]*registration
	waiters map[string]*waiter
	waiting int
	swept   time.Time
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
	return &Keys{regs: make(map[string]*registration), waiters: make(map[string]*waiter)}
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
// pull used it. A key registered by another client that has not expired
// is refused with ErrKeyInUse.
func (k *Keys) Register(id xrootd.Identity, key, path, dst string, ttl time.Duration) (release func(), err error) {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	now := k.now()
	r := &registration{
		user: id.User, pid: id.PID, client: id.Remote.Addr().Unmap(),
		path: path, dst: dst, expires: now.Add(min(ttl, MaxTTL)),
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.sweepLocked(now)
	if old := k.regs[key]; old != nil && now.Before(old.expires) &&
		(old.user != r.user || old.pid != r.pid || old.client != r.client) {
		return nil, ErrKeyInUse
	}
	k.regs[key] = r
	if w := k.waiters[key]; w != nil {
		close(w.ready)
		delete(k.waiters, key)
	}
	return func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.regs[key] == r {
			delete(k.regs, key)
		}
	}, nil
}

// sweepLocked drops the registrations past their time, at most once a
// second. k.mu is held.
func (k *Keys) sweepLocked(now time.Time) {
	if now.Sub(k.swept) < time.Second {
		return
	}
	k.swept = now
	for key, r := range k.regs {
		if now.After(r.expires) {
			delete(k.regs, key)
		}
	}
}

// Claim lets in the pull of path with key by the destination at puller
// on behalf of origin (tpc.org), using the key up; it waits for the
// registration when it has not come yet. A pull that does not match the
// registration uses the key up too (its copy is refused: someone else
// had its key) and, like one that never finds its registration, is
// refused with ErrNotAuthorized once the wait is over, so that a refusal
// tells nothing of what is registered.
func (k *Keys) Claim(ctx context.Context, key, origin, path string, puller netip.Addr) error {
	wait := k.Wait
	if wait <= 0 {
		wait = DefaultWait
	}
	maxWaiting := k.MaxWaiting
	if maxWaiting <= 0 {
		maxWaiting = MaxWaiting
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	refuse := func(reason error) error {
		if k.Refused != nil {
			k.Refused(key, origin, path, puller, reason)
		}
		select {
		case <-deadline.C:
			return ErrNotAuthorized
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for {
		k.mu.Lock()
		r := k.regs[key]
		if r != nil {
			delete(k.regs, key) // a key lets one pull in, matching or not
			expired := k.now().After(r.expires)
			k.mu.Unlock()
			if expired {
				return refuse(errors.New("the key expired"))
			}
			user, pid, host, err := parseOrigin(origin)
			if err == nil {
				err = k.match(ctx, r, user, pid, host, path, puller)
			}
			if err != nil {
				return refuse(err)
			}
			return nil
		}
		if k.waiting >= maxWaiting {
			k.mu.Unlock()
			if k.Refused != nil {
				k.Refused(key, origin, path, puller, errors.New("too many pulls wait for their keys"))
			}
			return ErrNotAuthorized
		}
		w := k.waiters[key]
		if w == nil {
			w = &waiter{ready: make(chan struct{})}
			k.waiters[key] = w
		}
		w.n++
		k.waiting++
		k.mu.Unlock()
		var err error
		select {
		case <-w.ready: // registered: look again
		case <-deadline.C:
			err = ErrNotAuthorized
		case <-ctx.Done():
			err = ctx.Err()
		}
		k.mu.Lock()
		k.waiting--
		if w.n--; w.n == 0 && k.waiters[key] == w {
			delete(k.waiters, key)
		}
		k.mu.Unlock()
		if err == ErrNotAuthorized && k.Refused != nil {
			k.Refused(key, origin, path, puller, fmt.Errorf("no client registered the key within %v", wait))
		}
		if err != nil {
			return err
		}
	}
}

// waiter is the pulls waiting for one key.
type waiter struct {
	ready chan struct{} // closed when the key is registered
	n     int
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
