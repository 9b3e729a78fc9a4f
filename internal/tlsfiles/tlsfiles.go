// Package tlsfiles keeps the TLS files of a service. Pair serves a
// certificate and key kept in PEM files, reloading them when they change
// on disk: a site renews its host certificate in place (by a cron job,
// certbot or its grid tooling), and a gateway must pick the new one up
// without a restart. A pair that fails to load keeps the previous one in
// use, and the failure is reported once per change. ClientConfig trusts
// the authorities a grid host trusts (X509_CERT_DIR).
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// checkEvery bounds how often the files' modification times are looked
// at: at most once per handshake, and not more often than this.
const checkEvery = 10 * time.Second

// Pair is a certificate and key loaded from files. Safe for concurrent
// use.
type Pair struct {
	certFile, keyFile string
	log               *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string    // the files' sizes and mtimes when cert was loaded
	checked time.Time // when stamp was last compared
	failed  string    // the stamp whose load failed (reported once)
}

// Load reads the pair. It fails when the files cannot be read or do not
// hold a matching certificate and key.
func Load(certFile, keyFile string, log *slog.Logger) (*Pair, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Pair{certFile: certFile, keyFile: keyFile, log: log}
	stamp, err := p.stampNow()
	if err != nil {
		return nil, err
	}
	cert, err := p.load()
	if err != nil {
		return nil, err
	}
	p.cert, p.stamp, p.checked = cert, stamp, time.Now()
	return p, nil
}

func (p *Pair) load() (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(p.certFile, p.keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: certificate %s, key %s: %w", p.certFile, p.keyFile, err)
	}
	if cert.Leaf == nil && len(cert.Certificate) > 0 {
		cert.Leaf, _ = x509.ParseCertificate(cert.Certificate[0])
	}
	return &cert, nil
}

// stampNow describes the files' current versions.
func (p *Pair) stampNow() (string, error) {
	var stamp string
	for _, f := range []string{p.certFile, p.keyFile} {
		st, err := os.Stat(f)
		if err != nil {
			return "", fmt.Errorf("tls: %w", err)
		}
		stamp += fmt.Sprintf("%d/%d;", st.Size(), st.ModTime().UnixNano())
	}
	return stamp, nil
}

// Certificate returns the current certificate, reloading the files first
// if they changed since they were last loaded (looked at no more than
// every 10 s).
func (p *Pair) Certificate() *tls.Certificate {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.checked) < checkEvery {
		return p.cert
	}
	p.checked = time.Now()
	stamp, err := p.stampNow()
	if err != nil || stamp == p.stamp || stamp == p.failed {
		return p.cert // a file being replaced, or already reported
	}
	cert, err := p.load()
	if err != nil {
		p.failed = stamp
		p.log.Error("TLS certificate not reloaded; the previous one stays in use", "err", err)
		return p.cert
	}
	p.cert, p.stamp, p.failed = cert, stamp, ""
	p.log.Info("TLS certificate reloaded", "cert", p.certFile, "subject", subject(cert), "expires", expiry(cert))
	return p.cert
}

// Config returns a server configuration that serves the pair's current
// certificate (TLS 1.2 at least).
func (p *Pair) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return p.Certificate(), nil
		},
	}
}

// Describe names the loaded certificate's subject and expiry, for logs.
func (p *Pair) Describe() (subjectName string, expires time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return subject(p.cert), expiry(p.cert)
}

func subject(c *tls.Certificate) string {
	if c.Leaf == nil {
		return ""
	}
	return c.Leaf.Subject.String()
}

func expiry(c *tls.Certificate) time.Time {
	if c.Leaf == nil {
		return time.Time{}
	}
	return c.Leaf.NotAfter
}

// DefaultCertDir is where grid hosts keep the certificate authorities
// they trust (X509_CERT_DIR overrides it).
const DefaultCertDir = "/etc/grid-security/certificates"

// clientConfig returns a client configuration that trusts the system's
// authorities and those in X509_CERT_DIR (or DefaultCertDir when it
// exists): every PEM file there, including OpenSSL's hashed names.
func clientConfig() (*tls.Config, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	dir := os.Getenv("X509_CERT_DIR")
	if dir == "" {
		if _, err := os.Stat(DefaultCertDir); err != nil {
			return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
		}
		dir = DefaultCertDir
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("tls: trusted certificates: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".pem") && !strings.HasSuffix(name, ".crt") && !isHashName(name) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue // a dangling link, a file being replaced
		}
		pool.AppendCertsFromPEM(b)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// ClientConfig returns a client configuration that trusts the system's
// authorities and those in X509_CERT_DIR (or DefaultCertDir when it
// exists): every PEM file there, including OpenSSL's hashed names, as
// XRootD's and grid tools' clients do. It is read again every few
// minutes rather than per connection (a grid host's certificate
// directory holds hundreds of files, which its CRL and CA updates change
// now and then), and when X509_CERT_DIR changes. Callers must not
// change the configuration; Clone it first.
func ClientConfig() (*tls.Config, error) { return defaultClient.get() }

var defaultClient tlsCache

type tlsCache struct {
	mu  sync.Mutex
	cfg *tls.Config
	dir string // X509_CERT_DIR when cfg was made
	at  time.Time
}

const tlsCacheFor = 5 * time.Minute

func (c *tlsCache) get() (*tls.Config, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	dir := os.Getenv("X509_CERT_DIR")
	if c.cfg != nil && c.dir == dir && time.Since(c.at) < tlsCacheFor {
		return c.cfg, nil
	}
	cfg, err := clientConfig()
	if err != nil {
		return nil, err
	}
	c.cfg, c.dir, c.at = cfg, dir, time.Now()
	return cfg, nil
}

// isHashName reports whether name is an OpenSSL hashed certificate name
// ("3387b84d.0").
func isHashName(name string) bool {
	h, n, ok := strings.Cut(name, ".")
	if !ok || len(h) != 8 {
		return false
	}
	if _, err := strconv.ParseUint(h, 16, 32); err != nil {
		return false
	}
	_, err := strconv.Atoi(n)
	return err == nil
}
