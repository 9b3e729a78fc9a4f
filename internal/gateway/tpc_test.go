package gateway

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/testcluster"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// tpcGateway serves a fresh test cluster and returns its address, its FS
// and a client.
func tpcGateway(t *testing.T) (string, *FS, *xrootd.Client) {
	t.Helper()
	c := testcluster.New(t, 7, layout.Geometry{K: 4, M: 2, ChunkSize: 64 << 10})
	fsys := NewFS(c.Store, nil, Hooks{})
	fsys.tpcKeys.Wait = 2 * time.Second // long enough for a loaded host, short for the refusals
	addr, cl := serveFS(t, &xrootd.Server{Handler: fsys, Limits: xrootd.Limits{WaitRespAfter: 10 * time.Millisecond}})
	return addr, fsys, cl
}

// thirdPartyCopy drives a copy as xrdcp --tpc does: the destination is
// opened with the source's address and key, its first sync starts the
// pull, the source is opened with the key (registering it), and the
// second sync waits for the pull's end; then both are closed. The key the
// source is told may differ from the destination's (srcKey).
func thirdPartyCopy(ctx context.Context, src, dst *xrootd.Client, srcPath, dstPath, key, srcKey string) error {
	df, err := dst.Open(ctx, dstPath+"?tpc.key="+key+"&tpc.lfn="+srcPath+"&tpc.src="+src.Addr()+"&tpc.stage=copy&tpc.spr=root&tpc.tpr=root",
		xrootd.OpenNew|xrootd.OpenUpdate, 0o644)
	if err != nil {
		return err
	}
	if err := df.Sync(ctx); err != nil {
		df.Close(ctx)
		return err
	}
	sf, err := src.Open(ctx, srcPath+"?tpc.dst=127.0.0.1&tpc.key="+srcKey+"&tpc.stage=copy", xrootd.OpenRead, 0)
	if err != nil {
		df.Close(ctx)
		return err
	}
	syncErr := df.Sync(ctx)
	sf.Close(ctx)
	if err := df.Close(ctx); syncErr == nil {
		return err
	}
	return syncErr
}

func TestThirdPartyCopy(t *testing.T) {
	ctx := context.Background()
	_, _, src := tpcGateway(t)
	_, _, dst := tpcGateway(t)
	data := make([]byte, 3<<20+12345)
	rand.NewChaCha8([32]byte{1, 2}).Read(data)
	upload(t, src, "/tpc/src", data)

	for _, c := range []*xrootd.Client{src, dst} {
		if v, err := c.QueryConfig(ctx, "tpc", "tpcdlg"); err != nil || len(v) != 2 || v[0] != "1" || v[1] != "tpcdlg" {
			t.Errorf("query config tpc tpcdlg: %q, %v; want 1 and tpcdlg (no delegation)", v, err)
		}
	}

	if err := thirdPartyCopy(ctx, src, dst, "/tpc/src", "/tpc/copy", "0123456789abcdef01234567", "0123456789abcdef01234567"); err != nil {
		t.Fatalf("copy: %v", err)
	}
	if got := download(t, dst, "/tpc/copy"); !bytes.Equal(got, data) {
		t.Fatalf("the copy has %d bytes, not the source's %d", len(got), len(data))
	}

	// A pull that the client did not register (another key) is refused
	// by the source; the destination stores nothing.
	err := thirdPartyCopy(ctx, src, dst, "/tpc/src", "/tpc/refused", "key-of-the-destination", "key-of-the-source")
	if !hasCode(err, xrootd.ErrFSError) || !strings.Contains(err.Error(), "tpc authorization") {
		t.Errorf("copy with a key the source was not given: %v, want kXR_FSError for the tpc authorization", err)
	}
	if _, err := dst.Stat(ctx, "/tpc/refused"); !hasCode(err, xrootd.ErrNotFound) {
		t.Errorf("the refused copy's destination: %v, want kXR_NotFound", err)
	}

	// A missing source: nothing stored either.
	err = thirdPartyCopy(ctx, src, dst, "/tpc/missing", "/tpc/nothing", "k2", "k2")
	if !hasCode(err, xrootd.ErrNotFound) {
		t.Errorf("copy of a missing source: %v, want kXR_NotFound from the source's open", err)
	}
	if _, err := dst.Stat(ctx, "/tpc/nothing"); !hasCode(err, xrootd.ErrNotFound) {
		t.Errorf("the failed copy's destination: %v, want kXR_NotFound", err)
	}
}

// TestThirdPartyCopyDestinationRules: a copy's destination takes no
// writes of the client's own, one closed without a sync stores nothing,
// and tpc CGI that does not fit the open's mode is refused.
func TestThirdPartyCopyDestinationRules(t *testing.T) {
	ctx := context.Background()
	srcAddr, _, src := tpcGateway(t)
	_, _, dst := tpcGateway(t)
	upload(t, src, "/s", []byte("source bytes"))
	cgi := "?tpc.key=k&tpc.lfn=/s&tpc.src=" + srcAddr + "&tpc.stage=copy"
	df, err := dst.Open(ctx, "/d"+cgi, xrootd.OpenNew|xrootd.OpenUpdate, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := df.WriteAt(ctx, []byte("mine"), 0); !hasCode(err, xrootd.ErrNotAuthorized) {
		t.Errorf("client write to a copy's destination: %v, want kXR_NotAuthorized", err)
	}
	if err := df.Close(ctx); err != nil {
		t.Errorf("close without a copy: %v", err)
	}
	if _, err := dst.Stat(ctx, "/d"); !hasCode(err, xrootd.ErrNotFound) {
		t.Errorf("a destination closed without a copy: %v, want kXR_NotFound", err)
	}
	if _, err := dst.Open(ctx, "/d"+cgi, xrootd.OpenRead, 0); !hasCode(err, xrootd.ErrArgInvalid) {
		t.Errorf("tpc.src on an open for reading: %v, want kXR_ArgInvalid", err)
	}
	if _, err := src.Open(ctx, "/s?tpc.key=k&tpc.dst=h", xrootd.OpenNew|xrootd.OpenUpdate, 0o644); !hasCode(err, xrootd.ErrArgInvalid) {
		t.Errorf("tpc.dst on an open for writing: %v, want kXR_ArgInvalid", err)
	}
	if _, err := src.Open(ctx, "/s?tpc.key=k&tpc.dst=h&tpc.org=u.1@h", xrootd.OpenRead, 0); !hasCode(err, xrootd.ErrArgInvalid) {
		t.Errorf("conflicting tpc cgi: %v, want kXR_ArgInvalid", err)
	}
}

// TestThirdPartyPullNeedsItsKey: an open that brings a key no client
// registered waits for the registration, then is refused; so is one
// from another host than the registered destination.
func TestThirdPartyPullNeedsItsKey(t *testing.T) {
	ctx := context.Background()
	_, _, src := tpcGateway(t)
	upload(t, src, "/s", []byte("source bytes"))
	start := time.Now()
	_, err := src.Open(ctx, "/s?tpc.key=guess&tpc.org=u.1@[::ffff:127.0.0.1]", xrootd.OpenRead, 0)
	if !hasCode(err, xrootd.ErrNotAuthorized) || time.Since(start) < 400*time.Millisecond {
		t.Errorf("pull with an unregistered key: %v after %v, want kXR_NotAuthorized after the wait", err, time.Since(start))
	}
	// Registered for another destination host.
	sf, err := src.Open(ctx, "/s?tpc.key=k2&tpc.dst=192.0.2.1&tpc.stage=copy", xrootd.OpenRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close(ctx)
	_, err = src.Open(ctx, "/s?tpc.key=k2&tpc.org=ecstore."+strconv.Itoa(os.Getpid())+"@[::ffff:127.0.0.1]", xrootd.OpenRead, 0)
	if !hasCode(err, xrootd.ErrNotAuthorized) {
		t.Errorf("pull from another host than the registered destination: %v", err)
	}
}

// TestThirdPartyPullCannotBeForged: regressions of a review's findings. A
// writer at a destination cannot smuggle another client's key and origin
// into its pull through tpc.lfn; a pull that does not match a
// registration learns nothing of it (the refusal says nothing more and
// comes after the wait, as for a key nobody registered) and uses the key
// up.
func TestThirdPartyPullCannotBeForged(t *testing.T) {
	ctx := context.Background()
	_, srcFS, src := tpcGateway(t)
	_, _, dst := tpcGateway(t)
	upload(t, src, "/secret", []byte("victim's bytes"))
	victim := xrootd.Identity{User: "victim", PID: 999, Remote: netip.MustParseAddrPort("10.0.0.1:1234")}
	release, err := srcFS.tpcKeys.Register(victim, "VK", "/secret", "127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	lfn := "/secret?tpc.key=VK&tpc.org=victim.999@[::ffff:10.0.0.1]&"
	_, err = dst.Open(ctx, "/stolen?tpc.key=attacker&tpc.lfn="+url.QueryEscape(lfn)+"&tpc.src="+src.Addr()+"&tpc.stage=copy",
		xrootd.OpenNew|xrootd.OpenUpdate, 0o644)
	if !hasCode(err, xrootd.ErrArgInvalid) {
		t.Errorf("a destination open whose tpc.lfn carries CGI: %v, want kXR_ArgInvalid", err)
	}

	start := time.Now()
	_, err = src.Open(ctx, "/secret?tpc.key=VK&tpc.org=victim.999@[::1]", xrootd.OpenRead, 0)
	var xe *xrootd.Error
	if !errors.As(err, &xe) || xe.Code != xrootd.ErrNotAuthorized || strings.Contains(xe.Message, "victim") || strings.Contains(xe.Message, "10.0.0.1") {
		t.Errorf("a pull from the wrong host: %v, want kXR_NotAuthorized that names nothing of the registration", err)
	}
	if took := time.Since(start); took < srcFS.tpcKeys.Wait {
		t.Errorf("the refusal came after %v, before the wait (%v)", took, srcFS.tpcKeys.Wait)
	}
	// The key is used up: the right pull (from the victim's destination,
	// this host) is refused now.
	if _, err := src.Open(ctx, "/secret?tpc.key=VK&tpc.org=victim.999@[::ffff:10.0.0.1]", xrootd.OpenRead, 0); !hasCode(err, xrootd.ErrNotAuthorized) {
		t.Errorf("a pull with a key a refused pull used up: %v", err)
	}
}

// TestThirdPartyCopyClosedEarly: a close that arrives while the second
// sync waits for the pull (from a source that never answers) ends the
// pull at once, as xrootd cancels its copy job: the sync fails, the close
// says nothing was stored, and nothing is. Regression (review): the
// close waited behind the sync for the pull's 2 minute idle bound.
func TestThirdPartyCopyClosedEarly(t *testing.T) {
	ctx := context.Background()
	_, _, dst := tpcGateway(t)
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close() // accepted, never answered
		}
	}()
	df, err := dst.Open(ctx, "/early?tpc.key=k&tpc.lfn=/s&tpc.src="+silent.Addr().String()+"&tpc.stage=copy",
		xrootd.OpenNew|xrootd.OpenUpdate, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := df.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	syncErr := make(chan error, 1)
	go func() { syncErr <- df.Sync(ctx) }()
	time.Sleep(100 * time.Millisecond) // the sync waits for the pull
	closed := make(chan error, 1)
	go func() { closed <- df.Close(ctx) }()
	select {
	case err := <-closed:
		if !hasCode(err, xrootd.ErrFSError) || !strings.Contains(err.Error(), "nothing stored") {
			t.Errorf("close during the copy: %v, want kXR_FSError saying nothing was stored", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the close waited for the pull")
	}
	if err := <-syncErr; err == nil {
		t.Error("the sync waiting for a cancelled pull succeeded")
	}
	if _, err := dst.Stat(ctx, "/early"); !hasCode(err, xrootd.ErrNotFound) {
		t.Errorf("after a copy closed early: %v, want kXR_NotFound", err)
	}
}
