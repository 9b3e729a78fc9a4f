package gateway

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/dataserver"
	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/node/xrdnode"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// Regression (found by review): a third-party copy pulled from whatever
// tpc.src named, the cluster's own storage nodes included, which serve
// anyone who reaches them: a client allowed to write anywhere could copy
// a node's raw archive of any object into a file of its own. A pull from
// a node's address, by any of this host's addresses, is refused; one
// from another server on the same host is not.
func TestThirdPartyCopyCannotPullFromANode(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	var nodes []node.Node
	var addrs []string
	for i := range 3 {
		dir := filepath.Join(base, fmt.Sprint(i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		ds, err := dataserver.New(dir, dataserver.Options{})
		if err != nil {
			t.Fatal(err)
		}
		addr, _ := serveFS(t, &xrootd.Server{Handler: ds})
		n, err := xrdnode.Open("root://"+addr+"//", xrdnode.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		nodes = append(nodes, n)
		addrs = append(addrs, addr)
	}
	store, err := object.New(nodes, object.Options{Geometry: layout.Geometry{K: 1, M: 2, ChunkSize: 64 << 10}, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	fsys := NewFS(store, nil, Hooks{})
	fsys.tpcKeys.Wait = 2 * time.Second
	_, cl := serveFS(t, &xrootd.Server{Handler: fsys, Limits: xrootd.Limits{WaitRespAfter: 10 * time.Millisecond}})
	secret := make([]byte, 100<<10)
	rand.NewChaCha8([32]byte{7}).Read(secret)
	upload(t, cl, "/atlas/secret.root", secret)

	// Another server on this host is a fine source.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "pub"), []byte("public"), 0o644); err != nil {
		t.Fatal(err)
	}
	ods, err := dataserver.New(other, dataserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	otherAddr, _ := serveFS(t, &xrootd.Server{Handler: ods})

	_, port, _ := strings.Cut(addrs[0], ":")
	for _, tc := range []struct {
		src, lfn string
		ok       bool
	}{
		{addrs[0], "/atlas/secret.root", false},
		{"localhost:" + port, "/atlas/secret.root", false},
		{otherAddr, "/pub", true},
	} {
		dst := fmt.Sprintf("/user/alice/from-%s", strings.ReplaceAll(tc.src, ":", "-"))
		f, err := cl.Open(ctx, dst+"?tpc.key=k1&tpc.lfn="+tc.lfn+"&tpc.src="+tc.src+"&tpc.stage=copy&tpc.spr=root&tpc.tpr=root",
			xrootd.OpenNew|xrootd.OpenUpdate|xrootd.OpenMkpath, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		err = f.Sync(ctx)
		if err == nil {
			err = f.Sync(ctx)
		}
		if cerr := f.Close(ctx); err == nil {
			err = cerr
		}
		if (err == nil) != tc.ok {
			t.Errorf("pull from %s%s: %v; want success %v", tc.src, tc.lfn, err, tc.ok)
		}
		if !tc.ok {
			if _, err := store.Stat(ctx, dst); err == nil {
				t.Errorf("the refused pull from %s left %s", tc.src, dst)
			}
		}
	}
}
