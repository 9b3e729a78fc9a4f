package main

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/testcluster"
)

// readFIFO makes a FIFO in dir and returns its path and a channel that
// gets everything written to it (read from another goroutine, as a
// consumer would).
func readFIFO(t *testing.T, dir string) (string, <-chan []byte) {
	t.Helper()
	p := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skipf("no FIFO: %v", err)
	}
	got := make(chan []byte, 1)
	go func() {
		f, err := os.Open(p)
		if err != nil {
			got <- nil
			return
		}
		b, _ := io.ReadAll(f)
		f.Close()
		got <- b
	}()
	return p, got
}

// within returns what got delivers, failing the test if it delivers
// nothing for 10 s (a FIFO replaced by a regular file is never written).
func within(t *testing.T, got <-chan []byte) []byte {
	t.Helper()
	select {
	case b := <-got:
		return b
	case <-time.After(10 * time.Second):
		t.Fatal("nothing was written into the FIFO")
		return nil
	}
}

// Regression (found by review): get and cp wrote into a temporary file
// renamed over the destination even when it was a device or a FIFO: run
// as root, `ecstore get /x /dev/null` made /dev/null a regular file full
// of object data. Such a destination is written in place.
func TestGetAndCpIntoAFIFO(t *testing.T) {
	c := newTestCluster(t)
	data := testcluster.Rand(rand.New(rand.NewPCG(6, 6)), 300<<10)
	c.put("/a/f", data)
	dir := t.TempDir()
	fifo, got := readFIFO(t, dir)
	mustRun(t, nil, c.cmd("get", "/a/f", fifo)...)
	if b := within(t, got); !bytes.Equal(b, data) {
		t.Errorf("the FIFO's reader got %d bytes, want %d", len(b), len(data))
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("after get the FIFO is %v (%v)", fi.Mode(), err)
	}

	url := gatewayURL(t)
	src := filepath.Join(dir, "src")
	os.WriteFile(src, data, 0o644)
	mustRun(t, nil, "cp", src, url+"/run/f")
	fifo2, got2 := readFIFO(t, t.TempDir())
	mustRun(t, nil, "cp", url+"/run/f", fifo2)
	if b := within(t, got2); !bytes.Equal(b, data) {
		t.Errorf("cp: the FIFO's reader got %d bytes, want %d", len(b), len(data))
	}
	if fi, err := os.Lstat(fifo2); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("after cp the FIFO is %v (%v)", fi.Mode(), err)
	}
}

// Regression (found by review): cp from a pipe or FIFO took its size (0)
// for the source's, stored the object, then failed "copied 100000 bytes,
// source has 0".
func TestCpFromAFIFO(t *testing.T) {
	url := gatewayURL(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "in")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skipf("no FIFO: %v", err)
	}
	data := testcluster.Rand(rand.New(rand.NewPCG(7, 7)), 100000)
	go func() {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		f.Write(data)
		f.Close()
	}()
	mustRun(t, nil, "cp", p, url+"/run/piped")
	if got := mustRun(t, nil, "cp", url+"/run/piped", "-"); got != string(data) {
		t.Errorf("read back %d bytes, want %d", len(got), len(data))
	}
}
