package xrdtpc

import (
	"context"
	"errors"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/xrootd"
)

func TestParseOpen(t *testing.T) {
	for _, tc := range []struct {
		cgi  string
		want Open
		err  bool
	}{
		{"", Open{}, false},
		{"oss.asize=5&tpc.stage=placement", Open{}, false},
		{"tpc.dst=host", Open{}, false}, // without a key: a plain open
		{"tpc.key=k1&tpc.dst=[::ffff:10.0.0.1]&tpc.stage=copy", Open{Role: RoleRegister, Key: "k1", Dst: "[::ffff:10.0.0.1]"}, false},
		{"tpc.key=k1&tpc.dst=h&tpc.ttl=30", Open{Role: RoleRegister, Key: "k1", Dst: "h", TTL: 30 * time.Second}, false},
		{"tpc.key=k1&tpc.dst=h&tpc.ttl=9227000000", Open{Role: RoleRegister, Key: "k1", Dst: "h", TTL: MaxTTL}, false}, // no overflow
		{"tpc.key=k1&tpc.org=root.7164@[::ffff:127.0.0.1]", Open{Role: RolePull, Key: "k1", Origin: "root.7164@[::ffff:127.0.0.1]"}, false},
		{"oss.asize=3&tpc.dlg=h:1&tpc.dlgon=0&tpc.key=k1&tpc.lfn=/f&tpc.spr=root&tpc.src=[::ffff:127.0.0.1]:31094&tpc.stage=copy&tpc.str=1&tpc.tpr=root",
			Open{Role: RoleDestination, Key: "k1", Src: "[::ffff:127.0.0.1]:31094", Path: "/f"}, false},
		{"tpc.key=k1&tpc.lfn=/f&tpc.spr=roots&tpc.src=h:1094", Open{Role: RoleDestination, Key: "k1", Src: "h:1094", Path: "/f", SrcTLS: true}, false},
		{"tpc.key=k1", Open{}, true},                         // no role
		{"tpc.key=k1&tpc.org=u.1@h&tpc.dst=h", Open{}, true}, // two roles
		{"tpc.key=k1&tpc.src=h&tpc.lfn=/f", Open{}, true},    // no port
		{"tpc.key=k1&tpc.src=h:1&tpc.lfn=f", Open{}, true},   // relative path
		{"tpc.key=k1&tpc.src=h:1&tpc.lfn=/f&tpc.spr=https", Open{}, true},
		{"tpc.src=h:1&tpc.lfn=/f", Open{}, true}, // no key
		{"tpc.key=k1&tpc.dst=h&tpc.ttl=-1", Open{}, true},
		// A path that would write the pull's CGI, and CGI given twice.
		{"tpc.key=k1&tpc.src=h:1&tpc.lfn=/f%3Ftpc.key%3Dx%26tpc.org%3Dv.1@h", Open{}, true},
		{"tpc.key=k1&tpc.src=h:1&tpc.lfn=/f%26tpc.org%3Dv.1@h", Open{}, true},
		{"tpc.key=k1&tpc.key=k2&tpc.dst=h", Open{}, true},
		{"tpc.key=k1&tpc.org=u.1@h&tpc.org=v.2@h", Open{}, true},
		{"tpc.key=k%261&tpc.dst=h", Open{}, true},
	} {
		v, err := url.ParseQuery(tc.cgi)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseOpen(v)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseOpen(%q) = %+v, %v; want %+v, error %v", tc.cgi, got, err, tc.want, tc.err)
		}
		if err != nil && !errors.Is(err, ErrConflict) {
			t.Errorf("ParseOpen(%q): %v does not wrap ErrConflict", tc.cgi, err)
		}
	}
}

func identity(user string, pid int32, addr string) xrootd.Identity {
	return xrootd.Identity{User: user, PID: pid, Remote: netip.MustParseAddrPort(addr)}
}

func TestOrigin(t *testing.T) {
	for _, tc := range []struct {
		id   xrootd.Identity
		want string
	}{
		{identity("root", 7164, "127.0.0.1:5000"), "root.7164@[::ffff:127.0.0.1]"},
		{identity("alice", 1, "[2001:db8::1]:5000"), "alice.1@[2001:db8::1]"},
	} {
		if got := Origin(tc.id); got != tc.want {
			t.Errorf("Origin(%+v) = %q, want %q", tc.id, got, tc.want)
		}
	}
}

// testKeys is a registry whose names resolve from a table.
func testKeys() *Keys {
	k := NewKeys()
	k.Wait = 200 * time.Millisecond
	k.Resolve = func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "dst.example.org":
			return []netip.Addr{netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("2001:db8::2")}, nil
		case "client.example.org":
			return []netip.Addr{netip.MustParseAddr("10.0.0.1")}, nil
		}
		return nil, errors.New("no such host")
	}
	return k
}

func TestClaim(t *testing.T) {
	client := identity("alice", 42, "10.0.0.1:4000")
	dst := netip.MustParseAddr("10.0.0.2")
	org := Origin(client)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		org    string
		path   string
		puller netip.Addr
		want   string // in the reason refused; "" for success
	}{
		{"match", org, "/f", dst, ""},
		{"match by names", "alice.42@client.example.org", "/f", netip.MustParseAddr("::ffff:10.0.0.2"), ""},
		{"other path", org, "/g", dst, "given for /f, not /g"},
		{"other pid", "alice.43@[::ffff:10.0.0.1]", "/f", dst, "client alice.42, not alice.43"},
		{"other user", "bob.42@[::ffff:10.0.0.1]", "/f", dst, "client alice.42, not bob.42"},
		{"other client host", "alice.42@[::ffff:10.0.0.9]", "/f", dst, "client at 10.0.0.1"},
		{"other puller", org, "/f", netip.MustParseAddr("10.0.0.3"), "destination dst.example.org, not 10.0.0.3"},
		{"malformed origin", "alice@host", "/f", dst, "not user.pid@host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := testKeys()
			var reasons []string
			k.Refused = func(_, _, _ string, _ netip.Addr, reason error) { reasons = append(reasons, reason.Error()) }
			release, err := k.Register(client, "key1", "/f", "dst.example.org", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			start := time.Now()
			err = k.Claim(ctx, "key1", tc.org, tc.path, tc.puller)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("claim: %v (%q)", err, reasons)
			case tc.want != "" && (err != ErrNotAuthorized || len(reasons) != 1 || !strings.Contains(reasons[0], tc.want)):
				t.Fatalf("claim: %v, refused for %q; want ErrNotAuthorized, refused for %q", err, reasons, tc.want)
			case tc.want != "" && time.Since(start) < k.Wait:
				t.Errorf("a refusal came after %v, before the wait of %v: it tells a registered key from an unknown one", time.Since(start), k.Wait)
			}
			// A key lets one pull in, and a pull that does not match
			// uses it up too.
			if err := k.Claim(ctx, "key1", org, "/f", dst); err != ErrNotAuthorized {
				t.Errorf("a claim of a used key: %v", err)
			}
		})
	}
}

func TestRegisterKeyInUse(t *testing.T) {
	k := testKeys()
	alice, bob := identity("alice", 42, "10.0.0.1:4000"), identity("bob", 7, "10.0.0.5:4000")
	if _, err := k.Register(alice, "key1", "/f", "h", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Register(bob, "key1", "/g", "h", 0); !errors.Is(err, ErrKeyInUse) {
		t.Errorf("another client's registration of a key: %v, want ErrKeyInUse", err)
	}
	if _, err := k.Register(alice, "key1", "/f", "h", 0); err != nil {
		t.Errorf("the same client registering its key again: %v", err)
	}
}

func TestClaimWaitsForItsRegistration(t *testing.T) {
	k := testKeys()
	k.Wait = 5 * time.Second
	client := identity("alice", 42, "10.0.0.1:4000")
	go func() {
		time.Sleep(50 * time.Millisecond)
		k.Register(client, "other", "/f", "10.0.0.2", 0)
		time.Sleep(50 * time.Millisecond)
		k.Register(client, "key1", "/f", "10.0.0.2", 0)
	}()
	start := time.Now()
	if err := k.Claim(context.Background(), "key1", Origin(client), "/f", netip.MustParseAddr("10.0.0.2")); err != nil {
		t.Fatalf("claim before its registration: %v", err)
	}
	if took := time.Since(start); took < 90*time.Millisecond {
		t.Errorf("claim returned after %v, before its registration", took)
	}
}

func TestClaimGivesUp(t *testing.T) {
	k := testKeys()
	client := identity("alice", 42, "10.0.0.1:4000")
	err := k.Claim(context.Background(), "never", Origin(client), "/f", netip.MustParseAddr("10.0.0.2"))
	if !errors.Is(err, ErrNotAuthorized) || len(k.waiters) != 0 || k.waiting != 0 {
		t.Errorf("claim of a key never registered: %v; %d keys still waited for, %d pulls", err, len(k.waiters), k.waiting)
	}
	// A released registration (the client closed the source) and an
	// expired one let nothing in.
	release, _ := k.Register(client, "key1", "/f", "10.0.0.2", 0)
	release()
	if err := k.Claim(context.Background(), "key1", Origin(client), "/f", netip.MustParseAddr("10.0.0.2")); !errors.Is(err, ErrNotAuthorized) {
		t.Errorf("claim of a released key: %v", err)
	}
	now := time.Now()
	k.Now = func() time.Time { return now }
	k.Register(client, "key2", "/f", "10.0.0.2", time.Second)
	now = now.Add(2 * time.Second)
	if err := k.Claim(context.Background(), "key2", Origin(client), "/f", netip.MustParseAddr("10.0.0.2")); !errors.Is(err, ErrNotAuthorized) {
		t.Errorf("claim of an expired key: %v", err)
	}
	// A cancelled claim returns at once.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	k.Wait = time.Hour
	if err := k.Claim(ctx, "key3", Origin(client), "/f", netip.MustParseAddr("10.0.0.2")); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled claim: %v", err)
	}
}
