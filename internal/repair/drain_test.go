package repair

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/testcluster"
)

func TestDrainEmptiesANode(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 3, M: 2, ChunkSize: 512}
	c := testcluster.New(t, 7, g)
	objs := map[string][]byte{}
	for i := range 8 {
		p := fmt.Sprintf("/dr/o%d", i)
		objs[p] = bytes.Repeat([]byte{byte(i)}, 700*i+1)
		c.Put(t, p, objs[p])
	}
	id := c.Nodes[2].ID()
	rep, err := Drain(ctx, c.Store, id, DrainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failed) > 0 || len(rep.Left) > 0 || rep.Moved == 0 {
		t.Fatalf("drain: moved %d, failed %v, left %v", rep.Moved, rep.Failed, rep.Left)
	}
	for p, want := range objs {
		got, err := c.Get(p)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s after drain: %v", p, err)
		}
		in, err := c.Store.Inspect(ctx, p, true)
		if err != nil || in.Health.String() != "healthy" {
			t.Fatalf("%s after drain: %v %v", p, in.Health, err)
		}
		for _, sl := range in.Slots {
			if sl.FoundOn == id {
				t.Fatalf("%s: slot %d still on drained node", p, sl.Slot)
			}
		}
	}
	mustCheckClean(t, c.Store, true)
}
