//go:build fault

package fault

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// netLab puts every node of a cluster on a host of its own: a network
// namespace with its own address on a bridge, which the gateway and the
// clients (in the test's namespace) reach as a remote host. A node's
// network can then fail apart from its process: fence drops every packet
// to and from it (nftables in its namespace), as a host that went off
// the network or a firewall that swallows its traffic would, where a
// SIGSTOPped process still has its kernel complete connections.
//
// It needs root, ip (iproute2) and nft (nftables); scripts/install-deps.sh
// installs the tools.
type netLab struct {
	t      testing.TB
	prefix string // of every name the lab creates
	subnet string // "10.213.N": the bridge is .1, node i is .(10+i)
	bridge string
	ns     []string
}

// newNetLab creates the bridge and n namespaces; t.Cleanup removes them
// (after the processes in them are killed: cleanups run in reverse).
func newNetLab(t testing.TB, n int) *netLab {
	t.Helper()
	if os.Geteuid() != 0 {
		// As every missing peer of the suite (needTool), a failure.
		t.Fatalf("network namespaces need root: run the fault suite as root")
	}
	needTool(t, "ip")
	needTool(t, "nft")
	id := os.Getpid() % 250
	l := &netLab{t: t, prefix: fmt.Sprintf("ecf%d", id), subnet: fmt.Sprintf("10.213.%d", id)}
	l.bridge = l.prefix + "br"
	l.remove() // what a killed earlier run of the same pid left
	t.Cleanup(l.remove)
	l.ip("link", "add", l.bridge, "type", "bridge")
	l.ip("addr", "add", l.subnet+".1/24", "dev", l.bridge)
	l.ip("link", "set", l.bridge, "up")
	for i := range n {
		ns := fmt.Sprintf("%s-n%d", l.prefix, i)
		veth := fmt.Sprintf("%sv%d", l.prefix, i)
		l.ns = append(l.ns, ns)
		l.ip("netns", "add", ns)
		l.ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
		l.ip("link", "set", veth, "master", l.bridge, "up")
		l.ip("-n", ns, "addr", "add", l.addr(i)+"/24", "dev", "eth0")
		l.ip("-n", ns, "link", "set", "eth0", "up")
		l.ip("-n", ns, "link", "set", "lo", "up")
	}
	return l
}

// addr is node i's address.
func (l *netLab) addr(i int) string { return fmt.Sprintf("%s.%d", l.subnet, 10+i) }

// exec is the command prefix that runs a program in node i's namespace.
func (l *netLab) exec(i int) []string { return []string{"ip", "netns", "exec", l.ns[i]} }

// fence drops every packet node i sends or receives, but for loopback.
func (l *netLab) fence(i int) {
	l.t.Helper()
	cmd := exec.Command("ip", "netns", "exec", l.ns[i], "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(`table inet ecfence {
	chain in { type filter hook input priority 0; policy drop; iifname "lo" accept; }
	chain out { type filter hook output priority 0; policy drop; oifname "lo" accept; }
}
`)
	if out, err := cmd.CombinedOutput(); err != nil {
		l.t.Fatalf("fence node %d: %v\n%s", i, err, out)
	}
}

// unfence lets node i's packets through again.
func (l *netLab) unfence(i int) {
	l.t.Helper()
	if out, err := exec.Command("ip", "netns", "exec", l.ns[i], "nft", "delete", "table", "inet", "ecfence").CombinedOutput(); err != nil {
		l.t.Fatalf("unfence node %d: %v\n%s", i, err, out)
	}
}

func (l *netLab) ip(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// remove deletes the lab's namespaces (their veths go with them) and its
// bridge, ignoring what is not there.
func (l *netLab) remove() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], l.prefix+"-n") {
			exec.Command("ip", "netns", "del", f[0]).Run()
		}
	}
	exec.Command("ip", "link", "del", l.bridge).Run()
}
