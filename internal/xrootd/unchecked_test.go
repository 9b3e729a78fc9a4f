package xrootd

import (
	"bytes"
	"io"
	"testing"
)

// A kXR_pgwrite payload that breaks off inside a page has handed out
// that page's bytes before its checksum came: Unchecked counts them (the
// gateway takes them back before its client sends the write again), and
// nothing at a page's end.
func TestPageReaderCountsTheUncheckedBytesOfACutPage(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 1300) // 13,000 bytes: 3 full pages and part of a fourth
	payload := AppendPages(nil, 0, data)
	for _, c := range []struct {
		cut       int // payload bytes that arrive
		unchecked int64
	}{
		{PageCRCLen + PageSize + PageCRCLen + 100, 100},
		{2 * (PageCRCLen + PageSize), 0},
		{2*(PageCRCLen+PageSize) + 2, 0}, // inside a checksum
	} {
		p := &pageReader{r: bytes.NewReader(payload[:c.cut]), off: 0, raw: int64(len(payload))}
		got, err := io.Copy(io.Discard, p)
		if err == nil {
			t.Errorf("cut at %d: no error after %d bytes", c.cut, got)
		}
		if u := p.Unchecked(); u != c.unchecked {
			t.Errorf("cut at %d: %d bytes read, Unchecked %d, want %d", c.cut, got, u, c.unchecked)
		}
	}
}
