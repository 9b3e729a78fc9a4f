package xrootd

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"testing"
)

// TestStatusAnswerMatchesItsRequest checks that a kXR_status answer is
// taken only for the request it names (XProtocol.hh,
// ServerResponseBody_Status): its body's stream id must be the header's,
// its request id the request's, and a kXR_pgwrite's info the offset
// written (ServerResponseBody_pgWrite). A confused or lying node had its
// answer applied to another request: a kXR_write, or a mkdir, answered
// with a pgwrite's status succeeded, and so did a pgwrite answered for
// another offset or naming another stream.
func TestStatusAnswerMatchesItsRequest(t *testing.T) {
	status := func(sid, bodySid StreamID, id RequestID, info []byte) []byte {
		sb := StatusBody{StreamID: bodySid, RequestID: id, RespType: RespFinal, Info: info}
		return respond(sid, StatusStatus, sb.AppendTo(nil))
	}
	offset := func(f *RequestFrame, delta int64) []byte {
		return be64(int64(getU64(f.Params[4:12])) + delta)
	}
	cases := []struct {
		name   string
		answer func(f *RequestFrame) []byte // to a write, pgwrite or mkdir
		do     func(ctx context.Context, f *ClientFile) error
		ok     bool
	}{
		{"pgwrite", func(f *RequestFrame) []byte { return status(f.StreamID, f.StreamID, ReqPgWrite, offset(f, 0)) },
			pgwrite, true},
		{"pgwrite_other_stream", func(f *RequestFrame) []byte { return status(f.StreamID, StreamID{9, 9}, ReqPgWrite, offset(f, 0)) },
			pgwrite, false},
		{"pgwrite_other_offset", func(f *RequestFrame) []byte { return status(f.StreamID, f.StreamID, ReqPgWrite, offset(f, PageSize)) },
			pgwrite, false},
		{"write_as_pgwrite", func(f *RequestFrame) []byte { return status(f.StreamID, f.StreamID, ReqPgWrite, offset(f, 0)) },
			func(ctx context.Context, f *ClientFile) error {
				_, err := f.WriteAt(ctx, []byte("data"), 8192)
				return err
			}, false},
		{"mkdir_as_pgwrite", func(f *RequestFrame) []byte { return status(f.StreamID, f.StreamID, ReqPgWrite, make([]byte, 8)) },
			func(ctx context.Context, f *ClientFile) error { return f.c.Mkdir(ctx, "/d", 0o755, false) }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := &fakeServer{t: t, serve: func(w net.Conn, f *RequestFrame) {
				switch f.ID {
				case ReqOpen:
					w.Write(respond(f.StreamID, StatusOK, []byte{0, 0, 0, 1}))
				case ReqWrite, ReqPgWrite, ReqMkdir:
					w.Write(tc.answer(f))
				}
			}}
			c := dial(t, fs.start(), nil)
			ctx := testCtx(t)
			f, err := c.Open(ctx, "/f", OpenUpdate, 0)
			if err != nil {
				t.Fatal(err)
			}
			err = tc.do(ctx, f)
			switch {
			case tc.ok && err != nil:
				t.Fatalf("a matching answer: %v", err)
			case !tc.ok && !errors.Is(err, ErrMalformed):
				t.Fatalf("an answer for another request: %v, want ErrMalformed", err)
			}
		})
	}
}

func pgwrite(ctx context.Context, f *ClientFile) error {
	_, err := f.PgWriteAt(ctx, []byte("data"), 8192)
	return err
}

func be64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// TestPgWriteAnswerAfterWaitIsChecked checks that a kXR_pgwrite sent
// again after kXR_wait has its answer checked as the first would have:
// a kXR_status listing pages in error, or a plain kXR_ok, was taken as
// the write's success.
func TestPgWriteAnswerAfterWaitIsChecked(t *testing.T) {
	cases := []struct {
		name  string
		again func(f *RequestFrame) []byte
		want  error
	}{
		{"bad_pages", func(f *RequestFrame) []byte {
			sb := StatusBody{StreamID: f.StreamID, RequestID: ReqPgWrite, RespType: RespFinal, Info: append(f.Params[4:12:12], make([]byte, 16)...)}
			return respond(f.StreamID, StatusStatus, sb.AppendTo(nil))
		}, ErrChecksum},
		{"ok", func(f *RequestFrame) []byte { return respond(f.StreamID, StatusOK, nil) }, ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			waited := false
			fs := &fakeServer{t: t, serve: func(w net.Conn, f *RequestFrame) {
				switch {
				case f.ID == ReqOpen:
					w.Write(respond(f.StreamID, StatusOK, []byte{0, 0, 0, 1}))
				case f.ID == ReqPgWrite && !waited:
					waited = true
					w.Write(respond(f.StreamID, StatusWait, append(be32(0), "busy"...)))
				case f.ID == ReqPgWrite:
					w.Write(tc.again(f))
				}
			}}
			c := dial(t, fs.start(), nil)
			ctx := testCtx(t)
			f, err := c.Open(ctx, "/f", OpenUpdate, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := pgwrite(ctx, f); !errors.Is(err, tc.want) {
				t.Fatalf("pgwrite answered after a wait: %v, want %v", err, tc.want)
			}
		})
	}
}
