package node

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// preadAtLeast returns what the file holds up to len(p), stopping once it
// has want bytes: a file larger than the size its reader expected (want)
// fills the byte beyond, which is how openFd sees that a file grew after
// its fstat.
func TestPreadAtLeast(t *testing.T) {
	content := bytes.Repeat([]byte("0123456789"), 10)
	name := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(name, content, 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(name, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for _, c := range []struct{ buf, want, got int }{
		{101, 100, 100}, // as fstat said: the whole file, no byte beyond
		{51, 50, 51},    // grown: the byte beyond is there
		{200, 150, 100}, // shrunk: what there is
		{1, 0, 1},       // fstat said empty: one read all the same
		{0, 0, 0},
	} {
		p := make([]byte, c.buf)
		n, err := preadAtLeast(fd, p, c.want)
		if err != nil || n != c.got || !bytes.Equal(p[:n], content[:n]) {
			t.Errorf("buffer %d, want %d: read %d (%v), equal %v; expected %d", c.buf, c.want, n, err, bytes.Equal(p[:n], content[:n]), c.got)
		}
	}
}
