package object

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
)

// Regression (found with two nodes cut off the network during a put, in
// the fault suite's network test bed): the write drops a node that has
// written nothing for WriteLag only while every other slot has written
// all it was sent, so two nodes that hang at once each kept the other
// from being dropped, and the write waited for WriteTimeout. Slots stuck
// alike are now dropped together when the write quorum holds without
// them; when it does not, or when every node pauses at once (a disk they
// share), the write waits as before rather than failing at WriteLag.
func TestTwoHungNodesAreDroppedAfterWriteLag(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 4096}
	for _, tc := range []struct {
		name    string
		quorum  int
		hang    []int                                 // nodes that hang from their third write
		pause   bool                                  // every node's fourth write takes 600 ms
		timeout time.Duration                         // WriteTimeout
		ok      bool                                  // the write succeeds
		within  func(d, timeout time.Duration) string // "" if d is as it should be
	}{
		{"two hung, quorum K holds", 4, []int{1, 4}, false, 10 * time.Second, true, func(d, timeout time.Duration) string {
			if d > 3*time.Second {
				return "waited for WriteTimeout, not WriteLag"
			}
			return ""
		}},
		{"two hung, quorum K+1 lost", 5, []int{1, 4}, false, 1500 * time.Millisecond, false, func(d, timeout time.Duration) string {
			if d < timeout {
				return "failed before WriteTimeout, where the nodes might have come back"
			}
			return ""
		}},
		{"every node pauses", 5, nil, true, 10 * time.Second, true, func(d, timeout time.Duration) string { return "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, fs := faultyCluster(t, 6, g)
			nodes := slices.Clone(c.nodes)
			for _, i := range tc.hang {
				nodes[i] = node.Wrap(fs[i], node.Inject(node.OpWrite, node.Hang()).FromIndex(2))
			}
			if tc.pause {
				for i := range nodes {
					nodes[i] = node.Wrap(fs[i], node.Inject(node.OpWrite, node.Delay(600*time.Millisecond)).OnIndex(3))
				}
			}
			s := c.storeOver(t, nodes, func(o *Options) {
				o.Spares = -1
				o.WriteQuorum = tc.quorum
				o.WriteLag = 200 * time.Millisecond
				o.WriteTimeout = tc.timeout
			})
			w, err := s.Create(context.Background(), "/x", nil)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, werr := w.Write(randBytes(rand.New(rand.NewPCG(1, 6)), 12*g.BlockSize()))
			cerr := w.Close()
			d := time.Since(start)
			if why := tc.within(d, tc.timeout); why != "" {
				t.Errorf("the write took %v: %s", d.Round(time.Millisecond), why)
			}
			if ok := werr == nil && cerr == nil; ok != tc.ok {
				t.Errorf("write %v, close %v; want success %v", werr, cerr, tc.ok)
			}
			s.Drain()
		})
	}
}
