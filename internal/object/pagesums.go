package object

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ecstore/ecstore/internal/archive"
)

// pageSums keeps the page checksum entries (archive.PageEntry) that
// random reads have read, so that later reads of the same group of
// blocks read only their pages: a random read otherwise costs its node
// two requests, one for the pages and one for their checksums.
//
// An entry is kept only once it has matched its ZIP entry's CRC-32, and
// it is named by the object's version, the archive's slot, the group's
// first block and the entry's length. What it holds never changes: an
// archive's checksum entries are written once for a version, and a
// rebuilt archive of the version holds the same bytes (docs/FORMAT.md §4),
// so nothing is ever invalidated. The least recently used entries go
// once the entries held, with a fixed overhead each, exceed the budget.
//
// A group is read whole only at its second miss within the latest
// seenMax missed groups: reads spread over more groups than the budget
// holds then keep reading only their own checksums, not an entry each. An
// entry that fails its CRC-32 is remembered as damaged, so that reads of
// its group read their own checksums without reading it again.
// Concurrent misses on one entry read it once.
type pageSums struct {
	budget int64

	mu      sync.Mutex
	used    int64
	recent  list.List // of *pageSumsEntry, the most recently used first
	byKey   map[pageSumsKey]*list.Element
	loading map[pageSumsKey]*pageSumsLoad
	// seen holds the groups missed once, oldest first in seenOrder (a
	// ring of seenMax, next the slot to fill).
	seen      map[pageSumsKey]struct{}
	seenOrder []pageSumsKey
	next      int
}

type pageSumsKey struct {
	version archive.Version
	slot    int
	first   int64
	size    int64
}

type pageSumsEntry struct {
	key pageSumsKey
	b   []byte // nil for an entry that failed its CRC-32
}

// pageSumsLoad is an entry being read; done is closed when b or err is
// set.
type pageSumsLoad struct {
	done chan struct{}
	b    []byte
	err  error
}

const (
	// seenMax is how many groups missed once the cache remembers.
	seenMax = 4096
	// entryOverhead is what the cache charges an entry besides its bytes
	// (map slot, list element, key).
	entryOverhead = 160
)

// entryState is what the cache knows of an entry.
type entryState int

const (
	entryAbsent  entryState = iota
	entryHeld               // its checksums are held
	entryDamaged            // it failed its CRC-32
)

// newPageSums returns a cache of budget bytes, or nil (no cache) when
// budget is not positive.
func newPageSums(budget int64) *pageSums {
	if budget <= 0 {
		return nil
	}
	return &pageSums{budget: budget, byKey: make(map[pageSumsKey]*list.Element),
		loading: make(map[pageSumsKey]*pageSumsLoad), seen: make(map[pageSumsKey]struct{})}
}

// holds reports whether an entry of size bytes is kept at all: one larger
// than an eighth of the budget (of chunks of more than 16 MiB at the
// default budget: an entry is a sixteenth of a chunk) would push out too
// many others, and reads then fetch only their own block's checksums.
func (c *pageSums) holds(size int64) bool {
	return c != nil && size <= c.budget/8
}

// lookup returns what the cache holds of key.
func (c *pageSums) lookup(key pageSumsKey) ([]byte, entryState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lookupLocked(key)
}

// lookupLocked is lookup with c.mu held.
func (c *pageSums) lookupLocked(key pageSumsKey) ([]byte, entryState) {
	el, ok := c.byKey[key]
	if !ok {
		return nil, entryAbsent
	}
	c.recent.MoveToFront(el)
	if b := el.Value.(*pageSumsEntry).b; b != nil {
		return b, entryHeld
	}
	return nil, entryDamaged
}

// admit records a miss of key and reports whether key was missed before,
// among the latest seenMax missed groups: the entry is then worth
// reading whole.
func (c *pageSums) admit(key pageSumsKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[key]; ok {
		return true
	}
	if len(c.seenOrder) < seenMax {
		c.seenOrder = append(c.seenOrder, key)
	} else {
		delete(c.seen, c.seenOrder[c.next])
		c.seenOrder[c.next] = key
		c.next = (c.next + 1) % seenMax
	}
	c.seen[key] = struct{}{}
	return false
}

// get returns the entry of key, reading it with load (which must check
// it) unless it is held or being read; loaded says whether this call
// read it. A load that fails with archive.ErrChecksum marks the entry
// damaged; other failures are not kept, and are returned to the callers
// that waited for the load, except a failure of the loader's own context,
// after which a waiter whose context is live loads the entry itself.
func (c *pageSums) get(ctx context.Context, key pageSumsKey, load func(context.Context) ([]byte, error)) (b []byte, loaded bool, err error) {
	for {
		c.mu.Lock()
		switch b, st := c.lookupLocked(key); st {
		case entryHeld:
			c.mu.Unlock()
			return b, false, nil
		case entryDamaged:
			c.mu.Unlock()
			return nil, false, errDamagedEntry
		}
		l, waiting := c.loading[key]
		if !waiting {
			break
		}
		c.mu.Unlock()
		select {
		case <-l.done:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
		if l.err == nil || !isContextError(l.err) || ctx.Err() != nil {
			return l.b, false, l.err
		}
	}
	l := &pageSumsLoad{done: make(chan struct{})}
	c.loading[key] = l
	c.mu.Unlock()

	l.b, l.err = load(ctx)
	c.mu.Lock()
	delete(c.loading, key)
	switch {
	case l.err == nil:
		c.add(key, l.b)
	case errors.Is(l.err, archive.ErrChecksum):
		c.add(key, nil)
	}
	c.mu.Unlock()
	close(l.done)
	return l.b, true, l.err
}

// add keeps b (nil for a damaged entry) as key's entry. c.mu must be held.
func (c *pageSums) add(key pageSumsKey, b []byte) {
	c.byKey[key] = c.recent.PushFront(&pageSumsEntry{key: key, b: b})
	c.used += int64(len(b)) + entryOverhead
	for c.used > c.budget {
		old := c.recent.Remove(c.recent.Back()).(*pageSumsEntry)
		delete(c.byKey, old.key)
		c.used -= int64(len(old.b)) + entryOverhead
	}
}

// errDamagedEntry is get's answer for an entry known to fail its CRC-32.
var errDamagedEntry = fmt.Errorf("%w: page checksum entry damaged before", archive.ErrChecksum)

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
