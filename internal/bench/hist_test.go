package bench

import (
	"flag"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var seed = flag.Uint64("seed", 0, "seed of the randomized tests (0: random)")

func newRand(t *testing.T) *rand.Rand {
	s := *seed
	if s == 0 {
		s = rand.Uint64()
	}
	t.Logf("seed %d", s)
	return rand.New(rand.NewPCG(s, 0))
}

// TestBuckets checks that buckets tile the range: every bucket's lowest
// and highest value map back to it, and the next value to the next one.
func TestBuckets(t *testing.T) {
	for b := 0; b < numBuckets-1; b++ {
		lo, w := bucketRange(b)
		if bucketOf(lo) != b || bucketOf(lo+w-1) != b || bucketOf(lo+w) != b+1 {
			t.Fatalf("bucket %d [%d, +%d): maps to %d, %d, next %d", b, lo, w, bucketOf(lo), bucketOf(lo+w-1), bucketOf(lo+w))
		}
		if b >= subCount && float64(w)/2/float64(lo) > 1.0/128 {
			t.Fatalf("bucket %d: relative half-width %v", b, float64(w)/2/float64(lo))
		}
	}
	if bucketOf(math.MaxUint64) != numBuckets-1 {
		t.Fatal("huge values do not land in the last bucket")
	}
}

// TestQuantileCrossCheck compares the histogram's quantiles with exact
// ones over sorted samples.
func TestQuantileCrossCheck(t *testing.T) {
	r := newRand(t)
	for _, n := range []int{1, 2, 3, 10, 99, 1000, 100_000} {
		var h, h1, h2 histogram
		vals := make([]time.Duration, n)
		for i := range vals {
			// Log-normal around 1 ms, spanning ns to seconds.
			vals[i] = time.Duration(math.Exp(r.NormFloat64()*3 + 13.8))
			h.record(vals[i])
			if i%2 == 0 {
				h1.record(vals[i])
			} else {
				h2.record(vals[i])
			}
		}
		h1.merge(&h2)
		slices.Sort(vals)
		for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 0.999, 1} {
			exact := vals[int(math.Ceil(q*float64(n)))-1]
			for _, hh := range []*histogram{&h, &h1} {
				got := hh.quantile(q)
				if diff := math.Abs(float64(got - exact)); diff > float64(exact)/128+1 {
					t.Errorf("n=%d q=%v: %v, exact %v", n, q, got, exact)
				}
			}
		}
		if h.min != vals[0] || h.max != vals[n-1] || h1.n != uint64(n) || h1.sum != h.sum {
			t.Errorf("n=%d: min %v max %v n %d", n, h.min, h.max, h1.n)
		}
	}
	var empty histogram
	if empty.quantile(0.5) != 0 || empty.mean() != 0 {
		t.Error("empty histogram")
	}
}

// Regression: a quantile in the last bucket (2^maxExp ns, about 73
// minutes, and more) was the middle of that bucket's nominal range, far
// below the values there (TestQuantileCrossCheck, seed
// 2925225821222501771: 2h26m for a maximum of 3h59m).
func TestQuantileBeyondTheLastBucket(t *testing.T) {
	var h histogram
	h.record(time.Millisecond)
	h.record(4 * time.Hour)
	if got := h.quantile(1); got != 4*time.Hour {
		t.Fatalf("maximum of 1 ms and 4 h: %v", got)
	}
	if got := h.quantile(0.5); got < time.Millisecond || got > time.Millisecond+time.Millisecond/128 {
		t.Fatalf("median of 1 ms and 4 h: %v", got)
	}
}

func TestGenerator(t *testing.T) {
	g := newGenerator(1, PieceSize)
	if len(g.buf) != 2*PieceSize {
		t.Fatalf("buffer of %d bytes", len(g.buf))
	}
	a := g.piece(5, 0, 1000)
	if string(a) != string(newGenerator(1, PieceSize).piece(5, 0, 1000)) {
		t.Error("same seed and key give different data")
	}
	for _, other := range [][]byte{g.piece(6, 0, 1000), g.piece(5, 1, 1000), newGenerator(2, PieceSize).piece(5, 0, 1000)} {
		if string(a) == string(other) {
			t.Error("different seed, key or piece give the same data")
		}
	}
	if p := g.piece(1, 2, PieceSize); len(p) != PieceSize {
		t.Errorf("full piece of %d bytes", len(p))
	}
	small := newGenerator(1, 27_000)
	if small.period < 27_000 || len(small.piece(9, 0, 27_000)) != 27_000 {
		t.Errorf("small generator: period %d", small.period)
	}
}

func TestFormat(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{0, "-"}, {512, "512ns"}, {812_345, "812µs"}, {4_213_000, "4.21ms"}, {12_345_678, "12.3ms"}, {1_500_000_000, "1.50s"},
		// Values that round up to the next digit or unit.
		{9_999_600, "10.0ms"}, {999_700, "1.00ms"}, {999_600_000, "1.00s"}, {99_960, "100µs"}, {9_996, "10.0µs"},
	} {
		if got := latency(tt.d); got != tt.want {
			t.Errorf("latency(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
	for _, tt := range []struct {
		v    float64
		want string
	}{
		{0, "0.00"}, {1.234, "1.23"}, {12.34, "12.3"}, {1234.5, "1234"}, {9.996, "10.0"}, {99.96, "100"}, {10.049, "10.0"}, {99.94, "99.9"},
	} {
		if got := rate(tt.v); got != tt.want {
			t.Errorf("rate(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}
