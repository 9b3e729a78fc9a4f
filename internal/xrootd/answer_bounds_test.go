package xrootd

import (
	"bytes"
	"errors"
	"net"
	"testing"
	"time"
)

// TestSmallAnswersAreBounded checks that an answer that is small by
// nature (a stat, an open, a checksum, a query) is refused once it grows
// past a bound of its own, not after MaxResponse (256 MiB): a lying node
// made the gateway gather up to that much per such request. Here 2 MiB
// come in kXR_oksofar parts.
func TestSmallAnswersAreBounded(t *testing.T) {
	part := bytes.Repeat([]byte("0"), 128<<10)
	fs := &fakeServer{t: t, serve: func(w net.Conn, f *RequestFrame) {
		for range 16 {
			w.Write(respond(f.StreamID, StatusOKSoFar, part))
		}
		w.Write(respond(f.StreamID, StatusOK, nil))
	}}
	c := dial(t, fs.start(), nil)
	ctx := testCtx(t)
	cases := []struct {
		name string
		do   func() error
	}{
		{"stat", func() error { _, err := c.Stat(ctx, "/f"); return err }},
		{"open", func() error { _, err := c.Open(ctx, "/f", OpenRead, 0); return err }},
		{"checksum", func() error { _, _, err := c.Checksum(ctx, "/f", "adler32"); return err }},
		{"query_config", func() error { _, err := c.QueryConfig(ctx, "version"); return err }},
		{"space", func() error { _, err := c.Space(ctx, "/"); return err }},
		{"locate", func() error { _, err := c.Locate(ctx, "/f"); return err }},
		{"rm_attr", func() error { _, _, err := c.RemoveWithAttr(ctx, "/f", "a"); return err }},
		{"fattr_get", func() error { _, err := c.GetAttrs(ctx, "/f", "a"); return err }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(); !errors.Is(err, ErrFrameTooLarge) {
				t.Errorf("a 2 MiB answer: %.300v, want ErrFrameTooLarge", err)
			}
		})
	}
}

// TestEndlessAttrListingIsBounded checks that a listing with attributes
// that never ends (whole entries, part after part) fails once it passes
// 4 × MaxResponse, handed over part by part as it is: it went on for as
// long as the node sent, each part counting as progress for the
// caller's watchdog.
func TestEndlessAttrListingIsBounded(t *testing.T) {
	var part []byte
	for len(part) < 64<<10 {
		part = AppendAttrListEntry(part, &AttrEntry{FileInfo: FileInfo{Name: "f", ModTime: time.Unix(1764160000, 0)}})
	}
	fs := &fakeServer{t: t, serve: func(w net.Conn, f *RequestFrame) {
		for {
			if _, err := w.Write(respond(f.StreamID, StatusOKSoFar, part)); err != nil {
				return
			}
		}
	}}
	c := dial(t, fs.start(), &DialOptions{MaxResponse: 1 << 20})
	ctx := testCtx(t)
	entries := 0
	err := c.ListAttrEach(ctx, "/d", "a", func(ents []AttrEntry) error {
		entries += len(ents)
		return nil
	})
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("endless listing: %v after %d entries, want ErrFrameTooLarge", err, entries)
	}
}
