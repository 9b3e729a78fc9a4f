package object

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/archive"
	"github.com/ecstore/ecstore/internal/directio"
	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
	"golang.org/x/sys/unix"
)

func TestSummaryAttrsRoundTrip(t *testing.T) {
	now := time.Unix(1795658584, 449607137)
	v := archive.NewVersion(now)
	base := archive.Metadata{Version: v, Size: 27000, Slot: 2, MTime: now.UTC().Truncate(time.Microsecond),
		K: 8, M: 2, ChunkSize: 1 << 20}
	otherTime := base
	otherTime.MTime = time.Unix(1600000000, 5).UTC()
	unpackable := base
	unpackable.Version = "v1"
	withUser := base
	withUser.User = map[string]string{"content-type": "text/plain"}
	for name, m := range map[string]archive.Metadata{"packed": base, "own mtime": otherTime, "unpackable": unpackable, "user metadata": withUser} {
		a := summaryAttrs(&m)
		s, ok := parseSummary(a)
		if !ok {
			t.Errorf("%s: parseSummary(%v) failed", name, a)
			continue
		}
		if s.version != m.Version || s.size != m.Size || !s.mtime.Equal(m.MTime) || s.geo != m.Geometry() ||
			s.noUser != (len(m.User) == 0 && name != "unpackable") {
			t.Errorf("%s: parseSummary(%v) = %+v; want %s, %d, %v, %v", name, a, s, m.Version, m.Size, m.MTime, m.Geometry())
		}
		_, own := a[attrMTime]
		if own != (name == "own mtime") {
			t.Errorf("%s: attrs %v: mtime kept: %v", name, a, own)
		}
	}
	for _, a := range []map[string]string{
		nil,
		{attrVersion: "short", attrSize: "1", attrEC: "1+2"},
		{attrVersion: "AAAAAAAAAAAAAAAAAAAAAA", attrSize: "x", attrEC: "1+2"},
		{attrVersion: "AAAAAAAAAAAAAAAAAAAAAA", attrSize: "1", attrEC: "12"},
		{attrVersion: "AAAAAAAAAAAAAAAAAAAAAA", attrSize: "1", attrEC: "1+2", attrMTime: "noon"},
		{legacyVersion: string(v), legacySize: "1", legacyEC: "1+2"}, // no mtime
	} {
		if s, ok := parseSummary(a); ok {
			t.Errorf("parseSummary(%v) = %+v; want false", a, s)
		}
	}
}

// An archive's summary must fit in the 64 bytes of value that ext4 keeps
// inside a 256-byte inode for the xattr user.ecstore: checked on what
// node.Local writes, for the largest values a cluster uses: 16+4, 64 MiB
// chunks, and objects under 100 GB without user metadata (whose summary
// says so) or under 10 TB with it. Larger ones take an extra block per
// archive, next to archives of several GB.
func TestSummaryFitsInTheInode(t *testing.T) {
	dir := t.TempDir()
	l, err := node.NewLocal("n", dir, node.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	for _, c := range []struct {
		size int64
		user map[string]string
	}{
		{99_999_999_999, nil},
		{9_999_999_999_999, map[string]string{"content-type": "application/octet-stream"}},
	} {
		m := archive.Metadata{Version: archive.NewVersion(time.Now()), Size: c.size, Slot: 19,
			K: 16, M: 4, ChunkSize: 64 << 20, User: c.user}
		m.MTime = versionMTime(m.Version)
		name := fmt.Sprintf("big%d", c.size)
		up, err := l.Create(ctx, "/"+name)
		if err != nil {
			t.Fatal(err)
		}
		if err := up.(node.Attributes).SetAttrs(ctx, summaryAttrs(&m)); err != nil {
			t.Fatal(err)
		}
		if err := up.Finish(ctx); err != nil {
			t.Fatal(err)
		}
		if err := up.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4096)
		n, err := unix.Getxattr(filepath.Join(dir, name), "user.ecstore", buf)
		if err == unix.ENOTSUP {
			t.Skip("no user xattrs on the test directory's file system")
		}
		if err != nil {
			t.Fatal(err)
		}
		if n > 64 {
			t.Errorf("user.ecstore is %d bytes (%q); want at most 64", n, buf[:n])
		}
	}
}

// Listings take an object's size, time, version and geometry from its
// archives' attributes, in the keys written now and in those of archives
// written before: the attributes are rewritten here to claim another
// size and time than the archives hold, which only the attributes say.
func TestListReadsSummaryAttrs(t *testing.T) {
	g := layout.Geometry{K: 2, M: 1, ChunkSize: 4096}
	c := newCluster(t, 4, g)
	ctx := context.Background()
	put(t, c.store, "/d/o", make([]byte, 10000))
	in, err := c.store.Stat(ctx, "/d/o")
	if err != nil {
		t.Fatal(err)
	}
	claimed := time.Unix(1600000000, 123456789).UTC()
	for _, legacy := range []bool{false, true} {
		m := archive.Metadata{Version: in.Version, Size: 12345, MTime: claimed, K: g.K, M: g.M, ChunkSize: g.ChunkSize}
		for _, p := range c.archivesOf("/d/o") {
			var a map[string]string
			if legacy {
				a = map[string]string{legacyVersion: string(m.Version), legacySize: fmt.Sprint(m.Size),
					legacyEC: "2+1", legacyMTime: fmt.Sprint(m.MTime.UnixNano()), legacySlot: "0", legacyChunk: "4096"}
			} else {
				a = summaryAttrs(&m)
			}
			v := url.Values{}
			for k, val := range a {
				v.Set(k, val)
			}
			if err := unix.Setxattr(p, "user.ecstore", []byte(v.Encode()), 0); err != nil {
				t.Skipf("setxattr: %v", err)
			}
		}
		infos, err := c.store.List(ctx, "/d")
		if err != nil || len(infos) != 1 {
			t.Fatalf("legacy %v: list: %v, %v", legacy, infos, err)
		}
		got := infos[0]
		if got.Size != 12345 || !got.MTime.Equal(claimed) || got.Version != in.Version || got.Geometry != g || got.Archives != 3 {
			t.Errorf("legacy %v: listed %+v; want the attributes' size 12345, time %v, version %s, geometry %v, 3 archives",
				legacy, got, claimed, in.Version, g)
		}
	}
}

// What a node keeps in the page cache of a file it just wrote with
// O_DIRECT must cover what the archive reader reads first.
func TestTailCachedCoversFirstTail(t *testing.T) {
	if directio.TailCached < archive.FirstTail {
		t.Errorf("directio.TailCached %d < archive.FirstTail %d: a stat of a new object reads from disk", directio.TailCached, archive.FirstTail)
	}
}

// A listing knows from the summaries which objects have no user metadata
// (NoUserMeta), and does not claim it of one that has.
func TestListSaysWhichObjectsHaveNoUserMetadata(t *testing.T) {
	c := newCluster(t, 6, layout.Geometry{K: 3, M: 2, ChunkSize: 4096})
	ctx := context.Background()
	put(t, c.store, "/l/plain", []byte("no metadata"))
	w, err := c.store.Create(ctx, "/l/meta", &CreateOptions{User: map[string]string{"content-type": "text/plain"}})
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("with metadata"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	infos, err := c.store.List(ctx, "/l")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, in := range infos {
		got[in.Name] = in.NoUserMeta
	}
	if want := map[string]bool{"plain": true, "meta": false}; !maps.Equal(got, want) {
		t.Errorf("NoUserMeta by name: %v, want %v", got, want)
	}
}
