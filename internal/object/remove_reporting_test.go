package object

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"

	"github.com/ecstore/ecstore/internal/node"
)

// attrRemover is a node that removes a file and says which attributes
// it had in one call (node.AttrRemover), as an `ecstore node` does in one
// request. It counts those calls and the summary reads and removals the
// store asks for on their own. With refuse it removes nothing and says
// node.ErrUnsupported, as a server that does not offer the request.
type attrRemover struct {
	*node.Faulty
	refuse                bool
	calls, reads, removes atomic.Int32
}

func (r *attrRemover) RemoveWithAttrs(ctx context.Context, path string) (map[string]string, error) {
	r.calls.Add(1)
	if r.refuse {
		return nil, node.ErrUnsupported
	}
	fi, err := r.Faulty.Stat(ctx, path)
	switch {
	case err != nil:
		return nil, err
	case fi.IsDir:
		return nil, node.ErrIsDir
	}
	attrs, err := r.Faulty.ReadAttrs(ctx, path)
	if err != nil {
		return nil, err
	}
	return attrs, r.Faulty.Remove(ctx, path)
}

func (r *attrRemover) ReadAttrs(ctx context.Context, path string) (map[string]string, error) {
	r.reads.Add(1)
	return r.Faulty.ReadAttrs(ctx, path)
}

func (r *attrRemover) Remove(ctx context.Context, path string) error {
	r.removes.Add(1)
	return r.Faulty.Remove(ctx, path)
}

// attrRemovers is a store over the nodes of fs as attrRemovers, those
// for which refuse says so refusing.
func attrRemovers(t *testing.T, c *cluster, fs []*node.Faulty, refuse func(i int) bool) (*Store, []*attrRemover) {
	t.Helper()
	rs := make([]*attrRemover, len(fs))
	nodes := make([]node.Node, len(fs))
	for i, f := range fs {
		rs[i] = &attrRemover{Faulty: f, refuse: refuse != nil && refuse(i)}
		nodes[i] = rs[i]
	}
	return c.storeOver(t, nodes, nil), rs
}

// counts sums the calls of rs since the last counts.
func counts(rs []*attrRemover) (calls, reads, removes int) {
	for _, r := range rs {
		calls += int(r.calls.Swap(0))
		reads += int(r.reads.Swap(0))
		removes += int(r.removes.Swap(0))
	}
	return
}

// On nodes that say what they removed, an object's removal is one call
// per node: no summary is read, no archive removed on its own, and no
// tombstone written. The second removal finds nothing.
func TestRemoveIsOneCallPerNode(t *testing.T) {
	c, fs, _ := smallLookupCluster(t, nil)
	put(t, c.store, "/l", randBytes(rand.New(rand.NewPCG(seed(t), 5)), 3*c.store.Geometry().BlockSize()))
	s, rs := attrRemovers(t, c, fs, nil)
	ctx := context.Background()
	for _, p := range []string{"/s", "/l"} {
		counts(rs)
		if err := s.Remove(ctx, p); err != nil {
			t.Fatalf("remove %s: %v", p, err)
		}
		if calls, reads, removes := counts(rs); calls != len(fs) || reads != 0 || removes != 0 {
			t.Errorf("remove %s: %d calls, %d summary reads, %d removals; want %d, 0, 0", p, calls, reads, removes, len(fs))
		}
		if left := c.archivesOf(p); len(left) != 0 {
			t.Errorf("remove %s left %v", p, left)
		}
		if left := c.archivesOf(tombstonePath(p)); len(left) != 0 {
			t.Errorf("remove %s wrote tombstones %v", p, left)
		}
		if _, err := s.Stat(ctx, p); !errors.Is(err, ErrNotExist) {
			t.Errorf("stat of removed %s: %v; want ErrNotExist", p, err)
		}
		if err := s.Remove(ctx, p); !errors.Is(err, ErrNotExist) {
			t.Errorf("second remove of %s: %v; want ErrNotExist", p, err)
		}
	}
}

// Nodes that refuse to say what they remove are asked for the summary
// and then to remove the archive, in the same pass: the object is gone
// either way.
func TestRemoveOnNodesThatRefuse(t *testing.T) {
	c, fs, _ := smallLookupCluster(t, nil)
	s, rs := attrRemovers(t, c, fs, func(i int) bool { return i%2 == 0 })
	if err := s.Remove(context.Background(), "/s"); err != nil {
		t.Fatalf("remove: %v", err)
	}
	calls, reads, removes := counts(rs)
	if calls != len(fs) || reads != len(fs)/2 || removes > 3 {
		t.Errorf("%d calls, %d summary reads, %d removals; want %d, %d (the refusing nodes'), at most 3", calls, reads, removes, len(fs), len(fs)/2)
	}
	if left := c.archivesOf("/s"); len(left) != 0 {
		t.Errorf("remove left %v", left)
	}
}

// What removing a path finds says the answer: a directory is left
// alone; remnants of a removed object, hidden by its tombstones, are
// cleared and the object did not exist; an object that lost archives
// but is still readable was there.
func TestRemoveAnswersByWhatItFound(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		name := map[bool]string{false: "in one call", true: "summary first"}[refuse]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c, fs, data := smallLookupCluster(t, nil)
			s, _ := attrRemovers(t, c, fs, func(int) bool { return refuse })

			if err := s.Mkdir(ctx, "/dir"); err != nil {
				t.Fatal(err)
			}
			if err := s.Remove(ctx, "/dir"); !errors.Is(err, ErrIsDir) {
				t.Errorf("remove of a directory: %v; want ErrIsDir", err)
			}
			if left := c.archivesOf("/dir"); len(left) != len(fs) {
				t.Errorf("the directory is left on %d nodes; want %d", len(left), len(fs))
			}

			// Remnants: removed while two of its three nodes were down.
			holders := []int{c.slotNode(t, "/s", 0), c.slotNode(t, "/s", 1)}
			for _, i := range holders {
				fs[i].SetDown(true)
			}
			if err := s.Remove(ctx, "/s"); err != nil {
				t.Fatalf("remove with two nodes down: %v", err)
			}
			for _, i := range holders {
				fs[i].SetDown(false)
			}
			if len(c.archivesOf("/s")) == 0 {
				t.Fatal("no remnants: the test tests nothing")
			}
			if err := s.Remove(ctx, "/s"); !errors.Is(err, ErrNotExist) {
				t.Errorf("remove of remnants: %v; want ErrNotExist", err)
			}
			if left := c.archivesOf("/s"); len(left) != 0 {
				t.Errorf("remnants left: %v", left)
			}

			// A small object with one copy of three left.
			putHint(t, s, "/t", data, int64(len(data)))
			for _, p := range c.archivesOf("/t")[1:] {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Stat(ctx, "/t"); err != nil {
				t.Fatalf("stat of the degraded object: %v", err)
			}
			if err := s.Remove(ctx, "/t"); err != nil {
				t.Errorf("remove of a degraded object: %v", err)
			}
			if _, err := s.Stat(ctx, "/t"); !errors.Is(err, ErrNotExist) {
				t.Errorf("stat after the removal: %v; want ErrNotExist", err)
			}
		})
	}
}
