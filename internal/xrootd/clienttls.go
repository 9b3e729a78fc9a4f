package xrootd

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/ecstore/ecstore/internal/tlsfiles"
)

// FindBearerToken finds the caller's bearer token as WLCG's token
// discovery (and XRootD's client) does: BEARER_TOKEN, the file named by
// BEARER_TOKEN_FILE, $XDG_RUNTIME_DIR/bt_u<uid>, /tmp/bt_u<uid>. It
// returns "" when there is none.
func FindBearerToken() (string, error) {
	if t := strings.TrimSpace(os.Getenv("BEARER_TOKEN")); t != "" {
		return t, nil
	}
	var files []string
	if f := os.Getenv("BEARER_TOKEN_FILE"); f != "" {
		files = append(files, f)
	}
	name := "bt_u" + strconv.Itoa(os.Geteuid())
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		files = append(files, filepath.Join(d, name))
	}
	files = append(files, filepath.Join(os.TempDir(), name))
	for _, f := range files {
		t, err := readTokenFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("xrootd: bearer token: %w", err)
		}
		if t != "" {
			return t, nil
		}
	}
	return "", nil
}

// maxTokenFile bounds a bearer token file (WLCG tokens are a few KB).
const maxTokenFile = 1 << 20

// readTokenFile reads a bearer token file, as XRootD's ztn client does
// only when the file is the caller's own and neither group nor others may
// read or write it: /tmp/bt_u<uid> lies in a directory every user may
// write, and a token another user put there would send the caller's
// uploads wherever that user's token allows.
func readTokenFile(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return "", fmt.Errorf("%s belongs to uid %d, not to you (uid %d): refused", name, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%s may be read or written by others (mode %04o; chmod 600 it): refused", name, fi.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxTokenFile {
		return "", fmt.Errorf("%s holds more than %d bytes: not a token", name, maxTokenFile)
	}
	return strings.TrimSpace(string(b)), nil
}

// startTLS moves the client's connection onto TLS, verifying the server
// as host.
func (c *Client) startTLS(ctx context.Context, host string) error {
	cfg := c.opts.TLS
	if cfg == nil {
		var err error
		if cfg, err = tlsfiles.ClientConfig(); err != nil {
			return err
		}
	}
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	tc := tls.Client(&readerConn{Conn: c.conn, r: c.in}, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return ctxErr(ctx, fmt.Errorf("TLS handshake: %w", err))
	}
	c.conn = tc
	c.in = bufio.NewReaderSize(tc, 64<<10) // the old one feeds tc
	c.tls = true
	return nil
}

// authenticate answers a login that asks for authentication (security
// parameters "&P=ztn,..." and maybe "&P=unix"): with the token when the
// server takes tokens and there is one, else anonymously ("unix") when
// the server offers that.
func (c *Client) authenticate(ctx context.Context, security string) error {
	offered := map[string]bool{}
	for _, p := range strings.Split(security, "&P=")[1:] {
		name, _, _ := strings.Cut(p, ",")
		offered[strings.TrimRight(name, "&")] = true
	}
	if offered["ztn"] && c.tls {
		tok := c.opts.Token
		if tok == "" && !c.opts.NoTokenSearch {
			var err error
			if tok, err = FindBearerToken(); err != nil {
				return err
			}
		}
		if tok != "" {
			err := c.sendAuth(ctx, "ztn", AppendZtnCredential(nil, tok))
			if err == nil || !offered["unix"] {
				return err
			}
			c.log.Debug("xrootd token not accepted; going on anonymously", "err", err)
		}
	}
	if offered["unix"] {
		return c.sendAuth(ctx, "unix", []byte("unix\x00"+c.opts.Username+" nogroup\x00"))
	}
	if offered["ztn"] && !c.tls {
		return Errorf(ErrTLSRequired, "server takes tokens under TLS only: use a roots:// URL")
	}
	if offered["ztn"] && c.opts.NoTokenSearch {
		return Errorf(ErrAuthFailed, "server requires a bearer token, and none is configured")
	}
	if offered["ztn"] {
		return Errorf(ErrAuthFailed, "server requires a bearer token: set BEARER_TOKEN or BEARER_TOKEN_FILE")
	}
	return Errorf(ErrAuthFailed, "server requires authentication (%.80s), which this client does not support", security)
}

// sendAuth sends kXR_auth and waits for its answer (during setup).
func (c *Client) sendAuth(ctx context.Context, proto string, cred []byte) error {
	r := &AuthRequest{Credentials: cred}
	copy(r.CredType[:], proto)
	if _, err := c.conn.Write(EncodeRequest(StreamID{}, r).AppendTo(nil)); err != nil {
		return ctxErr(ctx, fmt.Errorf("send auth: %w", err))
	}
	f, err := ReadResponseFrame(c.in, c.dialAnswerMax())
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("read auth response: %w", err))
	}
	if err := statusError(f); err != nil {
		return fmt.Errorf("auth (%s): %w", proto, err)
	}
	return nil
}

// hostOf returns the host part of host:port.
func hostOf(hostport string) string {
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport
	}
	return h
}
