package object

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ecstore/ecstore/internal/layout"
)

// Regression: a write that every archive writer refuses alike (metadata
// past the 1 MiB readers take) was reported as quorum loss ("quorum not
// reached", which S3 answers 503 and root:// as an I/O error, both of
// which clients retry), each node blamed with a write error. It is the
// request's fault: the write fails with ErrMetadataTooLarge, no node is
// blamed, nothing is left at the path, and the store writes on.
func TestMetadataTooLargeIsNotQuorumLoss(t *testing.T) {
	var nodeErrors atomic.Int64
	c := newCluster(t, 6, layout.Geometry{K: 4, M: 2, ChunkSize: 64}, func(o *Options) {
		o.Events.NodeError = func(id, op string, err error) {
			nodeErrors.Add(1)
			t.Logf("node %s %s: %v", id, op, err)
		}
	})
	ctx := context.Background()
	w, err := c.store.Create(ctx, "/big", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	w.SetUser("x", strings.Repeat("x", 1<<20))
	err = w.Close()
	if !errors.Is(err, ErrMetadataTooLarge) || errors.Is(err, ErrQuorum) {
		t.Fatalf("Close with 1 MiB of user metadata: %v, want ErrMetadataTooLarge and not ErrQuorum", err)
	}
	if !strings.Contains(err.Error(), "exceeds") {
		t.Errorf("error %q does not say what was exceeded", err)
	}
	if n := nodeErrors.Load(); n > 0 {
		t.Errorf("%d node errors reported for the request's fault", n)
	}
	if _, err := c.store.Stat(ctx, "/big"); !errors.Is(err, ErrNotExist) {
		t.Errorf("stat after the refused write: %v, want ErrNotExist", err)
	}
	put(t, c.store, "/big", []byte("hello"))
	if got, err := get(c.store, "/big"); err != nil || string(got) != "hello" {
		t.Fatalf("after a refused write: %q, %v", got, err)
	}
}
