package tlsfiles

import (
	"os"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/testtls"
)

// TestReload: a renewed certificate is served after the files change; a
// broken pair keeps the previous one; missing files fail Load.
func TestReload(t *testing.T) {
	f := testtls.New(t, "first")
	p, err := Load(f.CertFile, f.KeyFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := p.Describe(); got != "CN=first,O=ecstore tests" {
		t.Fatalf("subject %q", got)
	}
	due := func() {
		p.mu.Lock()
		p.checked = time.Now().Add(-checkEvery)
		p.mu.Unlock()
	}

	f.Issue(t, "second", f.CertFile, f.KeyFile)
	if got := p.Certificate().Leaf.Subject.CommonName; got != "first" {
		t.Errorf("reloaded within %v of the last check: %q", checkEvery, got)
	}
	due()
	if got := p.Certificate().Leaf.Subject.CommonName; got != "second" {
		t.Errorf("after the renewal: %q, want second", got)
	}

	if err := os.WriteFile(f.KeyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	due()
	if got := p.Certificate().Leaf.Subject.CommonName; got != "second" {
		t.Errorf("with a broken key file: %q, want the previous certificate", got)
	}

	if _, err := Load(f.CertFile+".missing", f.KeyFile, nil); err == nil {
		t.Error("Load of a missing certificate succeeded")
	}
	if _, err := Load(f.CertFile, f.KeyFile, nil); err == nil {
		t.Error("Load with a broken key succeeded")
	}
}
