package gateway

import (
	"context"
	"math/rand/v2"
	"net"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/testcluster"
	"github.com/ecstore/ecstore/internal/xrootd"
)

func heapLive() uint64 {
	runtime.GC()
	runtime.GC() // pooled (sync.Pool) buffers are gone after two
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// A client that pipelines reads of one open file, each one frame long (no
// turn-taking), and does not read its socket: every request holds the
// block its frame is lent from until its send times out (WriteTimeout,
// 60 s by default), up to MaxInflight (64) blocks per connection, while the
// reader counts one block for the memory limit.
// Regression (found by review): reads of one frame or less were answered
// from the reader's block buffers, each holding its whole block until its
// frame was sent: 62 MiB held for 8 MiB and 56 bytes asked, 8x what the
// open reader counts. Short reads are copied out now.
func TestStalledClientDoesNotHoldLentBlocks(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 256 << 10} // 1 MiB blocks
	c := testcluster.New(t, 6, g)
	bs := int(g.BlockSize())
	const blocks = 64
	var counted atomic.Int64
	c2, err := object.New(c.Nodes, object.Options{Geometry: g, MinFree: -1,
		Events: object.Events{TransferMemory: func(b int64) { counted.Store(b) }}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c2.Create(context.Background(), "/big", nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(testcluster.Rand(rand.New(rand.NewPCG(1, 1)), int64(blocks*bs)))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	addr, _ := serveFS(t, &xrootd.Server{Handler: NewFS(c2, nil, Hooks{})})

	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return nil
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	send := func(sid byte, req xrootd.Request) {
		if _, err := conn.Write(xrootd.EncodeRequest(xrootd.StreamID{0, sid}, req).AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
	}
	read := func() *xrootd.ResponseFrame {
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		f, err := xrootd.ReadResponseFrame(conn, 64<<20)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	conn.Write(xrootd.AppendHandshake(nil))
	send(0, &xrootd.ProtocolRequest{ClientVersion: xrootd.ProtocolVersion})
	read()
	read()
	send(1, &xrootd.LoginRequest{Username: "stall"})
	read()
	send(2, &xrootd.OpenRequest{Options: xrootd.OpenRead, Path: "/big"})
	f := read()
	if f.Status != xrootd.StatusOK {
		t.Fatalf("open: %+v", f)
	}
	var fh xrootd.FileHandle
	copy(fh[:], f.Body)

	base := heapLive()
	before := counted.Load()
	// Eight one-frame reads fill the socket buffers; then 56 reads of
	// one byte each, at the start of a block each, that the gateway
	// cannot answer until the client reads.
	for b := range blocks {
		n := int32(1)
		if b < 8 {
			n = int32(bs)
		}
		send(byte(10+b), &xrootd.ReadRequest{Handle: fh, Offset: int64(b * bs), Length: n})
	}
	time.Sleep(3 * time.Second) // the client reads nothing
	// What the connection holds stays held until the client reads (or the
	// 60 s WriteTimeout); what the gateway allocates on the way to its
	// answers, on a machine loaded enough that it is still working on
	// them, is gone a moment later. So the least of a few samples counts.
	held := int64(heapLive()) - int64(base)
	for range 12 {
		if held <= 8*before {
			break
		}
		time.Sleep(250 * time.Millisecond)
		held = min(held, int64(heapLive())-int64(base))
	}
	t.Logf("heap held by the stalled connection: %d MiB (%.1f blocks); the open reader counts %d bytes (memory limit allows 4x: %d MiB)",
		held>>20, float64(held)/float64(bs), before, 4*before>>20)
	if held > 8*before {
		t.Fatalf("one stalled connection holds %d MiB of blocks, %.1fx the %d MiB its one open file is allowed", held>>20, float64(held)/float64(4*before), 4*before>>20)
	}
}
