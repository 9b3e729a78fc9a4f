package gateway

import (
	"context"
	"sync"
	"testing"

	"github.com/ecstore/ecstore/internal/xrootd"
)

// Regression (a data race under -race): kXR_stat of a handle open for
// writing runs beside the handle's writes, and read the Writer's counts
// while they changed. It says the bytes written so far.
func TestStatWhileWriting(t *testing.T) {
	_, cl := serve(t)
	ctx := context.Background()
	f, err := cl.Open(ctx, "/race", xrootd.OpenNew|xrootd.OpenUpdate, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	const writes, size = 50, 32 << 10
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		last := int64(0)
		for range writes {
			fi, err := f.Stat(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			if fi.Size < last || fi.Size > writes*size {
				t.Errorf("stat while writing: size %d after %d", fi.Size, last)
			}
			last = fi.Size
		}
	}()
	buf := make([]byte, size)
	for i := range writes {
		if _, err := f.WriteAt(ctx, buf, int64(i*size)); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if fi, err := f.Stat(ctx); err != nil || fi.Size != writes*size {
		t.Errorf("stat after the writes: %+v, %v; want size %d", fi, err, writes*size)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
