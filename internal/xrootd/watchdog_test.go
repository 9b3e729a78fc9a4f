package xrootd

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/watchdog"
)

// slowListFS lists its directories one entry per pause.
type slowListFS struct {
	*memFS
	pause time.Duration
}

func (f slowListFS) List(ctx context.Context, dir string) iter.Seq2[FileInfo, error] {
	return func(yield func(FileInfo, error) bool) {
		for fi, err := range f.memFS.List(ctx, dir) {
			time.Sleep(f.pause)
			if !yield(fi, err) {
				return
			}
		}
	}
}

// Every part of a long answer is progress for a watchdog of the request's
// context: a listing sent in parts over several idle times completes,
// and one that stops coming is cut off.
func TestPartsAreProgress(t *testing.T) {
	m := newMemFS()
	long := strings.Repeat("n", 200)
	for i := range 60 {
		m.put(fmt.Sprintf("/d/%s%02d", long, i), []byte("x"))
	}
	// Entries of a dirlist with stat are ~240 bytes: parts of the
	// smallest size (a page) hold 17, sent every ~70 ms.
	addr, _ := startServer(t, slowListFS{m, 4 * time.Millisecond}, Limits{ResponseChunk: PageSize})
	c := dial(t, addr, nil)

	ctx, cancel := watchdog.WithIdleTimeout(testCtx(t), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	list, err := c.Dirlist(ctx, "/d", true)
	if err != nil {
		t.Fatalf("a listing sent in parts was cut off: %v", err)
	}
	if len(list) != 60 {
		t.Fatalf("listed %d entries, want 60", len(list))
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("the listing took %v: not longer than the idle time", d)
	}

	// One part, sent after the whole listing: the server is silent for
	// longer than the idle time.
	addr, _ = startServer(t, slowListFS{m, 4 * time.Millisecond}, Limits{ResponseChunk: 1 << 20})
	c = dial(t, addr, nil)
	ctx, cancel = watchdog.WithIdleTimeout(testCtx(t), 150*time.Millisecond)
	defer cancel()
	if _, err := c.Dirlist(ctx, "/d", true); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a server silent for 240 ms under a 150 ms watchdog: err = %v, want a deadline error", err)
	}
}

// The time the caller spends on a part it received is not the server's
// silence: a caller slower than the watchdog's idle time on every part
// still gets the whole answer. (Before, a gateway that took more than
// MetadataTimeout over a part of a 100000-entry listing, its CPU shared
// with ten nodes, cut nodes off that had long sent the next part.)
func TestSlowHandlingIsNotSilence(t *testing.T) {
	var body []byte
	for i := range 6 {
		body = AppendAttrListEntry(body, &AttrEntry{FileInfo: FileInfo{Name: fmt.Sprintf("f%d", i)}})
	}
	fs := &fakeServer{t: t, serve: func(w net.Conn, f *RequestFrame) {
		half := len(body) / 2
		w.Write(respond(f.StreamID, StatusOKSoFar, body[:half]))
		w.Write(respond(f.StreamID, StatusOKSoFar, body[half:]))
		w.Write(respond(f.StreamID, StatusOK, nil))
	}}
	c := dial(t, fs.start(), nil)
	ctx, cancel := watchdog.WithIdleTimeout(testCtx(t), 50*time.Millisecond)
	defer cancel()
	n := 0
	err := c.ListAttrEach(ctx, "/d", "ecstore", func(ents []AttrEntry) error {
		n += len(ents)
		time.Sleep(150 * time.Millisecond)
		return nil
	})
	if err != nil || n != 6 {
		t.Fatalf("a caller slow on each part: %d entries, %v", n, err)
	}
}
