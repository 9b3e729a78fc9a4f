package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/dataserver"
	"github.com/ecstore/ecstore/internal/testtls"
	"github.com/ecstore/ecstore/internal/xrootd"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/object"
)

func flags(t *testing.T, kv ...string) Config {
	t.Helper()
	var c Config
	for i := 0; i < len(kv); i += 2 {
		if err := c.Set(kv[i], kv[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func putGet(t *testing.T, c *Cluster, path string, data []byte) {
	t.Helper()
	ctx := context.Background()
	w, err := c.Store().Create(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := c.Store().Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got bytes.Buffer
	if _, err := r.WriteTo(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("read back %d bytes, differ from the %d written", got.Len(), len(data))
	}
}

func TestCreateThenReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	c, err := Open(Options{DataDir: dir, Create: true, Flags: flags(t, "fsync", "false")})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Created() {
		t.Errorf("Created() false for a new cluster")
	}
	if got := len(c.Nodes()); got != 12 {
		t.Fatalf("%d nodes, want 12 (8+2 plus 2 spares)", got)
	}
	for i, n := range c.Nodes() {
		want := filepath.Join(dir, "nodes", []string{"00", "01", "02", "03", "04", "05", "06", "07", "08", "09", "10", "11"}[i])
		if n.ID != filepath.Base(want) || n.Err != nil {
			t.Errorf("node %d: id %q err %v", i, n.ID, n.Err)
		}
		if abs, _ := filepath.Abs(want); n.Path != abs {
			t.Errorf("node %d: path %s, want %s", i, n.Path, abs)
		}
	}
	if g := c.Store().Geometry(); g != (layout.Geometry{K: 8, M: 2, ChunkSize: 1 << 20}) {
		t.Errorf("geometry %v", g)
	}
	putGet(t, c, "/a/b", []byte("hello"))
	c.Close()

	text, err := os.ReadFile(filepath.Join(dir, ConfigName))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ec = 8+2\n", "chunk-size = 1MiB\n", "spares = 2\n", "fsync = false\n", "nodes = nodes/00, nodes/01,"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("config lacks %q:\n%s", want, text)
		}
	}

	// Reopen without flags: the stored settings apply, nothing is created.
	c, err = Open(Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if c.Created() || len(c.Nodes()) != 12 || c.Config().Fsync() {
		t.Errorf("reopen: created %v, %d nodes, fsync %v", c.Created(), len(c.Nodes()), c.Config().Fsync())
	}
	putGet(t, c, "/a/c", bytes.Repeat([]byte("x"), 3<<20+5))
	c.Close()

	// Same geometry given again is fine; fsync may be overridden.
	c, err = Open(Options{DataDir: dir, Flags: flags(t, "ec", "8+2", "chunk-size", "1024KiB", "fsync", "true")})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Config().Fsync() {
		t.Errorf("--fsync=true did not override the config")
	}
	c.Close()

	// Contradicting the stored geometry is an error.
	for _, kv := range [][]string{{"ec", "4+2"}, {"chunk-size", "4MiB"}, {"spares", "0"}} {
		_, err := Open(Options{DataDir: dir, Flags: flags(t, kv...)})
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "--"+kv[0]) {
			t.Errorf("--%s=%s: got %v, want a usage error naming the flag", kv[0], kv[1], err)
		}
	}
}

func TestCreateGeometryFromFlags(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(Options{DataDir: dir, Create: true, Flags: flags(t, "ec", "4+1", "chunk-size", "64KiB", "spares", "0", "fsync", "false")})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Nodes()) != 5 {
		t.Errorf("%d nodes, want 5", len(c.Nodes()))
	}
	if g := c.Store().Geometry(); g != (layout.Geometry{K: 4, M: 1, ChunkSize: 64 << 10}) {
		t.Errorf("geometry %v", g)
	}
	putGet(t, c, "/x", bytes.Repeat([]byte("abc"), 100000))
	c.Close()

	// A write quorum is checked against the cluster's geometry, not the
	// default one.
	c, err = Open(Options{DataDir: dir, Flags: flags(t, "write-quorum", "5")})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := Open(Options{DataDir: dir, Flags: flags(t, "write-quorum", "6")}); err == nil || !strings.Contains(err.Error(), "write-quorum 6 outside [4, 5]") {
		t.Errorf("write-quorum 6 on a 4+1 cluster: %v", err)
	}
}

func TestNoClusterWithoutCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "none")
	_, err := Open(Options{DataDir: dir})
	if !errors.Is(err, ErrNoCluster) {
		t.Fatalf("got %v, want ErrNoCluster", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a read-only open created %s", dir)
	}
}

func TestRefuseNonEmptyDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "precious.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{DataDir: dir, Create: true})
	if !errors.Is(err, ErrNoCluster) || !strings.Contains(err.Error(), "precious.txt") {
		t.Fatalf("got %v, want a refusal naming precious.txt", err)
	}
}

func TestResumeUnfinishedCreate(t *testing.T) {
	dir := t.TempDir()
	// An earlier creation made empty node directories and then died.
	for _, n := range []string{"00", "01", "02"} {
		if err := os.MkdirAll(filepath.Join(dir, "nodes", n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c, err := Open(Options{DataDir: dir, Create: true, Flags: flags(t, "fsync", "false")})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestMissingNodeDirIsDown(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(Options{DataDir: dir, Create: true, Flags: flags(t, "fsync", "false")})
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789"), 1<<20)
	putGet(t, c, "/obj", data)
	info, err := c.Store().Stat(context.Background(), "/obj")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	// Lose two whole node directories of the object's placement.
	for _, id := range info.Placement[:2] {
		if err := os.RemoveAll(filepath.Join(dir, "nodes", id)); err != nil {
			t.Fatal(err)
		}
	}
	c, err = Open(Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	down := 0
	for _, n := range c.Nodes() {
		if n.Err != nil {
			down++
		}
	}
	if down != 2 {
		t.Errorf("%d nodes down, want 2", down)
	}
	r, err := c.Store().Open(context.Background(), "/obj")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := io.ReadAll(io.NewSectionReader(readerAt{r}, 0, r.Size()))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("degraded read: %v (%d bytes)", err, len(got))
	}
	if _, err := os.Stat(filepath.Join(dir, "nodes", info.Placement[0])); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing node directory was recreated")
	}
}

type readerAt struct {
	r interface {
		ReadAt(context.Context, []byte, int64) (int, error)
	}
}

func (r readerAt) ReadAt(p []byte, off int64) (int, error) {
	return r.r.ReadAt(context.Background(), p, off)
}

func TestConfigFileAndNodes(t *testing.T) {
	dir := t.TempDir()
	var list []string
	for _, n := range []string{"d0", "d1", "d2", "d3"} {
		if err := os.Mkdir(filepath.Join(dir, n), 0o755); err != nil {
			t.Fatal(err)
		}
		list = append(list, n)
	}
	conf := filepath.Join(dir, "my.conf")
	text := "# test cluster\nec = 2+1\nchunk-size = 4KiB\nspares = 1\nfsync = false\nnodes = " + strings.Join(list, ", ") + "\n"
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Open(Options{ConfigFile: conf})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Nodes()) != 4 || c.Nodes()[3].Path != filepath.Join(dir, "d3") || c.Nodes()[3].ID != "03" {
		t.Errorf("nodes %+v", c.Nodes())
	}
	putGet(t, c, "/f", bytes.Repeat([]byte("y"), 20000))
	c.Close()

	// The same directories named by --nodes read the object back.
	var abs []string
	for _, n := range list {
		abs = append(abs, filepath.Join(dir, n))
	}
	c, err = Open(Options{Nodes: abs, Flags: flags(t, "ec", "2+1", "fsync", "false")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Store().Stat(context.Background(), "/f"); err != nil {
		t.Error(err)
	}
	c.Close()
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		opts Options
		is   error
		want string
	}{
		{"two ways", Options{DataDir: dir, Nodes: []string{dir}}, ErrUsage, "one of --data, --config and --nodes"},
		{"other url", Options{Nodes: []string{"s3://bucket"}}, ErrNotSupported, "only local directories"},
		{"missing config", Options{ConfigFile: filepath.Join(dir, "nope.conf")}, os.ErrNotExist, "nope.conf"},
		{"no node opens", Options{Nodes: []string{filepath.Join(dir, "x"), filepath.Join(dir, "y")}, Flags: Config{k: 1, m: 1, set: map[string]bool{"ec": true}}}, os.ErrNotExist, "none of the 2 nodes"},
		{"too few nodes", Options{Nodes: []string{dir}}, nil, "cannot hold"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Open(tt.opts)
			if err == nil {
				c.Close()
				t.Fatal("no error")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

// TestRemoteNodes opens a cluster whose nodes are root:// data servers
// (ecstore's own, in process) and stores and reads an object through it.
func TestRemoteNodes(t *testing.T) {
	c, err := Open(Options{Nodes: dataNodes(t, 4), Flags: ec21(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	w, err := c.Store().Create(ctx, "/r/obj", nil)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("remote "), 300000)
	w.Write(data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := c.Store().Open(ctx, "/r/obj")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got bytes.Buffer
	if _, err := r.WriteTo(ctx, &got); err != nil || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("read back through root:// nodes: %v", err)
	}
}

// serveData serves a new directory over root:// on ln until the test ends.
func serveData(t *testing.T, ln net.Listener) { serveDir(t, ln, t.TempDir()) }

// serveDir serves dir over root:// on ln until the test ends or stop is
// called, which ends the server and its connections.
func serveDir(t *testing.T, ln net.Listener, dir string) (stop func()) {
	t.Helper()
	fsys, err := dataserver.New(dir, dataserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := &xrootd.Server{Handler: fsys}
	ctx, cancel := context.WithCancel(context.Background())
	go srv.Serve(ctx, ln)
	stop = sync.OnceFunc(func() { cancel(); srv.Shutdown(context.Background()) })
	t.Cleanup(stop)
	return stop
}

// dataNodes serves n new directories over root:// until the test ends and
// returns their URLs.
func dataNodes(t *testing.T, n int) []string {
	t.Helper()
	var urls []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		serveData(t, ln)
		urls = append(urls, "root://"+ln.Addr().String()+"//data")
	}
	return urls
}

// ec21 is the flags of a 2+1 cluster.
func ec21(t *testing.T) Config {
	t.Helper()
	var flags Config
	if err := flags.Set(KeyEC, "2+1"); err != nil {
		t.Fatal(err)
	}
	return flags
}

// Opening a cluster does not wait on a remote node that hangs (accepts
// connections, never answers) nor keeps one that refused connections
// down for good: the cluster opens within about remoteGrace, lookups do
// not wait for the hung node, the refused node's Err says why, and once
// a server listens there the node is used, its prefix directory made.
func TestRemoteNodesDownOrHungAtStart(t *testing.T) {
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	go func() {
		var held []net.Conn // accepted, never answered
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := hung.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedAddr := refused.Addr().String()
	refused.Close()
	urls := append([]string{"root://" + hung.Addr().String() + "//data", "root://" + refusedAddr + "//data"}, dataNodes(t, 2)...)
	start := time.Now()
	c, err := Open(Options{Nodes: urls, Flags: ec21(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if took := time.Since(start); took > remoteGrace+2*time.Second {
		t.Errorf("opening the cluster took %v with a hung node", took)
	}
	infos := c.Nodes()
	if infos[1].Err == nil {
		t.Errorf("the refused node has no Err")
	}
	if infos[2].Err != nil || infos[3].Err != nil {
		t.Errorf("nodes up: %v, %v", infos[2].Err, infos[3].Err)
	}
	// The node that did not answer is taken as hung: a lookup does not
	// wait for it.
	start = time.Now()
	if _, err := c.Store().Stat(context.Background(), "/missing"); !errors.Is(err, object.ErrNotExist) {
		t.Errorf("stat of a missing object: %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("a lookup waited %v for the hung node", took)
	}
	ln, err := net.Listen("tcp", refusedAddr)
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", refusedAddr, err)
	}
	serveData(t, ln)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := infos[1].Node.List(ctx, "/"); err != nil {
		t.Errorf("the node that refused at start, now up: list /: %v", err)
	}
}

// A local node directory missing when the cluster is opened (a disk not
// mounted yet) is down, and used once it exists: without a restart, new
// archives go to it. Until then it is not created.
func TestMissingNodeDirComesBack(t *testing.T) {
	defer func(d time.Duration) { localRetry = d }(localRetry)
	localRetry = 20 * time.Millisecond
	base := t.TempDir()
	var dirs []string
	for i := range 3 {
		dirs = append(dirs, filepath.Join(base, fmt.Sprint("n", i)))
	}
	for _, d := range dirs[:2] {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	flags := ec21(t)
	if err := flags.Set(KeyFsync, "false"); err != nil {
		t.Fatal(err)
	}
	c, err := Open(Options{Nodes: dirs, Flags: flags})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			c.Close()
		}
	}()
	infos := c.Nodes()
	if infos[2].Err == nil {
		t.Fatalf("the missing directory's node has no Err")
	}
	ctx := context.Background()
	time.Sleep(2 * localRetry)
	if _, err := infos[2].Node.Space(ctx); !errors.Is(err, ErrNodeDown) {
		t.Errorf("space of the missing node: %v, want ErrNodeDown", err)
	}
	if _, err := os.Stat(dirs[2]); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the missing directory was created: %v", err)
	}
	if err := os.Mkdir(dirs[2], 0o755); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * localRetry)
	data := bytes.Repeat([]byte("late disk "), 1<<17)
	putGet(t, c, "/late", data)
	if _, err := os.Stat(filepath.Join(dirs[2], "late")); err != nil {
		t.Errorf("no archive on the node whose directory appeared: %v", err)
	}
	// Closing the cluster closes the directory opened late; the node is
	// not opened again.
	closed = true
	if err := c.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	time.Sleep(2 * localRetry)
	if _, err := infos[2].Node.Space(ctx); !errors.Is(err, ErrNodeDown) {
		t.Errorf("space of the late node after the cluster's close: %v, want ErrNodeDown", err)
	}
}

// TestRemoteNodesOverTLSWithToken: nodes listed as roots:// that serve
// token holders only are used with the cluster's node-token (verified
// against X509_CERT_DIR's authority); without it they are down, and the
// token of whoever runs the command (BEARER_TOKEN) is not presented.
func TestRemoteNodesOverTLSWithToken(t *testing.T) {
	const token = "node-token-0123456789abcdef"
	files := testtls.New(t, "localhost")
	cert, err := tls.LoadX509KeyPair(files.CertFile, files.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("X509_CERT_DIR", files.Dir)
	t.Setenv("BEARER_TOKEN", token)
	t.Setenv("ECSTORE_NODE_TOKEN", "")
	var urls []string
	for range 3 {
		fsys, err := dataserver.New(t.TempDir(), dataserver.Options{})
		if err != nil {
			t.Fatal(err)
		}
		srv := &xrootd.Server{Handler: fsys, TLS: &tls.Config{Certificates: []tls.Certificate{cert}}, TokenRequired: true,
			Tokens: func(_ context.Context, tok string) (string, any, error) {
				if tok != token {
					return "", nil, errors.New("unknown token")
				}
				return "gateway", nil, nil
			}}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go srv.Serve(ctx, ln)
		t.Cleanup(func() { cancel(); srv.Shutdown(context.Background()) })
		urls = append(urls, "roots://"+ln.Addr().String()+"//data")
	}
	flags := ec21(t)
	if err := flags.Set(KeyNodeToken, token); err != nil {
		t.Fatal(err)
	}
	c, err := Open(Options{Nodes: urls, Flags: flags})
	if err != nil {
		t.Fatal(err)
	}
	putGet(t, c, "/tls/obj", bytes.Repeat([]byte("over TLS with a token "), 1<<14))
	c.Close()

	_, err = Open(Options{Nodes: urls, Flags: ec21(t)})
	if err == nil || !strings.Contains(err.Error(), "none is configured") {
		t.Fatalf("without the node token: %v, want every node refused for want of a token", err)
	}
}

// Regression (found by review): node ids were padded to the width of the
// list's last index, so that appending a 101st node renamed every other
// ("05" became "005"), their markers no longer matched, and the cluster
// opened no node. Ids keep two digits; a cluster whose markers show the
// old three-digit ids keeps those.
func TestNodeIDsSurviveTheHundredAndFirstNode(t *testing.T) {
	dir := t.TempDir()
	var list []string
	for i := range 101 {
		d := filepath.Join(dir, fmt.Sprint("d", i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		list = append(list, d)
	}
	geo := flags(t, "ec", "2+1", "fsync", "false")
	c, err := Open(Options{Nodes: list[:100], Flags: geo, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("z"), 20000)
	putGet(t, c, "/f", data)
	c.Close()
	c, err = Open(Options{Nodes: list, Flags: geo, Adopt: []string{"100"}})
	if err != nil {
		t.Fatalf("open with a 101st node: %v", err)
	}
	if ids := c.Nodes(); ids[5].ID != "05" || ids[100].ID != "100" {
		t.Errorf("ids %s and %s; want 05 and 100", ids[5].ID, ids[100].ID)
	}
	putGet(t, c, "/g", data)
	if _, err := c.Store().Stat(context.Background(), "/f"); err != nil {
		t.Errorf("the object written before the node was added: %v", err)
	}
	c.Close()

	// A cluster that an earlier version made with 101 nodes from the
	// start has three-digit ids in its markers, and keeps them.
	old := t.TempDir()
	list = list[:0]
	for i := range 101 {
		d := filepath.Join(old, fmt.Sprint("d", i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, MarkerName), []byte(fmt.Sprintf("node = %03d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
		list = append(list, d)
	}
	c, err = Open(Options{Nodes: list, Flags: geo, Create: true})
	if err != nil {
		t.Fatalf("open of a cluster with three-digit ids: %v", err)
	}
	if id := c.Nodes()[5].ID; id != "005" {
		t.Errorf("id %s; want 005", id)
	}
	c.Close()
}
