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

// Regression (TestGatewayKillDuringPuts, test/fault): XrdCl 5.5 reports
// a Close as done without sending it when it finds the connection gone,
// taking the server to have closed the file, so xrdcp exited 0 for an
// upload the gateway then discarded. An upload that holds every byte its
// client announced (oss.asize) is committed when its connection ends
// without a close; one cut short, one with no size announced, and one
// opened with kXR_posc are not (the first two are kept for a while for
// their client to take up again, see TestBrokenUploadIsTakenUpAgain).
func TestUploadWholeAtDisconnectIsCommitted(t *testing.T) {
	c := testcluster.New(t, 7, layout.Geometry{K: 4, M: 2, ChunkSize: 64 << 10})
	fsys := NewFS(c.Store, nil, Hooks{})
	fsys.uploads.parkFor = 100 * time.Millisecond // then the others are discarded
	addr, first := serveFS(t, &xrootd.Server{Handler: fsys})
	ctx := context.Background()
	upload(t, first, "/dc/old", []byte("the version before"))
	data := bytes.Repeat([]byte("0123456789"), 30_000) // 300 KB: several blocks
	cases := []struct {
		path  string
		flags xrootd.OpenFlags
		cgi   string
		write int
		kept  bool
	}{
		{"/dc/whole", 0, fmt.Sprintf("?oss.asize=%d", len(data)), len(data), true},
		{"/dc/old", xrootd.OpenDelete, fmt.Sprintf("?oss.asize=%d", len(data)), len(data), true},
		{"/dc/cut", 0, fmt.Sprintf("?oss.asize=%d", len(data)), len(data) - 1000, false},
		{"/dc/nosize", 0, "", len(data), false},
		{"/dc/posc", xrootd.OpenPOSC, fmt.Sprintf("?oss.asize=%d", len(data)), len(data), false},
		{"/dc/more", 0, "?oss.asize=1000", len(data), false},
	}
	cl, err := xrootd.Dial(ctx, addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		flags := xrootd.OpenUpdate | xrootd.OpenMkpath | tc.flags
		if tc.flags&xrootd.OpenDelete == 0 {
			flags |= xrootd.OpenNew
		}
		f, err := cl.Open(ctx, tc.path+tc.cgi, flags, 0o644)
		if err != nil {
			t.Fatalf("open %s: %v", tc.path, err)
		}
		if tc.path == "/dc/whole" {
			if _, err := f.SetAttrs(ctx, []xrootd.Attr{{Name: "run", Value: []byte("42")}}, false); err != nil {
				t.Fatalf("set attribute: %v", err)
			}
		}
		for off := 0; off < tc.write; off += 64 << 10 {
			if _, err := f.WriteAt(ctx, data[off:min(off+64<<10, tc.write)], int64(off)); err != nil {
				t.Fatalf("write %s at %d: %v", tc.path, off, err)
			}
		}
	}
	cl.Close() // no kXR_close: the connection ends
	deadline := time.Now().Add(10 * time.Second)
	for c.Store.OpenTransfers() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := c.Store.OpenTransfers(); n > 0 {
		t.Fatalf("%d uploads still open 10 s after their connection ended", n)
	}
	for _, tc := range cases {
		got, err := c.Get(tc.path)
		switch {
		case tc.kept && (err != nil || !bytes.Equal(got, data)):
			t.Errorf("%s: %d bytes, %v; want the whole upload of %d bytes", tc.path, len(got), err, len(data))
		case !tc.kept && tc.path == "/dc/old" && string(got) != "the version before":
			t.Errorf("%s: %q, %v; want the version before", tc.path, got, err)
		case !tc.kept && tc.path != "/dc/old" && !errors.Is(err, object.ErrNotExist):
			t.Errorf("%s: %d bytes, %v; want it absent", tc.path, len(got), err)
		}
	}
	info, err := c.Store.Stat(ctx, "/dc/whole")
	if err != nil {
		t.Fatal(err)
	}
	if v := info.User[attrKeyPrefix+"run"]; v != encodeAttrValue([]byte("42")) {
		t.Errorf("attribute set on the handle: %q, want it kept (user metadata %v)", v, info.User)
	}
}
