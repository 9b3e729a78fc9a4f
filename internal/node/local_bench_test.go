package node_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ecstore/ecstore/internal/node"
)

// BenchmarkLocalSmallFile is the node side of a small-object put, get
// and rm on a local directory: create, write 27 KB, commit (fsync,
// rename, directory fsync), open and read, remove, in a directory three
// levels down.
func BenchmarkLocalSmallFile(b *testing.B) {
	for _, fsync := range []bool{false, true} {
		b.Run(fmt.Sprintf("fsync=%v", fsync), func(b *testing.B) { benchSmallFile(b, fsync) })
	}
}

func benchSmallFile(b *testing.B, fsync bool) {
	ctx := context.Background()
	l, err := node.NewLocal("n1", b.TempDir(), node.LocalOptions{Fsync: fsync})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	data := make([]byte, 27000)
	buf := make([]byte, len(data))
	i := 0
	for b.Loop() {
		p := fmt.Sprintf("/bench/run/d%d/obj%d", i%4, i)
		i++
		u, err := l.Create(ctx, p)
		if err != nil {
			b.Fatal(err)
		}
		if err := u.Write(ctx, data); err != nil {
			b.Fatal(err)
		}
		if err := u.Commit(ctx); err != nil {
			b.Fatal(err)
		}
		f, err := l.Open(ctx, p)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.ReadAt(ctx, buf, 0); err != nil {
			b.Fatal(err)
		}
		f.Close()
		if err := l.Remove(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
}
