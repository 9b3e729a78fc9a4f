package object

import (
	"container/list"
	"context"
	"sync"

	"github.com/ecstore/ecstore/internal/archive"
)

// pageSums keeps the page checksum entries (archive.PageEntry) that
// random reads have read, so that later reads of the same group of
// blocks read only their pages: a random read otherwise costs its node
// two requests, one for the pages and one for their checksums.
//
// An entry is kept only once it has matched its ZIP entry's CRC-32, and
// it is named by the object's version, the archive's slot and the
// group's first block: what it holds never changes (a rebuilt archive
// holds the same checksums), so nothing is ever invalidated. The least
// recently used entries go once the entries held exceed the budget.
// Concurrent misses on one entry read it once.
type pageSums struct {
	budget int64

	mu      sync.Mutex
	used    int64
	recent  list.List // of *pageSumsEntry, the most recently used first
	byKey   map[pageSumsKey]*list.Element
	loading map[pageSumsKey]*pageSumsLoad
}

type pageSumsKey struct {
	version archive.Version
	slot    int
	first   int64
}

type pageSumsEntry struct {
	key pageSumsKey
	b   []byte
}

// pageSumsLoad is an entry being read; done is closed when b or err is
// set.
type pageSumsLoad struct {
	done chan struct{}
	b    []byte
	err  error
}

// newPageSums returns a cache of budget bytes, or nil (no cache) when
// budget is not positive.
func newPageSums(budget int64) *pageSums {
	if budget <= 0 {
		return nil
	}
	return &pageSums{budget: budget, byKey: make(map[pageSumsKey]*list.Element), loading: make(map[pageSumsKey]*pageSumsLoad)}
}

// holds reports whether an entry of size bytes is kept at all: one larger
// than an eighth of the budget (of chunks of more than 2 MiB at the
// default budget) would push out too many others, and reads then fetch
// only their own block's checksums.
func (c *pageSums) holds(size int64) bool {
	return c != nil && size <= c.budget/8
}

// lookup returns the entry of key if it is held.
func (c *pageSums) lookup(key pageSumsKey) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok {
		return nil, false
	}
	c.recent.MoveToFront(el)
	return el.Value.(*pageSumsEntry).b, true
}

// get returns the entry of key, reading it with load (which must check
// it) when it is not held; hit says whether it was. A load that fails is
// not kept, and its error is returned to every caller that waited for
// it.
func (c *pageSums) get(ctx context.Context, key pageSumsKey, load func(context.Context) ([]byte, error)) (b []byte, hit bool, err error) {
	c.mu.Lock()
	if el, ok := c.byKey[key]; ok {
		c.recent.MoveToFront(el)
		c.mu.Unlock()
		return el.Value.(*pageSumsEntry).b, true, nil
	}
	if l, ok := c.loading[key]; ok {
		c.mu.Unlock()
		select {
		case <-l.done:
			return l.b, false, l.err
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
	l := &pageSumsLoad{done: make(chan struct{})}
	c.loading[key] = l
	c.mu.Unlock()

	l.b, l.err = load(ctx)
	c.mu.Lock()
	delete(c.loading, key)
	if l.err == nil {
		c.byKey[key] = c.recent.PushFront(&pageSumsEntry{key: key, b: l.b})
		c.used += int64(len(l.b))
		for c.used > c.budget {
			old := c.recent.Remove(c.recent.Back()).(*pageSumsEntry)
			delete(c.byKey, old.key)
			c.used -= int64(len(old.b))
		}
	}
	c.mu.Unlock()
	close(l.done)
	return l.b, false, l.err
}
