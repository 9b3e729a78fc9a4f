package object

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/archive"

	"github.com/ecstore/ecstore/internal/layout"
)

// Regression (found by review): tombstones carry no checksum, and the
// one of any node wins: on a small object that had lost an archive (so
// that reads consult the tombstones), one node's tombstone with a digit
// flipped upward, recording a version from the future, hid the object
// although two intact copies remained. A tombstone from the future is
// ignored.
func TestTombstoneFromTheFutureIsIgnored(t *testing.T) {
	// A digit flipped in the leading zeros (no 64-bit time), or one that
	// makes the year 2200.
	for _, damaged := range []string{"9001795623769869665588-ba1047989399dad0", "0007258118400000000000-ba1047989399dad0"} {
		readsPastTombstone(t, func(archive.Version) []byte { return []byte(damaged + "\n") })
	}
}

// readsPastTombstone writes a small object /a, removes one of its three
// copies and puts, on that node, the tombstone that damaged makes of the
// object's version; the object must still read whole from the other two.
func readsPastTombstone(t *testing.T, damaged func(live archive.Version) []byte) {
	t.Helper()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 4096}
	c := newCluster(t, 6, g)
	a := bytes.Repeat([]byte("A"), 1000)
	putHint(t, c.store, "/a", a, int64(len(a)))
	info, err := c.store.Stat(context.Background(), "/a")
	if err != nil {
		t.Fatal(err)
	}
	arch := c.archivesOf("/a")
	if len(arch) != 3 {
		t.Fatalf("%d archives", len(arch))
	}
	if err := os.Remove(arch[0]); err != nil { // same node: archive lost, tombstone damaged
		t.Fatal(err)
	}
	dir := filepath.Dir(arch[0])
	if err := os.MkdirAll(filepath.Join(dir, ".ecstore-rm"), 0o755); err != nil {
		t.Fatal(err)
	}
	tomb := damaged(info.Version)
	if err := os.WriteFile(filepath.Join(dir, ".ecstore-rm", "a"), tomb, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := New(c.nodes, c.store.opts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := get(s, "/a")
	if err != nil || !bytes.Equal(got, a) {
		t.Fatalf("tombstone %q on the faulty node, 2 intact copies: read gives %d bytes, %v", tomb, len(got), err)
	}
}

// TestDamagedTombstoneIsIgnored: tombstones carry a CRC32C line, and one
// whose lines do not match it is ignored. Regression (left alone by the
// last review): a tombstone damaged into a plausible version, one from
// the past no later than the live object's, hid it although two intact
// copies remained (only tombstones from the future were caught).
func TestDamagedTombstoneIsIgnored(t *testing.T) {
	readsPastTombstone(t, func(live archive.Version) []byte {
		// A tombstone of a version removed an hour before the object
		// was written, its first digit that differs from the object's
		// version flipped to 9: a version later than the object's by
		// hours at most, within the clock skew tolerated.
		old := tombstone{upTo: archive.NewVersion(live.Time().Add(-time.Hour)), gen: 1}.encode()
		i := 0
		for i < len(live) && old[i] == live[i] {
			i++
		}
		damaged := append([]byte(string(old[:i])+"9"), old[i+1:]...)
		if got, ok := parseTombstone(damaged); ok {
			t.Fatalf("damaged tombstone %q parsed: %+v", damaged, got)
		}
		return damaged
	})
}
