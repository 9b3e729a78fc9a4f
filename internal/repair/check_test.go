package repair

import (
	"context"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/ecstore/ecstore/internal/archive"
	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/testcluster"
)

func TestCheckClassifiesObjects(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, ChunkSize: 256}
	c := testcluster.New(t, 7, g)
	r := rand.New(rand.NewPCG(1, 2))
	data := testcluster.Rand(r, 5*g.BlockSize()+3)
	for _, p := range []string{"/ok", "/d/missing", "/d/corrupt", "/d/lost"} {
		c.Put(t, p, data)
	}
	info := func(p string) *object.Info {
		in, err := c.Store.Stat(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	// /d/missing: remove the archive of slot 1.
	missingNode := info("/d/missing").Placement[1]
	os.Remove(c.Archive(c.NodeIndex(missingNode), "/d/missing"))
	// /d/corrupt: flip a byte inside block 2's chunk of slot 3.
	corruptNode := info("/d/corrupt").Placement[3]
	af := c.Archive(c.NodeIndex(corruptNode), "/d/corrupt")
	b, _ := os.ReadFile(af)
	f, _ := os.Open(af)
	st, _ := f.Stat()
	idx, err := archive.Parse(ctx, fileAt{f}, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	ch := idx.Chunks[2]
	b[ch.Offset+ch.Span()-1] ^= 0xff
	f.Close()
	os.WriteFile(af, b, 0o644)
	// /d/lost: remove three archives.
	for _, id := range info("/d/lost").Placement[:3] {
		os.Remove(c.Archive(c.NodeIndex(id), "/d/lost"))
	}
	// An abandoned write leaves a temporary file.
	w, err := c.Store.Create(ctx, "/d/abandoned", nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data[:100])
	// (not closed: its temp files stay, as after a crash)

	shallow, err := Check(ctx, c.Store, CheckOptions{DebrisAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]object.Health{"/ok": object.Healthy, "/d/missing": object.Degraded,
		"/d/corrupt": object.Healthy, "/d/lost": object.Unrecoverable}
	checkHealth(t, shallow, want)
	if len(shallow.Debris) != g.Width() || shallow.Debris[0].Object != "/d/abandoned" || shallow.Debris[0].InProgress {
		t.Fatalf("debris: %+v", shallow.Debris)
	}
	if shallow.Clean() {
		t.Fatal("report with damage says clean")
	}
	problems := strings.Join(find(shallow, "/d/missing").Problems(), "\n")
	if !strings.Contains(problems, "slot 1") || !strings.Contains(problems, missingNode) {
		t.Fatalf("problems of /d/missing do not name slot 1 on %s:\n%s", missingNode, problems)
	}

	deep, err := Check(ctx, c.Store, CheckOptions{Deep: true, DebrisAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	want["/d/corrupt"] = object.Degraded
	checkHealth(t, deep, want)
	problems = strings.Join(find(deep, "/d/corrupt").Problems(), "\n")
	if !strings.Contains(problems, "slot 3: node "+corruptNode+": chunk of block 2") {
		t.Fatalf("deep check does not name the corrupt chunk:\n%s", problems)
	}
	w.Abort()
}

func TestCheckCleanCluster(t *testing.T) {
	c := testcluster.New(t, 6, layout.Geometry{K: 3, M: 2, ChunkSize: 100})
	c.Put(t, "/a/b/c", []byte("hello"))
	c.Put(t, "/empty", nil)
	rep, err := Check(context.Background(), c.Store, CheckOptions{Deep: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Clean() || len(rep.Objects) != 2 {
		t.Fatalf("clean cluster: clean=%v objects=%d", rep.Clean(), len(rep.Objects))
	}
}

func checkHealth(t *testing.T, rep *Report, want map[string]object.Health) {
	t.Helper()
	if len(rep.Objects) != len(want) {
		t.Fatalf("%d objects reported, want %d", len(rep.Objects), len(want))
	}
	for p, h := range want {
		in := find(rep, p)
		if in == nil || in.Health != h {
			t.Fatalf("%s: %+v, want %v", p, in, h)
		}
	}
}

func find(rep *Report, p string) *object.Inspection {
	for _, in := range rep.Objects {
		if in.Path == p {
			return in
		}
	}
	return nil
}

type fileAt struct{ f *os.File }

func (f fileAt) ReadAt(_ context.Context, p []byte, off int64) (int, error) {
	return f.f.ReadAt(p, off)
}
