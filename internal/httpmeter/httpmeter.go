// Package httpmeter records what an HTTP handler sent — the final status
// and the body bytes — for the frontends' metrics and error handling
// (whether a response has started decides if an error can still be
// reported as a status).
package httpmeter

import (
	"net/http"
	"time"
)

// Writer wraps an http.ResponseWriter and records the response.
type Writer struct {
	http.ResponseWriter
	// Status is the final (non-1xx) status sent, 0 before the response
	// has started.
	Status int
	// Bytes counts the body bytes written.
	Bytes int64
	// Stall overrides WriteStall (tests).
	Stall time.Duration
	// renewed is when the write deadline was last pushed (see Write).
	renewed time.Time
}

// WriteStall bounds how long one write of a response may wait for a
// client that does not read: the connection's write deadline, pushed
// forward as the response goes out. A client that stops reading in the
// middle of a download would otherwise hold the handler, its object
// reader and the archives it has open on the nodes, forever; a long
// download that keeps going is never cut.
const WriteStall = 60 * time.Second

// WriteHeader records the first final status and forwards it.
func (w *Writer) WriteHeader(code int) {
	if w.Status == 0 && code >= 200 {
		w.Status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write counts body bytes; the first write implies status 200.
func (w *Writer) Write(p []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	stall := WriteStall
	if w.Stall > 0 {
		stall = w.Stall
	}
	if now := time.Now(); now.Sub(w.renewed) > min(time.Second, stall/4) {
		// Not at every write: a deadline is a timer to move.
		w.renewed = now
		_ = http.NewResponseController(w.ResponseWriter).SetWriteDeadline(now.Add(stall))
	}
	n, err := w.ResponseWriter.Write(p)
	w.Bytes += int64(n)
	return n, err
}

// Started reports whether the response's status line has been sent.
func (w *Writer) Started() bool { return w.Status != 0 }

// Unwrap returns the underlying ResponseWriter, for
// http.ResponseController.
func (w *Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush sends buffered data to the client, if the underlying writer can.
func (w *Writer) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
