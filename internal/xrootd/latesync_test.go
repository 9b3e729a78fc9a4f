package xrootd

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

// slowSyncFS gives files whose Sync takes a while, then fails with err.
type slowSyncFS struct {
	*memFS
	took time.Duration
	err  error
}

func (s slowSyncFS) Open(ctx context.Context, name string, o OpenOptions) (File, error) {
	f, err := s.memFS.Open(ctx, name, o)
	if err != nil {
		return nil, err
	}
	return &slowSyncFile{memFile: f.(*memFile), fs: s}, nil
}

type slowSyncFile struct {
	*memFile
	fs slowSyncFS
}

func (f *slowSyncFile) Sync(ctx context.Context) error {
	select {
	case <-time.After(f.fs.took):
		return f.fs.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestSlowSyncIsAnsweredLate: a kXR_sync that outlasts
// Limits.WaitRespAfter is answered kXR_waitresp at once and then with
// kXR_attn kXR_asynresp carrying the answer (its success or its error), as
// xrootd answers the sync that waits for a third-party copy; one that
// returns in time is answered plainly. The Go client takes both.
func TestSlowSyncIsAnsweredLate(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		code ErrorCode
	}{
		{"ok", nil, 0},
		{"error", Errorf(ErrFSError, "the copy failed"), ErrFSError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := slowSyncFS{memFS: newMemFS(), took: 300 * time.Millisecond, err: tc.err}
			addr, _ := startServer(t, fsys, Limits{WaitRespAfter: 20 * time.Millisecond})

			rc := rawDial(t, addr, true)
			rc.send(StreamID{0, 2}, &OpenRequest{Mode: 0o644, Options: OpenNew | OpenUpdate, Path: "/f"})
			f := rc.final()
			if f.Status != StatusOK {
				t.Fatalf("open: %v %q", f.Status, f.Body)
			}
			r, err := ParseOpenResponse(f.Body)
			if err != nil {
				t.Fatal(err)
			}
			sid := StreamID{0, 3}
			rc.send(sid, &SyncRequest{Handle: r.Handle})
			f = rc.read()
			if f.StreamID != sid || f.Status != StatusWaitResp || len(f.Body) < 4 || binary.BigEndian.Uint32(f.Body) != WaitRespSeconds {
				t.Fatalf("first answer to a slow sync: %v on %v %q, want kXR_waitresp %d s", f.Status, f.StreamID, f.Body, WaitRespSeconds)
			}
			rc.ping(StreamID{0, 4}) // the connection serves others meanwhile
			f = rc.read()
			if f.Status != StatusAttn {
				t.Fatalf("second answer: %v, want kXR_attn", f.Status)
			}
			inner, ok, err := parseAsyncResponse(f.Body)
			if err != nil || !ok || inner.StreamID != sid {
				t.Fatalf("kXR_asynresp: %+v, %v, %v", inner, ok, err)
			}
			if tc.err == nil {
				if inner.Status != StatusOK {
					t.Fatalf("late answer %v %q, want kXR_ok", inner.Status, inner.Body)
				}
			} else if xe, err := ParseErrorBody(inner.Body); inner.Status != StatusError || err != nil || xe.Code != tc.code {
				t.Fatalf("late answer %v %v (%v), want kXR_error %v", inner.Status, xe, err, tc.code)
			}

			// The Go client waits for the late answer.
			c := dial(t, addr, nil)
			ctx := testCtx(t)
			cf, err := c.Open(ctx, "/g", OpenNew|OpenUpdate, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			err = cf.Sync(ctx)
			var xe *Error
			switch {
			case tc.err == nil && err != nil:
				t.Errorf("client sync: %v", err)
			case tc.err != nil && (!errors.As(err, &xe) || xe.Code != tc.code):
				t.Errorf("client sync: %v, want %v", err, tc.code)
			}
		})
	}
	// A sync that returns in time is answered plainly.
	addr, _ := startServer(t, slowSyncFS{memFS: newMemFS(), took: time.Millisecond}, Limits{WaitRespAfter: 5 * time.Second})
	rc := rawDial(t, addr, true)
	rc.send(StreamID{0, 2}, &OpenRequest{Mode: 0o644, Options: OpenNew | OpenUpdate, Path: "/f"})
	r, err := ParseOpenResponse(rc.final().Body)
	if err != nil {
		t.Fatal(err)
	}
	rc.send(StreamID{0, 3}, &SyncRequest{Handle: r.Handle})
	if f := rc.read(); f.Status != StatusOK || f.StreamID != (StreamID{0, 3}) {
		t.Fatalf("quick sync answered %v on %v", f.Status, f.StreamID)
	}
}
