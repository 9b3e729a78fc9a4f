package object

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
)

// concurrentPuts writes n objects of blocks blocks at once through s and
// returns their data and the errors of their writes.
func concurrentPuts(t *testing.T, s *Store, g layout.Geometry, n int, blocks int64) ([][]byte, []error) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed(t), 11))
	data := make([][]byte, n)
	for i := range data {
		data[i] = randBytes(r, blocks*g.BlockSize())
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			w, err := s.Create(context.Background(), fmt.Sprintf("/busy/f%d", i), nil)
			if err == nil {
				_, err = w.Write(data[i])
				if cerr := w.Close(); err == nil {
					err = cerr
				}
			}
			errs[i] = err
		})
	}
	wg.Wait()
	return data, errs
}

// TestBusyNodesAreWaitedFor: nodes whose disk is saturated, appends
// queueing behind each other's for longer than WriteTimeout while the
// disk completes one every few milliseconds, are busy, not hung:
// concurrent writes wait for them and succeed whole. Regression: 8
// streams of 256 MiB to local directories on one slow disk failed
// ('quorum not reached: ... no answer from the file system'), appends
// having taken over the 3 s WriteTimeout, and others were written
// degraded by WriteLag.
func TestBusyNodesAreWaitedFor(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 4096}
	c, _ := faultyCluster(t, 6, g)
	nodes := slices.Clone(c.nodes)
	for _, i := range []int{0, 2, 4} { // more than M
		nodes[i] = &busyDisk{Node: nodes[i], service: 8 * time.Millisecond, head: make(chan struct{}, 1)}
	}
	var degraded atomic.Int32
	s := c.storeOver(t, nodes, func(o *Options) {
		o.WriteTimeout, o.WriteLag = 60*time.Millisecond, 30*time.Millisecond
		o.Events.DegradedWrite = func(string, []int) { degraded.Add(1) }
	})
	data, errs := concurrentPuts(t, s, g, 8, 8)
	for i, err := range errs {
		if err != nil {
			t.Errorf("write %d on busy nodes: %v", i, err)
		}
	}
	if n := degraded.Load(); n != 0 {
		t.Errorf("%d writes degraded on busy nodes, want none", n)
	}
	for i := range data {
		if got, err := get(s, fmt.Sprintf("/busy/f%d", i)); err != nil || !bytes.Equal(got, data[i]) {
			t.Errorf("read %d: err %v, equal %v", i, err, bytes.Equal(got, data[i]))
		}
	}
}

// TestHungNodeAmongBusyWritesIsDropped: a node that completes nothing is
// still dropped from concurrent writes after WriteLag or WriteTimeout,
// not kept waiting for as a busy node would be.
func TestHungNodeAmongBusyWritesIsDropped(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 4096}
	c, fs := faultyCluster(t, 6, g)
	nodes := slices.Clone(c.nodes)
	nodes[3] = node.Wrap(fs[3], node.Inject(node.OpWrite, node.Hang()))
	var degraded atomic.Int32
	timeout := 100 * time.Millisecond
	s := c.storeOver(t, nodes, func(o *Options) {
		o.WriteTimeout, o.WriteLag = timeout, 50*time.Millisecond
		o.Events.DegradedWrite = func(string, []int) { degraded.Add(1) }
	})
	start := time.Now()
	_, errs := concurrentPuts(t, s, g, 4, 4)
	took := time.Since(start)
	for i, err := range errs {
		if err != nil {
			t.Errorf("write %d with one node hung: %v", i, err)
		}
	}
	if n := degraded.Load(); n != 4 {
		t.Errorf("%d writes degraded, want 4 (the hung node dropped from each)", n)
	}
	if took > busyWait*timeout {
		t.Errorf("writes with a hung node took %v: waited for it as for a busy node (%v)", took, busyWait*timeout)
	}
}

// TestAppendDeadline checks uploadWriter's deadline directly: an append
// on a node that completes nothing else fails with DeadlineExceeded after
// timeout; one whose node completes other appends is waited for, up to
// busyWait timeouts.
func TestAppendDeadline(t *testing.T) {
	const timeout = 40 * time.Millisecond
	for _, tc := range []struct {
		name     string
		takes    time.Duration
		busy     bool
		wantErr  bool
		maxTaken time.Duration
	}{
		// (the error tells the idle case's deadline; its time is not
		// checked, as timers run late on a loaded machine)
		{"idle node, slow append", 3 * timeout, false, true, 0},
		{"busy node, slow append", 3 * timeout, true, false, 0},
		{"busy node, append past the bound", 2 * busyWait * timeout, true, true, (busyWait + 5) * timeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p nodeProgress
			stop := make(chan struct{})
			defer close(stop)
			if tc.busy {
				go func() { // other writes' appends on the node complete
					for {
						select {
						case <-stop:
							return
						case <-time.After(timeout / 5):
							p.done("n1", time.Now())
						}
					}
				}()
			}
			up := &slowUpload{takes: tc.takes}
			u := uploadWriter{ctx: context.Background(), up: up, timeout: timeout, node: "n1", progress: &p}
			start := time.Now()
			_, err := u.Write([]byte("chunk"))
			took := time.Since(start)
			if (err != nil) != tc.wantErr || (err != nil && !errors.Is(err, context.DeadlineExceeded)) {
				t.Errorf("err %v, want an error: %v (DeadlineExceeded)", err, tc.wantErr)
			}
			if tc.maxTaken > 0 && took > tc.maxTaken {
				t.Errorf("took %v, want at most %v", took, tc.maxTaken)
			}
		})
	}
}

// slowUpload is a node.Upload whose Write takes takes, or fails with its
// context's error when that ends first.
type slowUpload struct {
	node.Upload
	takes time.Duration
}

func (u *slowUpload) Write(ctx context.Context, p []byte) error {
	select {
	case <-time.After(u.takes):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// busyDisk is a node whose disk serves one append at a time, each taking
// service: appends queue behind each other's, as on a saturated disk.
type busyDisk struct {
	node.Node
	service time.Duration
	head    chan struct{} // held by the append being served
}

func (d *busyDisk) Create(ctx context.Context, path string) (node.Upload, error) {
	up, err := d.Node.Create(ctx, path)
	if err != nil {
		return nil, err
	}
	return &busyUpload{Upload: up, d: d}, nil
}

type busyUpload struct {
	node.Upload
	d *busyDisk
}

func (u *busyUpload) Write(ctx context.Context, p []byte) error {
	select {
	case u.d.head <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-u.d.head }()
	time.Sleep(u.d.service)
	return u.Upload.Write(ctx, p)
}
