package object

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ecstore/ecstore/internal/node"
)

// IsDir says what Stat says of a path's kind, and of a directory or a
// missing path it asks every node for a kXR_stat and nothing else: no
// archive opened, no summary read, no second round for the directory's
// time.
func TestIsDirAgreesWithStat(t *testing.T) {
	c, fs, _ := smallLookupCluster(t, nil)
	ctx := context.Background()
	if err := c.store.Mkdir(ctx, "/d/e"); err != nil {
		t.Fatal(err)
	}
	// Junk at /j on one node only: not an archive, so no object, and
	// what IsDir answers must come from the lookup Stat makes.
	if err := os.WriteFile(filepath.Join(c.dirs[0], "j"), []byte("not an archive"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stats []*node.Rule
	nodes := make([]node.Node, len(fs))
	opens, attrs := node.Inject(node.OpOpen, node.Delay(0)), node.Inject(node.OpReadAttrs, node.Delay(0))
	for i := range fs {
		st := node.Inject(node.OpStat, node.Delay(0))
		stats = append(stats, st)
		nodes[i] = node.Wrap(fs[i], st, opens, attrs)
	}
	s := c.storeOver(t, nodes, nil)
	lc := lookupCounters{}
	for _, tc := range []struct {
		path       string
		dir        bool
		notExist   bool
		onlyStats  bool // asks each node a stat, and nothing else
		statsAsked int
	}{
		{path: "/d", dir: true, onlyStats: true},
		{path: "/d/e", dir: true, onlyStats: true},
		{path: "/missing", notExist: true, onlyStats: true},
		{path: "/d/missing", notExist: true, onlyStats: true},
		{path: "/s"},
		{path: "/j", notExist: true},
		{path: "/", dir: true},
	} {
		before := [3]int{lc.total(stats), int(opens.Fired()), int(attrs.Fired())}
		dir, err := s.IsDir(ctx, tc.path)
		after := [3]int{lc.total(stats), int(opens.Fired()), int(attrs.Fired())}
		switch {
		case tc.notExist && !errors.Is(err, ErrNotExist):
			t.Errorf("IsDir(%s) = %v, %v; want ErrNotExist", tc.path, dir, err)
		case !tc.notExist && (err != nil || dir != tc.dir):
			t.Errorf("IsDir(%s) = %v, %v; want %v", tc.path, dir, err, tc.dir)
		}
		info, serr := s.Stat(ctx, tc.path)
		switch {
		case tc.notExist && !errors.Is(serr, ErrNotExist):
			t.Errorf("Stat(%s) = %v; IsDir says it does not exist", tc.path, serr)
		case !tc.notExist && (serr != nil || info.IsDir != dir):
			t.Errorf("Stat(%s) = %+v, %v; IsDir says directory %v", tc.path, info, serr, dir)
		}
		if tc.onlyStats {
			if st, o, a := after[0]-before[0], after[1]-before[1], after[2]-before[2]; st != len(fs) || o != 0 || a != 0 {
				t.Errorf("IsDir(%s): %d stats, %d opens, %d summary reads; want %d, 0, 0", tc.path, st, o, a, len(fs))
			}
		}
	}
	if _, err := s.IsDir(ctx, "/a/../b"); err == nil {
		t.Error("IsDir of a path with .. succeeded")
	}
}
