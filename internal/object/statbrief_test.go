package object

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/node"
)

// sameBrief fails t unless got says what a StatBrief takes from the
// summaries as want (a Stat's Info) does.
func sameBrief(t *testing.T, got, want *Info) {
	t.Helper()
	if got.Size != want.Size || !got.MTime.Equal(want.MTime) || got.Version != want.Version ||
		got.Geometry != want.Geometry || got.Archives != want.Archives || got.IsDir != want.IsDir {
		t.Errorf("brief stat gave %+v; want %+v", got, want)
	}
}

// A brief stat reads summaries only: the first window's for a small
// object, both windows' for a large one, and no archive; it says what
// Stat says of size, time, version, geometry and archives.
func TestStatBriefReadsNoArchive(t *testing.T) {
	c, fs, want := largeStatCluster(t, nil)
	wantSmall, err := c.store.Stat(context.Background(), "/s")
	if err != nil {
		t.Fatal(err)
	}
	s, lc := countedStore(t, c, fs, nil)
	windows := s.probeWindows(len(fs))
	for _, tc := range []struct {
		path  string
		want  *Info
		attrs int
	}{{"/s", wantSmall, windows[0]}, {"/l", want, windows[1]}} {
		opens, attrs := lc.total(lc.opens), lc.total(lc.attrs)
		got, err := s.StatBrief(context.Background(), tc.path)
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		sameBrief(t, got, tc.want)
		if o, a := lc.total(lc.opens)-opens, lc.total(lc.attrs)-attrs; o != 0 || a != tc.attrs {
			t.Errorf("%s: opened %d archives and read %d summaries; want 0 and %d", tc.path, o, a, tc.attrs)
		}
	}
}

// A path no node holds is reported missing after one summary read per
// node, without the probes of a Stat; a directory, a newer version on
// some nodes and a node that cannot give its summary are left to Stat,
// whose answer is the brief stat's.
func TestStatBriefLeavesTheRestToStat(t *testing.T) {
	c, fs, _ := largeStatCluster(t, func(o *Options) { o.Spares = 3 })
	s, lc := countedStore(t, c, fs, nil)
	if _, err := s.StatBrief(context.Background(), "/missing"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("brief stat of a missing path: %v", err)
	}
	if o, a := lc.total(lc.opens), lc.total(lc.attrs); o != 0 || a != len(fs) {
		t.Errorf("missing path: opened %d archives and read %d summaries; want 0 and %d", o, a, len(fs))
	}
	putHint(t, c.store, "/dir/x", []byte("x"), 1)
	if got, err := s.StatBrief(context.Background(), "/dir"); err != nil || !got.IsDir {
		t.Errorf("brief stat of a directory: %+v, %v", got, err)
	}

	// The first lookup window holds two versions.
	newer := putNewerBesideFirst(t, c, fs, 77)
	got, err := s.StatBrief(context.Background(), "/l")
	if err != nil {
		t.Fatal(err)
	}
	if got.Size != int64(len(newer)) {
		t.Errorf("brief stat gave %d bytes, version %s; want the newer version's %d", got.Size, got.Version, len(newer))
	}

	// A node that cannot give its summary: Stat's answer.
	if err := c.store.Remove(context.Background(), "/l"); err != nil {
		t.Fatal(err)
	}
	data := randBytes(rand.New(rand.NewPCG(seed(t), 78)), 50000)
	putHint(t, c.store, "/l", data, int64(len(data)))
	want, err := c.store.Stat(context.Background(), "/l")
	if err != nil {
		t.Fatal(err)
	}
	nodes := wrapRanked(c, fs, "/l", len(fs)-1, node.Inject(node.OpReadAttrs, node.Fail(nil)))
	got, err = c.storeOver(t, nodes, nil).StatBrief(context.Background(), "/l")
	if err != nil {
		t.Fatal(err)
	}
	sameBrief(t, got, want)
}

// Each window gets its own patience: with every node answering in 170 ms
// (within one window's patience, at least 300 ms with a 1.2 s hedge
// delay), a large object's brief stat reads its two windows' summaries
// and no archive. Found by review: one patience for all the windows sent
// every such stat to Stat as well, slower than Stat alone.
func TestStatBriefGivesEachWindowItsPatience(t *testing.T) {
	const delay = 170 * time.Millisecond
	c, fs, want := largeStatCluster(t, func(o *Options) { o.HedgeDelay = 1200 * time.Millisecond })
	nodes := make([]node.Node, len(fs))
	var lc lookupCounters
	for i := range fs {
		open, attrs := node.Inject(node.OpOpen, node.Delay(delay)), node.Inject(node.OpReadAttrs, node.Delay(delay))
		lc.opens, lc.attrs = append(lc.opens, open), append(lc.attrs, attrs)
		nodes[i] = node.Wrap(fs[i], open, attrs)
	}
	s := c.storeOver(t, nodes, nil)
	for range 4 { // lookups learn how long the nodes take
		s.Stat(context.Background(), "/l")
	}
	// Below two windows' time, the test tells one patience per window
	// from one for all; above, it only checks the answer.
	t.Logf("window patience %v, nodes answering in %v", s.windowPatience(), delay)
	for _, path := range []string{"/l", "/missing"} {
		opens, attrs := lc.total(lc.opens), lc.total(lc.attrs)
		got, err := s.StatBrief(context.Background(), path)
		if path == "/l" {
			if err != nil {
				t.Fatal(err)
			}
			sameBrief(t, got, want)
		} else if !errors.Is(err, ErrNotExist) {
			t.Fatalf("%s: %v", path, err)
		}
		if o, a := lc.total(lc.opens)-opens, lc.total(lc.attrs)-attrs; o != 0 || a != len(fs) {
			t.Errorf("%s: opened %d archives and read %d summaries; want 0 and %d", path, o, a, len(fs))
		}
	}
}
