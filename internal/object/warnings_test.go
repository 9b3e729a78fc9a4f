package object

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
)

// records is a slog.Handler that keeps the level and message of every
// record, and the records' attributes by message.
type records struct {
	mu    sync.Mutex
	count map[string]map[slog.Level]int
	attrs map[string][]map[string]any
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.count == nil {
		r.count, r.attrs = map[string]map[slog.Level]int{}, map[string][]map[string]any{}
	}
	if r.count[rec.Message] == nil {
		r.count[rec.Message] = map[slog.Level]int{}
	}
	r.count[rec.Message][rec.Level]++
	a := map[string]any{"level": rec.Level}
	rec.Attrs(func(at slog.Attr) bool { a[at.Key] = at.Value.Any(); return true })
	r.attrs[rec.Message] = append(r.attrs[rec.Message], a)
	return nil
}

func (r *records) n(msg string, level slog.Level) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count[msg][level]
}

// TestOutageWarnsOncePerInterval: with a node down, every read and write
// is degraded; the log says so at Warn once per warnEvery for that node,
// not once per request (3000 small gets a second logged 3000 warnings),
// and the rest at Debug.
func TestOutageWarnsOncePerInterval(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 4 << 10}
	logs := &records{}
	c, fs := faultyCluster(t, 6, g, func(o *Options) { o.Logger = slog.New(logs) })
	r := rand.New(rand.NewPCG(seed(t), 7))
	const objects = 8
	data := make([][]byte, objects)
	for i := range objects {
		data[i] = randBytes(r, 3*g.BlockSize()+100)
		put(t, c.store, fmt.Sprintf("/outage/f%d", i), data[i])
	}
	fs[1].SetDown(true)
	for i := range objects {
		got, err := get(c.store, fmt.Sprintf("/outage/f%d", i))
		if err != nil || !bytes.Equal(got, data[i]) {
			t.Fatalf("read %d with a node down: err %v, equal %v", i, err, bytes.Equal(got, data[i]))
		}
	}
	for i := range objects {
		put(t, c.store, fmt.Sprintf("/outage/g%d", i), data[i])
	}
	// A degraded read logs each block it rebuilds (Debug but the first
	// one's), a degraded write each object.
	for _, msg := range []string{"degraded read", "object written degraded"} {
		if w, d := logs.n(msg, slog.LevelWarn), logs.n(msg, slog.LevelDebug); w != 1 || d < objects-1 {
			t.Errorf("%q: %d at Warn and %d at Debug, want 1 and at least %d", msg, w, d, objects-1)
		}
	}
	if w := logs.n("archive open failed", slog.LevelWarn); w > 1 {
		t.Errorf("archive open failed: %d at Warn, want at most 1", w)
	}
}

// TestWarningsSayWhatTheyHeldBack checks the interval, the keys and the
// count of warnings held back.
func TestWarningsSayWhatTheyHeldBack(t *testing.T) {
	var w warnings
	t0 := time.Unix(1000, 0)
	steps := []struct {
		key       string
		at        time.Duration
		level     slog.Level
		held      int
		describes string
	}{
		{"a", 0, slog.LevelWarn, 0, "first of its kind"},
		{"a", time.Second, slog.LevelDebug, 0, "within the interval"},
		{"b", time.Second, slog.LevelWarn, 0, "another key"},
		{"a", warnEvery - time.Millisecond, slog.LevelDebug, 0, "still within"},
		{"a", warnEvery, slog.LevelWarn, 2, "next interval, with the two held back"},
		{"a", warnEvery + time.Second, slog.LevelDebug, 0, "within the new interval"},
		{"a", 3 * warnEvery, slog.LevelWarn, 1, "long after"},
	}
	for _, s := range steps {
		level, held := w.level(s.key, t0.Add(s.at))
		if level != s.level || held != s.held {
			t.Errorf("%s (%s at %v): %v, %d held, want %v, %d", s.describes, s.key, s.at, level, held, s.level, s.held)
		}
	}
	// The memory is bounded: the oldest keys go first.
	for i := range maxWarnKeys + 10 {
		w.level(fmt.Sprintf("k%d", i), t0.Add(4*warnEvery+time.Duration(i)))
	}
	if len(w.last) > maxWarnKeys {
		t.Errorf("%d keys kept, want at most %d", len(w.last), maxWarnKeys)
	}
	if level, _ := w.level(fmt.Sprintf("k%d", maxWarnKeys+9), t0.Add(4*warnEvery+time.Hour/1e6)); level != slog.LevelDebug {
		t.Errorf("the newest key was forgotten")
	}
}
