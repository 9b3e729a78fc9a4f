package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/object"
)

func TestMarkerNameIsReserved(t *testing.T) {
	if "/"+MarkerName != object.NodeMarker || !object.Reserved("/"+MarkerName) {
		t.Fatalf("marker %q is not the object layer's reserved %q", MarkerName, object.NodeMarker)
	}
}

// markedCluster opens a cluster of n empty local directories (2+1 for
// 3), writes an object and closes it; it returns the directories.
func markedCluster(t *testing.T, n int) []string {
	t.Helper()
	base := t.TempDir()
	var dirs []string
	for i := range n {
		d := filepath.Join(base, fmt.Sprint("n", i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	c := openNodes(t, dirs, nil)
	putGet(t, c, "/obj", bytes.Repeat([]byte("marked "), 1<<16))
	c.Close()
	return dirs
}

func openNodes(t *testing.T, dirs, adopt []string) *Cluster {
	t.Helper()
	flags := ec21(t)
	// A quorum of 2 of 3: writes go on, degraded, with a node down.
	for k, v := range map[string]string{KeyFsync: "false", KeyWriteQuorum: "2"} {
		if err := flags.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	c, err := Open(Options{Nodes: dirs, Flags: flags, Adopt: adopt})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The first opening marks every empty node directory of a new cluster
// with its node's id; listings and the object namespace do not show the
// marker.
func TestNewClusterMarksItsDirectories(t *testing.T) {
	dirs := markedCluster(t, 3)
	for i, d := range dirs {
		m, err := readMarker(d)
		if err != nil || !m.marked || m.node != fmt.Sprintf("%02d", i) {
			t.Errorf("%s: marker %+v, %v; want node %02d", d, m, err, i)
		}
	}
	c := openNodes(t, dirs, nil)
	defer c.Close()
	for _, n := range c.Nodes() {
		if n.Err != nil {
			t.Errorf("node %s down: %v", n.ID, n.Err)
		}
	}
	ctx := context.Background()
	entries, err := c.Store().List(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name != "obj" {
		t.Errorf("listing of /: %+v, want only obj", entries)
	}
	if _, err := c.Store().Create(ctx, object.NodeMarker, nil); !errors.Is(err, node.ErrPath) {
		t.Errorf("create %s: %v, want ErrPath", object.NodeMarker, err)
	}
}

// A node directory found empty and unmarked in a cluster in use is the
// mount point of a disk that is not mounted: the node stays down, and
// nothing is written there; it comes up once the disk is back (marked),
// or once adopted as a new disk.
func TestEmptyUnmarkedDirectoryIsRefused(t *testing.T) {
	defer func(d time.Duration) { localRetry = d }(localRetry)
	localRetry = 20 * time.Millisecond
	dirs := markedCluster(t, 3)
	// The disk of node 01 "unmounts": its mount point is an empty
	// directory (with a file system's lost+found, say, as an empty disk).
	disk := dirs[1] + ".disk"
	if err := os.Rename(dirs[1], disk); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dirs[1], "lost+found"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := openNodes(t, dirs, nil)
	infos := c.Nodes()
	if !errors.Is(infos[1].Err, ErrUnmarked) || !strings.Contains(infos[1].Err.Error(), "ecstore repair --adopt 01") {
		t.Fatalf("node 01 on an empty unmarked directory: %v, want ErrUnmarked with the adopt hint", infos[1].Err)
	}
	data := bytes.Repeat([]byte("degraded "), 1<<16)
	putGet(t, c, "/new", data) // written degraded, 2 of 3 archives
	time.Sleep(2 * localRetry)
	putGet(t, c, "/new2", data)
	if names, _ := os.ReadDir(dirs[1]); len(names) != 1 {
		t.Errorf("the refused directory holds %d entries, want only lost+found", len(names))
	}
	// The disk comes back: the node is used again without a restart.
	if err := os.RemoveAll(dirs[1]); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(disk, dirs[1]); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := infos[1].Node.Space(context.Background())
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 01 still down once its disk is back: %v", err)
		}
		time.Sleep(localRetry)
	}
	c.Close()

	// A new, empty disk for node 01: refused until adopted.
	if err := os.RemoveAll(dirs[1]); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dirs[1], 0o755); err != nil {
		t.Fatal(err)
	}
	c = openNodes(t, dirs, nil)
	if !errors.Is(c.Nodes()[1].Err, ErrUnmarked) {
		t.Errorf("new disk before adoption: %v, want ErrUnmarked", c.Nodes()[1].Err)
	}
	c.Close()
	c = openNodes(t, dirs, []string{"01"})
	defer c.Close()
	if err := c.Nodes()[1].Err; err != nil {
		t.Fatalf("adopted node: %v", err)
	}
	if m, err := readMarker(dirs[1]); err != nil || m.node != "01" {
		t.Errorf("adopted directory's marker: %+v, %v", m, err)
	}
}

// Directories marked as other nodes' (disks mounted at each other's
// places, a reordered node list) are refused.
func TestSwappedDirectoriesAreRefused(t *testing.T) {
	dirs := markedCluster(t, 3)
	c := openNodes(t, []string{dirs[0], dirs[2], dirs[1]}, nil)
	defer c.Close()
	for _, i := range []int{1, 2} {
		if err := c.Nodes()[i].Err; !errors.Is(err, ErrWrongNode) {
			t.Errorf("node %02d on another node's directory: %v, want ErrWrongNode", i, err)
		}
	}
	if err := c.Nodes()[0].Err; err != nil {
		t.Errorf("node 00: %v", err)
	}
}

// Directories that hold data from before markers existed are marked and
// used; so is an empty one beside them only when adopted.
func TestUnmarkedDataIsAdopted(t *testing.T) {
	dirs := markedCluster(t, 3)
	for _, d := range dirs {
		if err := os.Remove(filepath.Join(d, MarkerName)); err != nil {
			t.Fatal(err)
		}
	}
	c := openNodes(t, dirs, nil)
	defer c.Close()
	for i, d := range dirs {
		if err := c.Nodes()[i].Err; err != nil {
			t.Errorf("node %02d: %v", i, err)
		}
		if m, err := readMarker(d); err != nil || m.node != fmt.Sprintf("%02d", i) {
			t.Errorf("%s: marker %+v, %v", d, m, err)
		}
	}
}

func TestAdoptNeedsALocalNode(t *testing.T) {
	dirs := markedCluster(t, 3)
	flags := ec21(t)
	if _, err := Open(Options{Nodes: dirs, Flags: flags, Adopt: []string{"07"}}); !errors.Is(err, ErrUsage) {
		t.Errorf("adopting node 07 of 3: %v, want ErrUsage", err)
	}
}

func TestParseMarker(t *testing.T) {
	for _, tc := range []struct {
		in, id string
		ok     bool
	}{
		{"node = 03\n", "03", true},
		{"# comment\nnode=12", "12", true},
		{"", "", false},
		{"node =\n", "", false},
		{"nodes = 1\n", "", false},
	} {
		id, err := parseMarker([]byte(tc.in))
		if id != tc.id || (err == nil) != tc.ok {
			t.Errorf("parseMarker(%q) = %q, %v", tc.in, id, err)
		}
	}
}

// dataServer is a root:// data server over dir for a test; stop ends it
// and the connections to it.
type dataServer struct {
	addr string
	dir  string
	stop func()
}

func startDataServer(t *testing.T, addr, dir string) *dataServer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return &dataServer{addr: ln.Addr().String(), dir: dir, stop: serveDir(t, ln, dir)}
}

// remoteCluster serves n new directories and returns their servers and
// the cluster's node URLs (prefix /data).
func remoteCluster(t *testing.T, n int) ([]*dataServer, []string) {
	t.Helper()
	var (
		srvs []*dataServer
		urls []string
	)
	for range n {
		s := startDataServer(t, "127.0.0.1:0", t.TempDir())
		srvs = append(srvs, s)
		urls = append(urls, "root://"+s.addr+"//data")
	}
	return srvs, urls
}

// Remote nodes' roots are marked like local directories; one whose root
// is empty and unmarked in a cluster in use (its server's disk not
// mounted) is refused and takes no archives.
func TestEmptyRemoteRootIsRefused(t *testing.T) {
	srvs, urls := remoteCluster(t, 3)
	c := openNodes(t, urls, nil)
	putGet(t, c, "/obj", bytes.Repeat([]byte("remote marked "), 1<<15))
	c.Close()
	for i, s := range srvs {
		m, err := readMarker(filepath.Join(s.dir, "data"))
		if err != nil || m.node != fmt.Sprintf("%02d", i) {
			t.Errorf("server %d's root: marker %+v, %v", i, m, err)
		}
	}
	root1 := filepath.Join(srvs[1].dir, "data")
	if err := os.RemoveAll(root1); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(root1, 0o755); err != nil {
		t.Fatal(err)
	}
	c = openNodes(t, urls, nil)
	defer c.Close()
	if err := c.Nodes()[1].Err; !errors.Is(err, ErrUnmarked) {
		t.Fatalf("node 01 with an empty root: %v, want ErrUnmarked", err)
	}
	putGet(t, c, "/new", bytes.Repeat([]byte("degraded "), 1<<15))
	if names, _ := os.ReadDir(root1); len(names) != 0 {
		t.Errorf("the refused root holds %d entries", len(names))
	}
	if _, err := c.Nodes()[1].Node.Space(context.Background()); !errors.Is(err, ErrUnmarked) {
		t.Errorf("space of the refused node: %v, want ErrUnmarked", err)
	}
}

// A remote node whose server comes back without its disk while the
// gateway runs (a reboot with the disk not mounted) is refused by the
// new connection, even in a cluster that was new when it opened: its
// marker had been seen.
func TestRemoteServerBackWithoutItsDisk(t *testing.T) {
	srvs, urls := remoteCluster(t, 3)
	c := openNodes(t, urls, nil)
	defer c.Close()
	data := bytes.Repeat([]byte("before the reboot "), 1<<15)
	putGet(t, c, "/a", data)
	srvs[1].stop()
	empty := t.TempDir()
	if err := os.Mkdir(filepath.Join(empty, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	startDataServer(t, srvs[1].addr, empty)
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := c.Nodes()[1].Node.Space(ctx)
		if errors.Is(err, ErrUnmarked) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 01 back without its disk: space %v, want ErrUnmarked", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	putGet(t, c, "/b", data)
	if names, _ := os.ReadDir(filepath.Join(empty, "data")); len(names) != 0 {
		t.Errorf("the restarted server's empty root got %d entries", len(names))
	}
}
