package xrdnode

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/dataserver"
	"github.com/ecstore/ecstore/internal/testredirector"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// TestRedirectorIsNoNode checks that a node configured with the address
// of a redirector (an XRootD manager) is refused with an error that
// says so, and that its redirects are not followed: a node is one data
// server, whose archives must stay where they were written. The error
// was 'xrootd: mkdir /ec: xrootd: redirected to host port N'.
func TestRedirectorIsNoNode(t *testing.T) {
	data := startServing(t, "", "127.0.0.1:0", func(fsys *dataserver.FS) xrootd.FileSystem { return fsys })
	mgr := testredirector.Start(t, data.addr, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	want := "is a redirector"
	_, err := New(ctx, "root://"+mgr.Addr+"//ec", Options{ID: "03"})
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "configure the data server") ||
		!errors.Is(err, ErrRedirector) {
		t.Fatalf("New on a redirector: %v, want ErrRedirector saying %q", err, want)
	}
	t.Logf("New: %v", err)
	n, err := Open("root://"+mgr.Addr+"//ec", Options{ID: "03"})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, err := n.Stat(ctx, "/f"); !errors.Is(err, ErrRedirector) {
		t.Errorf("stat on a node that is a redirector: %v, want ErrRedirector", err)
	}
	if _, err := os.Stat(filepath.Join(data.dir, "ec")); !os.IsNotExist(err) {
		t.Errorf("the redirect was followed: the data server has the prefix (%v)", err)
	}
}

// TestRedirectedRequest checks that a request a data server redirects
// fails with an error that names the redirect and says what to do.
func TestRedirectedRequest(t *testing.T) {
	err := mapErr(&xrootd.RedirectError{Host: "ds7.example.org", Port: 1095})
	if !errors.Is(err, ErrRedirector) || !strings.Contains(err.Error(), "redirected to ds7.example.org:1095") {
		t.Errorf("a redirected request: %v", err)
	}
}
