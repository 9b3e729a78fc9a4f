package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/testcluster"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// XrdCl's write recovery: when the connection of an upload breaks, the
// client logs in again, opens the file again with kXR_open_updt (no
// kXR_new, no kXR_delete) and sends again the writes it had no answer
// for, some of which the gateway may have taken. The upload, kept when
// its connection broke, is taken up again by that open: only by the same
// client, and only for a while. (Such an open was refused, and the upload
// discarded with the connection: xrdcp failed where a plain xrootd goes
// on.)
func TestBrokenUploadIsTakenUpAgain(t *testing.T) {
	ctx := context.Background()
	c := testcluster.New(t, 7, layout.Geometry{K: 4, M: 2, ChunkSize: 64 << 10})
	fsys := NewFS(c.Store, nil, Hooks{})
	addr, _ := serveFS(t, &xrootd.Server{Handler: fsys})
	dial := func(user string) *xrootd.Client {
		cl, err := xrootd.Dial(ctx, addr, &xrootd.DialOptions{Username: user})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	data := bytes.Repeat([]byte("abcdefghijklm"), 100_000) // 1.3 MB, blocks of 256 KiB
	const part = 700_000

	first := dial("alice")
	f, err := first.Open(ctx, "/r/obj", xrootd.OpenNew|xrootd.OpenUpdate|xrootd.OpenMkpath, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < part; off += 100_000 {
		if _, err := f.WriteAt(ctx, data[off:min(off+100_000, part)], int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	first.Close() // the connection breaks

	// Another client (another user name) may not take it up.
	if _, err := dial("mallory").Open(ctx, "/r/obj", xrootd.OpenUpdate, 0o644); err == nil {
		t.Fatal("another client took up the upload")
	}
	// Its own client does, and sends again a write it had no answer
	// for, which straddles the end of what was written.
	g, err := dial("alice").Open(ctx, "/r/obj", xrootd.OpenUpdate|xrootd.OpenMkpath, 0o644)
	if err != nil {
		t.Fatalf("the recovery open: %v", err)
	}
	if _, err := g.WriteAt(ctx, data[600_000:800_000], 600_000); err != nil {
		t.Fatalf("a write sent again: %v", err)
	}
	if _, err := g.WriteAt(ctx, data[650_000:700_000], 650_000); err != nil {
		t.Fatalf("a write sent again, written whole already: %v", err)
	}
	for off := 800_000; off < len(data); off += 100_000 {
		if _, err := g.WriteAt(ctx, data[off:min(off+100_000, len(data))], int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	if got, err := c.Get("/r/obj"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("object after the recovery: %d bytes, %v; want the %d written", len(got), err, len(data))
	}
	// A gap after a resume is still refused.
	h, err := dial("alice").Open(ctx, "/r/gap", xrootd.OpenNew|xrootd.OpenUpdate|xrootd.OpenMkpath, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.WriteAt(ctx, data[:1000], 0); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := dial("alice").Open(ctx, "/r/gap", xrootd.OpenUpdate, 0o644); err == nil {
		t.Fatal("an upload closed (committed) was taken up again")
	}
}

// An upload whose client does not come back is discarded after parkFor.
func TestBrokenUploadNotTakenUpIsDiscarded(t *testing.T) {
	ctx := context.Background()
	c := testcluster.New(t, 7, layout.Geometry{K: 4, M: 2, ChunkSize: 64 << 10})
	fsys := NewFS(c.Store, nil, Hooks{})
	fsys.uploads.parkFor = 200 * time.Millisecond
	addr, cl := serveFS(t, &xrootd.Server{Handler: fsys})
	f, err := cl.Open(ctx, "/p/obj", xrootd.OpenNew|xrootd.OpenUpdate|xrootd.OpenMkpath, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ctx, make([]byte, 300_000), 0); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Store.OpenTransfers() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := c.Store.OpenTransfers(); n > 0 {
		t.Fatalf("%d uploads still open long after their park time", n)
	}
	if _, err := c.Store.Stat(ctx, "/p/obj"); !errors.Is(err, object.ErrNotExist) {
		t.Fatalf("a discarded upload: %v", err)
	}
	again, err := xrootd.Dial(ctx, addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if _, err := again.Open(ctx, "/p/obj", xrootd.OpenUpdate, 0o644); err == nil {
		t.Fatal("a discarded upload was taken up again")
	}
}

// A gateway that stops discards the uploads it kept for their clients,
// and every upload whose connection ends then, at once: no client can
// take them up again.
func TestGatewayStopDiscardsBrokenUploads(t *testing.T) {
	ctx := context.Background()
	c := testcluster.New(t, 7, layout.Geometry{K: 4, M: 2, ChunkSize: 64 << 10})
	fsys := NewFS(c.Store, nil, Hooks{})
	addr, cl := serveFS(t, &xrootd.Server{Handler: fsys})
	other, err := xrootd.Dial(ctx, addr, &xrootd.DialOptions{Username: "other"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for i, conn := range []*xrootd.Client{cl, other} {
		f, err := conn.Open(ctx, fmt.Sprintf("/s/obj%d", i), xrootd.OpenNew|xrootd.OpenUpdate|xrootd.OpenMkpath, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(ctx, make([]byte, 300_000), 0); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	parked := func() int {
		fsys.uploads.mu.Lock()
		defer fsys.uploads.mu.Unlock()
		return fsys.uploads.parked
	}
	deadline := time.Now().Add(10 * time.Second)
	for parked() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if parked() != 1 {
		t.Fatalf("%d uploads kept after a broken connection, want 1", parked())
	}
	fsys.DiscardBrokenUploads()
	other.Close()
	for c.Store.OpenTransfers() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n, p := c.Store.OpenTransfers(), parked(); n > 0 || p > 0 {
		t.Fatalf("after the stop: %d uploads open, %d kept; want none", n, p)
	}
}

// An upload that held every byte announced when its connection broke is
// committed then; its client, which may not have had the answers to its
// last writes, recovers: it opens the file again, sends those writes
// again and closes, and is answered as if the upload had gone on (it
// was refused, and xrdcp failed for an object that was stored whole).
func TestRecoveryOfAnUploadCommittedAtTheBreak(t *testing.T) {
	ctx := context.Background()
	c := testcluster.New(t, 7, layout.Geometry{K: 4, M: 2, ChunkSize: 64 << 10})
	fsys := NewFS(c.Store, nil, Hooks{})
	addr, cl := serveFS(t, &xrootd.Server{Handler: fsys})
	data := bytes.Repeat([]byte("0123456789abcdef"), 40_000) // 640,000 bytes
	f, err := cl.Open(ctx, fmt.Sprintf("/c/obj?oss.asize=%d", len(data)), xrootd.OpenNew|xrootd.OpenUpdate|xrootd.OpenMkpath, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if got, err := c.Get("/c/obj"); err == nil && bytes.Equal(got, data) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the whole upload was not committed when its connection broke")
		}
		time.Sleep(5 * time.Millisecond)
	}
	again, err := xrootd.Dial(ctx, addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	g, err := again.Open(ctx, fmt.Sprintf("/c/obj?oss.asize=%d", len(data)), xrootd.OpenUpdate|xrootd.OpenMkpath, 0o644)
	if err != nil {
		t.Fatalf("the recovery open: %v", err)
	}
	if _, err := g.WriteAt(ctx, data[400_000:], 400_000); err != nil {
		t.Fatalf("the last write sent again: %v", err)
	}
	if _, err := g.WriteAt(ctx, []byte("more"), int64(len(data))); err == nil {
		t.Error("a write past the committed size succeeded")
	}
	if err := g.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	if got, err := c.Get("/c/obj"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("object after the recovery: %d bytes, %v", len(got), err)
	}
}
