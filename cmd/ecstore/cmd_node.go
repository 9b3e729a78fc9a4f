package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/ecstore/ecstore/internal/dataserver"
	"github.com/ecstore/ecstore/internal/xrootd"
)

const nodeHelp = `
Runs a vanilla storage node: a plain-file data server for directory DIR
over the XRootD protocol, knowing nothing about erasure coding. A gateway
lists it as root://HOST:PORT//PREFIX in its nodes. It serves what any
XRootD data server does (open, read, write, stat, dirlist, mv, rm, mkdir,
rmdir, space, file attributes), so xrdcp and xrdfs work against it too,
plus two queries of its own (kXR_query kXR_Qopaquf) that save a gateway
requests: a listing with one attribute of every entry, and an open that
sends a small file whole.

Nothing can escape DIR, symbolic links included. With --fsync (default)
files are fsynced on sync and close, and renames are made durable.
`

// cmdNode is "ecstore node --dir DIR --addr HOST:PORT".
func cmdNode(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "node", "node --dir DIR [--addr HOST:PORT] [flags]", nodeHelp)
	dir := fs.String("dir", "", "directory `DIR` to serve (must exist)")
	addr := fs.String("addr", "127.0.0.1:1094", "listen `HOST:PORT`")
	fsync := fs.Bool("fsync", true, "fsync files on sync and close and make renames durable;\n--fsync=false is for scratch data")
	logLevel := slog.LevelWarn
	fs.TextVar(&logLevel, "log-level", slog.LevelWarn, "log `LEVEL`: debug, info, warn or error")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	if *dir == "" {
		return usageErrorf("--dir is required")
	}
	if st, err := os.Stat(*dir); err != nil || !st.IsDir() {
		return fmt.Errorf("node: %s is not a directory", *dir)
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: logLevel}))
	fsys, err := dataserver.New(*dir, dataserver.Options{Fsync: *fsync})
	if err != nil {
		return err
	}
	defer fsys.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("node: listen %s: %w", *addr, err)
	}
	srv := &xrootd.Server{Handler: fsys, Logger: log, SiteName: "ecstore-node"}
	fmt.Fprintf(e.stderr, "ecstore: node serving %s on root://%s\n", *dir, ln.Addr())
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
