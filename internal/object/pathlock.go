package object

import (
	"context"
	"sync"
)

// pathLocks orders, within one gateway, the operations that change what
// the nodes hold at a path node by node: the renames of a commit and a
// removal. Two commits of the same path whose renames interleaved would
// leave some nodes with one version and the rest with the other, neither
// whole; a removal interleaved with a commit would leave a part of the
// new version behind. Gateways do not share these locks: writers of the
// same path through different gateways are not ordered (docs/OPERATIONS.md).
type pathLocks struct {
	mu   sync.Mutex
	held map[string]*pathLock
}

// pathLock is the lock of one path: a channel of one token, so that a
// waiter can give up with its context; users counts the holder and the
// waiters, and the lock is forgotten when the last leaves.
type pathLock struct {
	token chan struct{}
	users int
}

// lock waits for path's lock, or fails with ctx's error; unlock must be
// called once lock succeeded.
func (l *pathLocks) lock(ctx context.Context, path string) (unlock func(), err error) {
	l.mu.Lock()
	if l.held == nil {
		l.held = make(map[string]*pathLock)
	}
	pl := l.held[path]
	if pl == nil {
		pl = &pathLock{token: make(chan struct{}, 1)}
		l.held[path] = pl
	}
	pl.users++
	l.mu.Unlock()
	leave := func() {
		l.mu.Lock()
		if pl.users--; pl.users == 0 {
			delete(l.held, path)
		}
		l.mu.Unlock()
	}
	select {
	case pl.token <- struct{}{}:
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
	return func() {
		<-pl.token
		leave()
	}, nil
}

// InTurn runs fn in path's turn at this gateway: after the commits,
// removals, renames and rebuild commits of path in flight here, and
// before the next. Repair uses it to judge and remove a path's debris
// without a write of the path committing in between. fn must not call
// the Store's Remove, Rename or a Writer's Close for path (they wait for
// the turn fn holds).
func (s *Store) InTurn(ctx context.Context, path string, fn func(ctx context.Context) error) error {
	unlock, err := s.paths.lock(ctx, path)
	if err != nil {
		return err
	}
	defer unlock()
	return fn(ctx)
}
