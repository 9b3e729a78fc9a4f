package directio

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// directOK reports whether dir's file system takes O_DIRECT.
func directOK(t *testing.T, dir string) bool {
	f, err := os.OpenFile(filepath.Join(dir, "probe"), os.O_CREATE|os.O_WRONLY|unix.O_DIRECT, 0o644)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

func flags(t *testing.T, f *os.File) int {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fl int
	var ferr error
	if err := rc.Control(func(fd uintptr) { fl, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil {
		t.Fatal(err)
	}
	if ferr != nil {
		t.Fatal(ferr)
	}
	return fl
}

// Bytes written in uneven pieces, then more after a Flush, land in the
// file exactly; whole aligned buffers go direct where the file system
// allows; after Flush the file has O_DIRECT off.
func TestAppendUnevenPieces(t *testing.T) {
	for _, start := range []int64{0, 100} {
		dir := t.TempDir()
		f, err := os.Create(filepath.Join(dir, "f"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		head := bytes.Repeat([]byte{'h'}, int(start))
		if _, err := f.WriteAt(head, 0); err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(1, uint64(start)))
		want := make([]byte, 3<<20+777)
		for i := range want {
			want[i] = byte(r.Uint32())
		}
		a := NewAppender(f, start, 64<<10)
		rest := want[:2<<20+5]
		for len(rest) > 0 {
			n := min(len(rest), 1+r.IntN(200<<10))
			if got, err := a.Write(rest[:n]); err != nil || got != n {
				t.Fatalf("write %d bytes: %d, %v", n, got, err)
			}
			rest = rest[n:]
		}
		if err := a.Flush(); err != nil {
			t.Fatal(err)
		}
		if flags(t, f)&unix.O_DIRECT != 0 {
			t.Fatal("O_DIRECT still set after Flush")
		}
		// More after a flush: the offset is no longer aligned.
		if _, err := a.ReadFrom(bytes.NewReader(want[2<<20+5:])); err != nil {
			t.Fatal(err)
		}
		if err := a.Flush(); err != nil {
			t.Fatal(err)
		}
		if a.Offset() != start+int64(len(want)) {
			t.Fatalf("offset %d, want %d", a.Offset(), start+int64(len(want)))
		}
		a.Release()
		got, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[:start], head) || !bytes.Equal(got[start:], want) {
			t.Fatalf("start %d: file differs from what was written (%d bytes, want %d)", start, len(got), int(start)+len(want))
		}
		switch {
		case start%Align != 0 && a.DirectBytes() != 0:
			t.Errorf("start %d: %d bytes went direct from an unaligned offset", start, a.DirectBytes())
		case start%Align == 0 && directOK(t, dir) && a.DirectBytes() < 2<<20-64<<10:
			t.Errorf("start %d: only %d bytes went direct", start, a.DirectBytes())
		}
	}
}

// ReadFrom passes on a reader's error and keeps what it read staged.
func TestReadFromError(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := NewAppender(f, 0, Align)
	defer a.Release()
	r := io.MultiReader(bytes.NewReader(make([]byte, 5000)), iotestErr{})
	n, err := a.ReadFrom(r)
	if err != errBroken || n != 5000 {
		t.Fatalf("ReadFrom: %d, %v; want 5000, %v", n, err, errBroken)
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	if fi, _ := f.Stat(); fi.Size() != 5000 {
		t.Fatalf("file has %d bytes, want 5000", fi.Size())
	}
}

var errBroken = io.ErrClosedPipe

type iotestErr struct{}

func (iotestErr) Read([]byte) (int, error) { return 0, errBroken }

// A write failure is sticky: later calls report it.
func TestWriteErrorIsSticky(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close() // writes now fail
	a := NewAppender(f, 0, Align)
	defer a.Release()
	if _, err := a.Write(make([]byte, 2*Align)); err == nil {
		t.Fatal("write to a closed file succeeded")
	}
	if _, err := a.Write([]byte("x")); err == nil {
		t.Fatal("a write after a failure succeeded")
	}
	if err := a.Flush(); err == nil {
		t.Fatal("flush after a failure succeeded")
	}
}

func BenchmarkAppend(b *testing.B) {
	dir := b.TempDir()
	chunk := make([]byte, 1<<20+64)
	for _, direct := range []bool{true, false} {
		name := map[bool]string{true: "direct", false: "buffered"}[direct]
		b.Run(name+"/64MiB", func(b *testing.B) {
			b.SetBytes(64 * int64(len(chunk)))
			for b.Loop() {
				f, err := os.Create(filepath.Join(dir, "f"))
				if err != nil {
					b.Fatal(err)
				}
				var w io.Writer = f
				var a *Appender
				if direct {
					a = NewAppender(f, 0, 1<<20)
					w = a
				}
				for range 64 {
					if _, err := w.Write(chunk); err != nil {
						b.Fatal(err)
					}
				}
				if a != nil {
					if err := a.Flush(); err != nil {
						b.Fatal(err)
					}
					a.Release()
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
	}
}

// Growing the staging buffer keeps what is staged, and the buffers
// written after it are of the new size.
func TestAppenderGrow(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := rand.New(rand.NewPCG(7, 7))
	want := make([]byte, 1<<20+333)
	for i := range want {
		want[i] = byte(r.Uint32())
	}
	a := NewAppender(f, 0, 16<<10)
	defer a.Release()
	first := 40<<10 + 5 // two small buffers written, 8 KiB + 5 staged
	if _, err := a.Write(want[:first]); err != nil {
		t.Fatal(err)
	}
	a.Grow(100 << 10) // rounded up to 25 pages
	a.Grow(8 << 10)   // smaller: no change
	if _, err := a.Write(want[first:]); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("file differs from what was written (%d bytes, want %d)", len(got), len(want))
	}
	if directOK(t, dir) {
		// 2 buffers of 16 KiB, then whole ones of 100 KiB (rounded up)
		grown := int64(25 * Align)
		n := (int64(len(want)) - 32<<10) / grown
		if d := a.DirectBytes(); d != 32<<10+n*grown {
			t.Errorf("DirectBytes = %d, want %d", d, 32<<10+n*grown)
		}
	}
}

// After Flush, the file's last TailCached bytes are in the page cache
// though most of them went to the disk with O_DIRECT; its start, written
// with O_DIRECT too, is not.
func TestFlushCachesTheTail(t *testing.T) {
	dir := t.TempDir()
	if !directOK(t, dir) {
		t.Skip("no O_DIRECT here")
	}
	f, err := os.OpenFile(filepath.Join(dir, "f"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const size = 1<<20 + 1000
	a := NewAppender(f, 0, 128<<10)
	defer a.Release()
	if _, err := a.Write(bytes.Repeat([]byte{7}, size)); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	if a.DirectBytes() < size-TailCached {
		t.Fatalf("%d bytes written with O_DIRECT: the test tests nothing", a.DirectBytes())
	}
	if c, err := CachedPages(f, 0, 64<<10); err != nil || c != 0 {
		t.Fatalf("%d pages of the start cached (%v): O_DIRECT did not bypass the page cache", c, err)
	}
	off := int64(size-TailCached) &^ (Align - 1)
	want := int((size - off + Align - 1) / Align)
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, err := CachedPages(f, off, size-off)
		if err != nil {
			t.Fatal(err)
		}
		if c == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the last %d pages cached", c, want)
		}
	}
}
