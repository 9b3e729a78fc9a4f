package bufpool

import "testing"

func TestClassesAndReuse(t *testing.T) {
	for _, c := range []struct{ n, class int }{{1, Granule}, {Granule, Granule}, {Granule + 1, 2 * Granule}, {1 << 20, 1 << 20}, {1<<20 + 100, 1<<20 + Granule}} {
		if got := Class(c.n); got != c.class {
			t.Errorf("Class(%d) = %d, want %d", c.n, got, c.class)
		}
	}
	b := Get(1<<20 + 100)
	if len(b) != 1<<20+100 || cap(b) != 1<<20+Granule {
		t.Fatalf("Get: len %d cap %d", len(b), cap(b))
	}
	if _, ok := TryGet(100); ok {
		t.Fatal("TryGet of a small buffer returned a pooled one")
	}
	Put(b)
	// sync.Pool may drop anything at any time; only check what a reused
	// buffer looks like if one comes back.
	if r, ok := TryGet(1<<20 + 1); ok && (len(r) != 1<<20+1 || cap(r) < len(r)) {
		t.Fatalf("TryGet: len %d cap %d", len(r), cap(r))
	}
	Put(make([]byte, 10)) // too small: dropped, no panic
	Put(nil)
}

func BenchmarkGetPut1MiB(b *testing.B) {
	b.SetBytes(1 << 20)
	for b.Loop() {
		Put(Get(1 << 20))
	}
}
