package archive

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
)

func testMetadata() *Metadata {
	return &Metadata{Format: 1, Path: "/d/o", Version: NewVersion(time.Now()), Size: 27000, K: 8, M: 2, ChunkSize: 1 << 20,
		Placement: []string{"07", "00", "01", "04", "05", "03", "09", "02", "06", "08"}, Slot: 1,
		MTime: time.Now().UTC().Truncate(time.Microsecond), Adler32: "36077cca", CRC32C: "8d295244",
		User: map[string]string{"content-type": "text/plain"}}
}

// Decoding the same bytes again is answered from the cache, and every
// caller gets metadata of its own: changing one changes no other.
func TestDecodedMetadataIsTheCallersOwn(t *testing.T) {
	want := testMetadata()
	p, err := want.encode()
	if err != nil {
		t.Fatal(err)
	}
	first, err := decodeMetadata(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := decoded.get(p); !ok {
		t.Fatal("decoded metadata was not kept")
	}
	first.Placement[0] = "99"
	first.User["content-type"] = "changed"
	first.Path = "/elsewhere"
	for range 2 {
		again, err := decodeMetadata(p)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(again, want) {
			t.Fatalf("decoded again: %+v, want %+v", again, want)
		}
		again.Placement[1] = "98"
		again.User["x"] = "y"
	}
}

// Metadata that does not validate is refused every time, never kept.
func TestInvalidMetadataIsNotKept(t *testing.T) {
	m := testMetadata()
	m.Slot = 10
	p, err := m.encode()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := decodeMetadata(p); err == nil {
			t.Fatal("metadata with slot 10 of 10 decoded")
		}
	}
	if _, ok := decoded.get(p); ok {
		t.Fatal("invalid metadata was kept")
	}
}

// The cache holds at most two generations of its byte budget; the latest
// entries are found, and a hit in the old generation survives the next
// turnover.
func TestMetadataCacheIsBounded(t *testing.T) {
	key := func(i int) []byte { return fmt.Appendf(nil, "metadata %02d", i) } // 11 bytes
	c := metadataCache{budget: 4 * 2 * len(key(0))}                           // 4 entries a generation
	for i := range 20 {
		c.put(key(i), &Metadata{Size: int64(i)})
		if n := len(c.cur) + len(c.old); n > 8 {
			t.Fatalf("after %d puts the cache holds %d entries, more than 2 × 4", i+1, n)
		}
	}
	for i := 16; i < 20; i++ {
		if m, ok := c.get(key(i)); !ok || m.Size != int64(i) {
			t.Errorf("entry %d: %v, %v", i, m, ok)
		}
	}
	if _, ok := c.get(key(0)); ok {
		t.Error("the first entry is still kept after 20 puts into 2 × 4")
	}
	// 16-19 fill the current generation and 12-15 the old one. A hit on
	// 12 moves it to the current generation, which, full, turns over:
	// 13-15 are dropped. 12 then outlives 16-19 at the next turnover.
	if _, ok := c.get(key(12)); !ok {
		t.Fatal("entry 12 is not kept")
	}
	for i := 20; i < 24; i++ {
		c.put(key(i), &Metadata{Size: int64(i)})
	}
	for i, want := range map[int]bool{12: true, 13: false, 16: false, 23: true} {
		if _, ok := c.get(key(i)); ok != want {
			t.Errorf("entry %d kept: %v, want %v", i, ok, want)
		}
	}
}

// Metadata larger than maxCachedMetadata (user metadata can make it up
// to 1 MiB) is decoded every time, not kept.
func TestLargeMetadataIsNotKept(t *testing.T) {
	m := testMetadata()
	m.User = map[string]string{"big": strings.Repeat("x", maxCachedMetadata)}
	p, err := m.encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeMetadata(p); err != nil {
		t.Fatal(err)
	}
	if _, ok := decoded.get(p); ok {
		t.Fatalf("metadata of %d bytes was kept", len(p))
	}
}

// Regression: the metadata entry was encoded with HTML escaping, so each
// <, > and & of a path or of user metadata (content types, S3 metadata,
// extended attributes) took 6 bytes of the 1 MiB readers take, and
// metadata well under it was refused. They are written as themselves
// (readers decode either form alike), and the bound is on what is
// written.
func TestMetadataKeepsHTMLCharacters(t *testing.T) {
	m := testMetadata()
	m.Path = "/d/a<b>&c"
	m.User["content-type"] = `text/html; x="<&>"`
	p, err := m.encode()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(p), `"/d/a<b>&c"`) || !strings.Contains(string(p), `x=\"<&>\"`) {
		t.Errorf("encoded with escapes:\n%s", p)
	}
	if strings.HasSuffix(string(p), "\n") {
		t.Error("encoded with a trailing newline")
	}
	got, err := decodeMetadata(p)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, m)
	}
	// As archives written before have it.
	old, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decodeMetadata(old); err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("escaped form decoded %+v, %v; want %+v", got, err, m)
	}

	// 400 KiB of '<': 2.4 MiB escaped, 400 KiB as written.
	l := layout.Layout{Geometry: layout.Geometry{K: 2, M: 1, ChunkSize: 16}, Size: 0}
	var buf bytes.Buffer
	w := NewWriter(&buf, testTime)
	big := testMeta(l, 0)
	big.User = map[string]string{"x": strings.Repeat("<", 400<<10)}
	if err := w.Close(big); err != nil {
		t.Fatalf("Close with 400 KiB of '<': %v", err)
	}
	idx := mustParse(t, buf.Bytes())
	if idx.Meta.User["x"] != big.User["x"] {
		t.Error("user metadata read back differs")
	}
}
