package main

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestFormatProgress(t *testing.T) {
	tests := []struct {
		name     string
		n, total int64
		elapsed  time.Duration
		final    bool
		want     string
	}{
		{"start", 0, 100 << 20, 0, false, "/x  0 B / 100.0 MiB    0% [                    ]  0.0 MB/s"},
		{"half", 50 << 20, 100 << 20, 2 * time.Second, false, "/x  50.0 MiB / 100.0 MiB   50% [==========          ]  26.2 MB/s  ETA 0:02"},
		{"done", 100 << 20, 100 << 20, 4 * time.Second, true, "/x  100.0 MiB / 100.0 MiB  100% [====================]  26.2 MB/s  in 0:04"},
		{"unknown size", 3 << 30, -1, 100 * time.Second, false, "/x  3.0 GiB  32.2 MB/s"},
		{"long eta", 1 << 20, 10 << 30, time.Second, false, "/x  1.0 MiB / 10.0 GiB    0% [                    ]  1.0 MB/s  ETA 2:50:39"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := formatProgress("/x", tt.n, tt.total, tt.elapsed, tt.final); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
	if got := formatProgress("/a/very/long/path/name/of/an/object.root", 0, -1, 0, false); got != "…/name/of/an/object.root  0 B  0.0 MB/s" {
		t.Errorf("long label: %q", got)
	}
}

// Log lines and the progress bar share stderr from different goroutines
// (repair logs a degraded read while its bar ticks: a data race on the
// test's buffer before they did): writes are serialized, and a log line
// written while the bar is drawn clears the bar's line first.
func TestLogLinesClearTheProgressBar(t *testing.T) {
	var stderr bytes.Buffer
	e := &env{stderr: &stderr, isTerminal: func(w io.Writer) bool { return w == &stderr }}
	bar := startProgress(e, "obj", 100<<20)
	if bar == nil {
		t.Fatal("no bar on a terminal")
	}
	log := slog.New(slog.NewTextHandler(e.stderr, nil))
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 200 {
			log.Warn("degraded read", "block", i)
		}
	})
	for range 200 {
		bar.add(1 << 10)
		bar.draw(false)
	}
	wg.Wait()
	bar.draw(false)
	log.Warn("after the bar")
	bar.finish(true)
	out := stderr.String()
	if !strings.Contains(out, "\r\033[K"+`time=`) {
		t.Errorf("no log line starts on a cleared line:\n%q", out)
	}
	// What a terminal shows of each line is what follows the last
	// "clear line"; a log line must be all of it.
	for _, line := range strings.Split(out, "\n") {
		const clear = "\r\033[K"
		shown := line
		if i := strings.LastIndex(line, clear); i >= 0 {
			shown = line[i+len(clear):]
		}
		if strings.Contains(shown, "level=WARN") && !strings.HasPrefix(shown, "time=") {
			t.Errorf("a log line follows the bar on its line: %q", shown)
		}
	}
	if !strings.Contains(out, "msg=\"after the bar\"") || !strings.HasSuffix(out, "\n") {
		t.Errorf("output ends %q", out[max(0, len(out)-200):])
	}
}
