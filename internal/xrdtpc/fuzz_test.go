package xrdtpc

import (
	"net"
	"net/url"
	"strings"
	"testing"
)

// FuzzParseOpen: any CGI gives a role whose fields are well formed, or an
// error; never a panic. Also feeds tpc.org values to parseOrigin.
func FuzzParseOpen(f *testing.F) {
	for _, s := range []string{
		"",
		"tpc.key=k&tpc.dst=[::ffff:127.0.0.1]&tpc.stage=copy",
		"tpc.key=k&tpc.org=root.7164@[::ffff:127.0.0.1]",
		"oss.asize=3&tpc.dlg=h:1&tpc.dlgon=0&tpc.key=k&tpc.lfn=/f&tpc.spr=root&tpc.src=[::ffff:127.0.0.1]:31094&tpc.stage=copy&tpc.str=1&tpc.tpr=root",
		"tpc.key=k&tpc.dst=h&tpc.ttl=99999999999999999999",
		"tpc.key=a%26b&tpc.org=.@",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cgi string) {
		v, _ := url.ParseQuery(cgi)
		o, err := ParseOpen(v)
		if err != nil {
			return
		}
		switch o.Role {
		case RoleNone:
			if o != (Open{}) {
				t.Fatalf("no role but fields: %+v", o)
			}
			return
		case RoleDestination:
			if _, _, err := net.SplitHostPort(o.Src); err != nil || !strings.HasPrefix(o.Path, "/") {
				t.Fatalf("destination with src %q path %q", o.Src, o.Path)
			}
		case RoleRegister:
			if o.Dst == "" || o.TTL < 0 {
				t.Fatalf("registration %+v", o)
			}
		case RolePull:
			if user, _, host, err := parseOrigin(o.Origin); err == nil && (host == "" || strings.Contains(user, "@")) {
				t.Fatalf("origin %q parsed as user %q host %q", o.Origin, user, host)
			}
		}
		if o.Key == "" || strings.ContainsAny(o.Key, "&= ") {
			t.Fatalf("role %v with key %q", o.Role, o.Key)
		}
	})
}
