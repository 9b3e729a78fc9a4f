package directio

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// ReadSpan returns exactly the bytes of the span, for spans that start
// and end anywhere, including in the file's last, partial block, and
// reports a span that runs past the end.
func TestReadSpan(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	content := make([]byte, 5*Align+123)
	for i := range content {
		content[i] = byte(r.IntN(256))
	}
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, content, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := OpenReader(f)
	if err != nil {
		t.Skipf("no direct reads here: %v", err)
	}
	defer d.Close()
	spans := [][2]int{{0, 0}, {0, 1}, {0, Align}, {1, Align}, {Align - 1, 2}, {100, 3 * Align}, {3*Align + 5, 2*Align + 118}, {len(content) - 1, 1}}
	for _, sp := range spans {
		off, n := sp[0], sp[1]
		// A buffer starting at a misaligned address.
		buf := make([]byte, n+ReadSlack+7)[7:]
		got, err := ReadSpan(d, buf, int64(off), n)
		if errors.Is(err, ErrRefused) {
			t.Skipf("device refuses direct reads: %v", err)
		}
		if err != nil {
			t.Fatalf("span %d+%d: %v", off, n, err)
		}
		if !bytes.Equal(got, content[off:off+n]) {
			t.Errorf("span %d+%d: wrong bytes", off, n)
		}
	}
	if _, err := ReadSpan(d, make([]byte, 10+ReadSlack), int64(len(content)-5), 10); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("span past the end: %v, want io.ErrUnexpectedEOF", err)
	}
	if _, err := ReadSpan(d, make([]byte, 10), 0, 10); err == nil {
		t.Error("buffer without slack accepted")
	}
}
