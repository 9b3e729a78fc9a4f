package object

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/ecstore/ecstore/internal/layout"
)

// Retired nodes take no new archives — neither new objects nor rebuilt
// slots — but their archives are still read.
func TestRetiredNodesTakeNoNewArchives(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 512}
	// Written before n02 is retired: some objects have an archive there.
	before := newCluster(t, 8, g)
	var old []string
	for i := range 20 {
		p := fmt.Sprintf("/old/%d", i)
		put(t, before.store, p, bytes.Repeat([]byte{byte(i)}, 3000))
		if info, _ := before.store.Stat(ctx, p); slices.Contains(info.Placement, "n02") {
			old = append(old, p)
		}
	}
	if len(old) == 0 {
		t.Fatal("test setup: no object placed on n02")
	}
	s, err := New(before.nodes, Options{Geometry: g, MinFree: -1, Retired: []string{"n02"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		p := fmt.Sprintf("/new/%d", i)
		put(t, s, p, []byte(p))
		info, err := s.Stat(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(info.Placement, "n02") {
			t.Fatalf("%s placed on retired n02: %v", p, info.Placement)
		}
	}
	// Old archives on n02 are still read; a slot rebuilt goes elsewhere.
	for _, p := range old {
		if got, err := get(s, p); err != nil || len(got) != 3000 {
			t.Fatalf("%s: %d bytes, %v", p, len(got), err)
		}
	}
	info, _ := s.Stat(ctx, old[0])
	slot := slices.Index(info.Placement, "n02")
	res, err := s.Rebuild(ctx, old[0], []int{slot}, RebuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rebuilt[slot] == "n02" || res.Rebuilt[slot] == "" {
		t.Fatalf("slot %d rebuilt on %q", slot, res.Rebuilt[slot])
	}
	if _, err := New(before.nodes, Options{Geometry: g, Retired: []string{"n99"}}); err == nil {
		t.Fatal("an unknown retired node was accepted")
	}
	if _, err := New(before.nodes, Options{Geometry: g, Retired: []string{"n00", "n01", "n02", "n03"}}); err == nil {
		t.Fatal("retiring all but K+M-1 nodes was accepted")
	}
}
