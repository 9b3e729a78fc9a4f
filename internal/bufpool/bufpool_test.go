package bufpool

import "testing"

func TestClassesAndReuse(t *testing.T) {
	for _, c := range []struct{ n, class int }{{1, Granule}, {Granule, Granule}, {Granule + 1, Granule + 4096}, {1 << 20, 1 << 20}, {1<<20 + 100, 1<<20 + 16<<10}, {8<<20 + 8<<10, 8<<20 + 128<<10}} {
		if got := Class(c.n); got != c.class {
			t.Errorf("Class(%d) = %d, want %d", c.n, got, c.class)
		}
	}
	b := Get(1<<20 + 100)
	if len(b) != 1<<20+100 || cap(b) != 1<<20+16<<10 {
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

// Every class is its own floor, and the floor of any capacity is a class
// that fits in it: a recycled buffer always serves what its class promises.
func TestFloorClass(t *testing.T) {
	for n := Granule; n < 20<<20; n += 997 {
		c := Class(n)
		if c < n || floorClass(c) != c {
			t.Fatalf("Class(%d) = %d, floorClass = %d", n, c, floorClass(c))
		}
		if f := floorClass(n); f > n || Class(f) != f {
			t.Fatalf("floorClass(%d) = %d, Class of it %d", n, f, Class(f))
		}
	}
}

func BenchmarkGetPut1MiB(b *testing.B) {
	b.SetBytes(1 << 20)
	for b.Loop() {
		Put(Get(1 << 20))
	}
}
