// Package bufpool recycles the large byte buffers of the data path
// (request payloads, chunks, response frames) by size class. A transfer
// then reuses a handful of megabyte buffers instead of allocating one per
// request, which keeps the garbage collector from letting the heap grow to
// a multiple of what is live.
//
// Buffers smaller than Granule are not pooled: allocating them is cheap.
package bufpool

import (
	"math/bits"
	"sync"
)

// Granule is the smallest pooled size, and the finest class step.
const Granule = 64 << 10

var classes sync.Map // class size -> *sync.Pool of *[]byte

// step is the class step for n bytes: 1/64 of the power of two below n
// (at least 4 KiB), so that a class wastes under 2 % and a chunk with
// its small archive header (1 MiB + a few dozen bytes) does not take a
// 64 KiB larger buffer.
func step(n int) int {
	return max(4096, 1<<(bits.Len(uint(n))-1)/64)
}

// Class is the capacity of the pooled buffers that serve n bytes.
func Class(n int) int {
	if n <= Granule {
		return Granule
	}
	st := step(n)
	return (n + st - 1) / st * st
}

// floorClass is the largest class not above capacity c.
func floorClass(c int) int {
	st := step(c)
	return c / st * st
}

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

// GetPooled returns a buffer of length n that comes from the pool even
// below Granule (its capacity is then Granule): for a buffer that the
// caller Puts back soon, on a path taken for every request, where a new
// one of n bytes each time would be zeroed and left to the collector (a
// 27 KB read of a small object, a few pages with their checksums).
func GetPooled(n int) []byte {
	return Get(max(n, Granule))[:n]
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
	if cap(b) < Granule {
		return
	}
	c := floorClass(cap(b))
	b = b[:c]
	pool(c).Put(&b)
}
