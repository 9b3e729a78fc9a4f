package main

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ecstore/ecstore/internal/access"
	"github.com/ecstore/ecstore/internal/cluster"
	"github.com/ecstore/ecstore/internal/gateway"
	"github.com/ecstore/ecstore/internal/jwtauth"
	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/memlimit"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/obs"
	"github.com/ecstore/ecstore/internal/repair"
	"github.com/ecstore/ecstore/internal/s3"
	"github.com/ecstore/ecstore/internal/tlsfiles"
	"github.com/ecstore/ecstore/internal/webdav"
)

const serveHelp = `
Runs the gateway: the erasure-coded namespace of the cluster served over
the XRootD protocol (root://), so that xrdcp, xrdfs, ROOT and the Python
XRootD bindings work unchanged, with Prometheus metrics on /metrics,
(with --s3-addr) over S3, where bucket b, key k is the object /b/k, and
(with --http-addr) over plain HTTP and WebDAV for curl, davix and
browsers, where the URL path is the object path.

Access to S3 and HTTP needs credentials, given as lines of the cluster's
config file or of an --auth-file (never as flags):

  access-key = ID:SECRET [SCOPE...]
                               S3 signing key, and HTTP Basic user/password;
                               storage scopes after it (storage.read:/b
                               storage.modify:/b/scratch) limit what it may do
  token = TOKEN                bearer token (at least 16 characters) for
                               HTTP, and for root:// under TLS (below);
                               http-token is its older name
  http-anonymous-read = true   HTTP reads without credentials
  token-issuer = URL [BASE]    root:// takes this issuer's JSON Web Tokens
                               (WLCG, SciTokens), held to their storage
                               scopes under BASE (default /)
  token-audience = AUD         an audience such tokens must name

access-key, token, token-issuer and token-audience may repeat. ECSTORE_ACCESS_KEY and
ECSTORE_SECRET_KEY in the environment add one more access key. HTTP
writes without credentials are possible only with --http-anonymous-writes
on a loopback --http-addr.

With --tls-cert and --tls-key the gateway offers TLS on root://
(roots://), and S3 and HTTP serve https. With tokens too, root:// takes
them with XRootD's ztn protocol: xrdcp, xrdfs, ROOT and Python present
BEARER_TOKEN (or their token file) under TLS, and a valid token may
write; clients without one only read, or are turned away with
--root-token-required. Without tokens, root:// clients are anonymous.

Third-party copies are served at both ends: xrdcp --tpc (the gateway
pulls a file a writer asks for, or lets another server pull an object
on the key a reader gave) and HTTP COPY with Source or a remote
Destination (WLCG HTTP-TPC, davix-cp, FTS).

SIGHUP re-reads these credentials (config file and --auth-file) without
a restart (whether root:// takes tokens at all is decided at start).
The cluster's config file may also hold this command's flags as
key = value lines (root-addr = 0.0.0.0:1094, tls-cert = FILE, ...);
a flag on the command line wins.

Abandoned S3 multipart uploads (neither completed nor aborted) are
removed with their parts after --s3-upload-expiry.

With no --data, --config or --nodes it serves the embedded cluster in
./ecstore-data, creating it (8+2, 1 MiB chunks, 12 local directories) on
first use. Listening on an address other than loopback must be asked for
explicitly with --root-addr; anonymous clients of such a listener only
read unless --root-anonymous-writes is given.

Every --heartbeat (2s) the gateway asks each node for its space. A node
that does not answer within 2s (a crashed or unreachable host, a stopped
server, a frozen file system) is left out of lookups, listings, reads and
new objects for as long as it stays silent, so that requests do not wait
for it, and is taken back as soon as it answers; both are logged.

A background healer (--heal, on by default) rebuilds the archives of
objects that reads or writes find degraded, at --heal-rate, and with
--heal-interval also runs a full repair periodically.

Objects are written sequentially and become visible when the client
closes the file (after the write quorum of archives is durable); reads
may be at any offset. SIGINT or SIGTERM stops the gateway gracefully.
`

// cmdServe is "ecstore serve".
func cmdServe(ctx context.Context, e *env, args []string) (err error) {
	// SIGHUP is taken from the start: a reload asked for while the
	// cluster opens (a hung node can make that seconds) must not kill the
	// gateway, as the signal's default action does; it is served once
	// the credentials are loaded.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	fs := newFlagSet(e, "serve", "serve [flags]", serveHelp)
	cf := fs.addClusterFlags()
	rootAddr := fs.String("root-addr", "127.0.0.1:1094", "root:// listen `HOST:PORT`")
	metricsAddr := fs.String("metrics-addr", "127.0.0.1:9094", "Prometheus /metrics listen `HOST:PORT` (empty: off)")
	pprofAddr := fs.String("pprof-addr", "", "Go pprof listen `HOST:PORT` for profiling (empty: off)")
	s3Addr := fs.String("s3-addr", "", "S3 listen `HOST:PORT` (empty: off); needs an access key (see above)")
	s3Domain := fs.String("s3-domain", "", "`DOMAIN` for virtual-host-style bucket addressing (bucket.DOMAIN)")
	s3Expiry := fs.Duration("s3-upload-expiry", 24*time.Hour, "abort S3 multipart uploads left incomplete for `DURATION`, removing\ntheir parts (0: never)")
	httpAddr := fs.String("http-addr", "", "plain HTTP/WebDAV listen `HOST:PORT` (empty: off)")
	httpAnonRead := fs.Bool("http-anonymous-read", false, "let HTTP clients without credentials read (GET, HEAD, PROPFIND)")
	httpAnonWrites := fs.Bool("http-anonymous-writes", false, "let HTTP clients without credentials write; only with a loopback\n--http-addr, and then only from loopback connections")
	authFile := fs.String("auth-file", "", "read access-key, token, http-anonymous-read, token-issuer and\ntoken-audience lines from `FILE` too (key = value lines, as in the config file)")
	anonWrites := fs.Bool("root-anonymous-writes", false, "let root:// clients without a token write on a non-loopback --root-addr,\nor on any address once tokens are taken (see above); otherwise they only read")
	tlsCert := fs.String("tls-cert", "", "TLS certificate `FILE` (PEM, with its chain): roots:// and root:// token\nauthentication, and https for --s3-addr and --http-addr; reloaded when it changes")
	tlsKey := fs.String("tls-key", "", "the certificate's private key `FILE` (PEM)")
	tokenRequired := fs.Bool("root-token-required", false, "refuse root:// clients without a valid token (they may otherwise read)")
	pageSums := fs.Bool("page-checksums", false, "offer root:// clients kXR_pgread and kXR_pgwrite, a CRC32C per 4 KiB page\non the wire; XRootD's client computes them in software, which halves\nxrdcp's speed (chunks are verified against their archives either way)")
	heal := fs.Bool("heal", true, "rebuild, in the background, objects that reads and writes find degraded")
	healRate := fs.String("heal-rate", "20MB", "limit background rebuilding to `SIZE` per second (0: unlimited)")
	healInterval := fs.Duration("heal-interval", 0, "also run a full repair of the cluster every `DURATION` (0: never)")
	heartbeat := fs.Duration("heartbeat", 2*time.Second, "ask every node that it answers every `DURATION` (0: never); a node that\ndoes not within 2s is left out of requests until it does")
	pageSumsCache := fs.String("page-checksum-cache", "8MiB", "keep up to `SIZE` of the archives' page checksums for random reads (1 KiB\nper MiB of object: 8 MiB covers 8 GiB), so that reading a few KB costs\na node one request, not two (0: off)")
	memLimit := fs.String("memory-limit", "auto", "soft limit of the gateway's memory: auto (40 MiB plus 4 blocks per open\ntransfer, or 4 times the object's size when it is smaller, at least 64 MiB:\nthe resident size stays within 64 MiB plus 4 blocks per open transfer,\nabout 80 MiB with none; unless GOMEMLIMIT is set), a `SIZE`, or off")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	if err := applyGatewaySettings(fs, cf); err != nil {
		return err
	}
	for _, a := range []string{*rootAddr, *metricsAddr, *pprofAddr, *s3Addr, *httpAddr} {
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
	sumsCache, err := layout.ParseSize(*pageSumsCache)
	if err != nil || sumsCache < 0 {
		return usageErrorf("--page-checksum-cache: want a size such as 8MiB (0: off), not %q", *pageSumsCache)
	}
	cf.pageChecksumCache = sumsCache
	if sumsCache == 0 {
		cf.pageChecksumCache = -1
	}
	// The Go runtime honours GOMEMLIMIT by itself; auto leaves it be.
	autoLimit := *memLimit == "auto" && os.Getenv("GOMEMLIMIT") == ""
	var fixedLimit int64
	switch *memLimit {
	case "auto", "off":
	default:
		if fixedLimit, err = layout.ParseSize(*memLimit); err != nil || fixedLimit <= 0 {
			return usageErrorf("--memory-limit: want auto, off or a size such as 2GiB, not %q", *memLimit)
		}
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		return usageErrorf("--tls-cert and --tls-key go together")
	}
	if *httpAnonWrites && (*httpAddr == "" || !loopback(*httpAddr)) {
		return usageErrorf("--http-anonymous-writes needs a loopback --http-addr (such as 127.0.0.1:8080): writes without credentials are never taken from other hosts")
	}
	if *s3Expiry < 0 {
		return usageErrorf("--s3-upload-expiry must not be negative")
	}
	if *heartbeat < 0 {
		return usageErrorf("--heartbeat must not be negative")
	}
	var extra *cluster.Config
	if *authFile != "" {
		if extra, err = readAuthFile(*authFile); err != nil {
			return err
		}
	}
	m := obs.New()
	log := cf.logger(e)
	var healer *repair.Healer
	events := m.Events()
	var gov atomic.Pointer[memlimit.Governor]
	if autoLimit {
		next := events.TransferMemory
		events.TransferMemory = func(blockBufs int64) {
			if g := gov.Load(); g != nil {
				g.Update(blockBufs)
			}
			if next != nil {
				next(blockBufs)
			}
		}
	}
	if *heal {
		healer = repair.NewHealer(nil, repair.HealerOptions{Rate: rate, Interval: *healInterval, Logger: log, Healed: m.Healed})
		events = healer.Events(events)
		m.WatchHealer(healer.Pending, healer.Retrying, healer.Dropped)
	}
	c, err := cf.openWith(e, true, events)
	if err != nil {
		return err
	}
	defer c.Close()
	m.WatchNodes(func(ctx context.Context) []object.NodeState { return c.Store().NodeStates(ctx, false) })
	if fixedLimit > 0 {
		debug.SetMemoryLimit(fixedLimit)
	}
	if autoLimit {
		// The resident budget is 64 MiB plus 4 blocks per transfer (4
		// times the object for one smaller than a block); the
		// Go limit does not count the binary's mapped code (11 MiB) and
		// other memory outside the Go heap, and a soft limit is overshot
		// while a collection runs, so it leaves 24 MiB for them (at 64
		// MiB the peak resident size with 8 streams reached 323 MiB of a
		// 320 MiB budget, at 48 MiB 324 MiB over three rounds of them).
		// It is never under 64 MiB: at 64 concurrent stats or removes of
		// small objects (no transfer open) the gateway holds about 40 MiB,
		// and a limit there made the collector run back to back (100
		// collections a second, 60 % of the gateway's CPU).
		// The base holds the default page checksum cache; a larger one
		// raises it (and the floor) by the difference.
		extra := max(sumsCache-object.DefaultPageChecksumCache, 0)
		gov.Store(memlimit.New(40<<20+extra, 4, 64<<20+extra))
	}
	// Under a memory limit (auto, a size or GOMEMLIMIT, which may say
	// off) the collector need not run at every doubling of a small live
	// heap (27 KB gets: 10-30% less gateway CPU per get).
	if debug.SetMemoryLimit(-1) != math.MaxInt64 && memlimit.RaiseGCPercent() {
		log.Debug("garbage collector target raised under the memory limit", "gc_percent", memlimit.GCPercentUnderLimit)
	}
	if *heartbeat > 0 {
		// Stopped before the cluster's nodes close, as the healer.
		bctx, stopBeats := context.WithCancel(ctx)
		beatsDone := make(chan struct{})
		go func() {
			defer close(beatsDone)
			c.Store().Heartbeat(bctx, *heartbeat)
		}()
		defer func() {
			stopBeats()
			<-beatsDone
		}()
	}
	if healer != nil {
		healer.SetStore(c.Store())
		// Stopped, and waited for, before the cluster's nodes close (the
		// deferred c.Close): a rebuild cut short by a closed node leaves
		// temporary files behind.
		hctx, stopHealer := context.WithCancel(ctx)
		healerDone := make(chan struct{})
		go func() {
			defer close(healerDone)
			healer.Run(hctx)
		}()
		defer func() {
			stopHealer()
			<-healerDone
		}()
	}
	acc, err := gatherAccess(c.Config(), extra)
	if err != nil {
		return err
	}
	acc.anonRead = acc.anonRead || *httpAnonRead
	var tlsPair *tlsfiles.Pair
	if *tlsCert != "" {
		if tlsPair, err = tlsfiles.Load(*tlsCert, *tlsKey, log); err != nil {
			return err
		}
	}
	// Tokens are taken on root:// under TLS only (the XRootD client sends
	// them under TLS only); once they are, anonymous clients only read,
	// on loopback too, unless --root-anonymous-writes.
	rootTokens := tlsPair != nil && (len(acc.tokens) > 0 || len(acc.issuers) > 0)
	if *tokenRequired && !rootTokens {
		return usageErrorf("--root-token-required needs --tls-cert and --tls-key, and token or token-issuer lines in the config file or --auth-file")
	}
	readOnly := !*anonWrites && (!loopback(*rootAddr) || rootTokens)
	var tlsConfig *tls.Config
	var checkToken func(context.Context, string) (string, any, error)
	if tlsPair != nil {
		tlsConfig = tlsPair.Config()
	}
	set, err := acc.set(log)
	if err != nil {
		return err
	}
	creds := access.NewLive(set)
	if rootTokens {
		checkToken = tokenChecker(creds)
	}
	go reloadOnHangup(ctx, hup, creds, log, func() (*access.Set, error) {
		return reloadAccess(c.ConfigFile(), *authFile, *httpAnonRead, log)
	})
	var s3h http.Handler
	if *s3Addr != "" {
		if len(acc.keys) == 0 {
			return usageErrorf("--s3-addr needs an access key: access-key = ID:SECRET in the config file or --auth-file,\nor ECSTORE_ACCESS_KEY and ECSTORE_SECRET_KEY in the environment")
		}
		s3h = s3.NewHandler(c.Store(), s3.Options{Access: creds, Domain: *s3Domain, Logger: log, Hooks: m.GatewayHooks(),
			KeepCompletions: *s3Expiry > 0})
		if *s3Expiry > 0 {
			go s3.RunUploadExpiry(ctx, c.Store(), s3.ExpiryOptions{Age: *s3Expiry, Logger: log})
		}
	}
	var httpBound string
	if *httpAddr != "" {
		if len(acc.keys) == 0 && len(acc.tokens) == 0 && set.JWT == nil && !acc.anonRead && !*httpAnonWrites {
			return usageErrorf("--http-addr needs credentials (access-key, token or token-issuer lines in the config file or\n--auth-file, or ECSTORE_ACCESS_KEY/ECSTORE_SECRET_KEY) or --http-anonymous-read")
		}
		h := webdav.NewHandler(c.Store(), webdav.Options{Access: creds, AnonymousWrite: *httpAnonWrites, Hooks: m.GatewayHooks(), Logger: log})
		var stop func() error
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		if httpBound, stop, err = serveHTTP(ctx, cancel, *httpAddr, h, tlsConfig, log); err != nil {
			return err
		}
		defer func() {
			cancel() // the gateway may have stopped on an error of its own
			if herr := stop(); herr != nil && err == nil {
				err = herr
			}
		}()
	}
	return gateway.Serve(ctx, gateway.Config{
		Store: c.Store(), RootAddr: *rootAddr, MetricsAddr: *metricsAddr, Metrics: m.Handler(),
		S3Addr: *s3Addr, S3Handler: s3h, RootReadOnly: readOnly, PageChecksums: *pageSums,
		TLS: tlsConfig, Tokens: checkToken, TokenRequired: *tokenRequired,
		PprofAddr: *pprofAddr, Hooks: m.GatewayHooks(), Logger: log,
		Ready: func(addr string) {
			fmt.Fprintf(e.stderr, "ecstore: serving root://%s (%s, %d nodes)", addr, c.Store().Geometry(), len(c.Store().Nodes()))
			if *metricsAddr != "" {
				fmt.Fprintf(e.stderr, ", metrics on http://%s/metrics", *metricsAddr)
			}
			scheme := "http"
			if tlsPair != nil {
				scheme = "https"
			}
			if *s3Addr != "" {
				fmt.Fprintf(e.stderr, ", S3 on %s://%s", scheme, *s3Addr)
			}
			if httpBound != "" {
				fmt.Fprintf(e.stderr, ", HTTP on %s://%s", scheme, httpBound)
			}
			fmt.Fprintln(e.stderr)
			if tlsPair != nil {
				subject, expires := tlsPair.Describe()
				fmt.Fprintf(e.stderr, "ecstore: TLS offered on root:// (roots://) with %s, valid until %s\n", subject, expires.Format(time.DateOnly))
			}
			switch {
			case *tokenRequired:
				fmt.Fprintln(e.stderr, "ecstore: root:// takes token holders only (roots:// and BEARER_TOKEN)")
			case rootTokens && readOnly:
				fmt.Fprintln(e.stderr, "ecstore: root:// writes need a token (roots:// and BEARER_TOKEN); clients without one may read")
			case readOnly:
				fmt.Fprintln(e.stderr, "ecstore: root:// is read-only: it listens beyond loopback and takes no tokens (give --tls-cert, --tls-key and token lines; or --root-anonymous-writes)")
			}
			if len(acc.tokens) > 0 && tlsPair == nil {
				fmt.Fprintln(e.stderr, "ecstore: tokens are taken over HTTP only: root:// takes them under TLS (--tls-cert, --tls-key)")
			}
			if httpBound != "" && (acc.anonRead || *httpAnonWrites) {
				fmt.Fprintf(e.stderr, "ecstore: HTTP allows anonymous reads: %v, anonymous writes from loopback: %v\n", acc.anonRead, *httpAnonWrites)
			}
		},
	})
}

// jwtChecker checks the JSON Web Tokens of the configured issuers.
func jwtChecker(acc accessConfig, log *slog.Logger) (*jwtauth.Checker, error) {
	issuers := make([]jwtauth.Issuer, len(acc.issuers))
	for i, is := range acc.issuers {
		issuers[i] = jwtauth.Issuer{URL: is.URL, Base: is.Base}
	}
	c, err := jwtauth.New(jwtauth.Options{Issuers: issuers, Audiences: acc.audiences, Logger: log})
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	return c, nil
}

// tokenChecker returns the check of root:// bearer tokens against the
// current credentials: a JSON Web Token of a trusted issuer (its grant:
// what its scopes allow), or one of the opaque tokens, compared in
// constant time (no grant: everything). A token's holder is named by its
// subject, or by its place in the list ("token 2"), never by the token.
func tokenChecker(creds *access.Live) func(context.Context, string) (string, any, error) {
	return func(ctx context.Context, tok string) (string, any, error) {
		set := creds.Load()
		if set.JWT != nil && jwtauth.LooksLikeJWT(tok) {
			g, err := set.JWT.Check(ctx, tok)
			if err != nil {
				return "", nil, err
			}
			return g.Subject + " (" + g.Issuer + ")", g, nil
		}
		found := 0
		for i, t := range set.Tokens {
			if subtle.ConstantTimeCompare([]byte(t), []byte(tok)) == 1 {
				found = i + 1
			}
		}
		if found == 0 {
			return "", nil, errors.New("not a configured token")
		}
		return fmt.Sprintf("token %d", found), nil, nil
	}
}

// set turns the configuration into the credentials the frontends check.
func (a accessConfig) set(log *slog.Logger) (*access.Set, error) {
	set := &access.Set{Keys: a.keys, Grants: a.grants, Tokens: a.tokens, AnonymousRead: a.anonRead}
	if len(a.issuers) > 0 {
		var err error
		if set.JWT, err = jwtChecker(a, log); err != nil {
			return nil, err
		}
	}
	return set, nil
}

// reloadAccess reads the credentials again from the cluster's config
// file (if it has one) and the --auth-file (if given).
func reloadAccess(configFile, authFile string, anonRead bool, log *slog.Logger) (*access.Set, error) {
	var cfg, extra *cluster.Config
	if configFile != "" {
		f, err := os.Open(configFile)
		if err != nil {
			return nil, err
		}
		cfg, err = cluster.ParseConfig(f, configFile)
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	if authFile != "" {
		var err error
		if extra, err = readAuthFile(authFile); err != nil {
			return nil, err
		}
	}
	acc, err := gatherAccess(cfg, extra)
	if err != nil {
		return nil, err
	}
	acc.anonRead = acc.anonRead || anonRead
	return acc.set(log)
}

// reloadOnHangup replaces the credentials with load's on every SIGHUP
// (hup) until ctx ends; a load that fails keeps the current ones.
func reloadOnHangup(ctx context.Context, hup <-chan os.Signal, creds *access.Live, log *slog.Logger, load func() (*access.Set, error)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		set, err := load()
		if err != nil {
			log.Error("credentials not reloaded; the current ones stay in use", "err", err)
			continue
		}
		creds.Store(set)
		log.Info("credentials reloaded", "access_keys", len(set.Keys), "tokens", len(set.Tokens), "token_issuers", set.JWT != nil)
	}
}

// applyGatewaySettings sets the serve flags that the command line left
// alone from the gateway settings of the cluster's config file (the
// --config file, or the embedded cluster's), if there is one.
func applyGatewaySettings(fs *flagSet, cf *clusterFlags) error {
	file := cf.config
	if file == "" && cf.nodes == "" {
		dir := cf.data
		if dir == "" {
			dir = cluster.DefaultDataDir
		}
		file = filepath.Join(dir, cluster.ConfigName)
		if _, err := os.Stat(file); err != nil {
			return nil // a new embedded cluster: nothing set yet
		}
	}
	if file == "" {
		return nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil // the cluster's opening reports it
	}
	cfg, err := cluster.ParseConfig(f, file)
	f.Close()
	if err != nil {
		return nil // likewise
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	for key, value := range cfg.GatewaySettings() {
		if onCommandLine[key] {
			continue
		}
		if err := fs.Set(key, value); err != nil {
			return usageErrorf("%s: %s = %s: %v", file, key, value, err)
		}
	}
	return nil
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

// accessConfig is who may use the frontends, as configured.
type accessConfig struct {
	keys      map[string]string
	grants    map[string]*jwtauth.Grant // access keys limited to scopes
	tokens    []string
	anonRead  bool
	issuers   []cluster.TokenIssuer
	audiences []string
}

// gatherAccess merges the access settings of the cluster config, of an
// --auth-file (extra, may be nil) and of ECSTORE_ACCESS_KEY and
// ECSTORE_SECRET_KEY. An access key id given twice with different
// secrets is an error.
func gatherAccess(cfg, extra *cluster.Config) (accessConfig, error) {
	a := accessConfig{keys: map[string]string{}}
	add := func(id, secret, from string) error {
		if old, ok := a.keys[id]; ok && old != secret {
			return usageErrorf("access key %s has two different secrets (the second from %s)", id, from)
		}
		a.keys[id] = secret
		return nil
	}
	for i, c := range []*cluster.Config{cfg, extra} {
		if c == nil {
			continue
		}
		from := []string{"the config file", "--auth-file"}[i]
		scopes := c.AccessKeyScopes()
		for id, secret := range c.AccessKeys() {
			if err := add(id, secret, from); err != nil {
				return a, err
			}
			if scopes[id] == "" {
				continue
			}
			g, err := jwtauth.StaticGrant(id, scopes[id])
			if err != nil {
				return a, usageErrorf("access key %s: %v", id, err)
			}
			if a.grants == nil {
				a.grants = map[string]*jwtauth.Grant{}
			}
			a.grants[id] = g
		}
		a.tokens = append(a.tokens, c.Tokens()...)
		a.anonRead = a.anonRead || c.HTTPAnonymousRead()
		a.issuers = append(a.issuers, c.TokenIssuers()...)
		a.audiences = append(a.audiences, c.TokenAudiences()...)
	}
	id, secret := os.Getenv("ECSTORE_ACCESS_KEY"), os.Getenv("ECSTORE_SECRET_KEY")
	switch {
	case id != "" && secret != "":
		if err := add(id, secret, "ECSTORE_ACCESS_KEY"); err != nil {
			return a, err
		}
	case id != "" || secret != "":
		return a, usageErrorf("set both ECSTORE_ACCESS_KEY and ECSTORE_SECRET_KEY, or neither")
	}
	return a, nil
}

// readAuthFile reads an --auth-file: access settings only, in the config
// file format. A file that others may read is worth a warning, not a
// refusal.
func readAuthFile(name string) (*cluster.Config, error) {
	f, err := os.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, usageErrorf("--auth-file: %v", err)
		}
		return nil, fmt.Errorf("--auth-file: %w", err)
	}
	defer f.Close()
	cfg, err := cluster.ParseConfig(f, name)
	if err != nil {
		return nil, usageErrorf("--auth-file: %v", err)
	}
	if cfg.NodeToken() != "" {
		return nil, usageErrorf("--auth-file %s: node-token belongs in the cluster config, where every command that opens the cluster finds it", name)
	}
	if key, ok := cfg.OnlyAccess(); !ok {
		return nil, usageErrorf("--auth-file %s: %s belongs in the cluster config; this file holds access-key, token, http-anonymous-read, token-issuer and token-audience only", name, key)
	}
	return cfg, nil
}

// serveHTTP starts the HTTP/WebDAV listener. It returns the bound
// address and a stop function that waits for the server to shut down
// (open requests get 30s after ctx is done) and returns its error. If the
// server fails, it calls fail so that the whole gateway stops.
func serveHTTP(ctx context.Context, fail context.CancelFunc, addr string, h http.Handler, tlsConfig *tls.Config, log *slog.Logger) (string, func() error, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("listen HTTP on %s: %w", addr, err)
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	served := make(chan error, 1)
	go func() {
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		} else {
			err = fmt.Errorf("HTTP on %s: %w", addr, err)
			fail()
		}
		served <- err
	}()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			log.Warn("HTTP shutdown", "err", err)
		}
	}()
	log.Info("serving HTTP", "addr", ln.Addr().String())
	return ln.Addr().String(), func() error {
		<-stopped
		return <-served
	}, nil
}
