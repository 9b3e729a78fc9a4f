package xrootd

import (
	"errors"
	"testing"
	"time"
)

// XrdCl sends kXR_endsess with the session id of its broken connection
// when it logs in again, before it opens its files again (its write
// recovery): the earlier session of the same client must then end, its
// files aborted or closed. Another client's session, or one that is not
// there, is not ended. (The server answered every kXR_endsess with ok and
// did nothing.)
func TestEndsessEndsTheClientsEarlierSession(t *testing.T) {
	m := newMemFS()
	addr, _ := startServer(t, m, Limits{})
	ctx := testCtx(t)
	old := dial(t, addr, nil)
	f, err := old.Open(ctx, "/partial", OpenNew, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ctx, []byte("half"), 0); err != nil {
		t.Fatal(err)
	}

	other := dial(t, addr, &DialOptions{Username: "someone"})
	err = other.roundTrip(ctx, &EndsessRequest{SessionID: old.sess}, nil)
	if code, ok := codeOf(err); !ok || code != ErrNotAuthorized {
		t.Errorf("endsess of another user's session: %v, want kXR_NotAuthorized", err)
	}
	var unknown [16]byte
	unknown[0] = 1
	err = other.roundTrip(ctx, &EndsessRequest{SessionID: unknown}, nil)
	if code, ok := codeOf(err); !ok || code != ErrNotFound {
		t.Errorf("endsess of no session: %v, want kXR_NotFound", err)
	}
	if err := old.Ping(ctx); err != nil {
		t.Fatalf("the session was ended by refused endsess requests: %v", err)
	}

	again := dial(t, addr, nil)
	if err := again.roundTrip(ctx, &EndsessRequest{SessionID: again.sess}, nil); err == nil {
		t.Error("a session ended itself")
	}
	if err := again.roundTrip(ctx, &EndsessRequest{SessionID: old.sess}, nil); err != nil {
		t.Fatalf("endsess of the client's earlier session: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		m.mu.Lock()
		n := m.aborted
		m.mu.Unlock()
		if n == 1 && old.Err() != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after endsess: %d files aborted, connection error %v; want the file aborted and the connection closed", n, old.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := again.Ping(ctx); err != nil {
		t.Fatalf("the new session: %v", err)
	}
}

// codeOf returns the XRootD error code err carries.
func codeOf(err error) (ErrorCode, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Code, true
	}
	return 0, false
}
