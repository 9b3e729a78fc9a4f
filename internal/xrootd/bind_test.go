package xrootd

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// rawLogin dials addr and logs in, returning the session id of the login
// answer.
func rawLogin(t testing.TB, addr string) (*rawConn, [16]byte) {
	t.Helper()
	rc := rawDial(t, addr, false)
	rc.send(StreamID{0, 1}, &LoginRequest{Username: "raw"})
	f := rc.read()
	if f.Status != StatusOK || len(f.Body) != 16 {
		t.Fatalf("login answer %+v", f)
	}
	var id [16]byte
	copy(id[:], f.Body)
	return rc, id
}

// rawBind dials addr and binds the connection to session id, expecting
// path id want.
func rawBind(t testing.TB, addr string, id [16]byte, want uint8) *rawConn {
	t.Helper()
	sub := rawDial(t, addr, false)
	sub.send(StreamID{0, 2}, &BindRequest{SessionID: id})
	f := sub.read()
	if f.Status != StatusOK || !bytes.Equal(f.Body, []byte{want}) {
		t.Fatalf("bind answered %v %q, want kXR_ok with path id %d", f.Status, f.Body, want)
	}
	return sub
}

// rawOpen opens name on rc and returns its handle.
func rawOpen(t testing.TB, rc *rawConn, name string, opts OpenFlags) FileHandle {
	t.Helper()
	rc.send(StreamID{0, 3}, &OpenRequest{Mode: 0o644, Options: opts, Path: name})
	f := rc.read()
	if f.Status != StatusOK || len(f.Body) < 4 {
		t.Fatalf("open %s answered %v %q", name, f.Status, f.Body)
	}
	var fh FileHandle
	copy(fh[:], f.Body)
	return fh
}

// collect reads the frames of one answer on sid and returns its data.
func collect(t testing.TB, rc *rawConn, sid StreamID) []byte {
	t.Helper()
	var data []byte
	for {
		f := rc.read()
		if f.StreamID != sid {
			t.Fatalf("frame for stream %v, want %v", f.StreamID, sid)
		}
		switch f.Status {
		case StatusOK, StatusOKSoFar:
			data = append(data, f.Body...)
		case StatusStatus:
			data = append(data, f.Data...)
		default:
			t.Fatalf("answer %v %q", f.Status, f.Body)
		}
		if isFinal(f) {
			return data
		}
	}
}

// TestBindReadsOnSubStream binds a sub-stream to a session and reads a
// file opened on the session with kXR_read, kXR_pgread and kXR_readv
// naming the sub-stream: the answers come there, with the request's
// stream id, and nothing comes on the session's connection.
func TestBindReadsOnSubStream(t *testing.T) {
	m := newMemFS()
	data := randomBytes(rand.New(rand.NewPCG(testSeed(t), 1)), 3<<20+123)
	m.put("/f", data)
	addr, srv := startServer(t, m, Limits{})
	main, id := rawLogin(t, addr)
	sub := rawBind(t, addr, id, 1)
	fh := rawOpen(t, main, "/f", OpenRead)

	sid := StreamID{0, 9}
	main.send(sid, &ReadRequest{Handle: fh, Offset: 5, Length: 2<<20 + 7, HasArgs: true, PathID: 1})
	if got := collect(t, sub, sid); !bytes.Equal(got, data[5:5+2<<20+7]) {
		t.Fatalf("read on the sub-stream: %d bytes, not the file's", len(got))
	}
	main.send(sid, &PgReadRequest{Handle: fh, Offset: 4096, Length: 1<<20 + 1, HasArgs: true, PathID: 1})
	pages := collect(t, sub, sid)
	got, err := DecodePages(nil, 4096, pages)
	if err != nil || !bytes.Equal(got, data[4096:4096+1<<20+1]) {
		t.Fatalf("pgread on the sub-stream: %v", err)
	}
	main.send(sid, &ReadVRequest{PathID: 1, Segments: []ReadSegment{{Handle: fh, Offset: 1, Length: 10}, {Handle: fh, Offset: 3 << 20, Length: 123}}})
	v := collect(t, sub, sid)
	if len(v) != 2*readVItemLen+133 || !bytes.Equal(v[readVItemLen:readVItemLen+10], data[1:11]) {
		t.Fatalf("readv on the sub-stream: %d bytes", len(v))
	}
	// The session's connection got nothing meanwhile: the next frame
	// there is the ping's answer.
	main.ping(StreamID{0, 10})

	// A path id that is not bound fails on the session's connection.
	main.send(sid, &ReadRequest{Handle: fh, Length: 10, HasArgs: true, PathID: 7})
	main.expectError(sid, ErrArgInvalid)
	// Path 0 is the session's own connection.
	main.send(sid, &ReadRequest{Handle: fh, Length: 10, HasArgs: true})
	if got := collect(t, main, sid); !bytes.Equal(got, data[:10]) {
		t.Fatal("read on path 0 is wrong")
	}

	sub.conn.Close()
	waitFor(t, func() bool { _, sent := srv.SubStreamBytes(); return sent > 3<<20 })
}

// TestBindWrites writes to a file opened on the session: on the
// sub-stream itself (buffered and streamed sizes), answered there, and on
// the session's connection naming the sub-stream, answered on the
// sub-stream.
func TestBindWrites(t *testing.T) {
	m := newMemFS()
	addr, _ := startServer(t, m, Limits{})
	main, id := rawLogin(t, addr)
	sub := rawBind(t, addr, id, 1)
	fh := rawOpen(t, main, "/w", OpenNew|OpenUpdate)

	r := rand.New(rand.NewPCG(testSeed(t), 2))
	small := randomBytes(r, 1000)
	big := randomBytes(r, 1<<20)
	third := randomBytes(r, 300<<10)
	sid := StreamID{0, 4}
	sub.send(sid, &WriteRequest{Handle: fh, Offset: 0, Data: small})
	if f := sub.read(); f.StreamID != sid || f.Status != StatusOK {
		t.Fatalf("small write on the sub-stream answered %v on %v", f.Status, f.StreamID)
	}
	off := int64(len(small))
	sub.send(sid, &PgWriteRequest{Handle: fh, Offset: off, Pages: AppendPages(nil, off, big)})
	if f := sub.read(); f.StreamID != sid || f.Status != StatusStatus {
		t.Fatalf("pgwrite on the sub-stream answered %v on %v", f.Status, f.StreamID)
	}
	off += int64(len(big))
	main.send(sid, &WriteRequest{Handle: fh, Offset: off, PathID: 1, Data: third})
	if f := sub.read(); f.StreamID != sid || f.Status != StatusOK {
		t.Fatalf("write naming the sub-stream answered %v on %v", f.Status, f.StreamID)
	}
	// A write on a handle that is not open fails where it was sent.
	sub.send(sid, &WriteRequest{Handle: FileHandle{9, 9, 9, 9}, Data: small})
	sub.expectError(sid, ErrFileNotOpen)
	sub.send(sid, &SyncRequest{Handle: fh})
	if f := sub.read(); f.Status != StatusOK {
		t.Fatalf("sync on the sub-stream answered %v", f.Status)
	}
	main.send(StreamID{0, 5}, &CloseRequest{Handle: fh})
	if f := main.read(); f.Status != StatusOK {
		t.Fatalf("close answered %v %q", f.Status, f.Body)
	}
	want := append(append(append([]byte{}, small...), big...), third...)
	if got, _ := m.get("/w"); !bytes.Equal(got, want) {
		t.Fatalf("file has %d bytes, want %d written through the sub-stream", len(got), len(want))
	}
}

// TestBindRefused checks that a bind names a live, logged-in session of
// this server, that a bound connection takes only data requests (no
// login, auth, open or second bind), and that malformed binds are
// answered, not fatal.
func TestBindRefused(t *testing.T) {
	m := newMemFS()
	m.put("/f", []byte("data"))
	addr, _ := startServer(t, m, Limits{})
	main, id := rawLogin(t, addr)
	sid := StreamID{0, 6}

	// An unknown session id.
	rc := rawDial(t, addr, false)
	rc.send(sid, &BindRequest{SessionID: [16]byte{1, 2, 3}})
	rc.expectError(sid, ErrNotAuthorized)
	rc.send(sid, &BindRequest{})
	rc.expectError(sid, ErrNotAuthorized)
	// Malformed: a payload, or a short frame.
	rc.write(append(rawHeader(sid, ReqBind, 3), "abc"...))
	rc.expectError(sid, ErrArgInvalid)
	// The connection is still usable (not logged in: open is refused).
	rc.ping(sid)
	rc.send(sid, &OpenRequest{Path: "/f", Options: OpenRead})
	rc.expectError(sid, ErrNotAuthorized)

	// A logged-in connection cannot bind.
	main.send(sid, &BindRequest{SessionID: id})
	main.expectError(sid, ErrInvalidRequest)

	// A bound connection cannot log in, authenticate, bind again, or
	// do anything but data requests.
	sub := rawBind(t, addr, id, 1)
	sub.send(sid, &LoginRequest{Username: "other"})
	sub.expectError(sid, ErrInvalidRequest)
	sub.send(sid, &AuthRequest{CredType: [4]byte{'u', 'n', 'i', 'x'}})
	sub.expectError(sid, ErrInvalidRequest)
	sub.send(sid, &BindRequest{SessionID: id})
	sub.expectError(sid, ErrInvalidRequest)
	sub.send(sid, &OpenRequest{Path: "/f", Options: OpenRead})
	sub.expectError(sid, ErrInvalidRequest)
	sub.send(sid, &ProtocolRequest{ClientVersion: ProtocolVersion})
	sub.expectError(sid, ErrInvalidRequest)
	sub.ping(sid)
	// Nor can a connection bind to a sub-stream's session id (it has none).
	other := rawDial(t, addr, false)
	other.send(sid, &BindRequest{SessionID: id})
	if f := other.read(); f.Status != StatusOK || !bytes.Equal(f.Body, []byte{2}) {
		t.Fatalf("second bind answered %v %q", f.Status, f.Body)
	}
}

// TestBindLimit binds MaxSubStreams sub-streams to a session, has the
// next one refused, and reuses the path id of one that ends.
func TestBindLimit(t *testing.T) {
	addr, _ := startServer(t, newMemFS(), Limits{})
	_, id := rawLogin(t, addr)
	subs := make([]*rawConn, 0, MaxSubStreams)
	for i := 1; i <= MaxSubStreams; i++ {
		subs = append(subs, rawBind(t, addr, id, uint8(i)))
	}
	sid := StreamID{0, 7}
	rc := rawDial(t, addr, false)
	rc.send(sid, &BindRequest{SessionID: id})
	rc.expectError(sid, ErrNoMemory)

	subs[4].conn.Close()
	waitFor(t, func() bool {
		rc.send(sid, &BindRequest{SessionID: id})
		f := rc.read()
		if f.Status == StatusOK {
			if !bytes.Equal(f.Body, []byte{5}) {
				t.Fatalf("bind after path 5 ended got path %q", f.Body)
			}
			return true
		}
		return false
	})
}

// TestBindClosedWithSession ends a session: its sub-streams are closed,
// and its session id no longer binds.
func TestBindClosedWithSession(t *testing.T) {
	m := newMemFS()
	addr, _ := startServer(t, m, Limits{})
	main, id := rawLogin(t, addr)
	fh := rawOpen(t, main, "/w", OpenNew|OpenUpdate)
	sub1 := rawBind(t, addr, id, 1)
	sub2 := rawBind(t, addr, id, 2)
	sub1.send(StreamID{0, 8}, &WriteRequest{Handle: fh, Data: []byte("x")})
	if f := sub1.read(); f.Status != StatusOK {
		t.Fatalf("write answered %v", f.Status)
	}
	main.conn.Close()
	sub1.expectClosed()
	sub2.expectClosed()
	rc := rawDial(t, addr, false)
	rc.send(StreamID{0, 8}, &BindRequest{SessionID: id})
	rc.expectError(StreamID{0, 8}, ErrNotAuthorized)
}

// TestBindConcurrent has several sub-streams write and read a session's
// files at once while the session opens and closes others (for -race).
func TestBindConcurrent(t *testing.T) {
	m := newMemFS()
	addr, _ := startServer(t, m, Limits{})
	main, id := rawLogin(t, addr)
	const n = 4
	fhs := make([]FileHandle, n)
	for i := range fhs {
		fhs[i] = rawOpen(t, main, fmt.Sprintf("/c%d", i), OpenNew|OpenUpdate)
	}
	done := make(chan error, n)
	for i := range n {
		sub := rawBind(t, addr, id, uint8(i+1))
		go func() {
			payload := bytes.Repeat([]byte{byte(i)}, 100<<10)
			for j := range 8 {
				sub.write(EncodeRequest(StreamID{1, byte(j)}, &WriteRequest{Handle: fhs[i], Offset: int64(j * len(payload)), Data: payload}).AppendTo(nil))
			}
			for range 8 {
				sub.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
				f, err := ReadResponseFrame(sub.conn, 1<<20)
				if err == nil && f.Status != StatusOK {
					err = fmt.Errorf("write answered %v %q", f.Status, f.Body)
				}
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 20 {
		rawOpen(t, main, "/c0", OpenRead)
	}
	for range n {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for i, fh := range fhs {
		main.send(StreamID{0, 5}, &CloseRequest{Handle: fh})
		if f := main.read(); f.Status != StatusOK {
			t.Fatalf("close answered %v %q", f.Status, f.Body)
		}
		if got, _ := m.get(fmt.Sprintf("/c%d", i)); len(got) != 800<<10 {
			t.Fatalf("/c%d has %d bytes", i, len(got))
		}
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
