//go:build fault

package fault

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/testport"
)

// Geometry of every cluster of the suite: 8+2 with 1 MiB chunks over
// twelve nodes (two spares).
const (
	geoK      = 8
	geoM      = 2
	numNodes  = 12
	chunkSize = 1 << 20
	mib       = 1 << 20
	kib       = 1 << 10
	// diskSize is each node's tmpfs. Placement avoids nodes with less than
	// 64 MiB free except as a last resort, so this leaves room for tests.
	diskSize = 192 * mib
)

// kind is how the cluster's nodes are run.
type kind int

const (
	// remoteNodes: one "ecstore node" process per node directory, the
	// gateway reaching them as root://127.0.0.1:PORT//data.
	remoteNodes kind = iota
	// localDirs: an embedded cluster (--data DIR) whose twelve node
	// directories the gateway opens itself. A node "dies" when its
	// directory disappears (the symbolic link DIR/nodes/NN is removed, as
	// an unmounted disk) and the gateway is restarted, since a running
	// gateway keeps the directory it opened.
	localDirs
)

func (k kind) String() string {
	if k == remoteNodes {
		return "nodes"
	}
	return "local"
}

// nodeState is what the suite did to a node.
type nodeState int

const (
	nodeUp      nodeState = iota
	nodeKilled            // SIGKILLed process (remoteNodes)
	nodeStopped           // SIGSTOPped process (remoteNodes)
	nodeOffline           // directory gone, gateway restarted (localDirs)
	nodeFenced            // its network drops every packet (netns clusters)
)

func (s nodeState) String() string {
	return [...]string{"up", "killed", "stopped", "offline", "fenced"}[s]
}

// storageNode is one node of a cluster.
type storageNode struct {
	id    string // "00", "01", ...: its position in the node list
	disk  string // the tmpfs mount point
	root  string // the directory that holds the node's files (archives at root/<object path>)
	link  string // localDirs: DIR/nodes/NN, a symbolic link to root
	host  string // remoteNodes: the address it listens on
	port  int    // remoteNodes
	proc  *proc  // remoteNodes
	state nodeState
	full  bool // its disk was filled up
}

// available reports whether the node answers (a full node still serves
// reads).
func (n *storageNode) available() bool { return n.state == nodeUp }

// faulty reports whether the node counts against the M faults a cluster
// may have at once.
func (n *storageNode) faulty() bool { return n.state != nodeUp || n.full }

// clusterOptions configure newCluster.
type clusterOptions struct {
	kind kind
	// heal runs the gateway's background healer (--heal-rate 50MB);
	// otherwise --heal=false.
	heal bool
	// netns puts every node (remoteNodes) on a host of its own (netLab),
	// so that its network can be fenced.
	netns bool
}

// cluster is a running gateway over twelve nodes.
type cluster struct {
	t      *testing.T
	kind   kind
	work   string
	nodes  []*storageNode
	tmpfs  bool     // node disks are tmpfs mounts (the disk-full fault works)
	flags  []string // cluster flags for ecstore CLI commands
	gwArgs []string
	gw     *proc
	lab    *netLab // opts.netns
	addr   string  // host:port of the gateway's root:// listener
	url    string  // root://host:port
}

var (
	nodeServingRE = regexp.MustCompile(`node serving .* on root://(\S+)`)
	servingRE     = regexp.MustCompile(`ecstore: serving root://(\S+) \(`)
)

// newCluster starts twelve nodes (each on its own tmpfs) and a gateway
// over them, all on loopback.
func newCluster(t *testing.T, opts clusterOptions) *cluster {
	t.Helper()
	needTool(t, "xrdcp")
	needTool(t, "xrdfs")
	c := &cluster{t: t, kind: opts.kind, work: t.TempDir(), tmpfs: true}
	start := time.Now()
	for i := range numNodes {
		n := &storageNode{id: fmt.Sprintf("%02d", i), disk: filepath.Join(c.work, "disks", fmt.Sprintf("%02d", i))}
		if err := os.MkdirAll(n.disk, 0o755); err != nil {
			t.Fatal(err)
		}
		if !mountTmpfs(t, n.disk, diskSize) {
			c.tmpfs = false
		}
		c.nodes = append(c.nodes, n)
	}
	if !c.tmpfs {
		t.Logf("node disks are plain directories (not root, or no tmpfs): the disk-full fault is skipped")
	}
	switch c.kind {
	case remoteNodes:
		if opts.netns {
			c.lab = newNetLab(t, numNodes)
		}
		start := func(i int, n *storageNode) {
			var wrap []string
			if c.lab != nil {
				// A host of its own: the port is its alone.
				n.host, n.port, wrap = c.lab.addr(i), 1094, c.lab.exec(i)
			} else {
				n.host, n.port = "127.0.0.1", testport.Free(t)
			}
			n.proc = startProcIn(t, c.work, "node"+n.id, wrap, "node", "--dir", n.disk,
				"--addr", net.JoinHostPort(n.host, strconv.Itoa(n.port)), "--fsync=false")
		}
		for i, n := range c.nodes {
			n.root = filepath.Join(n.disk, "data")
			start(i, n)
		}
		var urls []string
		for i, n := range c.nodes {
			for attempt := 1; ; attempt++ {
				_, err := n.proc.waitLog(0, nodeServingRE, 20*time.Second)
				if err == nil {
					break
				}
				// The free port was taken before the node bound it: another.
				if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
					t.Fatal(err)
				}
				t.Logf("node %s: port %d taken meanwhile; trying another", n.id, n.port)
				start(i, n)
			}
			urls = append(urls, fmt.Sprintf("root://%s//data", net.JoinHostPort(n.host, strconv.Itoa(n.port))))
		}
		c.flags = []string{"--nodes", strings.Join(urls, ","), "--ec", "8+2", "--spares", "2", "--fsync=false"}
	case localDirs:
		data := filepath.Join(c.work, "cluster")
		if err := os.MkdirAll(filepath.Join(data, "nodes"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range c.nodes {
			n.root = filepath.Join(n.disk, "root")
			n.link = filepath.Join(data, "nodes", n.id)
			if err := os.Mkdir(n.root, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(n.root, n.link); err != nil {
				t.Fatal(err)
			}
		}
		c.flags = []string{"--data", data, "--fsync=false"}
		// The first mkdir creates the embedded cluster over the links.
		mustRun(t, time.Minute, ecstoreBin, "mkdir", "--data", data, "--ec", "8+2", "--spares", "2", "--fsync=false", "/setup")
	}
	port := testport.Free(t)
	c.gwArgs = append([]string{"serve", "--root-addr", fmt.Sprintf("127.0.0.1:%d", port), "--metrics-addr="}, c.flags...)
	if opts.heal {
		c.gwArgs = append(c.gwArgs, "--heal", "--heal-rate", "50MB")
	} else {
		c.gwArgs = append(c.gwArgs, "--heal=false")
	}
	c.gw = startProc(t, c.work, "gateway", c.gwArgs...)
	c.waitGateway(0)
	t.Logf("cluster %s: gateway %s over %d nodes (8+2, 2 spares, --fsync=false, heal %v), up in %v",
		c.kind, c.url, numNodes, opts.heal, time.Since(start).Round(time.Millisecond))
	return c
}

// waitGateway waits for the gateway's "serving" line after log offset
// from.
func (c *cluster) waitGateway(from int64) {
	c.t.Helper()
	m, err := c.gw.waitLog(from, servingRE, 30*time.Second)
	if err != nil {
		c.t.Fatal(err)
	}
	c.addr = m[1]
	c.url = "root://" + c.addr
}

// restartGateway kills the gateway with SIGKILL and starts it again.
func (c *cluster) restartGateway() {
	c.t.Helper()
	c.gw.kill()
	from := c.gw.logSize()
	if err := c.gw.restart(); err != nil {
		c.t.Fatal(err)
	}
	c.waitGateway(from)
}

// obj returns the root:// URL of an object on the gateway.
func (c *cluster) obj(path string) string { return c.url + "/" + path }

// cli runs an ecstore subcommand on the cluster (flags after the command
// name, then args).
func (c *cluster) cli(timeout time.Duration, name string, args ...string) result {
	return run(timeout, ecstoreBin, append(append([]string{name}, c.flags...), args...)...)
}

// archive returns the file holding node i's archive of an object.
func (c *cluster) archive(i int, path string) string {
	return filepath.Join(c.nodes[i].root, filepath.FromSlash(strings.TrimPrefix(path, "/")))
}

// nodeIndex returns the position of node id.
func (c *cluster) nodeIndex(id string) int {
	i, err := strconv.Atoi(id)
	if err != nil || i < 0 || i >= len(c.nodes) {
		c.t.Fatalf("bad node id %q", id)
	}
	return i
}

// faulty returns how many nodes are faulty.
func (c *cluster) faulty() int {
	n := 0
	for _, nd := range c.nodes {
		if nd.faulty() {
			n++
		}
	}
	return n
}

// kill takes node i down: SIGKILL of its process, or (localDirs) its
// directory disappears and the gateway restarts without it.
func (c *cluster) kill(i int) {
	c.t.Helper()
	n := c.nodes[i]
	switch c.kind {
	case remoteNodes:
		n.proc.kill()
		n.state = nodeKilled
	case localDirs:
		if err := os.Remove(n.link); err != nil {
			c.t.Fatal(err)
		}
		n.state = nodeOffline
		c.restartGateway()
	}
}

// stop hangs node i with SIGSTOP (remoteNodes only).
func (c *cluster) stop(i int) {
	c.t.Helper()
	if err := c.nodes[i].proc.stop(); err != nil {
		c.t.Fatal(err)
	}
	c.nodes[i].state = nodeStopped
}

// fence cuts node i off the network (a netns cluster): its process runs
// on, but every packet to and from it is dropped.
func (c *cluster) fence(i int) {
	c.t.Helper()
	c.lab.fence(i)
	c.nodes[i].state = nodeFenced
}

// revive brings node i back: SIGCONT, a restart of its process, its
// network back, or its directory back and a gateway restart.
func (c *cluster) revive(i int) {
	c.t.Helper()
	n := c.nodes[i]
	switch n.state {
	case nodeFenced:
		c.lab.unfence(i)
	case nodeStopped:
		if err := n.proc.cont(); err != nil {
			c.t.Fatal(err)
		}
	case nodeKilled:
		from := n.proc.logSize()
		if err := n.proc.restart(); err != nil {
			c.t.Fatal(err)
		}
		if _, err := n.proc.waitLog(from, nodeServingRE, 20*time.Second); err != nil {
			c.t.Fatal(err)
		}
	case nodeOffline:
		if err := os.Symlink(n.root, n.link); err != nil {
			c.t.Fatal(err)
		}
		n.state = nodeUp
		c.restartGateway()
	}
	n.state = nodeUp
}

// fillPath is the file that fills node i's disk, outside the node's
// files.
func (c *cluster) fillPath(i int) string { return filepath.Join(c.nodes[i].disk, "fill") }

// fill allocates all but leave bytes of node i's disk.
func (c *cluster) fill(i int, leave int64) error {
	if !c.tmpfs {
		return fmt.Errorf("node disks are not tmpfs mounts")
	}
	free, err := freeBytes(c.nodes[i].disk)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(c.fillPath(i), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if n := free - leave; n > 0 {
		if err := syscall.Fallocate(int(f.Fd()), 0, 0, n); err != nil {
			return fmt.Errorf("fallocate %d bytes on %s: %w", n, c.nodes[i].disk, err)
		}
	}
	c.nodes[i].full = true
	return nil
}

// unfill frees node i's disk.
func (c *cluster) unfill(i int) {
	c.t.Helper()
	if err := os.Remove(c.fillPath(i)); err != nil && !os.IsNotExist(err) {
		c.t.Fatal(err)
	}
	c.nodes[i].full = false
}

// healAll revives every node and frees every disk.
func (c *cluster) healAll() {
	c.t.Helper()
	restart := false
	for i, n := range c.nodes {
		if n.full {
			c.unfill(i)
		}
		switch n.state {
		case nodeStopped, nodeKilled:
			c.revive(i)
		case nodeOffline:
			if err := os.Symlink(n.root, n.link); err != nil {
				c.t.Fatal(err)
			}
			n.state = nodeUp
			restart = true
		}
	}
	if restart {
		c.restartGateway()
	}
}

// describe lists the faulty nodes, for logs.
func (c *cluster) describe() string {
	var parts []string
	for _, n := range c.nodes {
		if n.faulty() {
			s := n.state.String()
			if n.full {
				s += "+full"
			}
			parts = append(parts, n.id+":"+s)
		}
	}
	if len(parts) == 0 {
		return "all nodes up"
	}
	return strings.Join(parts, " ")
}

// tempFiles lists the temporary files (".NAME.ecstore-tmp.SUFFIX") on
// every node's disk, by node id.
// filesOf describes what each node holds for path, for a failure's
// report: the archive (with its size and time), temporary files and
// tombstones of its name in its directory.
func (c *cluster) filesOf(path string) string {
	dir, base := filepath.Split(strings.TrimPrefix(path, "/"))
	var b strings.Builder
	for _, n := range c.nodes {
		entries, err := os.ReadDir(filepath.Join(n.root, dir))
		if err != nil {
			fmt.Fprintf(&b, "  node %s: %v\n", n.id, err)
			continue
		}
		var held []string
		for _, e := range entries {
			if name := e.Name(); name == base || strings.Contains(name, "."+base+".") || strings.HasPrefix(name, base+".") {
				desc := name
				if fi, err := e.Info(); err == nil {
					desc = fmt.Sprintf("%s (%d bytes, %s)", name, fi.Size(), fi.ModTime().Format("15:04:05.000"))
				}
				held = append(held, desc)
			}
		}
		fmt.Fprintf(&b, "  node %s: %s\n", n.id, strings.Join(held, ", "))
	}
	return b.String()
}

func (c *cluster) tempFiles() map[string][]string {
	out := map[string][]string{}
	for _, n := range c.nodes {
		_ = filepath.Walk(n.root, func(p string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() && strings.HasPrefix(fi.Name(), ".") && strings.Contains(fi.Name(), ".ecstore-tmp.") {
				rel, _ := filepath.Rel(n.root, p)
				out[n.id] = append(out[n.id], "/"+filepath.ToSlash(rel))
			}
			return nil
		})
	}
	return out
}
