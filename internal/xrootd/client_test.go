package xrootd

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeServer accepts one connection, answers the handshake and login as
// scripted, then hands every request to serve, which writes raw answers.
type fakeServer struct {
	t         testing.TB
	loginBody []byte
	serve     func(w net.Conn, f *RequestFrame)
	many      bool   // serve every connection, not just the first
	flags     uint32 // of the kXR_protocol answer; 0: kXR_isServer
}

func (fs *fakeServer) start() string {
	t := fs.t
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			if !fs.many {
				fs.conn(conn)
				return
			}
			go fs.conn(conn)
		}
	}()
	return ln.Addr().String()
}

// conn serves one connection.
func (fs *fakeServer) conn(conn net.Conn) {
	defer conn.Close()
	if ReadHandshake(conn) != nil {
		return
	}
	conn.Write(AppendHandshakeResponse(nil, ProtocolVersion, DataServer))
	for {
		f, err := ReadRequestFrame(conn, 1<<20)
		if err != nil {
			return
		}
		switch f.ID {
		case ReqProtocol:
			flags := fs.flags
			if flags == 0 {
				flags = FlagIsServer
			}
			conn.Write(respond(f.StreamID, StatusOK, (&ProtocolResponse{Version: ProtocolVersion, Flags: flags}).AppendTo(nil)))
		case ReqLogin:
			body := fs.loginBody
			if body == nil {
				body = make([]byte, 16)
			}
			conn.Write(respond(f.StreamID, StatusOK, body))
		default:
			fs.serve(conn, f)
		}
	}
}

func respond(sid StreamID, st Status, body []byte) []byte {
	return (&ResponseFrame{StreamID: sid, Status: st, Body: body}).AppendTo(nil)
}

func be32(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }

func TestClientWaitAndAsync(t *testing.T) {
	var stats atomic.Int32
	fs := &fakeServer{t: t, serve: func(w net.Conn, f *RequestFrame) {
		switch f.ID {
		case ReqStat:
			if stats.Add(1) == 1 {
				w.Write(respond(f.StreamID, StatusWait, append(be32(0), "busy"...)))
				return
			}
			w.Write(respond(f.StreamID, StatusOK, []byte("1 5 16 100\x00")))
		case ReqQuery:
			// As xrootd answers a checksum query: waitresp, then the
			// answer inside kXR_attn kXR_asynresp on stream 0.
			w.Write(respond(f.StreamID, StatusWaitResp, be32(600)))
			inner := &ResponseFrame{StreamID: f.StreamID, Status: StatusOK, Body: []byte("adler32 0a0b0c0d\x00")}
			w.Write(respond(StreamID{}, StatusAttn, AppendAsyncResponse(nil, inner)))
		case ReqDirlist:
			w.Write(respond(f.StreamID, StatusOKSoFar, []byte("a\nb\n")))
			w.Write(respond(StreamID{9, 9}, StatusOK, []byte("for nobody")))
			w.Write(respond(f.StreamID, StatusOKSoFar, []byte("c\n")))
			w.Write(respond(f.StreamID, StatusOK, []byte("d\x00")))
		case ReqRm:
			w.Write(respond(f.StreamID, StatusRedirect, append(be32(1094), "other.host?x=1"...)))
		case ReqRmdir:
			w.Write(respond(f.StreamID, StatusError, AppendErrorBody(nil, ErrFileLocked, "locked")))
		case ReqMkdir:
			w.Write(respond(f.StreamID, StatusAttn, append(be32(attnAsyncMsg), "hello"...)))
			w.Write(respond(f.StreamID, StatusOK, nil))
		}
	}}
	c := dial(t, fs.start(), nil)
	ctx := testCtx(t)

	fi, err := c.Stat(ctx, "/x")
	if err != nil || fi.Size != 5 || stats.Load() != 2 {
		t.Errorf("stat after kXR_wait: %+v %v (attempts %d)", fi, err, stats.Load())
	}
	if alg, sum, err := c.Checksum(ctx, "/x", "adler32"); err != nil || alg != "adler32" || sum != "0a0b0c0d" {
		t.Errorf("checksum via asynresp: %q %q %v", alg, sum, err)
	}
	list, err := c.Dirlist(ctx, "/", false)
	if err != nil || len(list) != 4 || list[3].Name != "d" {
		t.Errorf("dirlist over oksofar: %+v %v", list, err)
	}
	var re *RedirectError
	if err := c.Rm(ctx, "/x"); !errors.As(err, &re) || re.Port != 1094 || re.Host != "other.host?x=1" {
		t.Errorf("redirect: %v", err)
	}
	var xe *Error
	if err := c.Rmdir(ctx, "/x"); !errors.As(err, &xe) || xe.Code != ErrFileLocked || xe.Message != "locked" {
		t.Errorf("error: %v", err)
	}
	if err := c.Mkdir(ctx, "/x", 0o755, false); err != nil {
		t.Errorf("mkdir with unrelated attn: %v", err)
	}
}

func TestClientHostileServer(t *testing.T) {
	tests := []struct {
		name  string
		serve func(w net.Conn, f *RequestFrame)
		op    func(ctx context.Context, c *Client) error
		want  error
		dead  bool // the connection must be closed afterwards
	}{
		{"oversized frame", func(w net.Conn, f *RequestFrame) {
			w.Write(AppendResponseHeader(nil, f.StreamID, StatusOK, 1<<30))
		}, func(ctx context.Context, c *Client) error { return c.Ping(ctx) }, ErrFrameTooLarge, true},
		{"negative dlen", func(w net.Conn, f *RequestFrame) {
			w.Write(AppendResponseHeader(nil, f.StreamID, StatusOK, -1))
		}, func(ctx context.Context, c *Client) error { return c.Ping(ctx) }, ErrMalformed, true},
		{"truncated frame", func(w net.Conn, f *RequestFrame) {
			w.Write(AppendResponseHeader(nil, f.StreamID, StatusOK, 100))
			w.Write([]byte("short"))
			w.Close()
		}, func(ctx context.Context, c *Client) error { return c.Ping(ctx) }, ErrTruncated, true},
		{"short error body", func(w net.Conn, f *RequestFrame) {
			w.Write(respond(f.StreamID, StatusError, []byte{1}))
		}, func(ctx context.Context, c *Client) error { return c.Ping(ctx) }, ErrMalformed, false},
		{"too much read data", func(w net.Conn, f *RequestFrame) {
			if f.ID == ReqOpen {
				w.Write(respond(f.StreamID, StatusOK, []byte{0, 0, 0, 1}))
				return
			}
			w.Write(respond(f.StreamID, StatusOK, make([]byte, 20)))
		}, func(ctx context.Context, c *Client) error {
			f, err := c.Open(ctx, "/x", OpenRead, 0)
			if err != nil {
				return err
			}
			_, err = f.ReadAt(ctx, make([]byte, 10), 0)
			return err
		}, ErrMalformed, false},
		{"bad page checksum", func(w net.Conn, f *RequestFrame) {
			if f.ID == ReqOpen {
				w.Write(respond(f.StreamID, StatusOK, []byte{0, 0, 0, 1}))
				return
			}
			data := AppendPages(nil, 0, []byte("0123456789"))
			data[5] ^= 1
			sb := StatusBody{StreamID: f.StreamID, RequestID: ReqPgRead, DataLen: int32(len(data)), Info: make([]byte, 8)}
			w.Write((&ResponseFrame{StreamID: f.StreamID, Status: StatusStatus, Body: sb.AppendTo(nil), Data: data}).AppendTo(nil))
		}, func(ctx context.Context, c *Client) error {
			f, err := c.Open(ctx, "/x", OpenRead, 0)
			if err != nil {
				return err
			}
			_, err = f.PgReadAt(ctx, make([]byte, 10), 0)
			return err
		}, ErrChecksum, false},
		{"pgread at wrong offset", func(w net.Conn, f *RequestFrame) {
			if f.ID == ReqOpen {
				w.Write(respond(f.StreamID, StatusOK, []byte{0, 0, 0, 1}))
				return
			}
			data := AppendPages(nil, 4, []byte("0123456789"))
			info := binary.BigEndian.AppendUint64(nil, 4)
			sb := StatusBody{StreamID: f.StreamID, RequestID: ReqPgRead, DataLen: int32(len(data)), Info: info}
			w.Write((&ResponseFrame{StreamID: f.StreamID, Status: StatusStatus, Body: sb.AppendTo(nil), Data: data}).AppendTo(nil))
		}, func(ctx context.Context, c *Client) error {
			f, err := c.Open(ctx, "/x", OpenRead, 0)
			if err != nil {
				return err
			}
			_, err = f.PgReadAt(ctx, make([]byte, 10), 0)
			return err
		}, ErrMalformed, false},
		{"silent server", func(w net.Conn, f *RequestFrame) {}, func(ctx context.Context, c *Client) error {
			ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			return c.Ping(ctx)
		}, context.DeadlineExceeded, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := &fakeServer{t: t, serve: tt.serve}
			c := dial(t, fs.start(), &DialOptions{MaxFrame: 1 << 20})
			ctx := testCtx(t)
			if err := tt.op(ctx, c); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if tt.dead {
				if err := c.Ping(ctx); !errors.Is(err, ErrClosed) {
					t.Errorf("after a protocol violation: %v, want ErrClosed", err)
				}
			}
		})
	}
}

func TestDialFailures(t *testing.T) {
	ctx := testCtx(t)
	auth := &fakeServer{t: t, loginBody: append(make([]byte, 16), "&P=gsi,v:10000"...)}
	_, err := Dial(ctx, auth.start(), nil)
	if xe := (*Error)(nil); !errors.As(err, &xe) || xe.Code != ErrAuthFailed || !strings.Contains(err.Error(), "authentication") {
		t.Errorf("dial to a server requiring auth: %v", err)
	}
	short := &fakeServer{t: t, loginBody: []byte{1, 2}}
	if _, err := Dial(ctx, short.start(), nil); !errors.Is(err, ErrMalformed) {
		t.Errorf("short login answer: %v", err)
	}

	// A server that never answers the handshake.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			io.Copy(io.Discard, c)
		}
	}()
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := Dial(tctx, ln.Addr().String(), nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("silent server: %v", err)
	}
	if _, err := Dial(ctx, "http://x", nil); err == nil {
		t.Error("http URL accepted")
	}
	for in, want := range map[string]string{"root://h:1/p": "h:1", "h": "h:1094", "[::1]": "[::1]:1094", "h:5": "h:5", "roots://h:2//p": "h:2 (TLS)"} {
		got, secure, err := parseAddr(in)
		if secure {
			got += " (TLS)"
		}
		if err != nil || got != want {
			t.Errorf("parseAddr(%q) = %q, %v", in, got, err)
		}
	}
}

// TestClientReadInPlace checks that kXR_read answers are received straight
// into the caller's buffer, and that a read given up on never writes into
// that buffer afterwards: the buffer goes back to a pool and is reused.
func TestClientReadInPlace(t *testing.T) {
	release := make(chan struct{})
	lateSent := make(chan struct{})
	fs := &fakeServer{t: t, serve: func(w net.Conn, f *RequestFrame) {
		switch f.ID {
		case ReqOpen:
			w.Write(respond(f.StreamID, StatusOK, []byte{0, 0, 0, 1}))
		case ReqPing:
			w.Write(respond(f.StreamID, StatusOK, nil))
		case ReqRead:
			off := int64(binary.BigEndian.Uint64(f.Params[4:12]))
			switch off {
			case 0: // in two frames
				w.Write(respond(f.StreamID, StatusOKSoFar, []byte("abc")))
				w.Write(respond(f.StreamID, StatusOK, []byte("defgh")))
			case 1: // answered after the client gave up
				go func() {
					<-release
					w.Write(respond(f.StreamID, StatusOK, []byte("XXXXXXXX")))
					close(lateSent)
				}()
			case 2: // the client gives up in the middle of the frame
				w.Write(AppendResponseHeader(nil, f.StreamID, StatusOK, 8))
				w.Write([]byte("YY"))
				go func() {
					<-release
					w.Write([]byte("YYYYYY"))
				}()
			}
		}
	}}
	c := dial(t, fs.start(), nil)
	ctx := testCtx(t)
	f, err := c.Open(ctx, "/x", OpenRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if n, err := f.ReadAt(ctx, buf, 0); err != nil || string(buf[:n]) != "abcdefgh" {
		t.Fatalf("read in two frames: %q %v", buf[:n], err)
	}

	giveUp := func(off int64) {
		t.Helper()
		for i := range buf {
			buf[i] = '.'
		}
		tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if _, err := f.ReadAt(tctx, buf, off); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("read at %d: %v, want a deadline error", off, err)
		}
	}
	giveUp(1)
	release <- struct{}{}
	// The late answer is on the wire before the ping, so the ping's
	// answer comes after it; written later, it could fall between the
	// header and the body of the next read's answer (CI, under load).
	<-lateSent
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("ping after an abandoned read: %v", err)
	}
	if string(buf) != "........" {
		t.Fatalf("an abandoned read wrote %q into the caller's buffer", buf)
	}

	giveUp(2)
	close(release)
	time.Sleep(50 * time.Millisecond)
	if string(buf) != "........" && string(buf) != "YY......" {
		t.Fatalf("a read abandoned mid-frame wrote %q into the caller's buffer afterwards", buf)
	}
	if err := c.Ping(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("after a read abandoned mid-frame: %v, want ErrClosed (the stream cannot resync)", err)
	}
}

// A deadline set because the context ended is cleared only after it was
// set: when the context ends just as a request finishes sending, the
// goroutine setting it may run after the caller cleared it, and the
// connection's next request failed with an i/o timeout.
func TestDeadlineOnDoneClearsAfterSetting(t *testing.T) {
	var mu sync.Mutex
	var last time.Time
	entered, gate := make(chan struct{}), make(chan struct{})
	set := func(d time.Time) error {
		if !d.IsZero() {
			close(entered)
			<-gate // the setting goroutine is slow to get there
		}
		mu.Lock()
		last = d
		mu.Unlock()
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	release := deadlineOnDone(ctx, set)
	cancel()
	<-entered
	released := make(chan struct{})
	go func() { release(); close(released) }()
	select {
	case <-released:
		t.Fatal("release returned before the deadline it must clear was set")
	case <-time.After(50 * time.Millisecond):
	}
	close(gate)
	<-released
	mu.Lock()
	defer mu.Unlock()
	if !last.IsZero() {
		t.Fatalf("deadline left at %v after release", last)
	}
}

// FinishWrite sends the write, kXR_sync and kXR_close without waiting
// for answers in between: this server answers none of them before it
// has received all three.
func TestFinishWriteSendsAllBeforeAnAnswer(t *testing.T) {
	var (
		mu    sync.Mutex
		held  []*RequestFrame
		wrote []byte
	)
	fs := &fakeServer{t: t, serve: func(w net.Conn, f *RequestFrame) {
		switch f.ID {
		case ReqOpen:
			w.Write(respond(f.StreamID, StatusOK, []byte{0, 0, 0, 7}))
			return
		case ReqWrite:
			mu.Lock()
			wrote = append(wrote, f.Payload...)
			mu.Unlock()
		}
		held = append(held, f)
		if f.ID != ReqClose {
			return
		}
		for _, h := range held {
			w.Write(respond(h.StreamID, StatusOK, nil))
		}
		held = nil
	}}
	c := dial(t, fs.start(), &DialOptions{WriteChunk: 4})
	ctx, cancel := context.WithTimeout(testCtx(t), 5*time.Second)
	defer cancel()
	f, err := c.Open(ctx, "/f", OpenNew, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.FinishWrite(ctx, []byte("0123456789"), 0, FinishOptions{Sync: true}); err != nil {
		t.Fatalf("finish: %v", err)
	}
	if string(wrote) != "0123456789" {
		t.Errorf("the server received %q", wrote)
	}
}

// An error answer to the write or the sync is FinishWrite's error, even
// when the close succeeds.
func TestFinishWriteReportsAFailedSync(t *testing.T) {
	fs := &fakeServer{t: t, serve: func(w net.Conn, f *RequestFrame) {
		switch f.ID {
		case ReqOpen:
			w.Write(respond(f.StreamID, StatusOK, []byte{0, 0, 0, 7}))
		case ReqSync:
			w.Write(respond(f.StreamID, StatusError, AppendErrorBody(nil, ErrIOError, "disk gone")))
		default:
			w.Write(respond(f.StreamID, StatusOK, nil))
		}
	}}
	c := dial(t, fs.start(), nil)
	ctx := testCtx(t)
	f, err := c.Open(ctx, "/f", OpenNew, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var xe *Error
	if _, err := f.FinishWrite(ctx, []byte("data"), 0, FinishOptions{Sync: true}); !errors.As(err, &xe) || xe.Code != ErrIOError {
		t.Fatalf("finish with a failed sync: %v", err)
	}
}

// countingConn counts the writes made on a connection; with vectored
// set, it implements BuffersWriter too.
type countingConn struct {
	net.Conn
	writes, vectored atomic.Int32
	frames           atomic.Int32 // buffers passed to WriteBuffers
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

type vectoredConn struct{ *countingConn }

func (c vectoredConn) WriteBuffers(bufs *net.Buffers) (int64, error) {
	c.vectored.Add(1)
	c.frames.Add(int32(len(*bufs)))
	return bufs.WriteTo(c.Conn)
}

// A request's header and payload, and the requests FinishWrite sends
// together, go out in one write, also through a connection wrapped by
// DialOptions.Dial: before, such a wrapper (the gateway's connections to
// its nodes have one) got a write per header and one per payload, each
// a system call and, often, a wake-up of the server.
func TestRequestsGoOutInOneWrite(t *testing.T) {
	for _, vectored := range []bool{false, true} {
		fs := &fakeServer{t: t, serve: func(w net.Conn, f *RequestFrame) {
			if f.ID == ReqOpen {
				w.Write(respond(f.StreamID, StatusOK, []byte{0, 0, 0, 7}))
				return
			}
			w.Write(respond(f.StreamID, StatusOK, nil))
		}}
		addr := fs.start()
		cc := &countingConn{}
		var d net.Dialer
		c := dial(t, addr, &DialOptions{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			cc.Conn = conn
			if vectored {
				return vectoredConn{cc}, nil
			}
			return cc, nil
		}})
		ctx := testCtx(t)
		f, err := c.Open(ctx, "/f", OpenNew, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		writes, calls, frames := cc.writes.Load(), cc.vectored.Load(), cc.frames.Load()
		if err := c.Rm(ctx, "/some/path"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.FinishWrite(ctx, []byte("0123456789"), 0, FinishOptions{Sync: true}); err != nil {
			t.Fatal(err)
		}
		writes, calls, frames = cc.writes.Load()-writes, cc.vectored.Load()-calls, cc.frames.Load()-frames
		if vectored {
			// The rm's header and path; the write's header and data, the
			// sync's header and the close's: 2 calls, 6 buffers.
			if writes != 0 || calls != 2 || frames != 6 {
				t.Errorf("vectored: %d writes, %d WriteBuffers calls of %d buffers; want 0, 2 of 6", writes, calls, frames)
			}
		} else if writes != 2 {
			t.Errorf("%d writes for an rm and a FinishWrite; want 2", writes)
		}
	}
}

// recordingWriter records each Write it gets.
type recordingWriter struct{ writes [][]byte }

func (w *recordingWriter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, bytes.Clone(p))
	return len(p), nil
}

// writeFrames joins the frames for a writer without writev (a TLS
// connection: one record, not one a buffer) up to joinMax bytes, and
// writes larger ones buffer by buffer rather than copying them.
func TestWriteFramesJoinsSmallFrames(t *testing.T) {
	w := &recordingWriter{}
	if err := writeFrames(w, net.Buffers{[]byte("head"), []byte("body"), []byte("more")}); err != nil {
		t.Fatal(err)
	}
	if len(w.writes) != 1 || string(w.writes[0]) != "headbodymore" {
		t.Errorf("small frames: writes %q; want one of \"headbodymore\"", w.writes)
	}
	w = &recordingWriter{}
	big := bytes.Repeat([]byte{7}, joinMax)
	if err := writeFrames(w, net.Buffers{[]byte("head"), big}); err != nil {
		t.Fatal(err)
	}
	if len(w.writes) != 2 || string(w.writes[0]) != "head" || !bytes.Equal(w.writes[1], big) {
		t.Errorf("large frame: %d writes; want the header, then the payload", len(w.writes))
	}
}

// A batch of requests waiting for its turn (another batch holds it while
// it waits for free slots) gives up at its own deadline, not at the
// other batch's. Found by review: the turn was a plain mutex.
func TestBatchWaitingForItsTurnKeepsItsDeadline(t *testing.T) {
	fs := &fakeServer{t: t, serve: func(net.Conn, *RequestFrame) {}} // answers nothing
	c := dial(t, fs.start(), &DialOptions{MaxInflight: 2})
	bg, cancelBg := context.WithCancel(context.Background())
	defer cancelBg()
	for range 2 { // every slot taken by a request left unanswered
		go c.Ping(bg)
	}
	time.Sleep(100 * time.Millisecond)
	actx, acancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer acancel()
	go c.startAll(actx, []Request{&PingRequest{}, &PingRequest{}}) // waits for slots
	time.Sleep(100 * time.Millisecond)
	bctx, bcancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer bcancel()
	start := time.Now()
	if _, err := c.startAll(bctx, []Request{&PingRequest{}, &PingRequest{}}); err == nil {
		t.Error("a batch with no free slot was sent")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a batch with a 100 ms deadline returned after %v", d)
	}
}

// A FinishWrite of more requests than may be in flight sends them one at
// a time, as it did before batches. Found by review: it failed outright.
func TestFinishWriteWithFewerSlotsThanRequests(t *testing.T) {
	fs := &fakeServer{t: t, serve: func(w net.Conn, f *RequestFrame) {
		if f.ID == ReqOpen {
			w.Write(respond(f.StreamID, StatusOK, []byte{0, 0, 0, 7}))
			return
		}
		w.Write(respond(f.StreamID, StatusOK, nil))
	}}
	c := dial(t, fs.start(), &DialOptions{MaxInflight: 1})
	ctx := testCtx(t)
	f, err := c.Open(ctx, "/f", OpenNew, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.FinishWrite(ctx, []byte("0123456789"), 0, FinishOptions{Sync: true}); err != nil {
		t.Errorf("FinishWrite with one request in flight allowed: %v", err)
	}
}
