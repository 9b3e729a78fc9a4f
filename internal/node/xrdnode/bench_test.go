package xrdnode

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/ecstore/ecstore/internal/node"
)

// benchFileSize is the size of the file each benchmark iteration writes
// or reads.
const benchFileSize = 256 << 20

// benchServer makes the node of one benchmark configuration.
type benchServer struct {
	name   string
	remote bool
	// start returns a root:// URL, or a node for local ones.
	start func(b *testing.B) (url string, local node.Node)
}

// benchServers are the servers BenchmarkThroughput measures; the interop
// build adds the real xrootd.
var benchServers = []benchServer{
	{name: "local", start: func(b *testing.B) (string, node.Node) {
		l, err := node.NewLocal("local", b.TempDir(), node.LocalOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
		return "", l
	}},
	{name: "dataserver", remote: true, start: func(b *testing.B) (string, node.Node) {
		return "root://" + startOurs(b, "", "127.0.0.1:0").addr + "//bench", nil
	}},
}

// BenchmarkThroughput measures single-stream writes (Create, Write in
// 1 MiB pieces, Commit) and reads (sequential ReadAt of io bytes) of a
// 256 MiB file on loopback, through node.Local and through Node against
// each server, with kXR_write/kXR_read ("io=plain", the default) and with
// kXR_pgwrite/pgread ("io=pages"), and upload buffers of 1 MiB and the
// default. Compare the MB/s of server=local with the others. Run with
// -benchtime=3x; the interop build adds server=xrootd.
func BenchmarkThroughput(b *testing.B) {
	for _, srv := range benchServers {
		b.Run("server="+srv.name, func(b *testing.B) {
			url, local := srv.start(b)
			ios := []string{"local"}
			if srv.remote {
				ios = []string{"plain", "pages"}
			}
			for _, mode := range ios {
				var bufs []int
				if srv.remote {
					bufs = []int{1 << 20, DefaultWriteBuffer}
				} else {
					bufs = []int{0}
				}
				for _, buf := range bufs {
					name := "op=write/io=" + mode
					if buf > 0 {
						name += fmt.Sprintf("/buf=%dMiB", buf>>20)
					}
					b.Run(name, func(b *testing.B) {
						n := benchNode(b, url, local, mode, buf)
						benchWrite(b, n)
					})
				}
				for _, block := range []int{1 << 20, 8 << 20} {
					b.Run(fmt.Sprintf("op=read/io=%s/block=%dMiB", mode, block>>20), func(b *testing.B) {
						n := benchNode(b, url, local, mode, 0)
						benchRead(b, n, block)
					})
				}
			}
		})
	}
}

// benchNode returns the local node, or a new Node on url.
func benchNode(b *testing.B, url string, local node.Node, mode string, buf int) node.Node {
	if local != nil {
		return local
	}
	return newNode(b, url, Options{WriteBuffer: buf, PageChecksums: mode == "pages"})
}

// benchData is 1 MiB of random bytes, written over and over.
func benchData() []byte {
	r := rand.New(rand.NewPCG(1, 2))
	p := make([]byte, 1<<20)
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	return p
}

func putBench(b *testing.B, n node.Node, path string, data []byte) {
	ctx := context.Background()
	u, err := n.Create(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	for off := 0; off < benchFileSize; off += len(data) {
		if err := u.Write(ctx, data); err != nil {
			b.Fatal(err)
		}
	}
	if err := u.Commit(ctx); err != nil {
		b.Fatal(err)
	}
}

func benchWrite(b *testing.B, n node.Node) {
	data := benchData()
	putBench(b, n, "/w", data) // warm up: connections, directories
	b.SetBytes(benchFileSize)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		putBench(b, n, "/w", data)
	}
}

func benchRead(b *testing.B, n node.Node, block int) {
	ctx := context.Background()
	putBench(b, n, "/r", benchData())
	buf := make([]byte, block)
	read := func() {
		f, err := n.Open(ctx, "/r")
		if err != nil {
			b.Fatal(err)
		}
		var off int64
		for {
			m, err := f.ReadAt(ctx, buf, off)
			off += int64(m)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		if off != benchFileSize {
			b.Fatalf("read %d bytes; want %d", off, benchFileSize)
		}
		f.Close()
	}
	read() // warm up: page cache, connections
	b.SetBytes(benchFileSize)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		read()
	}
}
