// Package testtls makes a throw-away certificate authority and a server
// certificate signed by it, for tests of TLS listeners: the files a
// server loads and the CA a client trusts.
package testtls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Files are PEM files in a test's temporary directory.
type Files struct {
	Dir      string
	CAFile   string // the CA certificate
	CertFile string // the server certificate (for localhost and 127.0.0.1)
	KeyFile  string // its key
	CA       *x509.Certificate
	caKey    *ecdsa.PrivateKey
}

// New makes a CA and a server certificate named cn, valid for localhost,
// 127.0.0.1 and ::1, under t.TempDir().
func New(t testing.TB, cn string) *Files {
	t.Helper()
	dir := t.TempDir()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "ecstore test CA", Organization: []string{"ecstore tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	f := &Files{Dir: dir, CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "cert.pem"),
		KeyFile: filepath.Join(dir, "key.pem"), CA: ca, caKey: caKey}
	writePEM(t, f.CAFile, "CERTIFICATE", caDER)
	f.Issue(t, cn, f.CertFile, f.KeyFile)
	return f
}

// Issue writes a new server certificate named cn, signed by the CA, and
// its key, to certFile and keyFile.
func (f *Files) Issue(t testing.TB, cn, certFile, keyFile string) {
	t.Helper()
	key := newKey(t)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"ecstore tests"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, f.CA, &key.PublicKey, f.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, keyFile, "PRIVATE KEY", kb)
	writePEM(t, certFile, "CERTIFICATE", der)
}

// ClientConfig trusts the CA alone.
func (f *Files) ClientConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(f.CA)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t testing.TB, name, typ string, der []byte) {
	t.Helper()
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, name); err != nil {
		t.Fatal(err)
	}
}
