package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// Config is what a gateway serves and where.
type Config struct {
	Store *object.Store
	// RootAddr is the root:// listen address (default 127.0.0.1:1094).
	RootAddr string
	// MetricsAddr serves /metrics when set; Metrics is its handler.
	MetricsAddr string
	Metrics     http.Handler
	// PprofAddr serves /debug/pprof/ when set.
	PprofAddr string
	// S3Addr serves S3 with S3Handler when both are set.
	S3Addr    string
	S3Handler http.Handler
	Hooks     Hooks
	Logger    *slog.Logger
	// RootReadOnly serves root:// read-only to clients that have not
	// authenticated with a token (see FS.ReadOnly).
	RootReadOnly bool
	// TLS, when set, is offered on root:// (roots://) and used by the S3
	// listener (https).
	TLS *tls.Config
	// Tokens, when set, takes bearer tokens on root:// under TLS (see
	// xrootd.Server.Tokens); TokenRequired refuses clients without one.
	Tokens        func(ctx context.Context, token string) (holder string, grant any, err error)
	TokenRequired bool
	// PageChecksums offers root:// clients kXR_pgread and kXR_pgwrite
	// (a CRC32C per 4 KiB page on the wire). Off, clients read and write
	// plainly (see xrootd.Server.NoPageChecksums); every chunk is still
	// verified against its archive's checksum.
	PageChecksums bool
	// Ready, if set, receives the bound root:// address once listening.
	Ready func(rootAddr string)
}

// Serve runs the gateway until ctx is cancelled, then shuts down
// gracefully (open transfers get 30s to finish).
func Serve(ctx context.Context, cfg Config) error {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.RootAddr == "" {
		cfg.RootAddr = "127.0.0.1:1094"
	}
	ln, err := net.Listen("tcp", cfg.RootAddr)
	if err != nil {
		return fmt.Errorf("gateway: listen root://%s: %w", cfg.RootAddr, err)
	}
	fsys := NewFS(cfg.Store, log, cfg.Hooks)
	if cfg.RootReadOnly {
		fsys.ReadOnly()
	}
	if cfg.TokenRequired {
		fsys.RequireToken()
	}
	srv := &xrootd.Server{Handler: fsys, Logger: log, SiteName: "ecstore", NoPageChecksums: !cfg.PageChecksums,
		TLS: cfg.TLS, Tokens: cfg.Tokens, TokenRequired: cfg.TokenRequired,
		// A client that keeps a connection without a file open for 10
		// minutes has left it behind (XrdCl closes its own after 5):
		// it costs a goroutine and buffers until it goes.
		Limits:     xrootd.Limits{IdleTimeout: 10 * time.Minute},
		AuthFailed: func() { cfg.Hooks.AuthFailed("root", "credentials") }}
	var (
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	fail := func(err error) {
		errMu.Lock()
		defer errMu.Unlock()
		if first == nil {
			first = err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var https []*http.Server
	startHTTP := func(addr, what string, h http.Handler, tlsConfig *tls.Config) error {
		hl, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("gateway: listen %s on %s: %w", what, addr, err)
		}
		if tlsConfig != nil {
			hl = tls.NewListener(hl, tlsConfig)
		}
		// Idle keep-alive connections go after 2 minutes, as the HTTP
		// listener's do; writes are bounded by httpmeter.WriteStall.
		hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
		https = append(https, hs)
		log.Info("serving "+what, "addr", hl.Addr().String())
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := hs.Serve(hl); err != nil && !errors.Is(err, http.ErrServerClosed) {
				fail(fmt.Errorf("gateway: %s: %w", what, err))
				cancel()
			}
		}()
		return nil
	}
	if cfg.MetricsAddr != "" && cfg.Metrics != nil {
		mux := http.NewServeMux()
		mux.Handle("/metrics", cfg.Metrics)
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
		mux.Handle("/readyz", Readiness(cfg.Store))
		if err := startHTTP(cfg.MetricsAddr, "metrics", mux, nil); err != nil {
			ln.Close()
			return err
		}
	}
	if cfg.S3Addr != "" && cfg.S3Handler != nil {
		if err := startHTTP(cfg.S3Addr, "s3", cfg.S3Handler, cfg.TLS); err != nil {
			ln.Close()
			return err
		}
	}
	if cfg.PprofAddr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		if err := startHTTP(cfg.PprofAddr, "pprof", mux, nil); err != nil {
			ln.Close()
			return err
		}
	}
	log.Info("serving root://", "addr", ln.Addr().String(), "ec", cfg.Store.Geometry().String(), "nodes", len(cfg.Store.Nodes()))
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr().String())
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ctx, ln); err != nil && !errors.Is(err, xrootd.ErrServerClosed) && ctx.Err() == nil {
			fail(fmt.Errorf("gateway: root://: %w", err))
			cancel()
		}
	}()
	<-ctx.Done()
	log.Info("shutting down")
	fsys.DiscardBrokenUploads()
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("root:// shutdown", "err", err)
	}
	for _, hs := range https {
		hs.Shutdown(sctx)
	}
	wg.Wait()
	return first
}
