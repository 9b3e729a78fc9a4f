package xrdnode

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// CheckRoot sees what a new connection finds at the node's root (the
// marker, or whether the root is empty), its marker is written, and a
// refusal fails the node's calls at once until refusalRetry has passed,
// after which a new connection checks again.
func TestCheckRoot(t *testing.T) {
	defer func(d time.Duration) { refusalRetry = d }(refusalRetry)
	refusalRetry = 100 * time.Millisecond
	s := startOurs(t, "", "127.0.0.1:0")
	errRefused := errors.New("refused by the test")
	var (
		mu     sync.Mutex
		states []RootState
		refuse = true
	)
	n, err := Open("root://"+s.addr+"//p", Options{Logger: testLogger(t), MarkerPath: "/.mark", Conns: 1,
		CheckRoot: func(_ context.Context, st RootState) ([]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			states = append(states, st)
			if refuse {
				return nil, errRefused
			}
			return []byte("node = x\n"), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx := context.Background()
	if err := n.Check(ctx); !errors.Is(err, errRefused) {
		t.Fatalf("check of a refused root: %v", err)
	}
	if _, err := n.Space(ctx); !errors.Is(err, errRefused) {
		t.Fatalf("space right after the refusal: %v", err)
	}
	mu.Lock()
	if len(states) != 1 || states[0].Marker != nil || !states[0].Empty {
		t.Errorf("states seen: %+v, want one empty root without a marker", states)
	}
	refuse = false
	mu.Unlock()
	time.Sleep(2 * refusalRetry)
	if err := n.Check(ctx); err != nil {
		t.Fatalf("check once accepted: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(s.dir, "p", ".mark"))
	if err != nil || !bytes.Equal(b, []byte("node = x\n")) {
		t.Fatalf("marker written: %q, %v", b, err)
	}
	// A new connection reads the marker back.
	s.stop()
	startOurs(t, s.dir, s.addr)
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		last := states[len(states)-1]
		seen := len(states)
		mu.Unlock()
		if seen >= 3 && string(last.Marker) == "node = x\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new connection read the marker: %+v", states)
		}
		n.Space(ctx)
		time.Sleep(20 * time.Millisecond)
	}
}
