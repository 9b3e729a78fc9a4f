package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
)

// Regression: a cp cut short by Ctrl-C said "context canceled" (the
// error of whatever call the signal cut short) and exited 1. It says it
// was interrupted and exits as shells report a death by the signal:
// 128+2 for SIGINT, 128+15 for SIGTERM.
func TestCpInterrupted(t *testing.T) {
	url := gatewayURL(t)
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			src := &blockingReader{n: 20 << 20, reached: make(chan struct{}), release: make(chan struct{})}
			defer close(src.release)
			go func() {
				<-src.reached // the upload waits for its input, as on Ctrl-C at a terminal
				cancel(interrupt{tc.sig})
			}()
			r := ecstoreCtx(ctx, t, src, "cp", "-", url+"/up/interrupted")
			if r.code != tc.code || r.stderr != "ecstore: cp: interrupted\n" {
				t.Errorf("exit %d, stderr %q; want %d and \"ecstore: cp: interrupted\"", r.code, r.stderr, tc.code)
			}
			if r := ecstore(t, nil, "stat", url+"/up/interrupted"); r.code == 0 {
				t.Errorf("the interrupted upload was stored:\n%s", r.stdout)
			}
		})
	}
}

// A get into a file cut short by Ctrl-C leaves no file and says so.
func TestGetInterrupted(t *testing.T) {
	c := newTestCluster(t)
	c.put("/big", make([]byte, 24<<20))
	ctx, cancel := context.WithCancelCause(context.Background())
	w := &cancellingWriter{after: 1 << 20, cancel: func() { cancel(interrupt{syscall.SIGINT}) }}
	var errb syncBuffer
	e := &env{stdin: strings.NewReader(""), stdout: w, stderr: &errb}
	code := run(ctx, e, c.cmd("get", "/big", "-"))
	if code != 130 || errb.String() != "ecstore: get /big: interrupted\n" {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
}

// cancellingWriter calls cancel once more than after bytes are written
// to it, as a user presses Ctrl-C in the middle of a transfer.
type cancellingWriter struct {
	n, after int
	cancel   func()
}

func (w *cancellingWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	if w.n > w.after && w.cancel != nil {
		w.cancel()
		w.cancel = nil
	}
	return len(p), nil
}
