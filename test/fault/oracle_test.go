//go:build fault

package fault

import (
	"context"
	"fmt"
	"os"

	"github.com/ecstore/ecstore/internal/archive"
)

// The oracle reads archives straight from the node directories, with the
// format package alone (no engine code): which archives of which version
// exist where, and which of their chunks verify. The fault budget is
// computed from it, and the corruption test maps byte offsets to chunks
// with it.

// fileReaderAt adapts an *os.File to archive.ReaderAt.
type fileReaderAt struct{ f *os.File }

func (r fileReaderAt) ReadAt(_ context.Context, p []byte, off int64) (int, error) {
	return r.f.ReadAt(p, off)
}

// diskArchive is one archive file found on a node's disk.
type diskArchive struct {
	node int
	file string
	size int64
	idx  *archive.Index // nil if it does not parse
	err  error          // why it does not parse
	bad  []int64        // blocks whose chunk fails its CRC (when verified)
}

// good reports whether the archive parses and every chunk verified.
func (a *diskArchive) good() bool { return a.idx != nil && len(a.bad) == 0 }

// parseArchive parses the archive file at path; with verify it also
// checks every chunk's CRC-32.
func parseArchive(node int, path string, verify bool) (*diskArchive, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	a := &diskArchive{node: node, file: path, size: fi.Size()}
	ctx := context.Background()
	a.idx, a.err = archive.Parse(ctx, fileReaderAt{f}, fi.Size())
	if a.err != nil || !verify {
		return a, nil
	}
	var buf []byte
	for i := range a.idx.Chunks {
		c := &a.idx.Chunks[i]
		if int64(cap(buf)) < c.Span() {
			buf = make([]byte, c.Span())
		}
		if _, err := archive.ReadChunk(ctx, fileReaderAt{f}, c, buf); err != nil {
			a.bad = append(a.bad, c.Block)
		}
	}
	return a, nil
}

// scanObject returns the archives of path on every node's disk.
func (c *cluster) scanObject(path string, verify bool) []*diskArchive {
	var out []*diskArchive
	for i := range c.nodes {
		a, err := parseArchive(i, c.archive(i, path), verify)
		if err == nil && a != nil {
			out = append(out, a)
		}
	}
	return out
}

// goodArchives counts, for the object version whose metadata matches
// want (size and crc32c), the slots whose archive on a node that passes
// avail is verified; it is the maximum over matching versions. Where a
// slot has several archives (a rebuilt copy elsewhere and the original
// back on its node), the one a reader uses counts: the archive on the
// node the placement names wins, as in the engine's locate. The result is
// the surplus over what a read needs: good archives minus the version's K
// (small objects are stored 1+M, others geoK+geoM); negative when the
// version cannot be read, and -geoK when no archive matches.
func goodArchives(archives []*diskArchive, want *content, avail func(node int) bool) int {
	type pick struct {
		a    *diskArchive
		home bool
	}
	chosen := map[archive.Version]map[int]pick{}
	needK := map[archive.Version]int{}
	for _, a := range archives {
		if a.idx == nil || !avail(a.node) {
			continue
		}
		m := a.idx.Meta
		if m.Size != want.size || m.CRC32C != want.crc32c {
			continue
		}
		if chosen[m.Version] == nil {
			chosen[m.Version] = map[int]pick{}
			needK[m.Version] = m.K
		}
		home := m.Slot < len(m.Placement) && m.Placement[m.Slot] == fmt.Sprintf("%02d", a.node)
		if cur, ok := chosen[m.Version][m.Slot]; !ok || home && !cur.home {
			chosen[m.Version][m.Slot] = pick{a, home}
		}
	}
	best := -geoK
	for v, slots := range chosen {
		good := 0
		for _, p := range slots {
			if p.a.good() {
				good++
			}
		}
		best = max(best, good-needK[v])
	}
	return best
}

// diskView describes the archives of path on every node's disk, for
// failure messages.
func (c *cluster) diskView(path string) []string {
	var out []string
	for i, n := range c.nodes {
		a, err := parseArchive(i, c.archive(i, path), true)
		state := n.state.String()
		if n.full {
			state += "+full"
		}
		switch {
		case err != nil && os.IsNotExist(err):
			continue
		case err != nil:
			out = append(out, fmt.Sprintf("node %s (%s): %v", n.id, state, err))
		case a.idx == nil:
			out = append(out, fmt.Sprintf("node %s (%s): %d bytes, does not parse: %v", n.id, state, a.size, a.err))
		default:
			m := a.idx.Meta
			out = append(out, fmt.Sprintf("node %s (%s): version %s slot %d (placed on %s) size %d crc32c %s, bad blocks %v",
				n.id, state, m.Version, m.Slot, m.Placement[m.Slot], m.Size, m.CRC32C, a.bad))
		}
	}
	return out
}
