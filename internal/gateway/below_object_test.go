package gateway

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/testcluster"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// Regression (found by review): an mv onto a path below an object (a
// typo: mv /a/src /a/obj/x) was sent to every node; those holding the
// object's archives refused, the others made /a/obj a directory and moved
// their archives, and the source was split between two names (7 of 10
// unreadable) or, for small objects, moved "into" the object. The mv is
// refused with ENOTDIR and changes nothing, as rename(2) does.
func TestMvBelowAnObjectIsRefused(t *testing.T) {
	c := testcluster.New(t, 12, layout.Geometry{K: 4, M: 2, ChunkSize: 1024})
	_, cl := serveFS(t, &xrootd.Server{Handler: NewFS(c.Store, nil, Hooks{})})
	ctx := context.Background()
	data := testcluster.Rand(rand.New(rand.NewPCG(1, 2)), 20000)
	c.Put(t, "/a/obj", []byte("an object, not a directory"))
	for i := range 5 {
		src := fmt.Sprintf("/a/src%d", i)
		c.Put(t, src, data)
		if err := cl.Mv(ctx, src, "/a/obj/x"); err == nil {
			t.Errorf("mv %s /a/obj/x succeeded", src)
		}
		if got, err := c.Get(src); err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s after the refused mv: %d bytes, %v", src, len(got), err)
		}
	}
	if got, err := c.Get("/a/obj"); err != nil || string(got) != "an object, not a directory" {
		t.Errorf("/a/obj: %q, %v", got, err)
	}
}

// Regression (found by review): a create below an object was refused,
// but the nodes without the object's archive had made its path a
// directory; kXR_rmdir of the object's path then answered ok and removed
// the object's archives with the directories. A create below an object is
// refused before any node is written, whatever the placement, and rmdir
// of an object answers ENOTDIR.
func TestCreateAndRmdirBelowAnObject(t *testing.T) {
	c := testcluster.New(t, 12, layout.Geometry{K: 4, M: 2, ChunkSize: 1024})
	_, cl := serveFS(t, &xrootd.Server{Handler: NewFS(c.Store, nil, Hooks{})})
	ctx := context.Background()
	data := testcluster.Rand(rand.New(rand.NewPCG(1, 2)), 20000)
	c.Put(t, "/d/f", data)
	small := []byte("small")
	c.Put(t, "/d/s", small) // small objects' few archives miss most nodes
	for _, p := range []string{"/d/f/x", "/d/s/x", "/d/s/y/z"} {
		for _, flags := range []xrootd.OpenFlags{xrootd.OpenNew, xrootd.OpenDelete} {
			if f, err := cl.Open(ctx, p+"?oss.asize=5", flags|xrootd.OpenUpdate|xrootd.OpenMkpath, 0o644); err == nil {
				f.WriteAt(ctx, []byte("below"), 0)
				t.Errorf("create %s (flags %v) below an object: %v", p, flags, f.Close(ctx))
			}
		}
	}
	for _, p := range []string{"/d/f", "/d/s"} {
		if err := cl.Rmdir(ctx, p); err == nil {
			t.Errorf("rmdir of the object %s succeeded", p)
		}
	}
	if got, err := c.Get("/d/f"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("/d/f after the refused create and rmdir: %d bytes, %v", len(got), err)
	}
	if got, err := c.Get("/d/s"); err != nil || !bytes.Equal(got, small) {
		t.Fatalf("/d/s after the refused create and rmdir: %q, %v", got, err)
	}
}
