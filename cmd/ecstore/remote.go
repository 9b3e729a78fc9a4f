package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// rootURL is a parsed root://host[:port]//path argument: a file on an
// ecstore gateway, an ecstore node or any XRootD server.
type rootURL struct {
	addr string // host:port
	path string // absolute
	tls  bool   // roots://
	// dir is set when the URL's path ends with a slash (or is "/"): it
	// names a directory, and cp copies into it.
	dir bool
}

func (u rootURL) String() string {
	if u.tls {
		return "roots://" + u.addr + "/" + u.path
	}
	return "root://" + u.addr + "/" + u.path
}

// parseRootURL recognises root://, roots:// (TLS), xroot:// and
// xroots:// arguments. ok is false for anything else (an object path or
// a local file).
func parseRootURL(s string) (u rootURL, ok bool, err error) {
	var rest string
	found := false
	for _, scheme := range []string{"root://", "xroot://", "roots://", "xroots://"} {
		if rest, found = strings.CutPrefix(s, scheme); found {
			u.tls = strings.HasSuffix(scheme, "s://")
			break
		}
	}
	if !found {
		return rootURL{}, false, nil
	}
	hostport, p, _ := strings.Cut(rest, "/")
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i] // CGI is not passed on
	}
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	if hostport == "" {
		return rootURL{}, true, usageErrorf("%q: no host", s)
	}
	if _, _, err := net.SplitHostPort(hostport); err != nil {
		hostport = net.JoinHostPort(hostport, "1094")
	}
	dir := strings.HasSuffix(p, "/")
	if p != "/" {
		p = strings.TrimSuffix(p, "/")
	}
	if err := node.CheckPath(p); err != nil {
		return rootURL{}, true, usageErrorf("%q: invalid path %q", s, p)
	}
	return rootURL{addr: hostport, path: p, tls: u.tls, dir: dir}, true, nil
}

// dialRoot connects to u's server.
func dialRoot(ctx context.Context, u rootURL) (*xrootd.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	c, err := xrootd.Dial(dctx, u.addr, dialOptions(u))
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", rootURL{addr: u.addr, tls: u.tls}, err)
	}
	return c, nil
}

// dialOptions are the command line's options for u: TLS when u asks for
// it or the server requires it (for tokens), verified against the
// system's authorities and X509_CERT_DIR's; a bearer token (BEARER_TOKEN
// or a token file) when the server asks for one; redirects followed as
// xrdcp follows them (up to 16 for each request), so that u may name a
// redirector (an XRootD manager, xrootd + cmsd).
func dialOptions(u rootURL) *xrootd.DialOptions {
	return &xrootd.DialOptions{AppName: "ecstore", WantTLS: u.tls, AbleTLS: true, Redirects: xrootd.DefaultRedirects}
}

// remoteErr phrases a protocol error for people.
func remoteErr(u rootURL, err error) error {
	var xe *xrootd.Error
	if errors.As(err, &xe) {
		return fmt.Errorf("%s: %s", u, xe.Message)
	}
	return fmt.Errorf("%s: %w", u, err)
}

// remoteEach runs fn with a client for each argument of a command whose
// arguments are all root:// URLs (rm, mkdir, rmdir). Every URL is tried,
// as eachPath tries every object path: all but the last error are
// printed to stderr as they happen, and the last one is returned with a
// count. handled is false when no argument is a URL.
func remoteEach(ctx context.Context, stderr io.Writer, args []string, fn func(c *xrootd.Client, u rootURL) error) (handled bool, err error) {
	var urls []rootURL
	for _, a := range args {
		u, ok, err := parseRootURL(a)
		if err != nil {
			return true, err
		}
		if !ok {
			if len(urls) > 0 {
				return true, usageErrorf("mixing root:// URLs and object paths")
			}
			continue
		}
		urls = append(urls, u)
	}
	if len(urls) == 0 {
		return false, nil
	}
	if len(urls) != len(args) {
		return true, usageErrorf("mixing root:// URLs and object paths")
	}
	clients := map[string]*xrootd.Client{}
	dialErrs := map[string]error{} // a server that could not be reached is not dialled again
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	var errs []error
	for _, u := range urls {
		c := clients[u.addr]
		if c == nil && dialErrs[u.addr] == nil {
			if c, err = dialRoot(ctx, u); err != nil {
				dialErrs[u.addr] = err
			} else {
				clients[u.addr] = c
			}
		}
		if c == nil {
			errs = append(errs, fmt.Errorf("%s: %w", u, dialErrs[u.addr]))
		} else if err := fn(c, u); err != nil {
			errs = append(errs, remoteErr(u, err))
		}
		if ctx.Err() != nil {
			return true, errInterrupted
		}
	}
	switch len(errs) {
	case 0:
		return true, nil
	case 1:
		return true, errs[0]
	}
	for _, err := range errs[:len(errs)-1] {
		fmt.Fprintf(stderr, "ecstore: %v\n", err)
	}
	return true, fmt.Errorf("%w (%d of %d paths failed)", errs[len(errs)-1], len(errs), len(urls))
}

// remoteLs lists a directory on a root:// server.
func remoteLs(ctx context.Context, e *env, u rootURL, long bool) error {
	c, err := dialRoot(ctx, u)
	if err != nil {
		return err
	}
	defer c.Close()
	ents, err := c.DirlistCluster(ctx, u.path, true)
	var xe *xrootd.Error
	if errors.As(err, &xe) && xe.Code != xrootd.ErrNotFound {
		// Not a directory: list the file itself, as ls does.
		fi, serr := c.Stat(ctx, u.path)
		if serr != nil {
			return remoteErr(u, err)
		}
		_, fi.Name = node.Split(u.path)
		ents, err = []xrootd.FileInfo{fi}, nil
	}
	if err != nil {
		return remoteErr(u, err)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, fi := range ents {
		name := fi.Name
		if fi.IsDir() {
			name += "/"
		}
		if !long {
			fmt.Fprintln(e.stdout, name)
			continue
		}
		kind, size := "-", fmt.Sprint(fi.Size)
		if fi.IsDir() {
			kind, size = "d", "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t %s\n", kind, size, fi.ModTime.Local().Format(time.DateTime), name)
	}
	return tw.Flush()
}

// remoteStat describes a file on a root:// server, with its adler32 when
// the server knows it.
func remoteStat(ctx context.Context, e *env, u rootURL) error {
	c, err := dialRoot(ctx, u)
	if err != nil {
		return err
	}
	defer c.Close()
	fi, err := c.Stat(ctx, u.path)
	if err != nil {
		return remoteErr(u, err)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "url:\t%s\n", u)
	if fi.IsDir() {
		fmt.Fprintf(tw, "type:\tdirectory\n")
	} else {
		fmt.Fprintf(tw, "size:\t%d\n", fi.Size)
	}
	fmt.Fprintf(tw, "mtime:\t%s\n", fi.ModTime.Local().Format(time.RFC3339))
	if !fi.IsDir() {
		if _, v, err := c.Checksum(ctx, u.path, "adler32"); err == nil {
			fmt.Fprintf(tw, "adler32:\t%s\n", v)
		}
	}
	return tw.Flush()
}

// copyBuffer is the size of each read and write of a root:// transfer.
const copyBuffer = 8 << 20

// remoteWriter appends to a file being created on a root:// server.
type remoteWriter struct {
	ctx context.Context
	f   *xrootd.ClientFile
}

func (w *remoteWriter) Write(p []byte) (int, error) { return w.f.Write(w.ctx, p) }

// remoteReader reads a root:// file sequentially.
type remoteReader struct {
	ctx context.Context
	f   *xrootd.ClientFile
	off int64
}

func (r *remoteReader) Read(p []byte) (int, error) {
	n, err := r.f.ReadAt(r.ctx, p, r.off)
	r.off += int64(n)
	if n > 0 && errors.Is(err, io.EOF) {
		err = nil
	}
	if n == 0 && err == nil {
		err = io.EOF
	}
	return n, err
}
