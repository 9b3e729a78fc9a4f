// Package testcluster builds object stores over local directories for
// tests in other packages. It is test support only.
package testcluster

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/object"
)

// Cluster is a store over n local directories.
type Cluster struct {
	Store *object.Store
	Dirs  []string
	Nodes []node.Node
}

// New builds a cluster of n nodes (ids n00, n01, ...) in t.TempDir with
// geometry g (zero: the default), fsync off. mod may adjust the options.
func New(t testing.TB, n int, g layout.Geometry, mod ...func(*object.Options)) *Cluster {
	t.Helper()
	c := &Cluster{}
	base := t.TempDir()
	for i := range n {
		id := fmt.Sprintf("n%02d", i)
		dir := filepath.Join(base, id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		ln, err := node.NewLocal(id, dir, node.LocalOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		c.Dirs = append(c.Dirs, dir)
		c.Nodes = append(c.Nodes, ln)
	}
	opts := object.Options{Geometry: g, MinFree: -1}
	for _, m := range mod {
		m(&opts)
	}
	s, err := object.New(c.Nodes, opts)
	if err != nil {
		t.Fatal(err)
	}
	c.Store = s
	return c
}

// Faulty wraps every node of the cluster in a fault injector
// (node.Wrap) and returns a store over the wrapped nodes, with the same
// options as New, and the wrappers by node index.
func (c *Cluster) Faulty(t testing.TB, g layout.Geometry, mod ...func(*object.Options)) (*object.Store, []*node.Faulty) {
	t.Helper()
	fs := make([]*node.Faulty, len(c.Nodes))
	nodes := make([]node.Node, len(c.Nodes))
	for i, n := range c.Nodes {
		fs[i] = node.Wrap(n)
		nodes[i] = fs[i]
	}
	opts := object.Options{Geometry: g, MinFree: -1}
	for _, m := range mod {
		m(&opts)
	}
	s, err := object.New(nodes, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, fs
}

// Put stores data at path, failing the test on error.
func (c *Cluster) Put(t testing.TB, path string, data []byte) {
	t.Helper()
	c.PutWith(t, path, data, nil)
}

// PutWith stores data at path created with opts (user metadata, say),
// failing the test on error.
func (c *Cluster) PutWith(t testing.TB, path string, data []byte, opts *object.CreateOptions) {
	t.Helper()
	w, err := c.Store.Create(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// Get reads the whole object at path.
func (c *Cluster) Get(path string) ([]byte, error) {
	ctx := context.Background()
	r, err := c.Store.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var buf bytes.Buffer
	_, err = r.WriteTo(ctx, &buf)
	return buf.Bytes(), err
}

// Archive returns the local file of path's archive on node i.
func (c *Cluster) Archive(i int, path string) string {
	return filepath.Join(c.Dirs[i], filepath.FromSlash(path))
}

// NodeIndex returns the index of the node with id.
func (c *Cluster) NodeIndex(id string) int {
	for i, n := range c.Nodes {
		if n.ID() == id {
			return i
		}
	}
	return -1
}

// Rand returns n pseudo-random bytes from r.
func Rand(r *rand.Rand, n int64) []byte {
	var key [32]byte
	for i := range key {
		key[i] = byte(r.Uint32())
	}
	b := make([]byte, n)
	rand.NewChaCha8(key).Read(b)
	return b
}
