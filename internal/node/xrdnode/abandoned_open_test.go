package xrdnode

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/dataserver"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// slowOpenFS delays every open, as a busy disk does.
type slowOpenFS struct {
	*dataserver.FS
	delay atomic.Int64
}

func (s *slowOpenFS) Open(ctx context.Context, name string, o xrootd.OpenOptions) (xrootd.File, error) {
	time.Sleep(time.Duration(s.delay.Load()))
	return s.FS.Open(ctx, name, o)
}

// openFdsUnder counts this process's descriptors open on files under dir.
func openFdsUnder(t *testing.T, dir string) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc")
	}
	c := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(l, dir+"/") {
			c++
		}
	}
	return c
}

// Regression (found by review): an open (or create) whose context ended
// while the server was opening the file left the file open on the server
// for as long as the pooled connection lived: the late kXR_open answer
// was dropped and its handle never closed, and past Limits.MaxOpenFiles
// every open on the connection failed. The client closes such a file
// when its answer comes.
func TestAbandonedOpensAreClosed(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	fsys, err := dataserver.New(dir, dataserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	slow := &slowOpenFS{FS: fsys}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &xrootd.Server{Handler: slow, Logger: testLogger(t), Limits: xrootd.Limits{MaxOpenFiles: 4}}
	go srv.Serve(context.Background(), ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		fsys.Close()
	})
	n := newNode(t, "root://"+ln.Addr().String(), Options{Conns: 1})

	putFile(t, n, "/big", bytes.Repeat([]byte("x"), 300<<10)) // larger than WholeRead
	if got := openFdsUnder(t, dir); got != 0 {
		t.Fatalf("%d files open after the put", got)
	}

	slow.delay.Store(int64(300 * time.Millisecond))
	for range 4 {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err := n.Open(ctx, "/big")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("open with a short deadline: %v", err)
		}
	}
	time.Sleep(time.Second) // the server's opens complete
	slow.delay.Store(0)
	leaked := openFdsUnder(t, dir)
	t.Logf("descriptors still open on the node after 4 abandoned opens: %d", leaked)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f, err := n.Open(ctx, "/big")
	if err != nil {
		t.Errorf("open with time to spare, after 4 abandoned opens: %v", err)
	} else {
		f.Close()
	}
	if leaked != 0 {
		t.Errorf("%d server file handles leaked by abandoned opens", leaked)
	}
}
