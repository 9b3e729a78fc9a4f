package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"

	"github.com/ecstore/ecstore/internal/gateway"
	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/obs"
	"github.com/ecstore/ecstore/internal/repair"
	"github.com/ecstore/ecstore/internal/s3"
)

const serveHelp = `
Runs the gateway: the erasure-coded namespace of the cluster served over
the XRootD protocol (root://), so that xrdcp, xrdfs, ROOT and the Python
XRootD bindings work unchanged, with Prometheus metrics on /metrics, and
(with --s3-addr) over S3, where bucket b, key k is the object /b/k.

With no --data, --config or --nodes it serves the embedded cluster in
./ecstore-data, creating it (8+2, 1 MiB chunks, 12 local directories) on
first use. Listening on an address other than loopback must be asked for
explicitly with --root-addr; there is no authentication on root:// yet,
so such a listener is read-only unless --root-anonymous-writes is given.

A background healer (--heal, on by default) rebuilds the archives of
objects that reads or writes find degraded, at --heal-rate, and with
--heal-interval also runs a full repair periodically.

Objects are written sequentially and become visible when the client
closes the file (after the write quorum of archives is durable); reads
may be at any offset. SIGINT or SIGTERM stops the gateway gracefully.
`

// cmdServe is "ecstore serve".
func cmdServe(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "serve", "serve [flags]", serveHelp)
	cf := fs.addClusterFlags()
	rootAddr := fs.String("root-addr", "127.0.0.1:1094", "root:// listen `HOST:PORT`")
	metricsAddr := fs.String("metrics-addr", "127.0.0.1:9094", "Prometheus /metrics listen `HOST:PORT` (empty: off)")
	pprofAddr := fs.String("pprof-addr", "", "Go pprof listen `HOST:PORT` for profiling (empty: off)")
	s3Addr := fs.String("s3-addr", "", "S3 listen `HOST:PORT` (empty: off); credentials from the environment\nvariables ECSTORE_ACCESS_KEY and ECSTORE_SECRET_KEY")
	s3Domain := fs.String("s3-domain", "", "`DOMAIN` for virtual-host-style bucket addressing (bucket.DOMAIN)")
	anonWrites := fs.Bool("root-anonymous-writes", false, "allow writes over root:// on a non-loopback --root-addr, where there is\nno authentication yet (on loopback they are always allowed)")
	heal := fs.Bool("heal", true, "rebuild, in the background, objects that reads and writes find degraded")
	healRate := fs.String("heal-rate", "20MB", "limit background rebuilding to `SIZE` per second (0: unlimited)")
	healInterval := fs.Duration("heal-interval", 0, "also run a full repair of the cluster every `DURATION` (0: never)")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	for _, a := range []string{*rootAddr, *metricsAddr, *pprofAddr} {
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return usageErrorf("bad listen address %q: %v", a, err)
		}
	}
	rate, err := layout.ParseSize(*healRate)
	if err != nil {
		return usageErrorf("--heal-rate: %v", err)
	}
	readOnly := !*anonWrites && !loopback(*rootAddr)
	var creds map[string]string
	if *s3Addr != "" {
		if _, _, err := net.SplitHostPort(*s3Addr); err != nil {
			return usageErrorf("bad listen address %q: %v", *s3Addr, err)
		}
		key, secret := os.Getenv("ECSTORE_ACCESS_KEY"), os.Getenv("ECSTORE_SECRET_KEY")
		if key == "" || secret == "" {
			return usageErrorf("--s3-addr needs credentials: set ECSTORE_ACCESS_KEY and ECSTORE_SECRET_KEY")
		}
		creds = map[string]string{key: secret}
	}
	m := obs.New()
	log := cf.logger(e)
	var healer *repair.Healer
	events := m.Events()
	if *heal {
		healer = repair.NewHealer(nil, repair.HealerOptions{Rate: rate, Interval: *healInterval, Logger: log, Healed: m.Healed})
		events = healer.Events(events)
	}
	c, err := cf.openWith(e, true, events)
	if err != nil {
		return err
	}
	defer c.Close()
	if healer != nil {
		healer.SetStore(c.Store())
		go healer.Run(ctx)
	}
	var s3h http.Handler
	if *s3Addr != "" {
		s3h = s3.NewHandler(c.Store(), s3.Options{Credentials: creds, Domain: *s3Domain, Logger: log})
	}
	return gateway.Serve(ctx, gateway.Config{
		Store: c.Store(), RootAddr: *rootAddr, MetricsAddr: *metricsAddr, Metrics: m.Handler(),
		S3Addr: *s3Addr, S3Handler: s3h, RootReadOnly: readOnly,
		PprofAddr: *pprofAddr, Hooks: m.GatewayHooks(), Logger: log,
		Ready: func(addr string) {
			fmt.Fprintf(e.stderr, "ecstore: serving root://%s (%s, %d nodes)", addr, c.Store().Geometry(), len(c.Store().Nodes()))
			if *metricsAddr != "" {
				fmt.Fprintf(e.stderr, ", metrics on http://%s/metrics", *metricsAddr)
			}
			if *s3Addr != "" {
				fmt.Fprintf(e.stderr, ", S3 on http://%s", *s3Addr)
			}
			fmt.Fprintln(e.stderr)
			if readOnly {
				fmt.Fprintln(e.stderr, "ecstore: root:// is read-only: it listens beyond loopback and has no authentication (--root-anonymous-writes allows writes)")
			}
		},
	})
}

// loopback reports whether a listen address only accepts local clients.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
