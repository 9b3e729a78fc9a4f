package xrootd

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// TestSmallAnswersAreBounded checks that an answer that is small by
// nature (a stat, an open, a checksum, a query) is refused once it grows
// past a bound of its own, not after MaxResponse (256 MiB): a lying node
// made the gateway gather up to that much per such request. Here 2 MiB
// come in kXR_oksofar parts (of 32 KiB each, which a frame of each may
// be). Each case has a connection of its own: one refused fails it.
func TestSmallAnswersAreBounded(t *testing.T) {
	part := bytes.Repeat([]byte("0"), 32<<10)
	ctx := testCtx(t)
	cases := []struct {
		name string
		do   func(c *Client) error
	}{
		{"stat", func(c *Client) error { _, err := c.Stat(ctx, "/f"); return err }},
		{"open", func(c *Client) error { _, err := c.Open(ctx, "/f", OpenRead, 0); return err }},
		{"checksum", func(c *Client) error { _, _, err := c.Checksum(ctx, "/f", "adler32"); return err }},
		{"query_config", func(c *Client) error { _, err := c.QueryConfig(ctx, "version"); return err }},
		{"space", func(c *Client) error { _, err := c.Space(ctx, "/"); return err }},
		{"locate", func(c *Client) error { _, err := c.Locate(ctx, "/f"); return err }},
		{"rm_attr", func(c *Client) error { _, _, err := c.RemoveWithAttr(ctx, "/f", "a"); return err }},
		{"fattr_get", func(c *Client) error { _, err := c.GetAttrs(ctx, "/f", "a"); return err }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := &fakeServer{t: t, serve: func(w net.Conn, f *RequestFrame) {
				for range 64 {
					w.Write(respond(f.StreamID, StatusOKSoFar, part))
				}
				w.Write(respond(f.StreamID, StatusOK, nil))
			}}
			c := dial(t, fs.start(), nil)
			if err := tc.do(c); !errors.Is(err, ErrFrameTooLarge) {
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

// TestOversizedFrameFailsBeforeItsBody checks that one frame larger than
// any answer to its request (a stat answered with 8 MiB, under MaxFrame)
// fails the connection as soon as its header is in, with ErrFrameTooLarge
// naming the request: the client read the whole frame (up to MaxFrame,
// which may be hundreds of MiB) before the bound of the request's kind
// applied. Here the node sends the header alone and then nothing: the
// request failed only at its deadline. The answer may come straight, in a
// kXR_attn kXR_asynresp (as xrootd answers a checksum query), or as the
// data of a kXR_status answer.
func TestOversizedFrameFailsBeforeItsBody(t *testing.T) {
	const huge = 8 << 20
	header := func(sid StreamID, st Status, dlen int) []byte {
		return AppendResponseHeader(nil, sid, st, dlen)
	}
	cases := []struct {
		name   string
		answer func(f *RequestFrame) []byte
		do     func(ctx context.Context, c *Client) error
	}{
		{"stat", func(f *RequestFrame) []byte { return header(f.StreamID, StatusOK, huge) },
			func(ctx context.Context, c *Client) error { _, err := c.Stat(ctx, "/f"); return err }},
		{"stat_oksofar", func(f *RequestFrame) []byte { return header(f.StreamID, StatusOKSoFar, huge) },
			func(ctx context.Context, c *Client) error { _, err := c.Stat(ctx, "/f"); return err }},
		{"open_error", func(f *RequestFrame) []byte { return header(f.StreamID, StatusError, huge) },
			func(ctx context.Context, c *Client) error { _, err := c.Open(ctx, "/f", OpenRead, 0); return err }},
		{"checksum_asynresp", func(f *RequestFrame) []byte {
			b := respond(f.StreamID, StatusWaitResp, be32(600))
			b = append(b, header(StreamID{}, StatusAttn, 8+ResponseHeaderLen+huge)...)
			b = append(b, be32(attnAsyncResp)...)
			b = append(b, 0, 0, 0, 0)
			return append(b, header(f.StreamID, StatusOK, huge)...)
		}, func(ctx context.Context, c *Client) error { _, _, err := c.Checksum(ctx, "/f", "adler32"); return err }},
		{"mkdir_status_data", func(f *RequestFrame) []byte {
			sb := StatusBody{StreamID: f.StreamID, RequestID: ReqMkdir, RespType: RespFinal, DataLen: huge}
			body := sb.AppendTo(nil)
			return append(header(f.StreamID, StatusStatus, len(body)), body...)
		}, func(ctx context.Context, c *Client) error { return c.Mkdir(ctx, "/d", 0o755, false) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := &fakeServer{t: t, serve: func(w net.Conn, f *RequestFrame) {
				w.Write(tc.answer(f)) // and nothing of the body
			}}
			c := dial(t, fs.start(), &DialOptions{MaxFrame: 64 << 20})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			err := tc.do(ctx, c)
			if !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("an answer frame of %d bytes: %v after %v, want ErrFrameTooLarge", huge, err, time.Since(start))
			}
			if c.Err() == nil {
				t.Errorf("the connection is up after a frame it cannot take")
			}
		})
	}
}
