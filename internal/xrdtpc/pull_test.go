package xrdtpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/adler32"
	"io"
	"io/fs"
	"iter"
	"math/rand/v2"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/xrootd"
)

// sourceFS serves one file, /f, as a source would, with faults to order.
type sourceFS struct {
	data     []byte
	announce int64  // the size its open reports; len(data) when 0
	adler    string // its adler32 answer; the data's when "", none when "-"
	stall    bool   // reads never answer

	mu  sync.Mutex
	cgi url.Values // of the last open
}

func (s *sourceFS) Open(_ context.Context, name string, o xrootd.OpenOptions) (xrootd.File, error) {
	if name != "/f" {
		return nil, fs.ErrNotExist
	}
	s.mu.Lock()
	s.cgi = o.CGI
	s.mu.Unlock()
	return &sourceFile{s}, nil
}

func (s *sourceFS) size() int64 {
	if s.announce != 0 {
		return s.announce
	}
	return int64(len(s.data))
}

func (s *sourceFS) Stat(context.Context, string) (xrootd.FileInfo, error) {
	return xrootd.FileInfo{Size: s.size(), Mode: 0o644}, nil
}

func (s *sourceFS) List(context.Context, string) iter.Seq2[xrootd.FileInfo, error] {
	return func(func(xrootd.FileInfo, error) bool) {}
}

func (s *sourceFS) ChecksumAlgorithms() []string { return []string{"adler32"} }

func (s *sourceFS) Checksum(context.Context, string, string) (string, error) {
	switch s.adler {
	case "-":
		return "", xrootd.Errorf(xrootd.ErrUnsupported, "no checksums here")
	case "":
		return fmt.Sprintf("%08x", adler32.Checksum(s.data)), nil
	}
	return s.adler, nil
}

type sourceFile struct{ s *sourceFS }

func (f *sourceFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if f.s.stall {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	if off >= int64(len(f.s.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.s.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *sourceFile) Stat(context.Context) (xrootd.FileInfo, error) {
	return xrootd.FileInfo{Size: f.s.size(), Mode: 0o644}, nil
}

func (f *sourceFile) Close(context.Context) error { return nil }

func serveSource(t *testing.T, s xrootd.FileSystem) string {
	t.Helper()
	srv := &xrootd.Server{Handler: s}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go srv.Serve(ctx, ln)
	t.Cleanup(func() { cancel(); srv.Shutdown(context.Background()) })
	return ln.Addr().String()
}

func TestPull(t *testing.T) {
	data := make([]byte, 5<<20+77)
	rand.NewChaCha8([32]byte{3}).Read(data)
	// Only the silent source is cut short: under -race on a loaded host
	// the others' reads can pause for longer than its bound.
	opts := PullOptions{Chunk: 1 << 20, Depth: 3, Idle: time.Minute}
	pull := func(s *sourceFS) ([]byte, int64, error) {
		addr := serveSource(t, s)
		var out bytes.Buffer
		var moved atomic.Int64
		o := opts
		if s.stall {
			o.Idle = 300 * time.Millisecond
		}
		o.Moved = &moved
		n, err := Pull(context.Background(), Source{Addr: addr, Path: "/f", Key: "k1", Origin: "u.1@[::ffff:127.0.0.1]"}, &out, o)
		if n != moved.Load() || n != int64(out.Len()) {
			t.Errorf("Pull returned %d, counted %d, wrote %d", n, moved.Load(), out.Len())
		}
		return out.Bytes(), n, err
	}

	s := &sourceFS{data: data}
	got, _, err := pull(s)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("pull: %d bytes, %v", len(got), err)
	}
	s.mu.Lock()
	cgi := s.cgi
	s.mu.Unlock()
	if cgi.Get("tpc.key") != "k1" || cgi.Get("tpc.org") != "u.1@[::ffff:127.0.0.1]" {
		t.Errorf("the source's open got %v, want the key and origin", cgi)
	}
	if got, _, err := pull(&sourceFS{data: data, adler: "-"}); err != nil || !bytes.Equal(got, data) {
		t.Errorf("pull from a source without adler32: %d bytes, %v", len(got), err)
	}

	for _, tc := range []struct {
		name string
		s    *sourceFS
		want string
	}{
		{"shorter than announced", &sourceFS{data: data, announce: int64(len(data)) + 10}, "ended at"},
		{"longer than announced", &sourceFS{data: data, announce: int64(len(data)) - 10}, "longer than"},
		{"another checksum", &sourceFS{data: data, adler: "00000001"}, "checksum mismatch"},
		{"silent source", &sourceFS{data: data, stall: true}, "no data from the source"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, _, err := pull(tc.s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("pull: %v, want an error saying %q", err, tc.want)
			}
			if time.Since(start) > 5*time.Second {
				t.Errorf("the failed pull took %v", time.Since(start))
			}
		})
	}
	if _, err := Pull(context.Background(), Source{Addr: serveSource(t, &sourceFS{data: data}), Path: "/missing"}, io.Discard, opts); !errors.Is(err, fs.ErrNotExist) {
		var xe *xrootd.Error
		if !errors.As(err, &xe) || xe.Code != xrootd.ErrNotFound {
			t.Errorf("pull of a missing file: %v, want kXR_NotFound", err)
		}
	}
}

// tpcFS is sourceFS that says it does third-party copies, and takes
// writes (a destination that pulls nothing).
type tpcFS struct{ *sourceFS }

func (f tpcFS) ConfigValue(key string) (string, bool) { return "1", key == "tpc" }

func (f tpcFS) Open(ctx context.Context, name string, o xrootd.OpenOptions) (xrootd.File, error) {
	if o.Flags.Writable() {
		f.mu.Lock()
		f.cgi = o.CGI
		f.mu.Unlock()
		return &sourceFile{f.sourceFS}, nil
	}
	return f.sourceFS.Open(ctx, name, o)
}

// TestCopyNamesTheDestinationAsXrootdDoes: Copy tells the source the
// destination's address as "[::ffff:a.b.c.d]", as xrdcp does. Regression:
// with "127.0.0.1" a real xrootd source let in a pull that came after
// the registration, but never one that came first (it waited 15 s and
// refused it: "tpc authorization expired").
func TestCopyNamesTheDestinationAsXrootdDoes(t *testing.T) {
	src := &sourceFS{data: []byte("bytes")}
	dst := &sourceFS{}
	ctx := context.Background()
	sc, err := xrootd.Dial(ctx, serveSource(t, tpcFS{src}), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	dc, err := xrootd.Dial(ctx, serveSource(t, tpcFS{dst}), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	if err := Copy(ctx, sc, dc, "/f", "/g", CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	src.mu.Lock()
	reg := src.cgi
	src.mu.Unlock()
	dst.mu.Lock()
	open := dst.cgi
	dst.mu.Unlock()
	if reg.Get("tpc.dst") != "[::ffff:127.0.0.1]" || reg.Get("tpc.key") == "" || reg.Get("tpc.key") != open.Get("tpc.key") {
		t.Errorf("the source was told %v, the destination %v", reg, open)
	}
	if open.Get("tpc.src") != sc.Addr() || open.Get("tpc.lfn") != "/f" || open.Get("oss.asize") != "5" {
		t.Errorf("the destination was told %v", open)
	}
	// A server that does not do third-party copies.
	pc, err := xrootd.Dial(ctx, serveSource(t, dst), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if err := Copy(ctx, sc, pc, "/f", "/g", CopyOptions{}); !errors.Is(err, ErrNotSupported) {
		t.Errorf("copy to a server without TPC: %v", err)
	}
}
