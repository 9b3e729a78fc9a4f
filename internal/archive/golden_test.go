package archive

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"hash/adler32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ecstore/ecstore/internal/erasure"
	"github.com/ecstore/ecstore/internal/layout"
)

var update = flag.Bool("update", false, "rewrite testdata/golden and the fuzz seed corpus")

// helloObject is the object of the golden archives (and of the worked
// example in docs/FORMAT.md): 39 bytes in 2+1 with 16-byte chunks, so one
// full block and a short last block of 4-byte chunks, one of them padded.
const helloObject = "Hello, ecstore! This is a tiny object.\n"

var helloGeometry = layout.Geometry{K: 2, M: 1, ChunkSize: 16}

// helloArchives encodes helloObject and returns the archive of every slot.
func helloArchives(t testing.TB) [][]byte {
	t.Helper()
	l := layout.Layout{Geometry: helloGeometry, Size: int64(len(helloObject))}
	codec, err := erasure.New(l.K, l.M)
	if err != nil {
		t.Fatal(err)
	}
	var blocks [][][]byte // blocks[b][s]
	for b := range l.Blocks() {
		chunks := make([][]byte, l.Width())
		for s := range chunks {
			chunks[s] = make([]byte, l.ChunkLen(b)) // zero padded
			if s < l.K {
				start := l.BlockStart(b) + int64(s)*l.ChunkLen(b)
				copy(chunks[s], helloObject[start:start+l.DataLen(b, s)])
			}
		}
		if err := codec.Encode(chunks); err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, chunks)
	}
	var out [][]byte
	for slot := range l.Width() {
		var buf bytes.Buffer
		w := NewWriter(&buf, testTime)
		for b, chunks := range blocks {
			s := l.Stripe(int64(b), slot)
			if err := w.WriteChunk(int64(b), s, chunks[s], erasure.ChunkChecksum(chunks[s])); err != nil {
				t.Fatal(err)
			}
		}
		m := &Metadata{Path: "/demo/hello.txt", Version: testVersion, Size: l.Size,
			K: l.K, M: l.M, ChunkSize: l.ChunkSize, Placement: []string{"node-a", "node-b", "node-c"},
			Slot: slot, MTime: testTime,
			Adler32: erasure.FormatSum(adler32.Checksum([]byte(helloObject))),
			CRC32C:  erasure.FormatSum(erasure.CRC32C([]byte(helloObject))),
			User:    map[string]string{"content-type": "text/plain"}}
		if err := w.Close(m); err != nil {
			t.Fatal(err)
		}
		out = append(out, buf.Bytes())
	}
	return out
}

// TestGolden pins the bytes Writer produces: any change to the format
// shows up here (and must come with a docs/FORMAT.md update and, if
// readers are affected, a new FormatVersion). Run with -update to accept
// a deliberate change.
func TestGolden(t *testing.T) {
	ctx := context.Background()
	archives := helloArchives(t)
	var object [][][]byte // data chunks per block, in stripe order
	for slot, data := range archives {
		path := filepath.Join("testdata", "golden", fmt.Sprintf("hello.slot%d.zip", slot))
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, want) {
			t.Fatalf("%s: Writer output changed (%d bytes, golden %d); run with -update if deliberate", path, len(data), len(want))
		}
		idx := mustParse(t, want)
		for _, c := range idx.Chunks {
			p, err := ReadChunk(ctx, memFile(want), &c, nil)
			if err != nil {
				t.Fatal(err)
			}
			for int64(len(object)) <= c.Block {
				object = append(object, make([][]byte, helloGeometry.K))
			}
			if c.Stripe < helloGeometry.K {
				object[c.Block][c.Stripe] = p
			}
		}
	}
	// The data chunks of all slots, unpadded, are the object; the
	// metadata's checksums are the object's.
	l := layout.Layout{Geometry: helloGeometry, Size: int64(len(helloObject))}
	var got []byte
	for b, chunks := range object {
		for s, p := range chunks {
			got = append(got, p[:l.DataLen(int64(b), s)]...)
			if pad := p[l.DataLen(int64(b), s):]; !bytes.Equal(pad, make([]byte, len(pad))) {
				t.Errorf("chunk %d.%d: padding is not zero", b, s)
			}
		}
	}
	m := mustParse(t, archives[0]).Meta
	if string(got) != helloObject || m.Adler32 != erasure.FormatSum(adler32.Checksum(got)) ||
		m.CRC32C != erasure.FormatSum(erasure.CRC32C(got)) {
		t.Fatalf("reassembled %q (metadata %s %s)", got, m.Adler32, m.CRC32C)
	}
	if *update {
		writeFuzzSeeds(t)
	}
}

// writeFuzzSeeds writes the seed corpus of FuzzParse and FuzzMetadata
// under testdata/fuzz from real archives.
func writeFuzzSeeds(t *testing.T) {
	seeds := map[string][]byte{}
	for slot, a := range helloArchives(t) {
		seeds[fmt.Sprintf("hello-slot%d", slot)] = a
	}
	for _, tc := range []struct {
		g    layout.Geometry
		size int64
		slot int
	}{
		{layout.Geometry{K: 1, M: 0, ChunkSize: 4}, 0, 0},
		{layout.Geometry{K: 2, M: 1, ChunkSize: 8}, 37, 2},
		{layout.Geometry{K: 3, M: 2, ChunkSize: 5}, 1, 4},
		{layout.Geometry{K: 4, M: 2, ChunkSize: 16}, 200, 5},
	} {
		a, _ := buildArchive(t, tc.g, tc.size, tc.slot)
		name := fmt.Sprintf("%d+%d-%d-size%d-slot%d", tc.g.K, tc.g.M, tc.g.ChunkSize, tc.size, tc.slot)
		seeds[name] = a
		if tc.size == 37 {
			seeds[name+"-zip64"] = toZip64(t, a)
			body, recs := splitArchive(t, a)
			for i := range recs {
				n := uint64(le32(recs[i].fixed[24:]))
				recs[i].setZip64(n, n, uint64(le32(recs[i].fixed[42:])))
			}
			seeds[name+"-zip64-extra"] = joinArchive(body, recs, ends{zip64: true})
		}
	}
	l := layout.Layout{Geometry: layout.Geometry{K: 2, M: 1, ChunkSize: 8}, Size: 20}
	m := testMeta(l, 0)
	seeds["unknown-entries"] = craft(t, append([]rawEntry{{name: "README", data: []byte("hi")}},
		append(chunkEntries(l, 0), metaEntry(t, m))...)...)

	// Regression: RFC 3339 offsets of 24:00 decode but do not encode
	// (found while fuzzing FuzzMetadata); Validate now refuses them.
	badTime := bytes.Replace(metaEntry(t, m).data, []byte(`"2025-11-21T23:00:00.123456789Z"`),
		[]byte(`"2025-11-21T23:00:00.123456789+24:00"`), 1)
	seeds["regress-mtime-offset-24h"] = craft(t, append(chunkEntries(l, 0), rawEntry{name: MetadataName, data: badTime})...)

	// Regression: a ZIP64 offset near 2^63 overflowed the parser's bounds
	// checks and made it slice past its buffer (panic).
	{
		a, _ := buildArchive(t, layout.Geometry{K: 2, M: 1, ChunkSize: 8}, 37, 0)
		body, recs := splitArchive(t, a)
		n := uint64(le32(recs[len(recs)-1].fixed[24:]))
		recs[len(recs)-1].setZip64(n, n, 1<<63-100)
		seeds["regress-offset-overflow"] = joinArchive(body, recs, ends{zip64: true})
	}

	metas := map[string][]byte{}
	for name, a := range seeds {
		if strings.HasPrefix(name, "regress-") {
			continue
		}
		idx, err := parseBytes(a)
		if err != nil {
			t.Fatalf("seed %s: %v", name, err)
		}
		p, err := idx.Meta.encode()
		if err != nil {
			t.Fatal(err)
		}
		metas[name] = p
	}
	metas["compact"] = []byte(`{"format":1,"path":"/a","version":"0001763766000123456789-9f86d081884c7d65","size":0,"k":1,"m":0,"chunk_size":1,"placement":["n"],"slot":0,"mtime":"2025-11-21T23:00:00+01:00","adler32":"00000001","crc32c":"00000000","user":{}}`)
	metas["regress-mtime-offset-24h"] = badTime
	metas["newer"] = []byte(`{"format":2,"path":"/a","version":"0001763766000123456789-9f86d081884c7d65","size":0,"k":1,"m":0,"chunk_size":1,"placement":["n"],"slot":0,"mtime":"2025-11-21T23:00:00Z","adler32":"00000001","crc32c":"00000000","future":[1,2]}`)

	for dir, set := range map[string]map[string][]byte{"FuzzParse": seeds, "FuzzMetadata": metas} {
		dir = filepath.Join("testdata", "fuzz", dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, p := range set {
			body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(p)) + ")\n"
			if err := os.WriteFile(filepath.Join(dir, "seed-"+name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
