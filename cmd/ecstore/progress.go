package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"golang.org/x/sys/unix"
)

// Progress bar settings: shown on a terminal for transfers of at least
// progressMin bytes (or of unknown size once that many have passed),
// redrawn at most 1/progressEvery times a second.
const (
	progressMin   = 8 << 20
	progressEvery = 200 * time.Millisecond
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// stderrWriter is a command's standard error: log lines and progress
// bars share it, from different goroutines. Writes are serialized, and a
// write made while a bar is drawn clears the bar's line first, so that a
// log line never lands after the bar on its line; the bar is redrawn on
// its next tick.
type stderrWriter struct {
	mu    sync.Mutex
	w     io.Writer
	drawn bool // a bar is on the current line
}

// stderrOf returns e's standard error as a stderrWriter (run gives every
// command one), wrapping it if need be.
func stderrOf(e *env) *stderrWriter {
	if sw, ok := e.stderr.(*stderrWriter); ok {
		return sw
	}
	sw := &stderrWriter{w: e.stderr}
	e.stderr = sw
	return sw
}

func (sw *stderrWriter) Write(p []byte) (int, error) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.clearLocked()
	return sw.w.Write(p)
}

// clearLocked clears the bar's line, if a bar is drawn. sw.mu is held.
func (sw *stderrWriter) clearLocked() {
	if sw.drawn {
		io.WriteString(sw.w, "\r\033[K")
		sw.drawn = false
	}
}

// progress draws a one-line progress bar on a terminal. A nil *progress
// draws nothing, so callers need not check whether one is shown.
type progress struct {
	out   *stderrWriter
	label string
	total int64 // -1 when unknown
	n     atomic.Int64
	start time.Time
	stop  chan struct{}
	done  sync.WaitGroup
	shown bool // drawn at least once; under out.mu
}

// startProgress returns a progress bar for a transfer of total bytes (-1:
// unknown) on e.stderr, or nil when stderr is not a terminal or the
// transfer is small.
func startProgress(e *env, label string, total int64) *progress {
	out := stderrOf(e)
	if e.isTerminal == nil || !e.isTerminal(out.w) || total >= 0 && total < progressMin {
		return nil
	}
	p := &progress{out: out, label: label, total: total, start: time.Now(), stop: make(chan struct{})}
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				p.draw(false)
			case <-p.stop:
				return
			}
		}
	}()
	return p
}

// add counts n more bytes transferred.
func (p *progress) add(n int) {
	if p != nil {
		p.n.Add(int64(n))
	}
}

// finish stops the bar; on success it draws the final state and leaves
// it on its line.
func (p *progress) finish(ok bool) {
	if p == nil {
		return
	}
	close(p.stop)
	p.done.Wait()
	if ok {
		p.draw(true)
	}
	p.out.mu.Lock()
	defer p.out.mu.Unlock()
	if p.out.drawn {
		fmt.Fprintln(p.out.w)
		p.out.drawn = false
	}
}

// println writes a line of text to w without tangling it with the bar:
// the bar's line is cleared first and redrawn on the next tick. A nil
// *progress just writes the line.
func (p *progress) println(w io.Writer, line string) {
	if p == nil {
		fmt.Fprintln(w, line)
		return
	}
	p.out.mu.Lock()
	defer p.out.mu.Unlock()
	p.out.clearLocked()
	if w == p.out {
		w = p.out.w // its lock is held
	}
	fmt.Fprintln(w, line)
}

func (p *progress) draw(final bool) {
	p.out.mu.Lock()
	defer p.out.mu.Unlock()
	n := p.n.Load()
	if p.total < 0 && n < progressMin && !p.shown {
		return
	}
	fmt.Fprint(p.out.w, "\r\033[K"+formatProgress(p.label, n, p.total, time.Since(p.start), final))
	p.out.drawn, p.shown = true, true
}

// formatProgress renders one progress line: bytes, percent and bar (when
// the total is known), rate in MB/s, and the time left (or taken, when
// final).
func formatProgress(label string, n, total int64, elapsed time.Duration, final bool) string {
	var b strings.Builder
	if len(label) > 24 {
		label = "…" + label[len(label)-23:]
	}
	fmt.Fprintf(&b, "%s  %s", label, layout.HumanSize(n))
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(n) / s
	}
	if total >= 0 {
		total = max(total, n) // an estimate may fall short
		pct := 100.0
		if total > 0 {
			pct = 100 * float64(n) / float64(total)
		}
		const width = 20
		fill := min(width, int(pct/100*width))
		fmt.Fprintf(&b, " / %s  %3.0f%% [%s%s]", layout.HumanSize(total), pct,
			strings.Repeat("=", fill), strings.Repeat(" ", width-fill))
	}
	fmt.Fprintf(&b, "  %.1f MB/s", rate/1e6)
	switch {
	case final:
		fmt.Fprintf(&b, "  in %s", clock(elapsed))
	case total >= 0 && rate > 0:
		fmt.Fprintf(&b, "  ETA %s", clock(time.Duration(float64(total-n)/rate*float64(time.Second))))
	}
	return b.String()
}

// clock formats d as m:ss or h:mm:ss.
func clock(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// progressReader counts the bytes read through it.
type progressReader struct {
	r io.Reader
	p *progress
}

func (r progressReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.p.add(n)
	return n, err
}

// progressWriter counts the bytes written through it.
type progressWriter struct {
	w io.Writer
	p *progress
}

func (w progressWriter) Write(b []byte) (int, error) {
	n, err := w.w.Write(b)
	w.p.add(n)
	return n, err
}
