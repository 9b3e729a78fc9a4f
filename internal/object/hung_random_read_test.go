package object

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/node"
)

// TestRandomReadsAvoidAHungNode: random reads that land on the chunks of
// a node hung in its reads wait for it once, then avoid it. Regression
// (found by review): they paid a hedge delay (two, with page reads) every
// time: neither readPages nor readBlock (whose one needed chunk was the
// hung one, so that no other chunk had answered when the hedge fired)
// marked the node slow, and the hung read's timeout, ending after the
// block was read from parity, was dropped.
func TestRandomReadsAvoidAHungNode(t *testing.T) {
	hedge := 50 * time.Millisecond
	// Call 0 is the parse when the object is located.
	rule := node.Inject(node.OpRead, node.Hang()).FromIndex(1)
	data, s, _, _ := slotRuleStore(t, 60, 7, rule, nil, func(o *Options) {
		o.HedgeDelay = hedge
		o.ChunkTimeout = 200 * time.Millisecond // the hung reads time out during the test
		o.SuspectFor = time.Hour
	})
	g := s.Geometry()
	r, err := s.Open(context.Background(), "/h")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	bs := g.BlockSize()
	var slowReads int
	var total time.Duration
	for i := range 20 {
		b := int64(i*3 + 1)
		st := -1
		for s := range g.K {
			if g.Slot(b, s) == 0 {
				st = s
			}
		}
		if st < 0 {
			continue // slot 0 holds parity in this block
		}
		off := b*bs + int64(st)*g.ChunkSize + 100
		p := make([]byte, 100)
		start := time.Now()
		if _, err := r.ReadAt(context.Background(), p, off); err != nil || !bytes.Equal(p, data[off:off+100]) {
			t.Fatalf("ReadAt(%d): %v or wrong bytes", off, err)
		}
		took := time.Since(start)
		total += took
		if took >= hedge {
			slowReads++
		}
		t.Logf("read %d (block %d stripe %d): %v", i, b, st, took)
	}
	t.Logf("hung node asked %d times; %d reads waited >= a hedge delay; total %v", rule.Fired(), slowReads, total)
	if slowReads > 1 {
		t.Errorf("%d random reads each waited a hedge delay (or two) for the hung node: it is never avoided", slowReads)
	}
}
