package xrootd

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"
)

// sendingFS serves memFS files opened for reading through FileSender: the
// bytes are copied to an OS file at open. extra makes SendSource claim
// that many bytes more than the file holds (a file that shrank); refuse
// makes it return no file (the server then reads with ReadAt).
type sendingFS struct {
	*memFS
	dir    string
	extra  atomic.Int64
	refuse bool
	sent   atomic.Int64 // frames readied by SendSource
}

type sendingFile struct {
	*memFile
	fs  *sendingFS
	osf *os.File
}

func (s *sendingFS) Open(ctx context.Context, name string, opts OpenOptions) (File, error) {
	f, err := s.memFS.Open(ctx, name, opts)
	mf, ok := f.(*memFile)
	if !ok || err != nil || opts.Flags.Writable() {
		return f, err
	}
	data, _ := s.get(name)
	osf, err := os.CreateTemp(s.dir, "send")
	if err != nil {
		return nil, err
	}
	if _, err := osf.Write(data); err != nil {
		osf.Close()
		return nil, err
	}
	return &sendingFile{memFile: mf, fs: s, osf: osf}, nil
}

func (f *sendingFile) SendSource(ctx context.Context, off int64, n int) (*os.File, int, error) {
	if f.fs.refuse {
		return nil, 0, nil
	}
	fi, err := f.osf.Stat()
	if err != nil {
		return nil, 0, err
	}
	f.fs.sent.Add(1)
	return f.osf, int(max(0, min(int64(n), fi.Size()-off+f.fs.extra.Load()))), nil
}

func (f *sendingFile) Close(ctx context.Context) error {
	f.osf.Close()
	return f.memFile.Close(ctx)
}

// A file that can be sent with sendfile (FileSender) is read like any
// other: in frames of at most ResponseChunk, up to the end of the file.
// A file that refuses is read with ReadAt.
func TestSendFile(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		sfs := &sendingFS{memFS: newMemFS(), dir: t.TempDir(), refuse: refuse}
		addr, _ := startServer(t, sfs, Limits{ResponseChunk: 16 << 10})
		c := dial(t, addr, &DialOptions{ReadChunk: 100 << 10})
		ctx := testCtx(t)
		r := rand.New(rand.NewPCG(testSeed(t), 32))
		data := randomBytes(r, 300<<10+7)
		sfs.put("/s", data)
		f, err := c.Open(ctx, "/s", OpenRead, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, rg := range []struct{ off, n int }{{0, len(data)}, {5, 40000}, {16<<10 - 1, 16<<10 + 2}, {len(data) - 10, 100}, {len(data), 10}, {len(data) + 5, 10}, {123, 0}} {
			buf := make([]byte, rg.n)
			n, err := f.ReadAt(ctx, buf, int64(rg.off))
			want := data[min(rg.off, len(data)):min(rg.off+rg.n, len(data))]
			if !bytes.Equal(buf[:n], want) || (err != nil && !errors.Is(err, io.EOF)) {
				t.Errorf("refuse=%v: read %d at %d: %d bytes, %v; want %d bytes", refuse, rg.n, rg.off, n, err, len(want))
			}
		}
		f.Close(ctx)
		switch got := sfs.sent.Load(); {
		case refuse && got != 0:
			t.Errorf("%d frames sent from a file that refused", got)
		case !refuse && got < 20: // 300 KiB in 16 KiB frames, and the rest
			t.Errorf("%d frames sent with sendfile; the server did not use SendSource", got)
		}
	}
}

// A file that turns out shorter than SendSource said cannot finish its
// frame: the connection is closed, the read fails rather than hangs or
// returns short data, and the server goes on serving new connections.
func TestSendFileShorterThanClaimed(t *testing.T) {
	sfs := &sendingFS{memFS: newMemFS(), dir: t.TempDir()}
	sfs.extra.Store(100)
	addr, _ := startServer(t, sfs, Limits{ResponseChunk: 16 << 10})
	ctx := testCtx(t)
	data := bytes.Repeat([]byte("ecstore!"), 1000)
	sfs.put("/short", data)
	c := dial(t, addr, nil)
	f, err := c.Open(ctx, "/short", OpenRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2*len(data))
	if n, err := f.ReadAt(ctx, buf, 0); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("read of a file that lied about its length: %d bytes, %v; want a connection error", n, err)
	}
	sfs.extra.Store(0)
	c2 := dial(t, addr, nil)
	f2, err := c2.Open(ctx, "/short", OpenRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close(ctx)
	n, err := f2.ReadAt(ctx, buf, 0)
	if !bytes.Equal(buf[:n], data) || (err != nil && !errors.Is(err, io.EOF)) {
		t.Fatalf("read on a new connection: %d bytes, %v", n, err)
	}
}
