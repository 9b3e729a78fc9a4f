package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/testcluster"
	"github.com/ecstore/ecstore/internal/testtls"
	"github.com/ecstore/ecstore/internal/tlsfiles"
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
	outcomes := &recorded{}
	fsys := NewFS(c.Store, nil, Hooks{BrokenUpload: outcomes.add})
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
	// Its own client does, and sends again the writes it had no answer
	// for, in no set order, as XrdCl does: one after a gap (kept until
	// the gap is filled), one the gateway had whole, one that fills the
	// gap. A write below what is written that is not one of those is
	// refused.
	g, err := dial("alice").Open(ctx, "/r/obj", xrootd.OpenUpdate|xrootd.OpenMkpath, 0o644)
	if err != nil {
		t.Fatalf("the recovery open: %v", err)
	}
	if _, err := g.WriteAt(ctx, data[800_000:900_000], 800_000); err != nil {
		t.Fatalf("a write sent again after a gap: %v", err)
	}
	if _, err := g.WriteAt(ctx, data[600_000:700_000], 600_000); err != nil {
		t.Fatalf("a write sent again, written whole already: %v", err)
	}
	if _, err := g.WriteAt(ctx, data[700_000:800_000], 700_000); err != nil {
		t.Fatalf("a write sent again that fills the gap: %v", err)
	}
	for off := 900_000; off < len(data); off += 100_000 {
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
	if got := outcomes.get(); !slices.Equal(got, []string{"kept", "resumed"}) {
		t.Errorf("BrokenUpload hook: %q, want kept, resumed", got)
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
	outcomes := &recorded{}
	fsys := NewFS(c.Store, nil, Hooks{BrokenUpload: outcomes.add})
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
	if got := outcomes.get(); !slices.Equal(got, []string{"kept", "expired"}) {
		t.Errorf("BrokenUpload hook: %q, want kept, expired", got)
	}
}

// recorded collects what a hook is called with.
type recorded struct {
	mu  sync.Mutex
	got []string
}

func (r *recorded) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, s)
}

func (r *recorded) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
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
	// xrdcp --xattr sets attributes after the last write: one that
	// comes to an upload committed at the break fails, not lost.
	if _, err := g.SetAttrs(ctx, []xrootd.Attr{{Name: "run", Value: []byte("7")}}, false); err == nil {
		t.Error("an attribute set on an upload committed at the break succeeded")
	}
	if err := g.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	if got, err := c.Get("/c/obj"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("object after the recovery: %d bytes, %v", len(got), err)
	}
}

// Regression (review): the upload of a token's holder was taken up by an
// anonymous client on the same host that logged in under the holder's
// name and process id; the key now says whether the client
// authenticated.
func TestBrokenUploadOfATokenHolderIsNotAnonymousClients(t *testing.T) {
	ctx := context.Background()
	c := testcluster.New(t, 7, layout.Geometry{K: 4, M: 2, ChunkSize: 64 << 10})
	files := testtls.New(t, "localhost")
	pair, err := tlsfiles.Load(files.CertFile, files.KeyFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	fsys := NewFS(c.Store, nil, Hooks{}) // anonymous writes allowed
	tokens := func(context.Context, string) (string, any, error) { return "alice", nil, nil }
	addr, _ := serveFS(t, &xrootd.Server{Handler: fsys, TLS: pair.Config(), Tokens: tokens})
	url := "roots://" + addr
	dial := func(o *xrootd.DialOptions) *xrootd.Client {
		o.TLS = files.ClientConfig()
		cl, err := xrootd.Dial(ctx, url, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	owner := dial(&xrootd.DialOptions{Token: "T", Username: "bob"})
	f, err := owner.Open(ctx, "/h/obj", xrootd.OpenNew|xrootd.OpenUpdate|xrootd.OpenMkpath, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ctx, bytes.Repeat([]byte("A"), 300_000), 0); err != nil {
		t.Fatal(err)
	}
	owner.Close()
	thief := dial(&xrootd.DialOptions{Username: "alice", NoTokenSearch: true})
	if _, err := thief.Open(ctx, "/h/obj", xrootd.OpenUpdate, 0o644); err == nil {
		t.Fatal("an anonymous client took up a token holder's upload")
	}
	again := dial(&xrootd.DialOptions{Token: "T", Username: "bob"})
	g, err := again.Open(ctx, "/h/obj", xrootd.OpenUpdate, 0o644)
	if err != nil {
		t.Fatalf("the holder's recovery open: %v", err)
	}
	if err := g.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// Regression (review): once a resumed upload's client had written past
// what the gateway held, a write below it was still answered ok and its
// bytes dropped, whatever they were; only a write the gateway took
// before the break (same offset, its length) is passed over.
func TestResumedUploadRefusesRewritesAfterItsReplay(t *testing.T) {
	ctx := context.Background()
	c := testcluster.New(t, 7, layout.Geometry{K: 4, M: 2, ChunkSize: 64 << 10})
	fsys := NewFS(c.Store, nil, Hooks{})
	addr, first := serveFS(t, &xrootd.Server{Handler: fsys})
	f, err := first.Open(ctx, "/w/obj", xrootd.OpenNew|xrootd.OpenUpdate|xrootd.OpenMkpath, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ctx, bytes.Repeat([]byte("A"), 200_000), 0); err != nil {
		t.Fatal(err)
	}
	first.Close()
	again, err := xrootd.Dial(ctx, addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	g, err := again.Open(ctx, "/w/obj", xrootd.OpenUpdate, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteAt(ctx, bytes.Repeat([]byte("A"), 200_000), 0); err != nil {
		t.Fatalf("a write sent again: %v", err)
	}
	if _, err := g.WriteAt(ctx, bytes.Repeat([]byte("B"), 100_000), 200_000); err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteAt(ctx, bytes.Repeat([]byte("C"), 1000), 5_000); err == nil {
		t.Fatal("a rewrite after the replay was answered ok")
	}
	if err := g.Close(ctx); err == nil {
		t.Fatal("the close of an upload that refused a write succeeded")
	}
}

// Regression (review): an upload whose open was refused after the fact
// (past MaxOpenFiles) was kept for its client, which never had it,
// taking one of the MaxParked places for a minute.
func TestRefusedOpenIsNotKept(t *testing.T) {
	ctx := context.Background()
	c := testcluster.New(t, 7, layout.Geometry{K: 4, M: 2, ChunkSize: 64 << 10})
	fsys := NewFS(c.Store, nil, Hooks{})
	_, cl := serveFS(t, &xrootd.Server{Handler: fsys, Limits: xrootd.Limits{MaxOpenFiles: 1}})
	if _, err := cl.Open(ctx, "/o/a", xrootd.OpenNew|xrootd.OpenUpdate|xrootd.OpenMkpath, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/o/b", "/o/c"} {
		if _, err := cl.Open(ctx, p, xrootd.OpenNew|xrootd.OpenUpdate|xrootd.OpenMkpath, 0o644); err == nil {
			t.Fatal("an open past MaxOpenFiles succeeded")
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.Store.OpenTransfers() > 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	fsys.uploads.mu.Lock()
	parked, known := fsys.uploads.parked, len(fsys.uploads.m)
	fsys.uploads.mu.Unlock()
	if n := c.Store.OpenTransfers(); n != 1 || parked != 0 || known != 1 {
		t.Fatalf("after two refused opens: %d uploads open, %d kept, %d known; want 1, 0, 1", n, parked, known)
	}
}

// uncheckedReader gives data, then fails as a connection that breaks
// inside a page does, unchecked bytes of that page handed out.
type uncheckedReader struct {
	data      []byte
	unchecked int64
}

func (r *uncheckedReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, errors.New("connection reset")
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func (r *uncheckedReader) Unchecked() int64 { return r.unchecked }

// Regression (review): a kXR_pgwrite cut inside a page left that page's
// bytes, never checked, in the upload that its client then took up
// again; they are taken back, and the client sends them again.
func TestCutPageIsTakenBack(t *testing.T) {
	ctx := context.Background()
	c := testcluster.New(t, 7, layout.Geometry{K: 4, M: 2, ChunkSize: 64 << 10})
	fsys := NewFS(c.Store, nil, Hooks{})
	xf, err := fsys.Open(ctx, "/cut", xrootd.OpenOptions{Flags: xrootd.OpenNew | xrootd.OpenUpdate})
	if err != nil {
		t.Fatal(err)
	}
	wf := xf.(*writeFile)
	r := &uncheckedReader{data: make([]byte, 10_000), unchecked: 10_000 - 8192}
	if n, err := wf.WriteFrom(ctx, r, 0, 20_000); err == nil || n != 8192 {
		t.Fatalf("a cut payload: %d bytes, %v; want the 8192 of its checked pages and an error", n, err)
	}
	if got := wf.w.Size(); got != 8192 || !wf.cut {
		t.Fatalf("after the cut the upload holds %d bytes (cut %v); want the 8192 checked, and resumable", got, wf.cut)
	}
	wf.Discard(ctx)
}
