package netfence

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
)

// The fence refuses the nodes' addresses (by name or literal, loopback
// aliases of a node on loopback or on every address), link-local,
// unspecified and multicast addresses, and lets everything else through.
func TestFence(t *testing.T) {
	f := New([]string{"node1.example:1094", "10.0.0.7:1095", "127.0.0.1:21100", "[::]:21101", "bad-no-port"})
	f.lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
		if host == "node1.example" {
			return []netip.Addr{netip.MustParseAddr("192.168.1.5"), netip.MustParseAddr("2001:db8::5")}, nil
		}
		return nil, errors.New("no such host")
	}
	f.interfaces = func() ([]net.Addr, error) {
		return []net.Addr{&net.IPNet{IP: net.ParseIP("10.0.0.7"), Mask: net.CIDRMask(24, 32)}}, nil
	}
	for addr, fenced := range map[string]bool{
		"192.168.1.5:1094":          true,
		"[2001:db8::5]:1094":        true,
		"[::ffff:192.168.1.5]:1094": true,
		"192.168.1.5:1095":          false, // another port of the host
		"10.0.0.7:1095":             true,
		"10.0.0.8:1095":             false,
		"127.0.0.1:21100":           true,
		"[::1]:21100":               true,
		"127.0.0.1:21101":           true,
		"127.0.0.1:1094":            false, // a source on this host
		"169.254.169.254:80":        true,
		"[fe80::1]:80":              true,
		"0.0.0.0:80":                true,
		"224.0.0.1:80":              true,
		"8.8.8.8:443":               false,
		"not-an-address":            true,
	} {
		err := f.Check(addr)
		if (err != nil) != fenced || err != nil && !errors.Is(err, ErrFenced) {
			t.Errorf("Check(%s) = %v; want fenced %v", addr, err, fenced)
		}
	}
	var none *Fence
	if none.Check("127.0.0.1:21100") != nil || none.Check("169.254.169.254:80") == nil {
		t.Error("a nil fence must fence link-local addresses only")
	}
}

// A dial through the fence to a node is refused before connecting; one
// to another listener on loopback connects.
func TestFenceDial(t *testing.T) {
	node, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	f := New([]string{node.Addr().String()})
	ctx := context.Background()
	if c, err := f.DialContext(ctx, "tcp", node.Addr().String()); !errors.Is(err, ErrFenced) {
		if c != nil {
			c.Close()
		}
		t.Errorf("dial of the node: %v; want ErrFenced", err)
	}
	c, err := f.DialContext(ctx, "tcp", other.Addr().String())
	if err != nil {
		t.Fatalf("dial of another listener: %v", err)
	}
	c.Close()
}
