package xrootd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// DefaultRedirects is how many kXR_redirect answers xrdcp follows for one
// request (XRD_REDIRECTLIMIT); a tool that may be pointed at a redirector
// (an XRootD manager, xrootd + cmsd) sets DialOptions.Redirects to it.
const DefaultRedirects = 16

// ErrTooManyRedirects reports a request still redirected after
// DialOptions.Redirects hops: a redirect loop, or a cluster too deep.
var ErrTooManyRedirects = errors.New("xrootd: too many redirects")

// target returns where the redirect leads: host:port, whether a roots://
// URL asked for TLS, and the opaque CGI to append to the request's path.
// The body is "host[?opaque[?token]]" (XProtocol.hh,
// ServerResponseBody_Redirect) with port > 0, or port 0 for the default
// port, or a URL with port < 0; the token, which goes with the login at
// the new server, is not used (the login sends this client's own).
func (e *RedirectError) target() (addr, opaque string, secure bool, err error) {
	host, rest, _ := strings.Cut(e.Host, "?")
	opaque, _, _ = strings.Cut(rest, "?")
	switch {
	case e.Port < 0:
		u, perr := url.Parse(e.Host)
		if perr != nil {
			return "", "", false, fmt.Errorf("%w: kXR_redirect to URL %q: %v", ErrMalformed, e.Host, perr)
		}
		switch u.Scheme {
		case "root", "xroot":
		case "roots", "xroots":
			secure = true
		default:
			return "", "", false, fmt.Errorf("%w (a redirect to a %s:// URL is not followed)", e, u.Scheme)
		}
		host, opaque = u.Host, u.RawQuery
		if _, _, err := net.SplitHostPort(host); err == nil {
			return host, opaque, secure, nil
		}
		return net.JoinHostPort(strings.Trim(host, "[]"), "1094"), opaque, secure, nil
	case e.Port == 0:
		return net.JoinHostPort(strings.Trim(host, "[]"), "1094"), opaque, false, nil
	case e.Port > 65535:
		return "", "", false, fmt.Errorf("%w: kXR_redirect to port %d", ErrMalformed, e.Port)
	}
	if host == "" {
		return "", "", false, fmt.Errorf("%w: kXR_redirect to no host", ErrMalformed)
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(int(e.Port))), opaque, false, nil
}

// addCGI appends the CGI cgi to path, which may carry CGI already.
func addCGI(path, cgi string) string {
	cgi = strings.TrimLeft(cgi, "?&")
	if cgi == "" {
		return path
	}
	if strings.Contains(path, "?") {
		return path + "&" + cgi
	}
	return path + "?" + cgi
}

// redirected returns req as it is sent where a redirect leads, with the
// redirect's opaque CGI appended to its path; ok is false for a request
// that cannot be sent elsewhere: one on an open file (its handle is the
// redirecting server's), or one this client does not know to be about a
// path.
func redirected(req Request, opaque string) (_ Request, ok bool) {
	switch r := req.(type) {
	case *PingRequest:
		return r, true
	case *StatRequest:
		if r.Path == "" {
			return nil, false
		}
		n := *r
		n.Path = addCGI(r.Path, opaque)
		return &n, true
	case *TruncateRequest:
		if r.Path == "" {
			return nil, false
		}
		n := *r
		n.Path = addCGI(r.Path, opaque)
		return &n, true
	case *FattrRequest:
		if r.Path == "" {
			return nil, false
		}
		n := *r
		n.Path = addCGI(r.Path, opaque)
		return &n, true
	case *OpenRequest:
		n := *r
		n.Path = addCGI(r.Path, opaque)
		return &n, true
	case *DirlistRequest:
		n := *r
		n.Path = addCGI(r.Path, opaque)
		return &n, true
	case *MkdirRequest:
		n := *r
		n.Path = addCGI(r.Path, opaque)
		return &n, true
	case *RmRequest:
		n := *r
		n.Path = addCGI(r.Path, opaque)
		return &n, true
	case *RmdirRequest:
		n := *r
		n.Path = addCGI(r.Path, opaque)
		return &n, true
	case *ChmodRequest:
		n := *r
		n.Path = addCGI(r.Path, opaque)
		return &n, true
	case *LocateRequest:
		n := *r
		n.Path = addCGI(r.Path, opaque)
		return &n, true
	case *MvRequest:
		n := *r
		n.Source = addCGI(r.Source, opaque)
		return &n, true
	case *QueryRequest:
		switch r.InfoType {
		case QueryConfig, QueryStats:
			return r, true
		case QueryCksum, QuerySpace, QueryXattr, QueryOpaqueFile:
			if r.Handle != (FileHandle{}) {
				return nil, false
			}
			n := *r
			n.Args = []byte(addCGI(string(r.Args), opaque))
			return &n, true
		}
	}
	return nil, false
}

// redirectClient returns the connection to addr, where a redirect of a
// request to c led: c itself, or one of c's connections to the servers
// its redirects led to, dialled on first use (and again once it failed)
// with c's options, TLS too when secure. They close with c.
func (c *Client) redirectClient(ctx context.Context, addr string, secure bool) (*Client, error) {
	secure = secure || c.opts.WantTLS
	if addr == c.addr && secure == c.opts.WantTLS {
		return c, nil
	}
	key := addr
	if secure {
		key = "roots://" + addr
	}
	select {
	case c.rdial <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.done:
		return nil, c.unsentErr()
	}
	defer func() { <-c.rdial }()
	c.rmu.Lock()
	old := c.redir[key]
	c.rmu.Unlock()
	if old != nil && old.Err() == nil {
		return old, nil
	}
	o := c.opts
	o.Redirects = 0 // c follows the hops
	if secure {
		o.WantTLS, o.AbleTLS = true, true
	}
	sub, err := Dial(ctx, addr, &o)
	if err != nil {
		return nil, fmt.Errorf("redirected to %s: %w", addr, err)
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.Err() != nil {
		// Closed meanwhile.
		sub.Close()
		return nil, c.unsentErr()
	}
	if old != nil {
		old.Close()
	}
	if c.redir == nil {
		c.redir = map[string]*Client{}
	}
	c.redir[key] = sub
	return sub, nil
}

// closeRedirected closes the connections that c's redirects led to.
func (c *Client) closeRedirected() {
	c.rmu.Lock()
	subs := c.redir
	c.redir = nil
	c.rmu.Unlock()
	for _, sub := range subs {
		sub.Close()
	}
}

// follow sends req, and again where each kXR_redirect answering it
// leads, at most DialOptions.Redirects times; it returns the connection
// that gave the final answer. send is one round trip of a request on a
// connection.
func (c *Client) follow(ctx context.Context, req Request, send func(at *Client, req Request) error) (*Client, error) {
	at, orig := c, req
	for hop := 0; ; hop++ {
		err := send(at, req)
		re, ok := err.(*RedirectError)
		if !ok || c.opts.Redirects <= 0 {
			return at, err
		}
		if hop >= c.opts.Redirects {
			return at, fmt.Errorf("%w: still redirected after %d redirects (a redirect loop?): %w", ErrTooManyRedirects, hop, re)
		}
		addr, opaque, secure, err := re.target()
		if err != nil {
			return at, err
		}
		next, ok := redirected(orig, opaque)
		if !ok {
			return at, fmt.Errorf("%v is not sent where %s redirects it: %w", orig.RequestID(), at.addr, re)
		}
		c.log.Debug("xrootd request redirected", "req", orig.RequestID().String(), "from", at.addr, "to", addr, "opaque", opaque)
		if at, err = c.redirectClient(ctx, addr, secure); err != nil {
			return c, err
		}
		req = next
	}
}

// DirlistCluster lists directory path as Dirlist does, also on a
// redirector (a server that answers kXR_protocol with kXR_isManager, an
// XRootD manager), which lists no directory of its own: there, with
// Redirects allowed, it lists path on every data server that kXR_locate
// finds it on and merges the entries by name, as xrdfs ls does. The
// entries are sorted by name.
func (c *Client) DirlistCluster(ctx context.Context, path string, withStat bool) ([]FileInfo, error) {
	if c.proto.Flags&FlagIsManager == 0 || c.opts.Redirects <= 0 {
		return c.Dirlist(ctx, path, withStat)
	}
	servers, err := c.locateServers(ctx, c, path, c.opts.Redirects)
	if err != nil {
		return nil, fmt.Errorf("xrootd: dirlist %s: %w", path, err)
	}
	seen := map[string]bool{}
	var out []FileInfo
	var notFound error
	for _, s := range servers {
		at, err := c.redirectClient(ctx, s, false)
		if err != nil {
			return nil, fmt.Errorf("xrootd: dirlist %s: %w", path, err)
		}
		list, err := at.Dirlist(ctx, path, withStat)
		if errors.Is(err, fs.ErrNotExist) {
			notFound = err
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("xrootd: dirlist %s on %s: %w", path, s, err)
		}
		for _, fi := range list {
			if !seen[fi.Name] {
				seen[fi.Name] = true
				out = append(out, fi)
			}
		}
	}
	if len(seen) == 0 && notFound != nil {
		return nil, notFound
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// locateServers returns the data servers (host:port) that at's kXR_locate
// of path names, asking the managers it names in turn, depth levels
// deep at most.
func (c *Client) locateServers(ctx context.Context, at *Client, path string, depth int) ([]string, error) {
	raw, err := at.Locate(ctx, path)
	if err != nil {
		return nil, err
	}
	var servers []string
	for _, ent := range strings.Fields(raw) {
		if len(ent) < 3 {
			return nil, fmt.Errorf("%w: kXR_locate answer %q", ErrMalformed, raw)
		}
		addr, err := locatedAddr(ent[2:])
		if err != nil {
			return nil, fmt.Errorf("%w: kXR_locate answer %q: %v", ErrMalformed, raw, err)
		}
		switch ent[0] {
		case 'S', 's':
			servers = append(servers, addr)
		case 'M', 'm':
			if depth <= 0 || addr == at.addr {
				return nil, fmt.Errorf("%w: kXR_locate of %s leads from manager to manager", ErrTooManyRedirects, path)
			}
			sub, err := c.redirectClient(ctx, addr, false)
			if err != nil {
				return nil, err
			}
			more, err := c.locateServers(ctx, sub, path, depth-1)
			if err != nil {
				return nil, err
			}
			servers = append(servers, more...)
		default:
			return nil, fmt.Errorf("%w: kXR_locate answer %q", ErrMalformed, raw)
		}
	}
	slices.Sort(servers)
	return slices.Compact(servers), nil
}

// locatedAddr returns the address of a kXR_locate entry, "[ip]:port" or
// "host:port", with an IPv4 address written as IPv6 ("[::127.0.0.1]", as
// xrootd writes them) made IPv4 again.
func locatedAddr(s string) (string, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); ip != nil {
		if v4 := ip.To4(); v4 != nil {
			host = v4.String()
		} else if ip16 := ip.To16(); bytes.Equal(ip16[:12], make([]byte, 12)) && !ip.IsUnspecified() && !ip.IsLoopback() {
			host = net.IP(ip16[12:]).String() // IPv4-compatible, ::a.b.c.d
		}
	}
	return net.JoinHostPort(host, port), nil
}
