// Command limits measures the limits of this machine that bound what an
// ecstore gateway can do on it, for bench/run.sh: loopback TCP
// throughput, sequential write and read of a file system, and memory copy
// bandwidth. It also has the small helpers the script needs (a free
// loopback port, dropping a tree's files from the page cache, a file of
// pseudo-random bytes). Standard library only.
//
// Usage:
//
//	limits tcp [--bytes SIZE] [--streams N]     loopback sender → receiver
//	limits disk --dir DIR [--bytes SIZE] [--fsync] [--files N]
//	limits memcpy [--bytes SIZE]
//	limits port                                  print a free loopback TCP port
//	limits evict PATH...                         read, fsync and drop files from the page cache
//	limits fill --bytes SIZE FILE                write pseudo-random bytes to FILE
//
// Every measurement prints one line of key=value pairs, rates in MB/s
// (10^6 bytes per second), for example "tcp_mbps=2410.3 bytes=1073741824
// streams=1 seconds=0.445".
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ioSize is the size of every read and write the measurements make.
const ioSize = 1 << 20

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "tcp":
		err = cmdTCP(args)
	case "disk":
		err = cmdDisk(args)
	case "memcpy":
		err = cmdMemcpy(args)
	case "port":
		err = cmdPort()
	case "evict":
		err = cmdEvict(args)
	case "fill":
		err = cmdFill(args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "limits %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: limits tcp|disk|memcpy|port|evict|fill [flags]; see the package doc in bench/limits/main.go")
	os.Exit(2)
}

// sizeValue is a byte count flag that takes suffixes KiB, MiB, GiB.
type sizeValue int64

func (s *sizeValue) String() string { return strconv.FormatInt(int64(*s), 10) }

func (s *sizeValue) Set(v string) error {
	mult := int64(1)
	for _, u := range []struct {
		sfx string
		n   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if strings.HasSuffix(v, u.sfx) {
			v, mult = strings.TrimSuffix(v, u.sfx), u.n
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("bad size %q", v)
	}
	*s = sizeValue(n * mult)
	return nil
}

// mbps is the rate of n bytes in d, in MB/s.
func mbps(n int64, d time.Duration) float64 { return float64(n) / 1e6 / d.Seconds() }

// randomBuffer returns n pseudo-random bytes.
func randomBuffer(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// cmdTCP sends --bytes in total over --streams loopback TCP connections,
// from sender goroutines to receiver goroutines of this process, and
// prints the aggregate rate seen by the receivers.
func cmdTCP(args []string) error {
	fl := flag.NewFlagSet("tcp", flag.ExitOnError)
	size := sizeValue(1 << 30)
	fl.Var(&size, "bytes", "total `SIZE` to send (default 1GiB)")
	streams := fl.Int("streams", 1, "`N` parallel connections")
	fl.Parse(args)
	if *streams < 1 {
		return errors.New("--streams must be at least 1")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	per := int64(size) / int64(*streams)
	total := per * int64(*streams)
	buf := randomBuffer(ioSize)

	errc := make(chan error, 2*(*streams))
	var wg sync.WaitGroup
	// Receivers: accept every connection first so that the clock starts
	// when all streams are connected.
	conns := make([]net.Conn, *streams)
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for i := range conns {
			c, err := ln.Accept()
			if err != nil {
				errc <- err
				return
			}
			conns[i] = c
		}
	}()
	senders := make([]net.Conn, *streams)
	for i := range senders {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return err
		}
		defer c.Close()
		senders[i] = c
	}
	<-accepted
	select {
	case err := <-errc:
		return err
	default:
	}
	start := time.Now()
	for i := range *streams {
		wg.Add(2)
		go func(c net.Conn) {
			defer wg.Done()
			for left := per; left > 0; {
				n, err := c.Write(buf[:min(left, ioSize)])
				if err != nil {
					errc <- err
					return
				}
				left -= int64(n)
			}
		}(senders[i])
		go func(c net.Conn) {
			defer wg.Done()
			defer c.Close()
			rb := make([]byte, ioSize)
			for left := per; left > 0; {
				n, err := c.Read(rb[:min(left, ioSize)])
				if err != nil {
					errc <- err
					return
				}
				left -= int64(n)
			}
		}(conns[i])
	}
	wg.Wait()
	d := time.Since(start)
	select {
	case err := <-errc:
		return err
	default:
	}
	fmt.Printf("tcp_mbps=%.1f bytes=%d streams=%d seconds=%.3f\n", mbps(total, d), total, *streams, d.Seconds())
	return nil
}

// cmdDisk writes --bytes to a new file in --dir in 1 MiB writes (and
// fsyncs it when --fsync is given; the fsync is timed), drops the file
// from the page cache and reads it back, then removes it.
func cmdDisk(args []string) error {
	fl := flag.NewFlagSet("disk", flag.ExitOnError)
	dir := fl.String("dir", "", "`DIR` on the file system to measure")
	size := sizeValue(1 << 30)
	fl.Var(&size, "bytes", "`SIZE` to write and read in all (default 1GiB)")
	fsync := fl.Bool("fsync", false, "fsync each file before its write counts as done")
	files := fl.Int("files", 1, "write, then read, `N` files of SIZE/N at once, as N streams do")
	fl.Parse(args)
	if *dir == "" {
		return errors.New("--dir is required")
	}
	if *files < 1 || int64(*files) > int64(size) {
		return fmt.Errorf("--files %d: want 1 to SIZE", *files)
	}
	tmp := make([]*os.File, *files)
	for i := range tmp {
		f, err := os.CreateTemp(*dir, "limits-disk-*")
		if err != nil {
			return err
		}
		defer os.Remove(f.Name())
		defer f.Close()
		tmp[i] = f
	}
	per := int64(size) / int64(*files)
	total := per * int64(*files)
	buf := randomBuffer(ioSize) // only read: shared by the writers
	start := time.Now()
	err := parallel(tmp, func(f *os.File) error {
		for left := per; left > 0; {
			n, err := f.Write(buf[:min(left, ioSize)])
			if err != nil {
				return err
			}
			left -= int64(n)
		}
		if *fsync {
			return f.Sync()
		}
		return nil
	})
	if err != nil {
		return err
	}
	wd := time.Since(start)
	for _, f := range tmp {
		if err := evictFile(f); err != nil {
			return err
		}
	}
	start = time.Now()
	err = parallel(tmp, func(f *os.File) error {
		n, err := io.CopyBuffer(io.Discard, io.NewSectionReader(f, 0, per+1), make([]byte, ioSize))
		if err == nil && n != per {
			err = fmt.Errorf("read back %d bytes of %d", n, per)
		}
		return err
	})
	if err != nil {
		return err
	}
	rd := time.Since(start)
	fmt.Printf("write_mbps=%.1f read_mbps=%.1f bytes=%d files=%d fsync=%v write_seconds=%.3f read_seconds=%.3f\n",
		mbps(total, wd), mbps(total, rd), total, *files, *fsync, wd.Seconds(), rd.Seconds())
	return nil
}

// parallel runs fn on every file at once and returns their errors, joined.
func parallel(files []*os.File, fn func(*os.File) error) error {
	errs := make([]error, len(files))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(f); err != nil {
				errs[i] = fmt.Errorf("%s: %w", f.Name(), err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// cmdMemcpy copies a 64 MiB buffer into another until --bytes are copied.
func cmdMemcpy(args []string) error {
	fl := flag.NewFlagSet("memcpy", flag.ExitOnError)
	size := sizeValue(4 << 30)
	fl.Var(&size, "bytes", "`SIZE` to copy in total (default 4GiB)")
	fl.Parse(args)
	const bufSize = 64 << 20
	src, dst := randomBuffer(bufSize), make([]byte, bufSize)
	copy(dst, src) // fault the pages in before timing
	var done int64
	start := time.Now()
	for done < int64(size) {
		n := copy(dst[:min(int64(size)-done, bufSize)], src)
		done += int64(n)
	}
	d := time.Since(start)
	if dst[bufSize/2] != src[bufSize/2] {
		return errors.New("copy mismatch")
	}
	fmt.Printf("memcpy_mbps=%.1f bytes=%d seconds=%.3f\n", mbps(done, d), done, d.Seconds())
	return nil
}

// cmdPort prints a loopback TCP port that was free a moment ago.
func cmdPort() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	return nil
}

// cmdEvict reads every regular file under the given paths once, fsyncs
// it and asks the kernel to drop its pages from the page cache, so that
// the next read of it comes from the disk. Files that vanish meanwhile
// are skipped.
//
// The read first makes the next cold read fill pages the kernel has just
// freed, whether the file was cached or not. On a virtual machine whose
// balloon reports free pages to the host (virtio-balloon free page
// reporting), a page free for more than a few seconds has been handed
// back, and the first touch of it costs a fault in the host: a cold
// 1 GiB get through the gateway ran at 718 MB/s into such pages and at
// 1004 MB/s into recycled ones. Without the read, a file written through
// the page cache (plain xrootd) and one written with O_DIRECT (ecstore's
// nodes, whose eviction frees nothing) would be read cold under
// different conditions, and so would a degraded read's parity chunks,
// never read before, against the data chunks.
func cmdEvict(args []string) error {
	buf := make([]byte, ioSize)
	for _, root := range args {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if !d.Type().IsRegular() {
				return nil
			}
			f, err := os.Open(p)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			defer f.Close()
			if _, err := io.CopyBuffer(io.Discard, f, buf); err != nil {
				return fmt.Errorf("read %s: %w", p, err)
			}
			return evictFile(f)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// evictFile writes f's dirty pages back and drops its pages from the
// page cache.
func evictFile(f *os.File) error {
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", f.Name(), err)
	}
	if err := dropCache(f); err != nil {
		return fmt.Errorf("drop %s from the page cache: %w", f.Name(), err)
	}
	return nil
}

// cmdFill writes --bytes pseudo-random bytes to FILE.
func cmdFill(args []string) error {
	fl := flag.NewFlagSet("fill", flag.ExitOnError)
	size := sizeValue(0)
	fl.Var(&size, "bytes", "`SIZE` to write")
	fl.Parse(args)
	if fl.NArg() != 1 || size <= 0 {
		return errors.New("want --bytes SIZE FILE")
	}
	f, err := os.Create(fl.Arg(0))
	if err != nil {
		return err
	}
	r := rand.NewChaCha8([32]byte{'e', 'c', 's', 't', 'o', 'r', 'e'})
	if _, err := io.CopyBuffer(f, io.LimitReader(r, int64(size)), make([]byte, ioSize)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
