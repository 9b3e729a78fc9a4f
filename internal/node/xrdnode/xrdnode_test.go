package xrdnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/dataserver"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/node/nodetest"
	"github.com/ecstore/ecstore/internal/xrootd"
)

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// ourServer is an xrootd.Server serving a dataserver.FS.
type ourServer struct {
	t    testing.TB
	dir  string
	addr string
	srv  *xrootd.Server
	done chan error
}

// startOurs serves a fresh directory (or dir, if not empty) with
// package dataserver on addr ("127.0.0.1:0" for a free port) until
// stopped or the test ends.
func startOurs(t testing.TB, dir, addr string) *ourServer {
	t.Helper()
	return startServing(t, dir, addr, func(fsys *dataserver.FS) xrootd.FileSystem { return fsys })
}

// startServing is startOurs with the file system that wrap makes of the
// data server's.
func startServing(t testing.TB, dir, addr string, wrap func(*dataserver.FS) xrootd.FileSystem) *ourServer {
	t.Helper()
	return startServingWith(t, dir, addr, dataserver.Options{}, wrap)
}

// startServingWith is startServing with the data server's options.
func startServingWith(t testing.TB, dir, addr string, opts dataserver.Options, wrap func(*dataserver.FS) xrootd.FileSystem) *ourServer {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	fsys, err := dataserver.New(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	for deadline := time.Now().Add(5 * time.Second); ; {
		ln, err = net.Listen("tcp", addr)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // the old listener's port
	}
	if err != nil {
		t.Fatal(err)
	}
	s := &ourServer{t: t, dir: dir, addr: ln.Addr().String(), done: make(chan error, 1)}
	s.srv = &xrootd.Server{Handler: wrap(fsys), Logger: testLogger(t)}
	go func() { s.done <- s.srv.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		s.stop()
		fsys.Close()
	})
	return s
}

// stop shuts the server down, closing every connection.
func (s *ourServer) stop() {
	if s.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		s.t.Errorf("Shutdown: %v", err)
	}
	<-s.done
	s.srv = nil
}

// newNode returns a node on url closed at the end of the test.
func newNode(t testing.TB, url string, opts Options) *Node {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := New(ctx, url, opts)
	if err != nil {
		t.Fatalf("New(%s): %v", url, err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func TestConformance(t *testing.T) {
	t.Run("prefix=root", func(t *testing.T) {
		nodetest.Run(t, func(t *testing.T) node.Node {
			s := startOurs(t, "", "127.0.0.1:0")
			return newNode(t, "root://"+s.addr, Options{})
		})
	})
	t.Run("prefix=deep", func(t *testing.T) {
		s := startOurs(t, "", "127.0.0.1:0")
		var seq atomic.Int32
		nodetest.Run(t, func(t *testing.T) node.Node {
			// Every subtest gets its own prefix on one server, with a
			// neighbour that must stay untouched.
			n := newNode(t, fmt.Sprintf("root://%s//nodes/n%d", s.addr, seq.Add(1)), Options{Fsync: true, Conns: 3})
			if err := os.WriteFile(filepath.Join(s.dir, "nodes", "neighbour"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			return n
		})
		if b, err := os.ReadFile(filepath.Join(s.dir, "nodes", "neighbour")); err != nil || string(b) != "x" {
			t.Errorf("file beside the prefixes: %q, %v", b, err)
		}
	})
	t.Run("io=pages", func(t *testing.T) {
		s := startOurs(t, "", "127.0.0.1:0")
		var seq atomic.Int32
		nodetest.Run(t, func(t *testing.T) node.Node {
			return newNode(t, fmt.Sprintf("root://%s//p%d", s.addr, seq.Add(1)), Options{
				PageChecksums: true,
				WriteBuffer:   1, // the minimum, 64 KiB
				Client:        &xrootd.DialOptions{ReadChunk: 4096, WriteChunk: 4096},
			})
		})
	})
}

func TestParseURL(t *testing.T) {
	tests := []struct {
		url, addr, prefix string
		wantErr           bool
	}{
		{"root://h:1095//data/n1", "h:1095", "/data/n1", false},
		{"root://h:1095/data/n1", "h:1095", "/data/n1", false},
		{"root://h:1095//data/n1/", "h:1095", "/data/n1", false},
		{"xroot://h//p", "h:1094", "/p", false},
		{"root://[::1]:1094//p", "[::1]:1094", "/p", false},
		{"root://[::1]//p", "[::1]:1094", "/p", false},
		{"root://h:1", "h:1", "/", false},
		{"root://h:1/", "h:1", "/", false},
		{"root://h:1//", "h:1", "/", false},
		{"http://h:1//p", "", "", true},
		{"root:///p", "", "", true},
		{"root://h//a/../b", "", "", true},
		{"root://h//a//b", "", "", true},
		{"root://h//p?x=1", "", "", true},
		{"root://u@h//p", "", "", true},
		{"root://h//" + node.TempName("p", "1"), "", "", true},
		{"root://h//a%3Fb", "", "", true},
	}
	for _, tt := range tests {
		addr, prefix, err := parseURL(tt.url)
		if (err != nil) != tt.wantErr || addr != tt.addr || prefix != tt.prefix {
			t.Errorf("parseURL(%q) = %q, %q, %v; want %q, %q, error %v", tt.url, addr, prefix, err, tt.addr, tt.prefix, tt.wantErr)
		}
	}
}

func TestID(t *testing.T) {
	s := startOurs(t, "", "127.0.0.1:0")
	if n := newNode(t, "root://"+s.addr+"//a/b", Options{}); n.ID() != s.addr+"/a/b" {
		t.Errorf("derived ID = %q", n.ID())
	}
	if n := newNode(t, "root://"+s.addr, Options{}); n.ID() != s.addr {
		t.Errorf("derived ID = %q", n.ID())
	}
	if n := newNode(t, "root://"+s.addr, Options{ID: "n7"}); n.ID() != "n7" {
		t.Errorf("given ID = %q", n.ID())
	}
	if fi, err := os.Stat(filepath.Join(s.dir, "a", "b")); err != nil || !fi.IsDir() {
		t.Errorf("New did not create the prefix: %v", err)
	}
}

// TestQuestionMark checks that '?', which root:// reserves for CGI,
// never reaches the server.
func TestQuestionMark(t *testing.T) {
	s := startOurs(t, "", "127.0.0.1:0")
	n := newNode(t, "root://"+s.addr, Options{})
	ctx := context.Background()
	if _, err := n.Create(ctx, "/a?b"); !errors.Is(err, node.ErrPath) {
		t.Errorf("Create(/a?b) = %v; want ErrPath", err)
	}
	if _, err := n.Stat(ctx, "/a?b"); !errors.Is(err, node.ErrPath) {
		t.Errorf("Stat(/a?b) = %v; want ErrPath", err)
	}
	if err := n.Rename(ctx, "/x", "/a?b"); !errors.Is(err, node.ErrPath) {
		t.Errorf("Rename(/x, /a?b) = %v; want ErrPath", err)
	}
}

// TestLargeUpload writes through several buffers with odd-sized writes,
// the larger ones sent directly, and reads back with reads that cross
// them, with kXR_write and kXR_read and with their page-checksummed kin.
func TestLargeUpload(t *testing.T) {
	for _, pages := range []bool{false, true} {
		t.Run(fmt.Sprintf("pages=%v", pages), func(t *testing.T) { testLargeUpload(t, pages) })
	}
}

func testLargeUpload(t *testing.T, pages bool) {
	s := startOurs(t, "", "127.0.0.1:0")
	n := newNode(t, "root://"+s.addr+"//big", Options{WriteBuffer: 100 << 10, Fsync: true, PageChecksums: pages})
	ctx := context.Background()
	data := make([]byte, 3<<20+333)
	for i := range data {
		data[i] = byte(i*31 + i>>12)
	}
	u, err := n.Create(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	for rest, step := data, 1; len(rest) > 0; step = step*3 + 7 {
		k := min(step, len(rest))
		if err := u.Write(ctx, rest[:k]); err != nil {
			t.Fatal(err)
		}
		rest = rest[k:]
	}
	if err := u.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(s.dir, "big", "f"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("stored file: %d bytes, %v; want %d", len(got), err, len(data))
	}
	f, err := n.Open(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20+5)
	for _, off := range []int64{0, 4095, 1 << 20, int64(len(data)) - 100} {
		m, err := f.ReadAt(ctx, buf, off)
		want := data[off:min(off+int64(len(buf)), int64(len(data)))]
		if !bytes.Equal(buf[:m], want) || (len(want) < len(buf)) != (err == io.EOF) || (err != nil && err != io.EOF) {
			t.Errorf("ReadAt(off %d) = %d, %v; want %d bytes", off, m, err, len(want))
		}
	}
}

func TestRenameOntoDirectory(t *testing.T) {
	s := startOurs(t, "", "127.0.0.1:0")
	testRenameOntoDirectory(t, newNode(t, "root://"+s.addr+"//mv", Options{}))
}

// testRenameOntoDirectory checks that Rename onto a directory fails with
// node.ErrExist and Commit onto one with node.ErrIsDir, whatever the
// server answers, and that nothing changes.
func testRenameOntoDirectory(t *testing.T, n node.Node) {
	ctx := context.Background()
	put := func(path, data string) {
		t.Helper()
		u, err := n.Create(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		if err := u.Write(ctx, []byte(data)); err != nil {
			t.Fatal(err)
		}
		if err := u.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	put("/file", "f")
	put("/full/x", "x")
	put("/srcdir/y", "y")
	for _, d := range []string{"/empty", "/empty2"} {
		if err := n.Mkdir(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct{ from, to string }{
		{"/file", "/empty"},
		{"/file", "/full"},
		{"/srcdir", "/empty"},
		{"/srcdir", "/full"},
	} {
		if err := n.Rename(ctx, tt.from, tt.to); !errors.Is(err, node.ErrExist) {
			t.Errorf("Rename(%s, %s) = %v; want ErrExist", tt.from, tt.to, err)
		}
	}
	if got := string(readAll(t, n, ctx, "/file")); got != "f" {
		t.Errorf("/file = %q", got)
	}
	if got := string(readAll(t, n, ctx, "/srcdir/y")); got != "y" {
		t.Errorf("/srcdir/y = %q", got)
	}
	if ents, err := n.List(ctx, "/empty"); err != nil || len(ents) != 0 {
		t.Errorf("List(/empty) = %v, %v; want empty", ents, err)
	}
	for _, dir := range []string{"/empty2", "/full"} {
		u, err := n.Create(ctx, "/tmpdir"+dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Mkdir(ctx, "/tmpdir"+dir+"/sub"); err != nil {
			t.Fatal(err)
		}
		if dir == "/empty2" {
			if err := n.Remove(ctx, "/tmpdir"+dir+"/sub"); err != nil {
				t.Fatal(err)
			}
		}
		if err := u.Commit(ctx); !errors.Is(err, node.ErrIsDir) {
			t.Errorf("Commit onto directory %s = %v; want ErrIsDir", dir, err)
		}
		if err := u.Abort(ctx); err != nil {
			t.Errorf("Abort: %v", err)
		}
		if fi, err := n.Stat(ctx, "/tmpdir"+dir); err != nil || !fi.IsDir {
			t.Errorf("Stat(%s) after failed Commit = %+v, %v; want the directory", "/tmpdir"+dir, fi, err)
		}
	}
}

// TestNoDirCheck: with Options.NoDirCheck, a create where a directory
// stands is not refused at once (no stat of the path is sent); its Commit
// fails with node.ErrIsDir and the directory stays. A file is written as
// usual.
func TestNoDirCheck(t *testing.T) {
	s := startOurs(t, "", "127.0.0.1:0")
	n := newNode(t, "root://"+s.addr+"//nd", Options{NoDirCheck: true})
	ctx := context.Background()
	if err := n.Mkdir(ctx, "/d/sub"); err != nil {
		t.Fatal(err)
	}
	u, err := n.Create(ctx, "/d")
	if err != nil {
		t.Fatalf("Create onto a directory with NoDirCheck: %v; want the error at Commit", err)
	}
	if err := u.Write(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := u.Commit(ctx); !errors.Is(err, node.ErrIsDir) {
		t.Errorf("Commit onto a directory = %v; want ErrIsDir", err)
	}
	if err := u.Abort(ctx); err != nil {
		t.Errorf("Abort: %v", err)
	}
	if fi, err := n.Stat(ctx, "/d"); err != nil || !fi.IsDir {
		t.Errorf("Stat(/d) = %+v, %v; want the directory", fi, err)
	}
	putFile(t, n, "/f", []byte("data"))
	if got := string(readAll(t, n, ctx, "/f")); got != "data" {
		t.Errorf("/f = %q", got)
	}
	// Without the option the create itself is refused.
	plain := newNode(t, "root://"+s.addr+"//nd", Options{})
	if _, err := plain.Create(ctx, "/d"); !errors.Is(err, node.ErrIsDir) {
		t.Errorf("Create onto a directory = %v; want ErrIsDir", err)
	}
}

// TestWriteErrorIsSticky checks that a failure of the background writer
// reaches the caller and that Abort still cleans up.
func TestWriteErrorIsSticky(t *testing.T) {
	s := startOurs(t, "", "127.0.0.1:0")
	n := newNode(t, "root://"+s.addr, Options{WriteBuffer: 64 << 10})
	ctx := context.Background()
	u, err := n.Create(ctx, "/d/f")
	if err != nil {
		t.Fatal(err)
	}
	// Close the server's handle behind the upload's back: its next
	// write fails with kXR_FileNotOpen.
	uu := u.(*upload)
	if err := uu.f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	var werr error
	for range 4 {
		if werr = u.Write(ctx, chunk); werr != nil {
			break
		}
	}
	if werr == nil {
		werr = u.Finish(ctx)
	}
	if werr == nil {
		t.Fatal("writes to a closed handle succeeded")
	}
	if err := u.Commit(ctx); err == nil {
		t.Error("Commit after a failed write succeeded")
	}
	if err := u.Abort(ctx); err != nil {
		t.Errorf("Abort: %v", err)
	}
	if ents, err := n.List(ctx, "/d"); err != nil || len(ents) != 0 {
		t.Errorf("List after Abort = %v, %v; want empty", ents, err)
	}
}

// TestReconnect restarts the server on the same port: the node's pooled
// connections die with it and are replaced without a failed call, and
// an upload open across the restart fails cleanly.
func TestReconnect(t *testing.T) {
	s := startOurs(t, "", "127.0.0.1:0")
	n := newNode(t, "root://"+s.addr+"//p", Options{Conns: 2})
	ctx := context.Background()
	put := func(path, data string) {
		t.Helper()
		u, err := n.Create(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		if err := u.Write(ctx, []byte(data)); err != nil {
			t.Fatal(err)
		}
		if err := u.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	put("/a", "before")
	for range 4 { // use both connections
		if _, err := n.Stat(ctx, "/a"); err != nil {
			t.Fatal(err)
		}
	}
	pending, err := n.Create(ctx, "/b")
	if err != nil {
		t.Fatal(err)
	}

	s.stop()
	startOurs(t, s.dir, s.addr)

	for i := range 4 {
		if fi, err := n.Stat(ctx, "/a"); err != nil || fi.Size != 6 {
			t.Fatalf("Stat #%d after restart = %+v, %v", i, fi, err)
		}
	}
	put("/c", "after")
	if ents, err := n.List(ctx, "/"); err != nil || len(ents) != 3 {
		// a, c and the temporary file of the pending upload.
		t.Errorf("List after restart = %+v, %v", ents, err)
	}
	// The pending upload's handle died with the old server.
	err = pending.Write(ctx, []byte("x"))
	if err == nil {
		err = pending.Finish(ctx)
	}
	if err == nil {
		t.Error("an upload open across a restart finished")
	}
	if err := pending.Abort(ctx); err != nil {
		t.Errorf("Abort: %v", err)
	}
	if ents, err := n.List(ctx, "/"); err != nil || len(ents) != 2 {
		t.Errorf("List after Abort = %+v, %v; want a and c", ents, err)
	}
}

// TestServerDown checks that New fails, and calls on a node whose
// server went away fail without hanging.
func TestServerDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := New(ctx, "root://"+addr, Options{}); err == nil {
		t.Error("New on a closed port succeeded")
	}
	s := startOurs(t, "", "127.0.0.1:0")
	n := newNode(t, "root://"+s.addr, Options{})
	s.stop()
	if _, err := n.Stat(ctx, "/"); err == nil {
		t.Error("Stat with the server down succeeded")
	}
	if ctx.Err() != nil {
		t.Error("Stat with the server down hung")
	}
}

// freezer forwards TCP connections to a backend and can stop forwarding
// bytes in both directions, like a server that hangs.
type freezer struct {
	ln      net.Listener
	backend string
	gate    sync.RWMutex // write-locked while frozen
	frozen  atomic.Bool
	mu      sync.Mutex
	conns   []net.Conn
	wg      sync.WaitGroup
}

func newFreezer(t *testing.T, backend string) *freezer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fz := &freezer{ln: ln, backend: backend}
	fz.wg.Go(fz.accept)
	t.Cleanup(func() {
		fz.thaw()
		ln.Close()
		fz.mu.Lock()
		for _, c := range fz.conns {
			c.Close()
		}
		fz.mu.Unlock()
		fz.wg.Wait()
	})
	return fz
}

func (fz *freezer) addr() string { return fz.ln.Addr().String() }

func (fz *freezer) freeze() {
	if !fz.frozen.Swap(true) {
		fz.gate.Lock()
	}
}

func (fz *freezer) thaw() {
	if fz.frozen.Swap(false) {
		fz.gate.Unlock()
	}
}

func (fz *freezer) accept() {
	for {
		c, err := fz.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", fz.backend)
		if err != nil {
			c.Close()
			continue
		}
		fz.mu.Lock()
		fz.conns = append(fz.conns, c, b)
		fz.mu.Unlock()
		fz.wg.Go(func() { fz.pipe(b, c) })
		fz.wg.Go(func() { fz.pipe(c, b) })
	}
}

// pipe copies src to dst, holding every chunk while frozen.
func (fz *freezer) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 64<<10)
	for {
		k, err := src.Read(buf)
		if k > 0 {
			fz.gate.RLock()
			_, werr := dst.Write(buf[:k])
			fz.gate.RUnlock()
			if werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestHungServer checks that every call returns at its context's
// deadline when the server stops answering, that the hung connections
// are then dropped, and that the node works again once the server
// answers.
func TestHungServer(t *testing.T) {
	s := startOurs(t, "", "127.0.0.1:0")
	fz := newFreezer(t, s.addr)
	n := newNode(t, "root://"+fz.addr()+"//p", Options{
		Conns:          2,
		WriteBuffer:    64 << 10,
		DialTimeout:    300 * time.Millisecond,
		CleanupTimeout: 300 * time.Millisecond,
	})
	bg := context.Background()
	u0, err := n.Create(bg, "/f")
	if err != nil {
		t.Fatal(err)
	}
	// Larger than what an open reads whole, so that f's reads ask the
	// server.
	data := bytes.Repeat([]byte("data"), WholeRead/4+1)
	if err := u0.Write(bg, data); err != nil {
		t.Fatal(err)
	}
	if err := u0.Commit(bg); err != nil {
		t.Fatal(err)
	}
	f, err := n.Open(bg, "/f")
	if err != nil {
		t.Fatal(err)
	}
	u, err := n.Create(bg, "/g")
	if err != nil {
		t.Fatal(err)
	}

	fz.freeze()
	// All at once, so that every call meets a connection that is hung,
	// not one already dropped.
	const deadline = 200 * time.Millisecond
	calls := []struct {
		name string
		fn   func(ctx context.Context) error
	}{
		{"Stat", func(ctx context.Context) error { _, err := n.Stat(ctx, "/f"); return err }},
		{"List", func(ctx context.Context) error { _, err := n.List(ctx, "/"); return err }},
		{"Open", func(ctx context.Context) error { _, err := n.Open(ctx, "/f"); return err }},
		{"Create", func(ctx context.Context) error { _, err := n.Create(ctx, "/h"); return err }},
		// The server may still run the requests sent before the freeze
		// once it thaws (a timed-out request may or may not have taken
		// effect), so the namespace changes leave /f alone: it is read
		// after the thaw.
		{"Remove", func(ctx context.Context) error { return n.Remove(ctx, "/x") }},
		{"Rename", func(ctx context.Context) error { return n.Rename(ctx, "/y", "/y2") }},
		{"Mkdir", func(ctx context.Context) error { return n.Mkdir(ctx, "/d") }},
		{"Space", func(ctx context.Context) error { _, err := n.Space(ctx); return err }},
		{"ReadAt", func(ctx context.Context) error { _, err := f.ReadAt(ctx, make([]byte, 4), 0); return err }},
		{"Write+Finish", func(ctx context.Context) error {
			for range 8 {
				if err := u.Write(ctx, make([]byte, 64<<10)); err != nil {
					return err
				}
			}
			return u.Finish(ctx)
		}},
	}
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(bg, deadline)
			defer cancel()
			start := time.Now()
			err := c.fn(ctx)
			took := time.Since(start)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s: err = %v; want one wrapping context.DeadlineExceeded", c.name, err)
			}
			if took > deadline+time.Second {
				t.Errorf("%s: returned after %v; the deadline was %v", c.name, took, deadline)
			}
		})
	}
	wg.Wait()
	start := time.Now()
	if err := u.Abort(bg); err == nil {
		t.Error("Abort with the server hung succeeded")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Abort took %v; CleanupTimeout is 300ms", took)
	}
	f.Close()

	// The pings of the timed-out connections fail: they are dropped,
	// and new ones work once the server answers again.
	time.Sleep(500 * time.Millisecond)
	fz.thaw()
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	if got := readAll(t, n, ctx, "/f"); !bytes.Equal(got, data) {
		t.Errorf("read after thaw: %d bytes, equal: %v", len(got), bytes.Equal(got, data))
	}
	ents, err := n.List(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if node.IsTemp(e.Name) {
			// The aborted upload's temporary file could not be removed.
			if err := n.Remove(ctx, "/"+e.Name); err != nil {
				t.Errorf("Remove debris: %v", err)
			}
		}
	}
}

// TestHungHandshake checks that New and calls return at their deadline
// against a listener that accepts connections and never answers.
func TestHungHandshake(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = New(ctx, "root://"+ln.Addr().String(), Options{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("New = %v; want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("New took %v", took)
	}
}

func readAll(t *testing.T, n node.Node, ctx context.Context, path string) []byte {
	t.Helper()
	f, err := n.Open(ctx, path)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	defer f.Close()
	buf := make([]byte, f.Size())
	if _, err := f.ReadAt(ctx, buf, 0); err != nil {
		t.Fatalf("ReadAt(%s): %v", path, err)
	}
	return buf
}

// An upload's context is released when its writer is done, whether the
// upload commits or aborts: a context left to the node's lifetime kept
// every upload's context registered with the node's base context.
func TestUploadContextReleased(t *testing.T) {
	s := startOurs(t, "", "127.0.0.1:0")
	n := newNode(t, "root://"+s.addr+"//d", Options{Fsync: true})
	ctx := context.Background()
	for i, commit := range []bool{true, false} {
		nu, err := n.Create(ctx, fmt.Sprintf("/f%d", i))
		if err != nil {
			t.Fatal(err)
		}
		u := nu.(*upload)
		if err := u.Write(ctx, []byte("some bytes")); err != nil {
			t.Fatal(err)
		}
		if commit {
			err = u.Commit(ctx)
		} else {
			err = u.Abort(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		// An upload to ecstore's server sends its writes itself and has
		// no writer, hence no context; one with a writer must release it.
		if u.ctx != nil && u.ctx.Err() == nil {
			t.Errorf("upload %d (commit %v): its context is still live after the upload ended", i, commit)
		}
		if n.base.Err() != nil {
			t.Fatal("the node's base context was cancelled")
		}
	}
}

// TestCreateAfterRestart: the first creates after a server restart, on
// pooled connections that died with the old server, succeed on new ones
// (each attempt under a temporary name of its own).
func TestCreateAfterRestart(t *testing.T) {
	s := startOurs(t, "", "127.0.0.1:0")
	n := newNode(t, "root://"+s.addr+"//p", Options{Conns: 2})
	ctx := context.Background()
	for range 4 { // open both connections
		if _, err := n.Stat(ctx, "/"); err != nil {
			t.Fatal(err)
		}
	}
	s.stop()
	startOurs(t, s.dir, s.addr)
	for i := range 3 {
		p := fmt.Sprintf("/o%d", i)
		u, err := n.Create(ctx, p)
		if err != nil {
			t.Fatalf("create #%d after the restart: %v", i, err)
		}
		if err := u.Write(ctx, []byte("data")); err != nil {
			t.Fatal(err)
		}
		if err := u.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if ents, err := n.List(ctx, "/"); err != nil || len(ents) != 3 {
		t.Errorf("List = %+v, %v; want the 3 objects", ents, err)
	}
}

// orderedConns counts the node's live connections and those to a server
// that runs a file's writes in order.
func orderedConns(n *Node) (ordered, live int) {
	for i := range n.pool.slots {
		s := &n.pool.slots[i]
		s.mu.Lock()
		cn := s.cur
		s.mu.Unlock()
		// A dial still under way (the pool dials more connections in
		// the background) is not a connection yet, its ordered unknown.
		if cn != nil && cn.connected() {
			live++
			if cn.ordered {
				ordered++
			}
		}
	}
	return ordered, live
}

// putFile writes and commits a file through n.
func putFile(t *testing.T, n *Node, path string, data []byte) {
	t.Helper()
	ctx := context.Background()
	u, err := n.Create(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Write(ctx, data); err != nil {
		t.Fatal(err)
	}
	if err := u.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// ecstore's own server is recognised as one that runs writes in order,
// so an upload's last write, sync and close go at once; the file is
// durable and whole.
func TestOurServerTakesFinishedWritesAtOnce(t *testing.T) {
	s := startOurs(t, "", "127.0.0.1:0")
	n := newNode(t, "root://"+s.addr+"//d", Options{Fsync: true})
	putFile(t, n, "/f", []byte("small archive"))
	if ordered, live := orderedConns(n); live == 0 || ordered != live {
		t.Errorf("%d of %d connections to ecstore node take writes in order", ordered, live)
	}
	if b, err := os.ReadFile(filepath.Join(s.dir, "d", "f")); err != nil || string(b) != "small archive" {
		t.Errorf("committed file: %q, %v", b, err)
	}
}

// On ecstore's own server, a listing carries every file's attributes in
// one request (xrootd.AttrLister): a file without them has an empty set,
// not none, so that no one asks for them again. ListNames lists without.
func TestListCarriesAttrs(t *testing.T) {
	s := startOurs(t, "", "127.0.0.1:0")
	n := newNode(t, "root://"+s.addr+"//p", Options{})
	ctx := context.Background()
	u, err := n.Create(ctx, "/d/with")
	if err != nil {
		t.Fatal(err)
	}
	attrs := map[string]string{"v": "x1", "s": "27000"}
	if err := u.(node.Attributes).SetAttrs(ctx, attrs); err != nil {
		t.Fatal(err)
	}
	if err := u.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	putFile(t, n, "/d/without", []byte("x"))
	if err := n.Mkdir(ctx, "/d/sub"); err != nil {
		t.Fatal(err)
	}
	ents, err := n.List(ctx, "/d")
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 3 || n.noAttrList.active() {
		t.Fatalf("List = %+v (attribute listings off: %v)", ents, n.noAttrList.active())
	}
	for _, fi := range ents {
		switch fi.Name {
		case "with":
			if fmt.Sprint(fi.Attrs) != fmt.Sprint(attrs) || fi.Size != 0 || fi.IsDir {
				t.Errorf("with: %+v; want attributes %v", fi, attrs)
			}
		case "without":
			if fi.Attrs == nil || len(fi.Attrs) != 0 || fi.Size != 1 {
				t.Errorf("without: %+v; want an empty set of attributes", fi)
			}
		case "sub":
			if !fi.IsDir || fi.Attrs != nil {
				t.Errorf("sub: %+v; want a directory", fi)
			}
		}
	}
	names, err := n.ListNames(ctx, "/d")
	if err != nil || len(names) != 3 {
		t.Fatalf("ListNames = %+v, %v", names, err)
	}
	for _, fi := range names {
		if fi.Attrs != nil {
			t.Errorf("ListNames: %+v has attributes", fi)
		}
	}
	if _, err := n.List(ctx, "/nothing"); !errors.Is(err, node.ErrNotExist) {
		t.Errorf("List of nothing: %v; want ErrNotExist", err)
	}
	if _, err := n.List(ctx, "/d/without"); !errors.Is(err, node.ErrNotDir) {
		t.Errorf("List of a file: %v; want ErrNotDir", err)
	}
}

// A listing with attributes longer in all than the client's bound on a
// response (MaxResponse) comes whole, attributes included: its parts are
// parsed as they arrive rather than collected (ListParts). Before, it
// failed with ErrFrameTooLarge and List fell back to kXR_dirlist,
// without the attributes.
func TestListLongerThanMaxResponse(t *testing.T) {
	s := startOurs(t, "", "127.0.0.1:0")
	n := newNode(t, "root://"+s.addr+"//p", Options{Client: &xrootd.DialOptions{MaxResponse: 4096}})
	ctx := context.Background()
	value := strings.Repeat("x", 1000)
	for i := range 8 {
		u, err := n.Create(ctx, fmt.Sprintf("/d/f%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := u.(node.Attributes).SetAttrs(ctx, map[string]string{"v": value}); err != nil {
			t.Fatal(err)
		}
		if err := u.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ents, err := n.List(ctx, "/d")
	if err != nil || len(ents) != 8 {
		t.Fatalf("List = %+v, %v; want 8 entries", ents, err)
	}
	for _, fi := range ents {
		if fi.Attrs["v"] != value {
			t.Errorf("%s came without its attribute: %v", fi.Name, fi.Attrs)
		}
	}
	if !n.ListsAttrs() {
		t.Error("a long listing turned attribute listings off")
	}
}

// listAttrFailing is an ecstore node whose listing with attributes fails
// with code while fail is set: a server that does not offer it, or whose
// file system fails it.
type listAttrFailing struct {
	*dataserver.FS
	code  xrootd.ErrorCode
	fail  atomic.Bool
	asked atomic.Int32
}

func (q *listAttrFailing) ListAttr(ctx context.Context, dir, attr string) iter.Seq2[xrootd.AttrEntry, error] {
	q.asked.Add(1)
	if q.fail.Load() {
		return func(yield func(xrootd.AttrEntry, error) bool) {
			yield(xrootd.AttrEntry{}, xrootd.Errorf(q.code, "listing with attributes failed"))
		}
	}
	return q.FS.ListAttr(ctx, dir, attr)
}

func startListAttrFailing(t *testing.T, code xrootd.ErrorCode) (*ourServer, *listAttrFailing) {
	var q *listAttrFailing
	s := startServing(t, "", "127.0.0.1:0", func(fsys *dataserver.FS) xrootd.FileSystem {
		q = &listAttrFailing{FS: fsys, code: code}
		return q
	})
	q.fail.Store(true)
	return s, q
}

// A server that fails the listing with attributes (kXR_ServerError from
// its file system, say) is listed with kXR_dirlist instead, and asked
// with attributes again next time. Before, every listing of that node
// failed.
func TestListFallsBackWhenTheQueryFails(t *testing.T) {
	s, q := startListAttrFailing(t, xrootd.ErrServerError)
	n := newNode(t, "root://"+s.addr+"//p", Options{})
	ctx := context.Background()
	putFile(t, n, "/d/f", []byte("x"))
	for i := range 2 {
		ents, err := n.List(ctx, "/d")
		if err != nil || len(ents) != 1 || ents[0].Name != "f" || ents[0].Size != 1 {
			t.Fatalf("List = %+v, %v; want f", ents, err)
		}
		if got := q.asked.Load(); got != int32(i+1) || !n.ListsAttrs() {
			t.Fatalf("after %d listings the query was asked %d times, attribute listings on: %v", i+1, got, n.ListsAttrs())
		}
	}
	// Answers about the path are not failures of the query.
	q.fail.Store(false)
	if _, err := n.List(ctx, "/nothing"); !errors.Is(err, node.ErrNotExist) {
		t.Errorf("List of nothing: %v; want ErrNotExist", err)
	}
}

// A kXR_Unsupported is remembered for refusalMemory, and then the server
// is asked again: one replaced by a server that lists with attributes is
// used in full without a restart.
func TestUnsupportedListingIsAskedAgain(t *testing.T) {
	s, q := startListAttrFailing(t, xrootd.ErrUnsupported)
	n := newNode(t, "root://"+s.addr+"//p", Options{})
	ctx := context.Background()
	putFile(t, n, "/d/f", []byte("x"))
	for range 2 {
		if ents, err := n.List(ctx, "/d"); err != nil || len(ents) != 1 || ents[0].Attrs != nil {
			t.Fatalf("List = %+v, %v; want f without attributes", ents, err)
		}
	}
	if q.asked.Load() != 1 || n.ListsAttrs() {
		t.Fatalf("asked %d times, attribute listings on: %v; want 1 refusal remembered", q.asked.Load(), n.ListsAttrs())
	}
	q.fail.Store(false)
	n.noAttrList.until.Store(time.Now().Add(-time.Second).UnixNano()) // refusalMemory has passed
	ents, err := n.List(ctx, "/d")
	if err != nil || len(ents) != 1 || ents[0].Attrs == nil || q.asked.Load() != 2 || !n.ListsAttrs() {
		t.Fatalf("List = %+v, %v (asked %d times); want f listed with attributes", ents, err, q.asked.Load())
	}
}

func TestRefusal(t *testing.T) {
	var r refusal
	if r.active() {
		t.Fatal("a new refusal is active")
	}
	if !r.note() || !r.active() {
		t.Fatal("the first note is not news, or not remembered")
	}
	if r.note() {
		t.Error("a second note while one is remembered is news")
	}
	if d := time.Until(time.Unix(0, r.until.Load())); d < refusalMemory-time.Minute || d > refusalMemory {
		t.Errorf("remembered for %v; want %v", d, refusalMemory)
	}
	r.until.Store(time.Now().Add(-time.Nanosecond).UnixNano())
	if r.active() || !r.note() {
		t.Error("a refusal past its memory is still active, or a new one is not news")
	}
}

// An `ecstore node` sends a file of at most WholeRead bytes whole with
// its open (xrootd.WholeOpener): the File is a node.ContentsFile that
// needs no connection to be read, even after the server is gone. A
// larger file is opened as before; missing files and directories fail
// as before.
func TestOpenReadsSmallFilesWhole(t *testing.T) {
	s := startOurs(t, "", "127.0.0.1:0")
	n := newNode(t, "root://"+s.addr+"//p", Options{})
	ctx := context.Background()
	small := []byte("a small archive")
	large := bytes.Repeat([]byte("L"), WholeRead+1)
	putFile(t, n, "/d/small", small)
	putFile(t, n, "/d/large", large)
	if _, err := n.Open(ctx, "/d/nothing"); !errors.Is(err, node.ErrNotExist) {
		t.Errorf("Open of nothing: %v; want ErrNotExist", err)
	}
	if _, err := n.Open(ctx, "/d"); !errors.Is(err, node.ErrIsDir) {
		t.Errorf("Open of a directory: %v; want ErrIsDir", err)
	}
	g, err := n.Open(ctx, "/d/large")
	if err != nil {
		t.Fatal(err)
	}
	if _, whole := g.(node.ContentsFile); whole || g.Size() != int64(len(large)) {
		t.Fatalf("large file: %T of size %d; want an open file of %d bytes", g, g.Size(), len(large))
	}
	got := make([]byte, len(large))
	if k, err := g.ReadAt(ctx, got, 0); k != len(large) || !bytes.Equal(got, large) {
		t.Errorf("large file: read %d bytes (%v)", k, err)
	}
	g.Close()
	f, err := n.Open(ctx, "/d/small")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, whole := f.(node.ContentsFile)
	if !whole || !bytes.Equal(c.Contents(), small) || f.Size() != int64(len(small)) {
		t.Fatalf("small file: %T of size %d; want its content whole", f, f.Size())
	}
	s.stop()
	got = make([]byte, len(small))
	if k, err := f.ReadAt(ctx, got, 0); k != len(small) || !bytes.Equal(got, small) {
		t.Errorf("small file read after the server stopped: %d bytes, %v", k, err)
	}
	if n.noOpenWhole.active() {
		t.Error("opens that read small files whole are off")
	}
}

// TestObserveNamesRequestsAndBytes checks the operations a node reports
// to Options.Observe: the requests of an upload and of a read, with their
// data bytes, and a missing path as node.ErrNotExist.
func TestObserveNamesRequestsAndBytes(t *testing.T) {
	s := startOurs(t, "", "127.0.0.1:0")
	var mu sync.Mutex
	var ops []node.Operation
	n := newNode(t, "root://"+s.addr, Options{Fsync: true, NoDirCheck: true, Observe: func(op node.Operation) {
		mu.Lock()
		defer mu.Unlock()
		ops = append(ops, op)
	}})
	take := func() (names []string, read, written int64, errs []error) {
		mu.Lock()
		defer mu.Unlock()
		for _, op := range ops {
			if op.Name == "query_config" {
				continue // asked once per connection
			}
			names = append(names, op.Name)
			read += op.Read
			written += op.Written
			errs = append(errs, op.Err)
		}
		ops = nil
		return
	}
	ctx := context.Background()
	take() // the check of the prefix at New
	data := bytes.Repeat([]byte("x"), 1000)
	u, err := n.Create(ctx, "/a")
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Write(ctx, data); err != nil {
		t.Fatal(err)
	}
	if err := u.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	names, read, written, _ := take()
	if want := "open write sync close mv"; strings.Join(names, " ") != want || read != 0 || written != int64(len(data)) {
		t.Errorf("upload observed as %q, %d bytes read, %d written; want %q, 0, %d", names, read, written, want, len(data))
	}
	f, err := n.Open(ctx, "/a")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	names, read, _, _ = take()
	// The answer's few bytes of framing count as read too.
	if strings.Join(names, " ") != "open_whole" || read < int64(len(data)) || read > int64(len(data))+64 {
		t.Errorf("open of a small file observed as %q, %d bytes read; want open_whole, %d", names, read, len(data))
	}
	if _, err := n.Stat(ctx, "/missing"); !errors.Is(err, node.ErrNotExist) {
		t.Fatalf("stat of a missing path: %v", err)
	}
	names, _, _, errs := take()
	if strings.Join(names, " ") != "stat" || !errors.Is(errs[0], node.ErrNotExist) {
		t.Errorf("stat of a missing path observed as %q, %v", names, errs)
	}
}

// removeAttrRefusing is an ecstore node whose removal that says what it
// removed is refused, as by a server that does not offer it.
type removeAttrRefusing struct {
	*dataserver.FS
	asked atomic.Int32
}

func (r *removeAttrRefusing) RemoveWithAttr(context.Context, string, string) ([]byte, bool, error) {
	r.asked.Add(1)
	return nil, false, xrootd.Errorf(xrootd.ErrUnsupported, "not offered")
}

// RemoveWithAttrs removes a file of an `ecstore node` in one request and
// returns its attributes; a directory is left alone. A server that
// refuses the request removes nothing, and is not asked again while
// the refusal is remembered.
func TestRemoveWithAttrs(t *testing.T) {
	s := startOurs(t, "", "127.0.0.1:0")
	var requests []string
	var mu sync.Mutex
	n := newNode(t, "root://"+s.addr+"//d", Options{Fsync: true, Observe: func(op node.Operation) {
		mu.Lock()
		requests = append(requests, op.Name)
		mu.Unlock()
	}})
	ctx := context.Background()
	u, err := n.Create(ctx, "/a/f")
	if err != nil {
		t.Fatal(err)
	}
	if err := u.(node.Attributes).SetAttrs(ctx, map[string]string{"v": "7", "n": "2"}); err != nil {
		t.Fatal(err)
	}
	if err := u.Write(ctx, []byte("archive")); err != nil {
		t.Fatal(err)
	}
	if err := u.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	putFile(t, n, "/a/plain", []byte("x"))

	mu.Lock()
	requests = nil
	mu.Unlock()
	attrs, err := n.RemoveWithAttrs(ctx, "/a/f")
	if err != nil || attrs["v"] != "7" || attrs["n"] != "2" {
		t.Errorf("RemoveWithAttrs = %v, %v; want v=7, n=2", attrs, err)
	}
	mu.Lock()
	if !slices.Equal(requests, []string{"rm_attr"}) {
		t.Errorf("requests sent: %v; want one rm_attr", requests)
	}
	mu.Unlock()
	if attrs, err := n.RemoveWithAttrs(ctx, "/a/plain"); err != nil || attrs != nil {
		t.Errorf("RemoveWithAttrs of a file without attributes = %v, %v", attrs, err)
	}
	for _, p := range []string{"/a/f", "/a/plain"} {
		if _, err := n.Stat(ctx, p); !errors.Is(err, node.ErrNotExist) {
			t.Errorf("stat of removed %s: %v", p, err)
		}
	}
	if _, err := n.RemoveWithAttrs(ctx, "/a/f"); !errors.Is(err, node.ErrNotExist) {
		t.Errorf("RemoveWithAttrs of a missing file: %v; want ErrNotExist", err)
	}
	if _, err := n.RemoveWithAttrs(ctx, "/a"); !errors.Is(err, node.ErrIsDir) {
		t.Errorf("RemoveWithAttrs of a directory: %v; want ErrIsDir", err)
	}
	if fi, err := n.Stat(ctx, "/a"); err != nil || !fi.IsDir {
		t.Errorf("the directory after RemoveWithAttrs: %+v, %v", fi, err)
	}

	var r *removeAttrRefusing
	s2 := startServing(t, "", "127.0.0.1:0", func(fsys *dataserver.FS) xrootd.FileSystem {
		r = &removeAttrRefusing{FS: fsys}
		return r
	})
	n2 := newNode(t, "root://"+s2.addr+"//d", Options{})
	putFile(t, n2, "/f", []byte("x"))
	for range 2 {
		if _, err := n2.RemoveWithAttrs(ctx, "/f"); !errors.Is(err, node.ErrUnsupported) {
			t.Errorf("RemoveWithAttrs on a refusing server: %v; want ErrUnsupported", err)
		}
	}
	if got := r.asked.Load(); got != 1 {
		t.Errorf("the refusing server was asked %d times; want once, the refusal remembered", got)
	}
	if _, err := n2.Stat(ctx, "/f"); err != nil {
		t.Errorf("the file a refusing server was asked to remove: %v", err)
	}
}

// A durable `ecstore node` makes a file durable at its close
// (xrootd.CloseSyncsKey): an upload that wants it durable sends no
// kXR_sync to it, and does to one that runs without fsync.
func TestNoSyncBeforeADurableClose(t *testing.T) {
	for _, durable := range []bool{true, false} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			s := startServingWith(t, "", "127.0.0.1:0", dataserver.Options{Fsync: durable}, func(fsys *dataserver.FS) xrootd.FileSystem { return fsys })
			var mu sync.Mutex
			var names []string
			n := newNode(t, "root://"+s.addr+"//d", Options{Fsync: true, NoDirCheck: true, Observe: func(op node.Operation) {
				mu.Lock()
				defer mu.Unlock()
				if op.Name != "query_config" && op.Name != "mkdir" {
					names = append(names, op.Name)
				}
			}})
			putFile(t, n, "/f", []byte("small archive"))
			want := "open write sync close mv"
			if durable {
				want = "open write close mv"
			}
			mu.Lock()
			got := strings.Join(names, " ")
			mu.Unlock()
			if got != want {
				t.Errorf("requests %q; want %q", got, want)
			}
			if b, err := os.ReadFile(filepath.Join(s.dir, "d", "f")); err != nil || string(b) != "small archive" {
				t.Errorf("committed file: %q, %v", b, err)
			}
		})
	}
}
