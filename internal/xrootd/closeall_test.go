package xrootd

import (
	"context"
	"sync"
	"testing"
	"time"
)

// slowAbortFS is memFS whose files opened for writing at "/slow" take
// until release to abort.
type slowAbortFS struct {
	*memFS
	release chan struct{}
}

type slowAbortFile struct {
	*memFile
	release chan struct{}
}

func (f slowAbortFile) Abort(ctx context.Context) error {
	select {
	case <-f.release:
	case <-ctx.Done():
	}
	return f.memFile.Abort(ctx)
}

func (s slowAbortFS) Open(ctx context.Context, name string, opts OpenOptions) (File, error) {
	f, err := s.memFS.Open(ctx, name, opts)
	if err != nil || name != "/slow" {
		return f, err
	}
	return slowAbortFile{memFile: f.(*memFile), release: s.release}, nil
}

// The files a client left open when its connection ended are aborted
// (or closed) each on its own: one whose abort takes long (an upload
// committed at the disconnect, say) does not hold up the others (an
// upload kept for its client's recovery, which that client is waiting
// to take up again). They were handled one after another.
func TestFilesLeftOpenAreAbortedApart(t *testing.T) {
	m := newMemFS()
	fsys := slowAbortFS{memFS: m, release: make(chan struct{})}
	var once sync.Once
	release := func() { once.Do(func() { close(fsys.release) }) }
	t.Cleanup(release)
	addr, _ := startServer(t, fsys, Limits{})
	c := dial(t, addr, nil)
	ctx := testCtx(t)
	for _, p := range []string{"/slow", "/a", "/b", "/c"} {
		f, err := c.Open(ctx, p, OpenNew, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(ctx, []byte("x"), 0); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	aborted := func() int {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.aborted
	}
	deadline := time.Now().Add(5 * time.Second)
	for aborted() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := aborted(); n != 3 {
		t.Fatalf("%d of the 3 quick files aborted while the slow one aborts", n)
	}
	release()
	for aborted() < 4 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := aborted(); n != 4 {
		t.Fatalf("%d files aborted in all, want 4", n)
	}
}
