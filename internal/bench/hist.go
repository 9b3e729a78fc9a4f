package bench

import (
	"math"
	"math/bits"
	"time"
)

// Histogram geometry: values below subCount nanoseconds have a bucket
// each; above, every power of two [2^e, 2^(e+1)) is split into subCount
// buckets of width 2^(e-subBits). Values of 2^maxExp ns (about 73
// minutes) and more share the last bucket.
const (
	subBits    = 6
	subCount   = 1 << subBits
	maxExp     = 42
	numBuckets = (maxExp - subBits + 2) * subCount
)

// histogram records durations with bounded memory. The zero value is
// empty and ready; it is not safe for concurrent use.
type histogram struct {
	counts   []uint64 // numBuckets, allocated by the first record
	n        uint64
	sum      time.Duration
	min, max time.Duration
}

// bucketOf returns the bucket of v nanoseconds.
func bucketOf(v uint64) int {
	if v < subCount {
		return int(v)
	}
	e := bits.Len64(v) - 1
	if e > maxExp {
		return numBuckets - 1
	}
	shift := e - subBits
	return (shift+1)*subCount + int(v>>shift-subCount)
}

// bucketRange returns the lowest value of bucket b and the bucket's width.
func bucketRange(b int) (lo, width uint64) {
	if b < subCount {
		return uint64(b), 1
	}
	shift := b/subCount - 1
	return uint64(b%subCount+subCount) << shift, 1 << shift
}

// record adds one duration (negative ones count as zero).
func (h *histogram) record(d time.Duration) {
	d = max(d, 0)
	if h.counts == nil {
		h.counts = make([]uint64, numBuckets)
	}
	h.counts[bucketOf(uint64(d))]++
	if h.n == 0 || d < h.min {
		h.min = d
	}
	h.max = max(h.max, d)
	h.n++
	h.sum += d
}

// merge adds o's durations to h.
func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	if h.counts == nil {
		h.counts = make([]uint64, numBuckets)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// quantile returns the q-quantile (0 < q <= 1) of the recorded durations:
// the middle of the bucket holding the ceil(q*n)-th smallest, clamped to
// [min, max], or max if that is the last bucket, which has no upper
// bound. It is 0 when nothing was recorded.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for b, c := range h.counts {
		seen += c
		if seen >= rank {
			if b == numBuckets-1 {
				return h.max // the middle of [2^maxExp, ∞) means nothing
			}
			lo, w := bucketRange(b)
			v := time.Duration(min(lo+w/2, math.MaxInt64))
			return min(max(v, h.min), h.max)
		}
	}
	return h.max
}

// mean returns the average duration, 0 when empty.
func (h *histogram) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}
