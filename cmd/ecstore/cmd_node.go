package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/ecstore/ecstore/internal/access"
	"github.com/ecstore/ecstore/internal/cluster"
	"github.com/ecstore/ecstore/internal/dataserver"
	"github.com/ecstore/ecstore/internal/tlsfiles"
	"github.com/ecstore/ecstore/internal/xrootd"
)

const nodeHelp = `
Runs a vanilla storage node: a plain-file data server for directory DIR
over the XRootD protocol, knowing nothing about erasure coding. A gateway
lists it as root://HOST:PORT//PREFIX in its nodes. It serves what any
XRootD data server does (open, read, write, stat, dirlist, mv, rm, mkdir,
rmdir, space, file attributes), so xrdcp and xrdfs work against it too,
plus three queries of its own (kXR_query kXR_Qopaquf) that save a
gateway requests: a listing with one attribute of every entry, an open
that sends a small file whole, and a removal that answers with the
removed file's attribute.

Nothing can escape DIR, symbolic links included. With --fsync (default)
files are fsynced on sync and close, and renames and removals are made
durable.

Anyone who reaches the port may read and change every file, as with a
plain xrootd without security: keep nodes on a private network, or give
the node --tls-cert and --tls-key (gateways then list it as
roots://HOST:PORT//PREFIX) and a --token-file: then only clients that
present one of its tokens (XRootD's ztn, under TLS) are served. Gateways
present the node-token line of their cluster config (or
ECSTORE_NODE_TOKEN); xrdcp and xrdfs present BEARER_TOKEN.
`

// cmdNode is "ecstore node --dir DIR --addr HOST:PORT".
func cmdNode(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "node", "node --dir DIR [--addr HOST:PORT] [flags]", nodeHelp)
	dir := fs.String("dir", "", "directory `DIR` to serve (must exist)")
	addr := fs.String("addr", "127.0.0.1:1094", "listen `HOST:PORT`")
	fsync := fs.Bool("fsync", true, "fsync files on sync and close and make renames durable;\n--fsync=false is for scratch data")
	tlsCert := fs.String("tls-cert", "", "TLS certificate `FILE` (PEM); reloaded when it changes")
	tlsKey := fs.String("tls-key", "", "the certificate's private key `FILE` (PEM)")
	tokenFile := fs.String("token-file", "", "serve only clients that present a token of `FILE` (one per line, at least\n16 characters; keep it mode 0600); needs --tls-cert")
	logLevel := slog.LevelWarn
	fs.TextVar(&logLevel, "log-level", slog.LevelWarn, "log `LEVEL`: debug, info, warn or error (default warn)")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	if *dir == "" {
		return usageErrorf("--dir is required")
	}
	if st, err := os.Stat(*dir); err != nil || !st.IsDir() {
		return fmt.Errorf("node: %s is not a directory", *dir)
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		return usageErrorf("--tls-cert and --tls-key go together")
	}
	if *tokenFile != "" && *tlsCert == "" {
		return usageErrorf("--token-file needs --tls-cert and --tls-key: tokens are sent under TLS only")
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: logLevel}))
	srv := &xrootd.Server{Logger: log, SiteName: "ecstore-node"}
	if *tlsCert != "" {
		pair, err := tlsfiles.Load(*tlsCert, *tlsKey, log)
		if err != nil {
			return err
		}
		srv.TLS = pair.Config()
	}
	if *tokenFile != "" {
		tokens, err := readTokenFile(*tokenFile)
		if err != nil {
			return err
		}
		srv.Tokens, srv.TokenRequired = tokenChecker(access.NewLive(&access.Set{Tokens: tokens})), true
	}
	fsys, err := dataserver.New(*dir, dataserver.Options{Fsync: *fsync})
	if err != nil {
		return err
	}
	defer fsys.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("node: listen %s: %w", *addr, err)
	}
	srv.Handler = fsys
	scheme := "root"
	if srv.TLS != nil {
		scheme = "roots"
	}
	fmt.Fprintf(e.stderr, "ecstore: node serving %s on %s://%s\n", *dir, scheme, ln.Addr())
	if srv.Tokens != nil {
		fmt.Fprintln(e.stderr, "ecstore: node serves token holders only")
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	select {
	case err := <-done:
		if errors.Is(err, xrootd.ErrServerClosed) {
			return nil
		}
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	<-done
	return nil
}

// readTokenFile reads tokens, one per line; '#' starts a comment at the
// start of a line or after a blank, as in the cluster config ('#' inside
// a token is part of it, as the gateway's node-token line reads it). A
// file that others may read is worth a warning, not a refusal.
func readTokenFile(name string) ([]string, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("--token-file: %w", err)
	}
	var tokens []string
	for i, line := range strings.Split(string(b), "\n") {
		// As in the cluster config: a comment starts a line, or follows
		// a blank; '#' inside a token is part of it.
		if i := strings.IndexAny(line, " \t"); i >= 0 {
			if j := strings.Index(line[i:], "#"); j >= 0 && strings.TrimSpace(line[i:i+j]) == "" {
				line = line[:i]
			}
		}
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if len(line) < cluster.MinTokenLen || strings.ContainsAny(line, " \t") {
			return nil, usageErrorf("--token-file %s:%d: want one token of at least %d characters, no blanks", name, i+1, cluster.MinTokenLen)
		}
		tokens = append(tokens, line)
	}
	if len(tokens) == 0 {
		return nil, usageErrorf("--token-file %s holds no token", name)
	}
	return tokens, nil
}
