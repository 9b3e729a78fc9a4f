package xrootd

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// redirectBody is the body of a kXR_redirect to addr (host:port) with
// the given "?opaque[?token]" suffix.
func redirectBody(t testing.TB, addr, suffix string) []byte {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	return append(be32(int32(p)), host+suffix...)
}

// redirector is a fake XRootD manager: every request after the login is
// answered with a kXR_redirect to target (set before the first request)
// with suffix; it counts them.
type redirector struct {
	target, suffix string
	n              atomic.Int32
}

func (r *redirector) start(t *testing.T) string {
	fs := &fakeServer{t: t, many: true, serve: func(w net.Conn, f *RequestFrame) {
		r.n.Add(1)
		w.Write(respond(f.StreamID, StatusRedirect, redirectBody(t, r.target, r.suffix)))
	}}
	return fs.start()
}

// TestRedirectsFollowed checks that a Client with Redirects follows a
// manager's kXR_redirect to the data server, as xrdcp does: every
// request about a path is sent again there, a file opened there is
// written, read and closed there. kXR_redirect was returned as an error
// and never followed, so that ecstore cp, ls and bench failed every
// operation against an XRootD redirector.
func TestRedirectsFollowed(t *testing.T) {
	data, _ := startServer(t, newMemFS(), Limits{})
	mgr := &redirector{target: data, suffix: "?mgr.tried=none"}
	addr := mgr.start(t)
	ctx := testCtx(t)

	plain := dial(t, addr, nil)
	var re *RedirectError
	if _, err := plain.Stat(ctx, "/"); !errors.As(err, &re) || !strings.Contains(err.Error(), data) {
		t.Fatalf("stat without Redirects: %v, want a *RedirectError naming %s", err, data)
	}

	c := dial(t, addr, &DialOptions{Redirects: DefaultRedirects})
	if err := c.Mkdir(ctx, "/d", 0o755, true); err != nil {
		t.Fatal(err)
	}
	w, err := c.Open(ctx, "/d/f", OpenNew, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if w.Addr() != data {
		t.Errorf("file opened on %s, want the data server %s", w.Addr(), data)
	}
	content := bytes.Repeat([]byte("redirected "), 1000)
	if _, err := w.Write(ctx, content); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	fi, err := c.Stat(ctx, "/d/f")
	if err != nil || fi.Size != int64(len(content)) {
		t.Fatalf("stat: %+v %v", fi, err)
	}
	list, err := c.Dirlist(ctx, "/d", true)
	if err != nil || len(list) != 1 || list[0].Name != "f" {
		t.Fatalf("dirlist: %+v %v", list, err)
	}
	r, err := c.Open(ctx, "/d/f", OpenRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(content)+10)
	if n, err := r.ReadAt(ctx, got, 0); err != io.EOF || !bytes.Equal(got[:n], content) {
		t.Fatalf("read: %d bytes, %v", n, err)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Mv(ctx, "/d/f", "/d/g"); err != nil {
		t.Fatal(err)
	}
	if err := c.Rm(ctx, "/d/g"); err != nil {
		t.Fatal(err)
	}
	if err := c.Rmdir(ctx, "/d"); err != nil {
		t.Fatal(err)
	}
	// mkdir, open, stat, dirlist, open, mv, rm, rmdir: each once there.
	if n := mgr.n.Load(); n != 1+8 {
		t.Errorf("the manager redirected %d requests, want 9", n)
	}
	c.Close()
	if err := r.c.Err(); !errors.Is(err, ErrClosed) {
		t.Errorf("the connection to the data server after Close: %v, want ErrClosed", err)
	}
}

// TestRedirectOpaque checks that the opaque CGI of a redirect
// ("host?opaque?token", XProtocol.hh) is appended to the path, after the
// path's own CGI, and that the token is not.
func TestRedirectOpaque(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	data := (&fakeServer{t: t, many: true, serve: func(w net.Conn, f *RequestFrame) {
		req, err := ParseRequest(f)
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		paths = append(paths, req.(*StatRequest).Path)
		mu.Unlock()
		w.Write(respond(f.StreamID, StatusOK, []byte("1 5 16 100\x00")))
	}}).start()
	mgr := &redirector{target: data, suffix: "?tried=a&x=1?authz=secret"}
	c := dial(t, mgr.start(t), &DialOptions{Redirects: DefaultRedirects})
	ctx := testCtx(t)
	for _, p := range []string{"/f", "/g?a=b"} {
		if _, err := c.Stat(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"/f?tried=a&x=1", "/g?a=b&tried=a&x=1"}
	if strings.Join(paths, " ") != strings.Join(want, " ") {
		t.Errorf("the data server was asked for %q, want %q", paths, want)
	}
}

// TestRedirectLoop checks that a request redirected round and round
// fails after Redirects hops with ErrTooManyRedirects, which names the
// last redirect.
func TestRedirectLoop(t *testing.T) {
	mgr := &redirector{}
	addr := mgr.start(t)
	mgr.target = addr // to itself
	c := dial(t, addr, &DialOptions{Redirects: 5})
	_, err := c.Stat(testCtx(t), "/f")
	var re *RedirectError
	if !errors.Is(err, ErrTooManyRedirects) || !errors.As(err, &re) {
		t.Fatalf("a redirect loop: %v, want ErrTooManyRedirects", err)
	}
	if n := mgr.n.Load(); n != 6 {
		t.Errorf("the request was sent %d times, want 6 (5 redirects followed)", n)
	}
}

// TestRedirectOfAnOpenFile checks that a request on an open file that
// is redirected is not sent elsewhere (its handle is the server's that
// opened it): it fails with the *RedirectError.
func TestRedirectOfAnOpenFile(t *testing.T) {
	var other atomic.Int32
	elsewhere := (&fakeServer{t: t, many: true, serve: func(w net.Conn, f *RequestFrame) {
		other.Add(1)
		w.Write(respond(f.StreamID, StatusOK, nil))
	}}).start()
	fs := &fakeServer{t: t, serve: func(w net.Conn, f *RequestFrame) {
		if f.ID == ReqOpen {
			w.Write(respond(f.StreamID, StatusOK, []byte{0, 0, 0, 1}))
			return
		}
		w.Write(respond(f.StreamID, StatusRedirect, redirectBody(t, elsewhere, "")))
	}}
	c := dial(t, fs.start(), &DialOptions{Redirects: DefaultRedirects})
	ctx := testCtx(t)
	f, err := c.Open(ctx, "/f", OpenRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	var re *RedirectError
	if _, err := f.ReadAt(ctx, make([]byte, 10), 0); !errors.As(err, &re) {
		t.Fatalf("a redirected read: %v, want a *RedirectError", err)
	}
	if n := other.Load(); n != 0 {
		t.Errorf("%d requests were sent where the read was redirected", n)
	}
}

// TestRedirectToNowhere checks that a redirect to a server that cannot
// be reached fails with an error that names it.
func TestRedirectToNowhere(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	mgr := &redirector{target: gone}
	c := dial(t, mgr.start(t), &DialOptions{Redirects: DefaultRedirects})
	_, err = c.Stat(testCtx(t), "/f")
	if err == nil || !strings.Contains(err.Error(), "redirected to "+gone) {
		t.Fatalf("a redirect to a closed port: %v, want an error naming %s", err, gone)
	}
}

// TestRedirectTarget checks the decoding of a redirect's target.
func TestRedirectTarget(t *testing.T) {
	cases := []struct {
		host           string
		port           int32
		addr, opaque   string
		secure, broken bool
	}{
		{"ds1.example.org", 1095, "ds1.example.org:1095", "", false, false},
		{"ds1.example.org?", 1095, "ds1.example.org:1095", "", false, false},
		{"ds1?a=1&b=2?tok", 1094, "ds1:1094", "a=1&b=2", false, false},
		{"::1", 1094, "[::1]:1094", "", false, false},
		{"[::1]", 1094, "[::1]:1094", "", false, false},
		{"ds1", 0, "ds1:1094", "", false, false},
		{"roots://ds1:2000/?x=1", -1, "ds1:2000", "x=1", true, false},
		{"root://ds1", -1, "ds1:1094", "", false, false},
		{"https://ds1/f", -1, "", "", false, true},
		{"", 1094, "", "", false, true},
		{"ds1", 70000, "", "", false, true},
	}
	for _, tc := range cases {
		addr, opaque, secure, err := (&RedirectError{Host: tc.host, Port: tc.port}).target()
		if (err != nil) != tc.broken || addr != tc.addr || opaque != tc.opaque || secure != tc.secure {
			t.Errorf("%q port %d: %q %q %v %v", tc.host, tc.port, addr, opaque, secure, err)
		}
	}
}

// TestDirlistCluster checks that a directory listed through a manager
// (kXR_isManager), which lists nothing of its own, is the merge of its
// listings on every data server kXR_locate names, as xrdfs ls shows it:
// ecstore ls on a manager listed the manager's own directory, which
// xrootd answers with 'Unable to open directory'.
func TestDirlistCluster(t *testing.T) {
	var servers []string
	for _, names := range [][]string{{"a", "b"}, {"b", "c"}} {
		mfs := newMemFS()
		for _, n := range names {
			mfs.put("/d/"+n, []byte(n))
		}
		addr, _ := startServer(t, mfs, Limits{})
		servers = append(servers, addr)
	}
	located := ""
	for _, s := range servers {
		_, port, _ := net.SplitHostPort(s)
		located += "Sw[::127.0.0.1]:" + port + " "
	}
	mgr := (&fakeServer{t: t, many: true, flags: FlagIsManager, serve: func(w net.Conn, f *RequestFrame) {
		if f.ID == ReqLocate {
			w.Write(respond(f.StreamID, StatusOK, []byte(located)))
			return
		}
		w.Write(respond(f.StreamID, StatusError, append(be32(int32(ErrFSError)), "Unable to open directory /d\x00"...)))
	}}).start()
	c := dial(t, mgr, &DialOptions{Redirects: DefaultRedirects})
	list, err := c.DirlistCluster(testCtx(t), "/d", true)
	var names []string
	for _, fi := range list {
		names = append(names, fi.Name)
	}
	if err != nil || strings.Join(names, " ") != "a b c" {
		t.Fatalf("listing through the manager: %q, %v; want a b c", names, err)
	}
}

// TestLocatedAddr checks the addresses of kXR_locate entries.
func TestLocatedAddr(t *testing.T) {
	for in, want := range map[string]string{
		"[::127.0.0.1]:1094":     "127.0.0.1:1094",
		"[::ffff:10.0.0.1]:1095": "10.0.0.1:1095",
		"[::1]:1094":             "[::1]:1094",
		"[2001:db8::7]:1094":     "[2001:db8::7]:1094",
		"ds1.example.org:1094":   "ds1.example.org:1094",
		"192.168.1.2:2094":       "192.168.1.2:2094",
	} {
		if got, err := locatedAddr(in); err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", in, got, err, want)
		}
	}
}
