package xrootd

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/adler32"
	"io"
	"io/fs"
	"iter"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("seed", 0, "seed for random test data (0: time-based)")

// testSeed returns the seed for random data and logs it.
func testSeed(t testing.TB) uint64 {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	return seed
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// startServer serves h on a free loopback port until the test ends.
func startServer(t testing.TB, h FileSystem, limits Limits) (string, *Server) {
	t.Helper()
	srv := &Server{Handler: h, Logger: testLogger(t), Limits: limits}
	return startServerWith(t, srv), srv
}

// startServerWith serves srv, set up by the caller, on a free loopback
// port until the test ends.
func startServerWith(t testing.TB, srv *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return ln.Addr().String()
}

func dial(t testing.TB, addr string, opts *DialOptions) *Client {
	t.Helper()
	if opts == nil {
		opts = &DialOptions{}
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, opts)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func wantCode(t testing.TB, err error, code ErrorCode) {
	t.Helper()
	var xe *Error
	if !errors.As(err, &xe) || xe.Code != code {
		t.Fatalf("error %v, want code %v", err, code)
	}
}

func TestNamespace(t *testing.T) {
	m := newMemFS()
	m.put("/data/a.txt", []byte("hello"))
	m.put("/data/b.bin", make([]byte, 5000))
	addr, _ := startServer(t, m, Limits{})
	c := dial(t, addr, nil)
	ctx := testCtx(t)

	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	fi, err := c.Stat(ctx, "/data/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size != 5 || fi.IsDir() || fi.Mode.Perm() != 0o644 || fi.Owner != "test" {
		t.Errorf("stat = %+v", fi)
	}
	if fi, err := c.Stat(ctx, "/data"); err != nil || !fi.IsDir() {
		t.Errorf("stat dir = %+v, %v", fi, err)
	}
	_, err = c.Stat(ctx, "/nope")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat missing: %v, want fs.ErrNotExist", err)
	}
	wantCode(t, err, ErrNotFound)

	for _, withStat := range []bool{false, true} {
		list, err := c.Dirlist(ctx, "/data", withStat)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].Name != "a.txt" || list[1].Name != "b.bin" {
			t.Fatalf("dirlist(stat=%v) = %+v", withStat, list)
		}
		if withStat && (list[1].Size != 5000 || list[0].Size != 5) {
			t.Errorf("dirlist sizes = %d, %d", list[0].Size, list[1].Size)
		}
	}
	if list, err := c.Dirlist(ctx, "/data/../data/.", true); err != nil || len(list) != 2 {
		t.Errorf("dirlist of uncleaned path = %v, %v", list, err)
	}

	if err := c.Mkdir(ctx, "/x/y/z", 0o750, true); err != nil {
		t.Fatal(err)
	}
	if err := c.Mkdir(ctx, "/x/y/z", 0o750, false); !errors.Is(err, fs.ErrExist) {
		t.Errorf("mkdir existing: %v", err)
	}
	if err := c.Mv(ctx, "/data/a.txt", "/x/y/z/a.txt"); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.get("/x/y/z/a.txt"); !ok {
		t.Error("mv did not move")
	}
	if err := c.Rmdir(ctx, "/x/y/z"); err == nil {
		t.Error("rmdir of non-empty directory succeeded")
	}
	if err := c.Rm(ctx, "/x/y/z/a.txt"); err != nil {
		t.Fatal(err)
	}
	if err := c.Rmdir(ctx, "/x/y/z"); err != nil {
		t.Fatal(err)
	}
	if err := c.Rm(ctx, "/x/y/z/a.txt"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("rm missing: %v", err)
	}
	if err := c.Chmod(ctx, "/data/b.bin", 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Truncate(ctx, "/data/b.bin", 10); err != nil {
		t.Fatal(err)
	}
	if fi, _ := c.Stat(ctx, "/data/b.bin"); fi.Size != 10 || fi.Mode.Perm() != 0o600 {
		t.Errorf("after chmod+truncate: %+v", fi)
	}

	m.put("/sum", []byte("checksum me"))
	alg, sum, err := c.Checksum(ctx, "/sum", "")
	if want := fmt.Sprintf("%08x", adler32.Checksum([]byte("checksum me"))); err != nil || alg != "adler32" || sum != want {
		t.Errorf("checksum = %q %q %v, want adler32 %s", alg, sum, err, want)
	}
	if alg, _, err := c.Checksum(ctx, "/sum", "crc32c"); err != nil || alg != "crc32c" {
		t.Errorf("crc32c checksum: %q %v", alg, err)
	}
	if _, _, err := c.Checksum(ctx, "/sum", "md5"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("md5 checksum: %v", err)
	}
	vals, err := c.QueryConfig(ctx, "readv_iov_max", "readv_ior_max", "chksum", "tpc")
	if err != nil || vals[0] != "1024" || vals[1] != "2097136" || vals[2] != "0:adler32,1:crc32c" || vals[3] != "tpc" {
		t.Errorf("query config = %q, %v", vals, err)
	}
	sp, err := c.Space(ctx, "/")
	if err != nil || sp.Total != 1<<40 || sp.Free == 0 {
		t.Errorf("space = %+v, %v", sp, err)
	}
	if loc, err := c.Locate(ctx, "/sum"); err != nil || loc[:3] != "Sw[" {
		t.Errorf("locate = %q, %v", loc, err)
	}
	if _, err := c.Locate(ctx, "/nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("locate missing: %v", err)
	}
}

func TestReadWrite(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 1))
	m := newMemFS()
	// Small frames so that every size below spans several of them.
	addr, _ := startServer(t, m, Limits{ResponseChunk: 64 << 10})
	c := dial(t, addr, &DialOptions{ReadChunk: 200 << 10, WriteChunk: 100<<10 + 3, WriteWindow: 3})
	ctx := testCtx(t)

	sizes := []int{0, 1, PageSize - 1, PageSize, PageSize + 1, 64 << 10, 1 << 20, 1<<20 + 1, 3<<20 + 123}
	modes := []string{"write", "pgwrite", "append"}
	for _, size := range sizes {
		for _, mode := range modes {
			t.Run(fmt.Sprintf("size=%d/mode=%s", size, mode), func(t *testing.T) {
				data := randomBytes(r, size)
				name := fmt.Sprintf("/rw/%d.%s", size, mode)
				f, err := c.Open(ctx, name, OpenNew|OpenMkpath, 0o640)
				if err != nil {
					t.Fatal(err)
				}
				var n int
				switch mode {
				case "write":
					n, err = f.WriteAt(ctx, data, 0)
				case "pgwrite":
					n, err = f.PgWriteAt(ctx, data, 0)
				case "append":
					half := size / 2
					n, err = f.Write(ctx, data[:half])
					if err == nil {
						var n2 int
						n2, err = f.Write(ctx, data[half:])
						n += n2
					}
				}
				if err != nil || n != size {
					t.Fatalf("%s: %d, %v", mode, n, err)
				}
				if err := f.Sync(ctx); err != nil {
					t.Fatal(err)
				}
				if fi, err := f.Stat(ctx); err != nil || fi.Size != int64(size) {
					t.Fatalf("stat open file = %+v, %v", fi, err)
				}
				if err := f.Close(ctx); err != nil {
					t.Fatal(err)
				}
				if got, _ := m.get(name); !bytes.Equal(got, data) {
					t.Fatalf("server holds %d bytes, want %d identical", len(got), size)
				}

				f, err = c.Open(ctx, name, OpenRead, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close(ctx)
				if f.OpenInfo().Size != int64(size) {
					t.Errorf("open info size %d", f.OpenInfo().Size)
				}
				for _, off := range []int{0, 1, PageSize - 1, size / 3} {
					if off > size {
						continue
					}
					for name, read := range map[string]func(context.Context, []byte, int64) (int, error){"read": f.ReadAt, "pgread": f.PgReadAt} {
						buf := make([]byte, size-off+10) // asks past the end
						n, err := read(ctx, buf, int64(off))
						if err != io.EOF || n != size-off || !bytes.Equal(buf[:n], data[off:]) {
							t.Fatalf("%s at %d: n=%d err=%v", name, off, n, err)
						}
						if size-off > 1 {
							buf = buf[:size-off-1]
							n, err = read(ctx, buf, int64(off))
							if err != nil || n != len(buf) || !bytes.Equal(buf, data[off:size-1]) {
								t.Fatalf("%s exact at %d: n=%d err=%v", name, off, n, err)
							}
						}
					}
				}
				if size > 0 {
					segs := []ReadSegment{{Offset: 0, Length: int32(min(size, 100))}, {Offset: int64(size / 2), Length: int32(size - size/2)}, {Offset: int64(size - 1), Length: 1}}
					got, err := f.ReadV(ctx, segs)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got[0], data[:min(size, 100)]) || !bytes.Equal(got[1], data[size/2:]) || !bytes.Equal(got[2], data[size-1:]) {
						t.Fatalf("readv mismatch")
					}
					// Past the end: an error, as xrootd answers.
					if _, err := f.ReadV(ctx, []ReadSegment{{Offset: int64(size - 1), Length: 5}}); err == nil {
						t.Fatalf("readv past the end answered")
					}
				}
			})
		}
	}
}

func TestOpenErrors(t *testing.T) {
	m := newMemFS()
	m.put("/f", []byte("x"))
	addr, _ := startServer(t, m, Limits{})
	c := dial(t, addr, nil)
	ctx := testCtx(t)

	tests := []struct {
		name  string
		path  string
		flags OpenFlags
		code  ErrorCode
	}{
		{"missing", "/nope", OpenRead, ErrNotFound},
		{"exists", "/f", OpenNew, ErrItExists},
		{"directory", "/", OpenRead, ErrIsDirectory},
		{"relative", "f", OpenRead, ErrArgInvalid},
		{"parent is a file", "/f/c", OpenNew, ErrNotFile},
		{"empty", "", OpenRead, ErrArgMissing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Open(ctx, tt.path, tt.flags, 0o644)
			wantCode(t, err, tt.code)
		})
	}

	f, err := c.Open(ctx, "/f", OpenRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt(ctx, []byte("y"), 0)
	wantCode(t, err, ErrFileNotOpen)
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = f.ReadAt(ctx, make([]byte, 1), 0)
	wantCode(t, err, ErrFileNotOpen)
	wantCode(t, f.Close(ctx), ErrFileNotOpen)
	_, err = f.Stat(ctx)
	wantCode(t, err, ErrFileNotOpen)
}

// minimalFS implements only FileSystem: every optional request must be
// answered kXR_Unsupported.
type minimalFS struct{ m *memFS }

func (f minimalFS) Open(ctx context.Context, name string, o OpenOptions) (File, error) {
	file, err := f.m.Open(ctx, name, o)
	if err != nil {
		return nil, err
	}
	return readOnlyFile{file}, nil
}

func (f minimalFS) Stat(ctx context.Context, name string) (FileInfo, error) {
	return f.m.Stat(ctx, name)
}

func (f minimalFS) List(ctx context.Context, dir string) iter.Seq2[FileInfo, error] {
	return f.m.List(ctx, dir)
}

type readOnlyFile struct{ f File }

func (r readOnlyFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	return r.f.ReadAt(ctx, p, off)
}
func (r readOnlyFile) Stat(ctx context.Context) (FileInfo, error) { return r.f.Stat(ctx) }
func (r readOnlyFile) Close(ctx context.Context) error            { return r.f.Close(ctx) }

func TestUnsupported(t *testing.T) {
	m := newMemFS()
	m.put("/f", []byte("x"))
	addr, _ := startServer(t, minimalFS{m}, Limits{})
	c := dial(t, addr, nil)
	ctx := testCtx(t)
	checks := map[string]error{
		"rm":       c.Rm(ctx, "/f"),
		"rmdir":    c.Rmdir(ctx, "/"),
		"mkdir":    c.Mkdir(ctx, "/d", 0o755, false),
		"mv":       c.Mv(ctx, "/f", "/g"),
		"chmod":    c.Chmod(ctx, "/f", 0o600),
		"truncate": c.Truncate(ctx, "/f", 0),
	}
	_, _, checks["checksum"] = c.Checksum(ctx, "/f", "")
	_, checks["space"] = c.Space(ctx, "/")
	_, _, checks["open whole"] = c.OpenWhole(ctx, "/f", 1<<20)
	_, checks["attribute listing"] = c.ListAttr(ctx, "/", "a")
	_, checks["fattr list"] = c.AllAttrs(ctx, "/f")
	_, checks["fattr get"] = c.GetAttrs(ctx, "/f", "a")
	f, err := c.Open(ctx, "/f", OpenUpdate, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, checks["write"] = f.WriteAt(ctx, []byte("y"), 0)
	checks["file truncate"] = f.Truncate(ctx, 0)
	_, checks["file fattr list"] = f.AllAttrs(ctx)
	for name, err := range checks {
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s: %v, want kXR_Unsupported", name, err)
		}
	}
	if err := f.Sync(ctx); err != nil {
		t.Errorf("sync without FileSyncer: %v", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Errorf("connection did not survive: %v", err)
	}
}

// seqFS accepts only sequential writes, like the erasure-coded writer.
type seqFS struct{ *memFS }

func (s seqFS) Open(ctx context.Context, name string, o OpenOptions) (File, error) {
	f, err := s.memFS.Open(ctx, name, o)
	if err != nil {
		return nil, err
	}
	return &seqFile{memFile: f.(*memFile)}, nil
}

type seqFile struct {
	*memFile
	mu   sync.Mutex
	size int64
}

func (f *seqFile) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if off != f.size {
		return 0, Errorf(ErrUnsupported, "non-sequential write at %d, size %d", off, f.size)
	}
	time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond) // invite reordering
	n, err := f.memFile.WriteAt(ctx, p, off)
	f.size += int64(n)
	return n, err
}

func TestWritesStayOrdered(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 2))
	m := newMemFS()
	// A small payload budget makes the reader wait for earlier writes.
	addr, _ := startServer(t, seqFS{m}, Limits{MaxInflight: 16, MaxPayload: 8 << 10, PayloadBudget: 20 << 10})
	c := dial(t, addr, &DialOptions{WriteChunk: 4096 + 17, WriteWindow: 12})
	ctx := testCtx(t)
	data := randomBytes(r, 300<<10)
	for _, pg := range []bool{false, true} {
		name := fmt.Sprintf("/seq.%v", pg)
		f, err := c.Open(ctx, name, OpenNew, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		write := f.WriteAt
		if pg {
			write = f.PgWriteAt
		}
		if n, err := write(ctx, data, 0); err != nil || n != len(data) {
			t.Fatalf("pg=%v: %d, %v", pg, n, err)
		}
		if err := f.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if got, _ := m.get(name); !bytes.Equal(got, data) {
			t.Fatalf("pg=%v: data differs", pg)
		}
	}
}

func TestConcurrentClients(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 3))
	m := newMemFS()
	data := randomBytes(r, 2<<20)
	m.put("/big", data)
	addr, _ := startServer(t, m, Limits{ResponseChunk: 32 << 10, MaxInflight: 8})
	ctx := testCtx(t)
	var wg sync.WaitGroup
	for ci := range 3 {
		c := dial(t, addr, &DialOptions{ReadChunk: 100 << 10})
		f, err := c.Open(ctx, "/big", OpenRead, 0)
		if err != nil {
			t.Fatal(err)
		}
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rr := rand.New(rand.NewPCG(uint64(ci), uint64(g)))
				for range 20 {
					off := rr.IntN(len(data))
					n := rr.IntN(300 << 10)
					buf := make([]byte, n)
					read := f.ReadAt
					if rr.IntN(2) == 0 {
						read = f.PgReadAt
					}
					got, err := read(ctx, buf, int64(off))
					if err != nil && err != io.EOF {
						t.Errorf("read: %v", err)
						return
					}
					if !bytes.Equal(buf[:got], data[off:off+got]) {
						t.Errorf("data mismatch at %d", off)
						return
					}
					if _, err := c.Stat(ctx, "/big"); err != nil {
						t.Errorf("stat: %v", err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
}

func TestAbortOnDisconnect(t *testing.T) {
	m := newMemFS()
	addr, _ := startServer(t, m, Limits{})
	c := dial(t, addr, nil)
	ctx := testCtx(t)
	f, err := c.Open(ctx, "/partial", OpenNew, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ctx, []byte("half"), 0); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := f.WriteAt(ctx, []byte("more"), 4); !errors.Is(err, ErrClosed) {
		t.Errorf("write after Close: %v, want ErrClosed", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		m.mu.Lock()
		n := m.aborted
		m.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("file not aborted after disconnect (aborted=%d)", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// blockFS blocks Stat of "/slow" until release is closed, and panics on
// Stat of "/panic".
type blockFS struct {
	*memFS
	entered chan struct{}
	release chan struct{}
}

func (b blockFS) Stat(ctx context.Context, name string) (FileInfo, error) {
	switch name {
	case "/slow":
		b.entered <- struct{}{}
		select {
		case <-b.release:
		case <-ctx.Done():
			return FileInfo{}, ctx.Err()
		}
		return FileInfo{Name: "slow", Size: 42, Mode: 0o644}, nil
	case "/panic":
		panic("test panic")
	}
	return b.memFS.Stat(ctx, name)
}

func TestPanicAndCancel(t *testing.T) {
	b := blockFS{memFS: newMemFS(), entered: make(chan struct{}, 4), release: make(chan struct{})}
	addr, _ := startServer(t, b, Limits{})
	c := dial(t, addr, nil)
	ctx := testCtx(t)

	_, err := c.Stat(ctx, "/panic")
	wantCode(t, err, ErrServerError)

	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := c.Stat(short, "/slow"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("stat with expired context: %v", err)
	}
	<-b.entered
	// The late answer to the abandoned request must not confuse the next.
	close(b.release)
	if _, err := c.Stat(ctx, "/"); err != nil {
		t.Errorf("connection unusable after abandoned request: %v", err)
	}
	if fi, err := c.Stat(ctx, "/slow"); err != nil || fi.Size != 42 {
		t.Errorf("stat = %+v, %v", fi, err)
	}
}

func TestGracefulShutdown(t *testing.T) {
	b := blockFS{memFS: newMemFS(), entered: make(chan struct{}, 4), release: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{Handler: b, Logger: testLogger(t)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background(), ln) }()
	c := dial(t, ln.Addr().String(), nil)
	ctx := testCtx(t)

	result := make(chan error, 1)
	go func() {
		_, err := c.Stat(ctx, "/slow")
		result <- err
	}()
	<-b.entered
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(ctx) }()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	default:
	}
	close(b.release)
	if err := <-result; err != nil {
		t.Errorf("in-flight request failed during graceful shutdown: %v", err)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve: %v", err)
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Error("listener still accepts after Shutdown")
	}
}

func TestShutdownDeadline(t *testing.T) {
	b := blockFS{memFS: newMemFS(), entered: make(chan struct{}, 4), release: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{Handler: b, Logger: testLogger(t)}
	go srv.Serve(context.Background(), ln)
	c := dial(t, ln.Addr().String(), nil)
	ctx := testCtx(t)
	result := make(chan error, 1)
	go func() {
		_, err := c.Stat(ctx, "/slow")
		result <- err
	}()
	<-b.entered
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := srv.Shutdown(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want DeadlineExceeded", err)
	}
	if err := <-result; !errors.Is(err, ErrClosed) {
		t.Errorf("request cut by forced shutdown: %v, want ErrClosed", err)
	}
}

func TestServeContextCancel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{Handler: newMemFS(), Logger: testLogger(t)}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	c := dial(t, ln.Addr().String(), nil)
	cancel()
	if err := <-served; !errors.Is(err, context.Canceled) {
		t.Errorf("Serve = %v, want context.Canceled", err)
	}
	if err := c.Ping(testCtx(t)); err == nil {
		t.Error("connection survived Serve's context")
	}
}

func TestLargeDirlist(t *testing.T) {
	m := newMemFS()
	const n = 3000
	for i := range n {
		m.put(fmt.Sprintf("/many/file_with_a_fairly_long_name_number_%05d.dat", i), nil)
	}
	addr, _ := startServer(t, m, Limits{ResponseChunk: 8 << 10})
	c := dial(t, addr, nil)
	ctx := testCtx(t)
	for _, withStat := range []bool{false, true} {
		list, err := c.Dirlist(ctx, "/many", withStat)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != n {
			t.Fatalf("stat=%v: %d entries, want %d", withStat, len(list), n)
		}
		for i, fi := range list {
			if want := fmt.Sprintf("file_with_a_fairly_long_name_number_%05d.dat", i); fi.Name != want {
				t.Fatalf("entry %d = %q, want %q", i, fi.Name, want)
			}
		}
	}
	if list, err := c.Dirlist(ctx, "/many/file_with_a_fairly_long_name_number_00001.dat/..", false); err != nil || len(list) != n {
		t.Errorf("dirlist with dot-dot: %d, %v", len(list), err)
	}
	if err := c.Mkdir(ctx, "/empty", 0o755, false); err != nil {
		t.Fatal(err)
	}
	for _, withStat := range []bool{false, true} {
		if list, err := c.Dirlist(ctx, "/empty", withStat); err != nil || len(list) != 0 {
			t.Errorf("empty dirlist(stat=%v) = %v, %v", withStat, list, err)
		}
	}
	if _, err := c.Dirlist(ctx, "/missing", true); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("dirlist missing: %v", err)
	}
	// A handler's ENOTDIR is kXR_FSError, as xrootd answers a file.
	if _, err := c.Dirlist(ctx, "/many/file_with_a_fairly_long_name_number_00001.dat", false); !isCode(err, ErrFSError) {
		t.Errorf("dirlist of a file: %v", err)
	}
}

func TestOpenFileLimit(t *testing.T) {
	m := newMemFS()
	m.put("/f", []byte("x"))
	addr, _ := startServer(t, m, Limits{MaxOpenFiles: 2})
	c := dial(t, addr, nil)
	ctx := testCtx(t)
	f1, err := c.Open(ctx, "/f", OpenRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Open(ctx, "/f", OpenRead, 0); err != nil {
		t.Fatal(err)
	}
	_, err = c.Open(ctx, "/f", OpenRead, 0)
	wantCode(t, err, ErrOverloaded)
	if err := f1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Open(ctx, "/f", OpenRead, 0); err != nil {
		t.Errorf("open after close: %v", err)
	}
}

// A server with NoPageChecksums reports the protocol version before page
// requests and no kXR_suppgrw, so that XRootD clients use plain reads
// and writes; page requests sent anyway are still served.
func TestNoPageChecksums(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoPageChecksums=%v", off), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := &Server{Handler: newMemFS(), Logger: testLogger(t), NoPageChecksums: off}
			go srv.Serve(context.Background(), ln)
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				srv.Shutdown(ctx)
			})
			addr := ln.Addr().String()

			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			raw := &rawConn{t: t, conn: conn}
			raw.write(append(AppendHandshake(nil), EncodeRequest(StreamID{0, 1}, &ProtocolRequest{ClientVersion: ProtocolVersion}).AppendTo(nil)...))
			v, _, err := ParseHandshakeResponse(raw.read())
			if err != nil {
				t.Fatal(err)
			}
			pr, err := ParseProtocolResponse(raw.read().Body)
			if err != nil {
				t.Fatal(err)
			}
			wantVersion, wantPgRW := ProtocolVersion, true
			if off {
				wantVersion, wantPgRW = ProtocolVersionNoPgRW, false
			}
			if v != wantVersion || pr.Version != wantVersion || (pr.Flags&FlagSupPgRW != 0) != wantPgRW {
				t.Errorf("handshake version %#x, protocol version %#x, flags %#x; want version %#x, kXR_suppgrw %v",
					v, pr.Version, pr.Flags, wantVersion, wantPgRW)
			}

			c := dial(t, addr, nil)
			ctx := testCtx(t)
			f, err := c.Open(ctx, "/p", OpenNew, 0o640)
			if err != nil {
				t.Fatal(err)
			}
			data := bytes.Repeat([]byte("page"), 3000)
			if n, err := f.PgWriteAt(ctx, data, 0); err != nil || n != len(data) {
				t.Fatalf("pgwrite: %d, %v", n, err)
			}
			buf := make([]byte, len(data))
			if n, err := f.PgReadAt(ctx, buf, 0); err != nil || !bytes.Equal(buf[:n], data) {
				t.Fatalf("pgread: %d, %v", n, err)
			}
			if err := f.Close(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// slicingFS serves memFS files through FileSlicer, lending the bytes in
// pieces of at most 1000 bytes, and counts unreleased loans.
type slicingFS struct {
	*memFS
	loans atomic.Int64 // outstanding
	lent  atomic.Int64 // in all
	// inside, if set, runs in every ReadSlices call before it returns.
	inside func(n int)
}

type slicingFile struct {
	*memFile
	fs *slicingFS
}

func (s *slicingFS) Open(ctx context.Context, name string, opts OpenOptions) (File, error) {
	f, err := s.memFS.Open(ctx, name, opts)
	if mf, ok := f.(*memFile); ok && err == nil {
		return &slicingFile{memFile: mf, fs: s}, nil
	}
	return f, err
}

func (f *slicingFile) ReadSlices(ctx context.Context, off int64, n int) ([][]byte, func(), error) {
	p := make([]byte, n)
	got, err := f.ReadAt(ctx, p, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, err
	}
	var bufs [][]byte
	for b := p[:got]; len(b) > 0; {
		k := min(len(b), 1000)
		bufs = append(bufs, b[:k])
		b = b[k:]
	}
	f.fs.loans.Add(1)
	f.fs.lent.Add(1)
	if f.fs.inside != nil {
		f.fs.inside(n)
	}
	return bufs, func() { f.fs.loans.Add(-1) }, err
}

// writeTestFile creates name on c with data.
func writeTestFile(t *testing.T, c *Client, name string, data []byte) {
	t.Helper()
	ctx := testCtx(t)
	f, err := c.Open(ctx, name, OpenNew, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// Reads longer than one frame of a file that lends its bytes take turns,
// SliceReadsPerFile at a time: a client pipelining long reads must not
// hold all their buffers lent at once.
func TestLongSliceReadsTakeTurns(t *testing.T) {
	sfs := &slicingFS{memFS: newMemFS()}
	var most atomic.Int64
	sfs.inside = func(int) {
		most.Store(max(most.Load(), sfs.loans.Load()))
		time.Sleep(2 * time.Millisecond) // let other reads overlap this one
	}
	addr, _ := startServer(t, sfs, Limits{ResponseChunk: 16 << 10, SliceReadsPerFile: 2})
	c := dial(t, addr, &DialOptions{ReadChunk: 1 << 20})
	ctx := testCtx(t)
	data := randomBytes(rand.New(rand.NewPCG(testSeed(t), 32)), 8*64<<10)
	writeTestFile(t, c, "/s", data)
	f, err := c.Open(ctx, "/s", OpenRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(ctx)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			off := i * 64 << 10
			buf := make([]byte, 64<<10) // four frames
			if n, err := f.ReadAt(ctx, buf, int64(off)); n != len(buf) || !bytes.Equal(buf, data[off:off+n]) {
				t.Errorf("read at %d: %d bytes, %v", off, n, err)
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m > 2 {
		t.Errorf("%d frames of long reads were lent at once; want at most 2 (one per read admitted)", m)
	}
}

// Reads of one frame or less do not wait for each other: three of them
// are answered at once (each waits, inside the file, until all three are
// there).
func TestShortSliceReadsDoNotWait(t *testing.T) {
	sfs := &slicingFS{memFS: newMemFS()}
	var arrived sync.WaitGroup
	arrived.Add(3)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	sfs.inside = func(int) {
		arrived.Done()
		select {
		case <-all:
		case <-time.After(5 * time.Second):
		}
	}
	addr, _ := startServer(t, sfs, Limits{ResponseChunk: 16 << 10, SliceReadsPerFile: 1})
	c := dial(t, addr, nil)
	ctx := testCtx(t)
	data := randomBytes(rand.New(rand.NewPCG(testSeed(t), 33)), 3*16<<10)
	writeTestFile(t, c, "/s", data)
	f, err := c.Open(ctx, "/s", OpenRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(ctx)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			off := i * 16 << 10
			buf := make([]byte, 16<<10)
			if n, err := f.ReadAt(ctx, buf, int64(off)); n != len(buf) || !bytes.Equal(buf, data[off:off+n]) {
				t.Errorf("read at %d: %d bytes, %v", off, n, err)
			}
		})
	}
	wg.Wait()
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("three one-frame reads took %v: they were answered one at a time", d)
	}
}

// A file that lends its bytes (FileSlicer) is read like any other, in
// frames of at most ResponseChunk, up to the end of the file, and every
// loan is released.
func TestReadSlices(t *testing.T) {
	sfs := &slicingFS{memFS: newMemFS()}
	addr, _ := startServer(t, sfs, Limits{ResponseChunk: 16 << 10})
	c := dial(t, addr, &DialOptions{ReadChunk: 100 << 10})
	ctx := testCtx(t)
	r := rand.New(rand.NewPCG(testSeed(t), 31))
	data := randomBytes(r, 300<<10+7)
	f, err := c.Open(ctx, "/s", OpenNew, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	f.Close(ctx)
	f, err = c.Open(ctx, "/s", OpenRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(ctx)
	for _, rg := range []struct{ off, n int }{{0, len(data)}, {5, 40000}, {len(data) - 10, 100}, {len(data), 10}, {123, 0}} {
		buf := make([]byte, rg.n)
		n, err := f.ReadAt(ctx, buf, int64(rg.off))
		want := data[min(rg.off, len(data)):min(rg.off+rg.n, len(data))]
		if !bytes.Equal(buf[:n], want) || (err != nil && !errors.Is(err, io.EOF)) {
			t.Errorf("read %d at %d: %d bytes, %v; want %d bytes", rg.n, rg.off, n, err, len(want))
		}
	}
	// The server releases a loan once the frame is written, which may be
	// after the client has read it.
	for deadline := time.Now().Add(5 * time.Second); sfs.loans.Load() != 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if l := sfs.loans.Load(); l != 0 {
		t.Errorf("%d loans not released", l)
	}
	// 300 KiB in 16 KiB frames, and the other reads: one loan per frame.
	if l := sfs.lent.Load(); l < 20 {
		t.Errorf("%d loans for the reads; the server did not read through ReadSlices", l)
	}
}

// orderFS records the write-side calls on its files, slowing writes so
// that a sync or close that overtook one would show.
type orderFS struct {
	*memFS
	mu  sync.Mutex
	ops []string
}

type orderFile struct {
	*memFile
	fs *orderFS
}

func (o *orderFS) Open(ctx context.Context, name string, opts OpenOptions) (File, error) {
	f, err := o.memFS.Open(ctx, name, opts)
	if mf, ok := f.(*memFile); ok && err == nil {
		return &orderFile{memFile: mf, fs: o}, nil
	}
	return f, err
}

func (o *orderFS) note(op string) {
	o.mu.Lock()
	o.ops = append(o.ops, op)
	o.mu.Unlock()
}

func (f *orderFile) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	time.Sleep(10 * time.Millisecond)
	f.fs.note(fmt.Sprintf("write %d", off))
	return f.memFile.WriteAt(ctx, p, off)
}

func (f *orderFile) Sync(ctx context.Context) error {
	f.fs.note("sync")
	return f.memFile.Sync(ctx)
}

func (f *orderFile) Close(ctx context.Context) error {
	f.fs.note("close")
	return f.memFile.Close(ctx)
}

// The server says it runs a file's write-side requests in order
// (ServerVersion), and does: FinishWrite's writes, sync and close, sent
// without waiting, run one after the other, and the file is whole.
func TestServerRunsFinishWriteInOrder(t *testing.T) {
	ofs := &orderFS{memFS: newMemFS()}
	addr, _ := startServer(t, ofs, Limits{})
	c := dial(t, addr, &DialOptions{WriteChunk: 1000})
	ctx := testCtx(t)
	if v, err := c.QueryConfig(ctx, "version"); err != nil || len(v) != 1 || v[0] != ServerVersion {
		t.Fatalf("config version: %q, %v", v, err)
	}
	data := randomBytes(rand.New(rand.NewPCG(testSeed(t), 34)), 3000)
	f, err := c.Open(ctx, "/f", OpenNew, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.FinishWrite(ctx, data, 0, FinishOptions{Sync: true}); err != nil {
		t.Fatal(err)
	}
	ofs.mu.Lock()
	got := strings.Join(ofs.ops, ", ")
	ofs.mu.Unlock()
	if want := "write 0, write 1000, write 2000, sync, close"; got != want {
		t.Errorf("the server ran %s; want %s", got, want)
	}
	f, err = c.Open(ctx, "/f", OpenRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(ctx)
	buf := make([]byte, len(data)+1)
	if n, _ := f.ReadAt(ctx, buf, 0); !bytes.Equal(buf[:n], data) {
		t.Errorf("read back %d bytes, not what was written", n)
	}
}
