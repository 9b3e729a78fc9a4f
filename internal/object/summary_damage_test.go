package object

import (
	"context"
	"net/url"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ecstore/ecstore/internal/layout"
)

// Regression (found by review): a brief stat (kXR_stat) and a listing
// took an object's size from one archive's summary without comparing it
// with the others': one node's damaged summary changed the size xrdfs
// stat and ls showed. Summaries that disagree send the stat to the
// archives.
func TestDamagedSummaryDoesNotSetTheSize(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 4096}
	c := newCluster(t, 6, g)
	put(t, c.store, "/o", make([]byte, 50000))
	for i, p := range c.archivesOf("/o") {
		buf := make([]byte, 512)
		n, err := unix.Getxattr(p, "user.ecstore", buf)
		if err != nil {
			t.Skipf("getxattr: %v", err)
		}
		v, err := url.ParseQuery(string(buf[:n]))
		if err != nil {
			t.Fatal(err)
		}
		good := v.Get(attrSize)
		v.Set(attrSize, "12345") // one node's summary lies about the size
		if err := unix.Setxattr(p, "user.ecstore", []byte(v.Encode()), 0); err != nil {
			t.Fatal(err)
		}
		s, err := New(c.nodes, c.store.opts)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.StatBrief(ctx, "/o")
		if err == nil && info.Size != 50000 {
			t.Errorf("summary of archive %d damaged: StatBrief says %d bytes, the object has 50000", i, info.Size)
		}
		if l, err := s.List(ctx, "/"); err != nil || len(l) != 1 || l[0].Size != 50000 {
			t.Errorf("summary of archive %d damaged: the listing says %+v, %v", i, l, err)
		}
		v.Set(attrSize, good)
		unix.Setxattr(p, "user.ecstore", []byte(v.Encode()), 0)
	}
}
