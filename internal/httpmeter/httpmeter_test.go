package httpmeter

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestWriterRecords(t *testing.T) {
	rec := httptest.NewRecorder()
	w := &Writer{ResponseWriter: rec}
	if w.Started() {
		t.Fatal("started before anything was sent")
	}
	w.WriteHeader(http.StatusPartialContent)
	w.Write([]byte("hello"))
	w.Write([]byte(" world"))
	w.Flush()
	if w.Status != http.StatusPartialContent || w.Bytes != 11 || !rec.Flushed {
		t.Fatalf("status %d bytes %d flushed %v", w.Status, w.Bytes, rec.Flushed)
	}
	w1 := &Writer{ResponseWriter: httptest.NewRecorder()}
	w1.WriteHeader(http.StatusContinue) // informational: not final
	if w1.Started() {
		t.Fatal("a 100 Continue counted as the final status")
	}
	w2 := &Writer{ResponseWriter: httptest.NewRecorder()}
	w2.Write([]byte("x"))
	if w2.Status != http.StatusOK {
		t.Fatalf("implicit status %d", w2.Status)
	}
}
