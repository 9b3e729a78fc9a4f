package s3

import (
	"sync"
	"time"
)

// listingCache keeps the name listings of large directories for the
// pages that continue a listing. Without it, every page of a flat
// directory of n keys lists all n names from every node again (100000
// keys in pages of 1000 on 10 nodes: 2 s a page, 206 s in all). A page
// that continues a ListObjectsV2 listing (its continuation token, which
// only this gateway's pages hand out) takes the directory's listing if
// one made less than listingCacheAge ago is kept, and gives it back when
// done; any other page lists afresh, start-after and V1's marker
// included (a client that wrote a key and lists from scratch must see
// it). Objects removed since are found gone when the page describes
// them. A key written through this S3 front end drops the kept listing of
// its directory (changed), and a listing made before the write is not
// kept again; objects written otherwise (root://, another gateway) in the
// part of the directory not yet paged through are missed by the pages
// that take the cached listing, for at most listingCacheAge. A listing is
// used by one page at a time (DescribeListed keeps what it reads in it):
// one taken is out of the cache until given back, and a concurrent page
// lists afresh.
type listingCache struct {
	mu      sync.Mutex
	kept    map[string]keptListing // by directory path
	changed map[string]time.Time   // directories written to in the last maxAge, when
	names   int                    // names of every kept listing
	now     func() time.Time
	minLen  int // smaller listings are not kept: relisting them is cheap
	maxAge  time.Duration
	maxKept int // names in all
}

type keptListing struct {
	l  *dirListing
	at time.Time // when it was listed
}

const (
	listingCacheMinLen = 2000
	listingCacheAge    = 30 * time.Second
	listingCacheNames  = 200000
)

func newListingCache(now func() time.Time) *listingCache {
	return &listingCache{kept: map[string]keptListing{}, changed: map[string]time.Time{}, now: now,
		minLen: listingCacheMinLen, maxAge: listingCacheAge, maxKept: listingCacheNames}
}

// take returns the listing of dir kept for a continuing page, and when
// it was made, removing it from the cache; nil if none is fresh.
func (c *listingCache) take(dir string) (*dirListing, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.kept[dir]
	if !ok {
		return nil, time.Time{}
	}
	delete(c.kept, dir)
	c.names -= len(k.l.infos)
	if c.now().Sub(k.at) >= c.maxAge {
		return nil, time.Time{}
	}
	return k.l, k.at
}

// keep keeps l, the listing of dir made at at, for the next page, if it
// is large enough to be worth it and still fresh; the oldest listings
// make room for it.
func (c *listingCache) keep(dir string, l *dirListing, at time.Time) {
	if len(l.infos) < c.minLen || len(l.infos) > c.maxKept {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if now.Sub(at) >= c.maxAge {
		return
	}
	if w, ok := c.changed[dir]; ok && !at.After(w) {
		return // listed before a write to the directory
	}
	if old, ok := c.kept[dir]; ok {
		if old.at.After(at) {
			return // a newer listing is kept
		}
		c.names -= len(old.l.infos)
		delete(c.kept, dir)
	}
	for c.names+len(l.infos) > c.maxKept {
		oldest := ""
		for d, k := range c.kept {
			if oldest == "" || k.at.Before(c.kept[oldest].at) {
				oldest = d
			}
		}
		c.names -= len(c.kept[oldest].l.infos)
		delete(c.kept, oldest)
	}
	c.kept[dir] = keptListing{l: l, at: at}
	c.names += len(l.infos)
}

// changedDir drops the kept listing of dir, to which a key was just
// written or from which one was removed, and keeps any listing made
// before now from being kept again.
func (c *listingCache) changedDir(dir string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.changed) >= 1024 {
		for d, t := range c.changed {
			if now.Sub(t) >= c.maxAge {
				delete(c.changed, d)
			}
		}
	}
	c.changed[dir] = now
	if old, ok := c.kept[dir]; ok {
		c.names -= len(old.l.infos)
		delete(c.kept, dir)
	}
}
