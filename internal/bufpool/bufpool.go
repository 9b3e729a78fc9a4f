// Package bufpool recycles the large byte buffers of the data path
// (request payloads, chunks, response frames) by size class. A transfer
// then reuses a handful of megabyte buffers instead of allocating one per
// request, which keeps the garbage collector from letting the heap grow to
// a multiple of what is live.
//
// Buffers smaller than Granule are not pooled: allocating them is cheap.
package bufpool

import "sync"

// Granule is the size-class step: a buffer of n bytes comes from the class
// of n rounded up to a multiple of Granule.
const Granule = 64 << 10

var classes sync.Map // class size -> *sync.Pool of *[]byte

// Class is the capacity of the pooled buffers that serve n bytes.
func Class(n int) int { return (n + Granule - 1) / Granule * Granule }

func pool(class int) *sync.Pool {
	if p, ok := classes.Load(class); ok {
		return p.(*sync.Pool)
	}
	p, _ := classes.LoadOrStore(class, &sync.Pool{})
	return p.(*sync.Pool)
}

// Get returns a buffer of length n: a recycled one when available, else a
// new one with capacity Class(n) (exactly n below Granule).
func Get(n int) []byte {
	if n < Granule {
		return make([]byte, n)
	}
	if b, ok := TryGet(n); ok {
		return b
	}
	return make([]byte, n, Class(n))
}

// TryGet returns a recycled buffer of length n, or false when none is
// pooled (or n is below Granule). Callers that must not allocate from an
// untrusted length use it before growing a buffer step by step.
func TryGet(n int) ([]byte, bool) {
	if n < Granule {
		return nil, false
	}
	v := pool(Class(n)).Get()
	if v == nil {
		return nil, false
	}
	return (*v.(*[]byte))[:n], true
}

// Put recycles b; the caller must not use it afterwards. Buffers below
// Granule, and nil, are dropped.
func Put(b []byte) {
	c := cap(b) / Granule * Granule
	if c < Granule {
		return
	}
	b = b[:c]
	pool(c).Put(&b)
}
