package repair

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/archive"
	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/testcluster"
)

// TestHealerRepairsWhatReadsFind: a read that needs parity queues the
// object, and the healer rebuilds the lost archive without anyone running
// repair.
func TestHealerRepairsWhatReadsFind(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 512}
	c := testcluster.New(t, 6, g)
	healed := make(chan bool, 4)
	h := NewHealer(nil, HealerOptions{Settle: 10 * time.Millisecond, Healed: func(_ string, _ int64, ok bool) { healed <- ok }})
	nodes := make([]node.Node, len(c.Nodes))
	copy(nodes, c.Nodes)
	s, err := object.New(nodes, object.Options{Geometry: g, MinFree: -1, Events: h.Events(object.Events{})})
	if err != nil {
		t.Fatal(err)
	}
	h.SetStore(s)
	go h.Run(ctx)
	data := bytes.Repeat([]byte("heal me "), 2000)
	put(t, s, "/h", data)
	info, _ := s.Stat(ctx, "/h")
	os.Remove(c.Archive(c.NodeIndex(info.Placement[0]), "/h"))
	if got, err := get(s, "/h"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("degraded read: %v", err)
	}
	select {
	case ok := <-healed:
		if !ok {
			t.Fatal("heal failed")
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("not healed; %d pending", h.Pending())
	}
	in, err := s.Inspect(ctx, "/h", true)
	if err != nil || in.Health != object.Healthy {
		t.Fatalf("after healing: %v %v", in.Health, err)
	}
}

// TestHealRebuildsWhatAWriteDropped: Heal (what `ecstore put` runs after
// a degraded write) rebuilds the slot of a node that failed during the
// write on the free node, and does nothing to a healthy object.
func TestHealRebuildsWhatAWriteDropped(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 512}
	s, fs, c := faultyStore(t, 7, g)
	first := bytes.Repeat([]byte("first "), 1000)
	put(t, s, "/w", first) // the overwrite has the same placement
	info, err := s.Stat(ctx, "/w")
	if err != nil {
		t.Fatal(err)
	}
	if slots, res, err := Heal(ctx, s, "/w", nil); len(slots) != 0 || res != nil || err != nil {
		t.Fatalf("heal of a healthy object: slots %v, %v, %v", slots, res, err)
	}
	down := c.NodeIndex(info.Placement[2])
	data := bytes.Repeat([]byte("second "), 1000)
	w, err := s.Create(ctx, "/w", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data[:3000]); err != nil {
		t.Fatal(err)
	}
	fs[down].SetDown(true)
	if _, err := w.Write(data[3000:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("write with one node down mid-way: %v", err)
	}
	slots, res, err := Heal(ctx, s, "/w", nil)
	if err != nil || len(slots) != 1 || slots[0] != 2 || res == nil || res.Rebuilt[2] == "" || res.Rebuilt[2] == info.Placement[2] {
		t.Fatalf("heal after the write dropped slot 2 (node %s): slots %v, result %+v, err %v", info.Placement[2], slots, res, err)
	}
	assertHealed(t, s, "/w", data)
}

// assertHealed checks that the object at path is healthy, a deep
// inspection says, and reads back as data.
func assertHealed(t *testing.T, s *object.Store, path string, data []byte) {
	t.Helper()
	in, err := s.Inspect(context.Background(), path, true)
	if err != nil || in.Health != object.Healthy {
		t.Fatalf("%s after healing: %v %v", path, in.Health, err)
	}
	if got, err := get(s, path); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read of %s after healing: %v", path, err)
	}
}

// TestHealerRepairsCorruptionReadsFind: a chunk whose bytes rotted, and
// an archive whose page checksums did (its chunks sound), are found by
// reads (a whole get; a random read of a few bytes) and rebuilt by the
// healer, which a shallow inspection alone would take for healthy.
func TestHealerRepairsCorruptionReadsFind(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 8192}
	c := testcluster.New(t, 6, g)
	type outcome struct {
		path string
		ok   bool
	}
	healed := make(chan outcome, 8)
	h := NewHealer(nil, HealerOptions{Settle: 10 * time.Millisecond, Healed: func(p string, _ int64, ok bool) { healed <- outcome{p, ok} }})
	s, err := object.New(c.Nodes, object.Options{Geometry: g, MinFree: -1, Events: h.Events(object.Events{})})
	if err != nil {
		t.Fatal(err)
	}
	h.SetStore(s)
	go h.Run(ctx)
	data := bytes.Repeat([]byte("rotting bytes "), 60000) // archives larger than archive.TailSize, not read whole
	// damage flips a byte of slot's archive at the offset where returns.
	damage := func(path string, slot int, where func(idx *archive.Index) int64) {
		t.Helper()
		info, err := s.Stat(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		af := c.Archive(c.NodeIndex(info.Placement[slot]), path)
		f, err := os.Open(af)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		idx, err := archive.Parse(ctx, fileAt{f}, st.Size())
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		flipByte(t, af, int(where(idx)))
	}
	wait := func(path string) {
		t.Helper()
		for {
			select {
			case o := <-healed:
				if o.path != path {
					t.Errorf("%s healed again after its rebuild", o.path)
					continue
				}
				if !o.ok {
					t.Fatalf("%s: heal failed", path)
				}
				return
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: not healed; %d pending", path, h.Pending())
			}
		}
	}
	healthy := func(path string) {
		t.Helper()
		if in, err := s.Inspect(ctx, path, true); err != nil || in.Health != object.Healthy {
			t.Fatalf("%s after healing: %v %v\n%s", path, in.Health, err, strings.Join(in.Problems(), "\n"))
		}
	}

	put(t, s, "/rot", data)
	damage("/rot", 1, func(idx *archive.Index) int64 { c := idx.Chunks[0]; return c.DataOffset() + 10 }) // block 0, stripe 1: data
	if got, err := get(s, "/rot"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read of a rotten chunk: %v", err)
	}
	wait("/rot")
	healthy("/rot")

	// A chunk's local header, whose CRC-32 differs from the central
	// directory's (archive.ErrFormat, not a checksum mismatch).
	put(t, s, "/header", data)
	damage("/header", 1, func(idx *archive.Index) int64 { return idx.Chunks[0].Offset + 14 })
	if got, err := get(s, "/header"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read of a chunk with a damaged header: %v", err)
	}
	wait("/header")
	healthy("/header")

	put(t, s, "/pages", data)
	const b = 5
	var slot int
	for slot = range g.Width() { // the archive that holds a data chunk of block b
		if st := (slot - b%g.Width() + g.Width()) % g.Width(); st < g.K {
			break
		}
	}
	stripe := (slot - b%g.Width() + g.Width()) % g.Width()
	damage("/pages", slot, func(idx *archive.Index) int64 { ps, _ := idx.Pages(b); return ps.CRCs })
	rd, err := s.Open(ctx, "/pages")
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 100)
	off := int64(b)*g.BlockSize() + int64(stripe)*g.ChunkSize + 7 // the first page of that chunk
	if n, err := rd.ReadAt(ctx, p, off); err != nil || !bytes.Equal(p[:n], data[off:off+int64(n)]) {
		t.Fatalf("random read of a page whose checksum rotted: %d, %v", n, err)
	}
	rd.Close()
	wait("/pages")
	healthy("/pages")
	// The rebuilds read the damaged archives too, and reported them
	// again: that must not rebuild them a second time (found by review).
	time.Sleep(300 * time.Millisecond)
	select {
	case o := <-healed:
		t.Errorf("%s healed again after its rebuild", o.path)
	default:
	}
}

// TestHealerDamageReportsFollowTheQueue: a damage report for a path the
// full queue leaves out is dropped with it (before, it stayed in its own
// map for good), and one of an older version than the pending one is
// dropped (found by review).
func TestHealerDamageReportsFollowTheQueue(t *testing.T) {
	h := NewHealer(nil, HealerOptions{Queue: 1})
	older := archive.NewVersion(time.Unix(100, 0))
	newer := archive.NewVersion(time.Unix(200, 0))
	h.enqueueDamaged("/a", newer, 1)
	h.enqueueDamaged("/b", newer, 0) // the queue is full
	h.enqueueDamaged("/a", older, 3)
	h.enqueueDamaged("/a", newer, 2)
	h.enqueueDamaged("/a", newer, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.damaged["/b"]; ok || len(h.pending) != 1 {
		t.Errorf("a report beyond the queue was kept: %v, pending %v", h.damaged, h.pending)
	}
	if d := h.damaged["/a"]; d.version != newer || !slices.Equal(d.slots, []int{1, 2}) {
		t.Errorf("reports of /a: %+v, want slots [1 2] of %s", d, newer)
	}
}

// degradedWithANodeDown starts a healer with opts on 6 nodes at 4+2 (no
// node to spare) and writes path with node down stopped, so that its
// heal fails until the node is back. It returns the store, the nodes,
// the data written and the heals' outcomes as the healer reports them.
func degradedWithANodeDown(t *testing.T, opts HealerOptions, path string, down int) (*object.Store, []*node.Faulty, []byte, chan bool, *Healer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 512}
	c := testcluster.New(t, 6, g)
	healed := make(chan bool, 100)
	opts.Healed = func(_ string, _ int64, ok bool) { healed <- ok }
	h := NewHealer(nil, opts)
	s, fs := c.Faulty(t, g, func(o *object.Options) { o.Events = h.Events(object.Events{}) })
	h.SetStore(s)
	go h.Run(ctx)
	fs[down].SetDown(true)
	data := bytes.Repeat([]byte("written with a node down "), 400)
	put(t, s, path, data)
	return s, fs, data, healed, h
}

// awaitFailedHeals waits for n failed heals (and no successful one).
func awaitFailedHeals(t *testing.T, healed chan bool, n int) {
	t.Helper()
	for i := 0; i < n; {
		select {
		case ok := <-healed:
			if ok {
				t.Fatal("healed with the node still down")
			}
			i++
		case <-time.After(10 * time.Second):
			t.Fatalf("%d failed heals, then none for 10 s", i)
		}
	}
}

// TestHealerTriesAgainOnceTheNodeIsBack: an object written while a node
// was down is reported by the write; its heal fails while the node is
// still down (every other node holds one of its archives already), and
// the healer tries again until the node is back, without the object
// being read or reported again. It used to give up after the first
// failure, leaving the object degraded until someone ran a repair.
func TestHealerTriesAgainOnceTheNodeIsBack(t *testing.T) {
	down := 3
	s, fs, data, healed, h := degradedWithANodeDown(t, HealerOptions{Settle: 10 * time.Millisecond, MaxRetryWait: 40 * time.Millisecond}, "/d", down)
	awaitFailedHeals(t, healed, 3)
	if n := h.Retrying(); n != 1 {
		t.Errorf("%d objects retrying, want 1", n)
	}
	fs[down].SetDown(false)
	deadline := time.After(10 * time.Second)
	for done := false; !done; {
		select {
		case done = <-healed:
		case <-deadline:
			t.Fatalf("not healed after the node came back; %d pending", h.Pending())
		}
	}
	assertHealed(t, s, "/d", data)
	if n := h.Retrying(); n != 0 {
		t.Errorf("%d objects retrying after the heal, want 0", n)
	}
}

// TestHealerRetryBookkeeping: a failed heal goes back in the queue with
// the damaged slots reported for it, due after waits that double up to
// MaxRetryWait, and is dropped once RetryFor has passed since its first
// failure.
func TestHealerRetryBookkeeping(t *testing.T) {
	h := NewHealer(nil, HealerOptions{Settle: time.Second, MaxRetryWait: 5 * time.Second, RetryFor: time.Hour})
	v := archive.NewVersion(time.Unix(100, 0))
	failed := errors.New("node down")
	var waits []time.Duration
	for range 4 {
		h.retry("/a", damagedSlots{version: v, slots: []int{2}}, []int{2}, failed)
		h.mu.Lock()
		at, queued := h.pending["/a"]
		delete(h.pending, "/a") // as due does
		h.mu.Unlock()
		if !queued {
			t.Fatal("a failed heal was not queued again")
		}
		waits = append(waits, (time.Until(at) + h.opts.Settle + 50*time.Millisecond).Truncate(100*time.Millisecond))
	}
	if want := []time.Duration{2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}; !slices.Equal(waits, want) {
		t.Errorf("waits %v, want %v", waits, want)
	}
	if d := h.damaged["/a"]; d.version != v || !slices.Equal(d.slots, []int{2}) {
		t.Errorf("damage report after the retries: %+v", d)
	}
	// Many failures with a long Settle: the wait stays at the cap.
	long := NewHealer(nil, HealerOptions{Settle: time.Minute, MaxRetryWait: time.Hour, RetryFor: 1000 * time.Hour})
	for i := 1; i <= 70; i++ {
		long.retry("/b", damagedSlots{}, []int{1}, failed)
		wait := time.Until(long.pending["/b"]) + time.Minute
		delete(long.pending, "/b")
		if wait <= 0 || wait > time.Hour || i >= 6 && wait < 59*time.Minute {
			t.Fatalf("wait after %d failures with Settle 1m, cap 1h: %v", i, wait)
		}
	}
	h.mu.Lock()
	f := h.failing["/a"]
	f.since = time.Now().Add(-2 * time.Hour)
	h.failing["/a"] = f
	h.mu.Unlock()
	h.retry("/a", damagedSlots{}, []int{2}, failed)
	if _, queued := h.pending["/a"]; queued {
		t.Error("queued again after RetryFor")
	}
	if _, ok := h.failing["/a"]; ok {
		t.Error("still counted as failing after giving up")
	}
}

// TestHealerTriesAgainWhenTheNodeAnswers: after a few failed heals the
// wait before the next try has grown, but the healer notices the node
// answering again and tries at once rather than at the end of that wait.
func TestHealerTriesAgainWhenTheNodeAnswers(t *testing.T) {
	const settle = 20 * time.Millisecond
	s, fs, data, healed, _ := degradedWithANodeDown(t, HealerOptions{Settle: settle}, "/n", 1)
	awaitFailedHeals(t, healed, 7) // the next try would come 20 ms << 7 = 2.56 s later
	back := time.Now()
	fs[1].SetDown(false)
	select {
	case ok := <-healed:
		if !ok {
			t.Fatal("the heal after the node came back failed")
		}
		if d := time.Since(back); d > 1500*time.Millisecond {
			t.Errorf("healed %v after the node came back; want within a few ticks of %v", d, settle/2)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not healed after the node came back")
	}
	assertHealed(t, s, "/n", data)
}
