//go:build interop

package interop

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/testtool"
)

// XRootD protocol numbers, from XProtocol/XProtocol.hh (libxrootd-dev).
// They are written out here rather than taken from internal/xrootd so that
// the suite checks the gateway against the protocol, not against itself.
const (
	reqProtocol = 3006 // kXR_protocol
	reqLogin    = 3007 // kXR_login
	reqOpen     = 3010 // kXR_open
	reqPing     = 3011 // kXR_ping
	reqWrite    = 3019 // kXR_write

	statusOK    = 0    // kXR_ok
	statusError = 4003 // kXR_error

	errArgInvalid     = 3000 // kXR_ArgInvalid
	errArgTooLong     = 3002 // kXR_ArgTooLong
	errInvalidRequest = 3006 // kXR_InvalidRequest
	errUnsupported    = 3013 // kXR_Unsupported

	protocolVersion = 0x00000520 // kXR_PROTOCOLVERSION of 5.2.0
)

// handshake returns the client's initial 20 bytes (XRootD protocol,
// "Initial Handshake"): 12 zero bytes, then 4 and 2012.
func handshake() []byte {
	b := make([]byte, 20)
	binary.BigEndian.PutUint32(b[12:], 4)
	binary.BigEndian.PutUint32(b[16:], 2012)
	return b
}

// request returns a 24-byte request header (ClientRequestHdr) with the
// given 16 parameter bytes, followed by body.
func request(sid uint16, id uint16, params []byte, dlen int32, body []byte) []byte {
	b := make([]byte, 24, 24+len(body))
	binary.BigEndian.PutUint16(b[0:], sid)
	binary.BigEndian.PutUint16(b[2:], id)
	copy(b[4:20], params)
	binary.BigEndian.PutUint32(b[20:], uint32(dlen))
	return append(b, body...)
}

// frame is one server response (ServerResponseHeader and body).
type frame struct {
	sid    uint16
	status uint16
	body   []byte
}

// code returns the error code of a kXR_error frame.
func (f *frame) code() int {
	if f.status != statusError || len(f.body) < 4 {
		return -1
	}
	return int(binary.BigEndian.Uint32(f.body))
}

func (f *frame) String() string {
	if f.status == statusError {
		msg := ""
		if len(f.body) > 4 {
			msg = string(f.body[4:])
		}
		return fmt.Sprintf("kXR_error %d %q on stream %#x", f.code(), msg, f.sid)
	}
	return fmt.Sprintf("status %d (%d bytes) on stream %#x", f.status, len(f.body), f.sid)
}

// rawConn is a hand-driven TCP connection to an XRootD server.
type rawConn struct {
	t testing.TB
	c *net.TCPConn
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c.(*net.TCPConn)}
}

func (r *rawConn) write(b []byte) {
	r.t.Helper()
	r.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.c.Write(b); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// read reads one response frame within timeout.
func (r *rawConn) read(timeout time.Duration) (*frame, error) {
	r.c.SetReadDeadline(time.Now().Add(timeout))
	var h [8]byte
	if _, err := io.ReadFull(r.c, h[:]); err != nil {
		return nil, err
	}
	f := &frame{sid: binary.BigEndian.Uint16(h[0:]), status: binary.BigEndian.Uint16(h[2:])}
	n := binary.BigEndian.Uint32(h[4:])
	if n > 16*mib {
		return nil, fmt.Errorf("response of %d bytes", n)
	}
	f.body = make([]byte, n)
	if _, err := io.ReadFull(r.c, f.body); err != nil {
		return nil, err
	}
	return f, nil
}

func (r *rawConn) mustRead() *frame {
	r.t.Helper()
	f, err := r.read(10 * time.Second)
	if err != nil {
		r.t.Fatalf("read response: %v", err)
	}
	return f
}

// login performs the handshake, kXR_protocol and kXR_login.
func (r *rawConn) login() {
	r.t.Helper()
	params := make([]byte, 16)
	binary.BigEndian.PutUint32(params, protocolVersion)
	r.write(append(handshake(), request(0, reqProtocol, params, 0, nil)...))
	if f := r.mustRead(); f.status != statusOK || len(f.body) != 8 {
		r.t.Fatalf("handshake answer: %v", f)
	}
	if f := r.mustRead(); f.status != statusOK {
		r.t.Fatalf("kXR_protocol answer: %v", f)
	}
	params = make([]byte, 16)
	binary.BigEndian.PutUint32(params, uint32(os.Getpid()))
	copy(params[4:12], "interop")
	params[15] = 5 // capver: kXR_ver005
	r.write(request(1, reqLogin, params, 0, nil))
	if f := r.mustRead(); f.sid != 1 || f.status != statusOK || len(f.body) < 16 {
		r.t.Fatalf("kXR_login answer: %v", f)
	}
}

// ping checks that the connection still serves requests.
func (r *rawConn) ping(sid uint16) {
	r.t.Helper()
	r.write(request(sid, reqPing, nil, 0, nil))
	if f := r.mustRead(); f.sid != sid || f.status != statusOK {
		r.t.Fatalf("kXR_ping answer: %v, want kXR_ok on stream %#x", f, sid)
	}
}

// expectError reads one frame and checks it is a kXR_error for sid with
// one of codes.
func (r *rawConn) expectError(sid uint16, codes ...int) {
	r.t.Helper()
	f := r.mustRead()
	if f.sid != sid || f.status != statusError {
		r.t.Fatalf("got %v, want kXR_error on stream %#x", f, sid)
	}
	for _, c := range codes {
		if f.code() == c {
			r.t.Logf("answered %v", f)
			return
		}
	}
	r.t.Fatalf("got %v, want error code in %v", f, codes)
}

// expectClose reads until the server closes the connection; every frame
// it sends before must be a kXR_error.
func (r *rawConn) expectClose(timeout time.Duration) {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		f, err := r.read(time.Until(deadline))
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			r.t.Fatalf("the server neither answered nor closed the connection within %v", timeout)
		case err != nil:
			return // EOF or reset: closed
		case f.status != statusError:
			r.t.Fatalf("answered %v to malformed input, want kXR_error or close", f)
		default:
			r.t.Logf("answered %v", f)
		}
	}
}

// expectClosedAfterHandshake is expectClose for a connection whose
// handshake failed: the server may not frame anything, so any bytes are
// accepted until it closes.
func (r *rawConn) expectClosedAfterHandshake(timeout time.Duration) {
	r.t.Helper()
	r.c.SetReadDeadline(time.Now().Add(timeout))
	n, err := io.Copy(io.Discard, r.c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		r.t.Fatalf("the server did not close the connection within %v (after %d bytes)", timeout, n)
	}
	r.t.Logf("closed after sending %d bytes (%v)", n, err)
}

// TestGatewayRawTCP sends malformed frames to the gateway from a raw TCP
// client. After each case the gateway must still be running and a fresh
// xrdfs must list and read what it stores: one bad client never takes the
// gateway down.
func TestGatewayRawTCP(t *testing.T) {
	testtool.Need(t, "xrdfs")
	testtool.Need(t, "xrdcp")
	work := t.TempDir()
	gw := startGateway(t, work, false, "--data", filepath.Join(work, "data"), "--fsync=false")
	seed := seed(t)
	rnd := rand.New(rand.NewPCG(seed, 2))
	local := filepath.Join(work, "obj")
	writeRandom(t, local, mib+1, seed, 200)
	must(t, "xrdcp", "--nopbar", local, gw.obj("/raw/obj"))

	garbage := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rnd.Uint32())
		}
		return b
	}
	tests := []struct {
		name string
		run  func(t *testing.T, r *rawConn)
	}{
		{"truncated handshake, then close", func(t *testing.T, r *rawConn) {
			r.write(handshake()[:10])
			r.c.Close()
		}},
		{"truncated handshake, held open", func(t *testing.T, r *rawConn) {
			// A client stuck mid-handshake must not block others.
			r.write(handshake()[:10])
			checkServing(t, gw, work, local)
		}},
		{"200 clients stuck mid-handshake", func(t *testing.T, r *rawConn) {
			r.write(handshake()[:10])
			for range 199 {
				dialRaw(t, gw.addr).write(handshake()[:10])
			}
			checkServing(t, gw, work, local)
		}},
		{"garbage instead of handshake", func(t *testing.T, r *rawConn) {
			r.write(garbage(4 * kib))
			r.c.CloseWrite()
			r.expectClosedAfterHandshake(10 * time.Second)
		}},
		{"garbage after login", func(t *testing.T, r *rawConn) {
			r.login()
			r.write(garbage(64 * kib))
			r.c.CloseWrite()
			r.expectClose(10 * time.Second)
		}},
		{"truncated request header", func(t *testing.T, r *rawConn) {
			r.login()
			r.write(request(7, reqPing, nil, 0, nil)[:13])
			r.c.CloseWrite()
			r.expectClose(10 * time.Second)
		}},
		{"huge length before login", func(t *testing.T, r *rawConn) {
			r.write(handshake())
			if _, err := r.read(10 * time.Second); err != nil {
				t.Fatalf("handshake answer: %v", err)
			}
			r.write(request(9, reqLogin, nil, 0x7fffffff, nil))
			r.expectError(9, errArgTooLong, errArgInvalid)
		}},
		{"huge length open", func(t *testing.T, r *rawConn) {
			r.login()
			r.write(request(9, reqOpen, nil, 0x7fffffff, []byte("/raw/obj")))
			r.expectError(9, errArgTooLong, errArgInvalid)
		}},
		{"huge length write", func(t *testing.T, r *rawConn) {
			r.login()
			r.write(request(10, reqWrite, nil, 0x7ffffff0, garbage(64*kib)))
			r.expectError(10, errArgTooLong, errArgInvalid)
		}},
		{"negative length", func(t *testing.T, r *rawConn) {
			r.login()
			r.write(request(11, reqOpen, nil, -1, nil))
			r.expectError(11, errArgInvalid, errArgTooLong)
		}},
		{"unknown request id", func(t *testing.T, r *rawConn) {
			r.login()
			r.write(request(12, 3999, nil, 0, nil))
			r.expectError(12, errUnsupported, errInvalidRequest)
			r.ping(13) // the connection survives
		}},
		{"unknown request id with a body", func(t *testing.T, r *rawConn) {
			r.login()
			r.write(request(14, 2999, nil, 100, garbage(100)))
			r.expectError(14, errUnsupported, errInvalidRequest)
			r.ping(15) // the body was skipped: framing is intact
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, gw.addr)
			tc.run(t, r)
			r.c.Close()
			checkServing(t, gw, work, local)
		})
	}
	gw.fsck(t)
}

// checkServing checks that the gateway is alive and that fresh xrdfs and
// xrdcp clients can list and read /raw/obj (a copy of local).
func checkServing(t *testing.T, gw *gateway, work, local string) {
	t.Helper()
	gw.checkAlive(t)
	fi, err := os.Stat(local)
	if err != nil {
		t.Fatal(err)
	}
	checkLs(t, gw.url, "/raw", map[string]int64{"/raw/obj": fi.Size()})
	back := filepath.Join(work, "back")
	must(t, "xrdcp", "--nopbar", "-f", gw.obj("/raw/obj"), back)
	sameFile(t, back, local)
	gw.checkAlive(t)
}
