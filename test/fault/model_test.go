//go:build fault

package fault

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// content is one generated object body, kept in a local file.
type content struct {
	id     int
	size   int64
	file   string
	sha    [32]byte
	crc32c string // as the archive metadata records it
}

func (c *content) String() string {
	if c == nil {
		return "absent"
	}
	return fmt.Sprintf("c%d(%d bytes)", c.id, c.size)
}

// contents makes seeded object bodies in a directory.
type contents struct {
	t    testing.TB
	dir  string
	seed uint64
	next int
}

func newContents(t testing.TB, dir string, seed uint64) *contents {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &contents{t: t, dir: dir, seed: seed}
}

// make writes a new body of size bytes: ChaCha8 keyed by the seed and the
// body's number, so a replay writes the same bytes.
func (cs *contents) make(size int64) *content {
	cs.t.Helper()
	c := &content{id: cs.next, size: size, file: filepath.Join(cs.dir, fmt.Sprintf("c%04d", cs.next))}
	cs.next++
	var key [32]byte
	binary.LittleEndian.PutUint64(key[0:], cs.seed)
	binary.LittleEndian.PutUint64(key[8:], uint64(c.id))
	binary.LittleEndian.PutUint64(key[16:], uint64(size))
	g := rand.NewChaCha8(key)
	f, err := os.Create(c.file)
	if err != nil {
		cs.t.Fatal(err)
	}
	h := sha256.New()
	crc := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	w := io.MultiWriter(f, h, crc)
	buf := make([]byte, 1*mib)
	for left := size; left > 0; {
		n := min(left, int64(len(buf)))
		_, _ = g.Read(buf[:n])
		if _, err := w.Write(buf[:n]); err != nil {
			f.Close()
			cs.t.Fatal(err)
		}
		left -= n
	}
	if err := f.Close(); err != nil {
		cs.t.Fatal(err)
	}
	copy(c.sha[:], h.Sum(nil))
	c.crc32c = fmt.Sprintf("%08x", crc.Sum32())
	return c
}

// matchFile compares a downloaded file with the candidate bodies; it
// returns the matching one, or nil and a description of the difference
// from the first candidate.
func matchFile(path string, candidates []*content) (*content, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return nil, "", err
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	for _, c := range candidates {
		if c != nil && c.size == n && c.sha == sum {
			return c, "", nil
		}
	}
	diff := fmt.Sprintf("got %d bytes (sha256 %x…) matching none of %v", n, sum[:6], candidates)
	for _, c := range candidates {
		if c != nil {
			if off, err := firstDiff(path, c.file); err == nil {
				diff += fmt.Sprintf("; first difference from %v at byte %d", c, off)
			}
			break
		}
	}
	return nil, diff, nil
}

// firstDiff returns the first offset where files a and b differ (a
// shorter file differs at its end), or -1.
func firstDiff(a, b string) (int64, error) {
	fa, err := os.Open(a)
	if err != nil {
		return 0, err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return 0, err
	}
	defer fb.Close()
	ba, bb := make([]byte, mib), make([]byte, mib)
	var off int64
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if !bytes.Equal(ba[:na], bb[:nb]) {
			for i := range min(na, nb) {
				if ba[i] != bb[i] {
					return off + int64(i), nil
				}
			}
			return off + int64(min(na, nb)), nil
		}
		if ea != nil || eb != nil {
			return -1, nil
		}
		off += int64(na)
	}
}

// entry is what the model knows of one path: the bodies it may hold (nil
// for "absent"). More than one means an operation on it timed out or
// failed in a way that leaves its outcome open (why says which); the next
// read settles it.
type entry struct {
	states []*content
	why    string
}

func (e *entry) certain() bool { return len(e.states) == 1 }

func (e *entry) mayBeAbsent() bool { return slices.Contains(e.states, nil) }

// present returns the non-absent states.
func (e *entry) present() []*content {
	var out []*content
	for _, c := range e.states {
		if c != nil {
			out = append(out, c)
		}
	}
	return out
}

func (e *entry) String() string {
	parts := make([]string, len(e.states))
	for i, c := range e.states {
		parts[i] = c.String()
	}
	s := strings.Join(parts, " or ")
	if e.why != "" {
		s += " (uncertain: " + e.why + ")"
	}
	return s
}

// model maps object paths to what they must hold. Paths not in it are
// absent.
type model map[string]*entry

func (m model) get(path string) *entry {
	if e, ok := m[path]; ok {
		return e
	}
	return &entry{states: []*content{nil}}
}

// set records a certain outcome (nil: absent).
func (m model) set(path string, c *content) {
	if c == nil {
		delete(m, path)
		return
	}
	m[path] = &entry{states: []*content{c}}
}

// widen adds possible outcomes to path after an operation of unknown
// outcome.
func (m model) widen(path, why string, alts ...*content) {
	e := m.get(path)
	states := slices.Clone(e.states)
	for _, a := range alts {
		if !slices.Contains(states, a) {
			states = append(states, a)
		}
	}
	if len(states) == 1 && states[0] == nil {
		delete(m, path)
		return
	}
	m[path] = &entry{states: states, why: why}
}

// paths returns the model's paths, sorted.
func (m model) paths() []string {
	out := make([]string, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// lsEntry is one line of xrdfs ls -l.
type lsEntry struct {
	dir  bool
	size int64
}

// parseLs parses xrdfs ls -l output: "MODE OWNER GROUP SIZE DATE TIME PATH".
func parseLs(out string) (map[string]lsEntry, error) {
	ents := map[string]lsEntry{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 7 {
			return nil, fmt.Errorf("bad xrdfs ls -l line %q", sc.Text())
		}
		size, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad size in xrdfs ls -l line %q", sc.Text())
		}
		p := f[len(f)-1]
		if _, dup := ents[p]; dup {
			return nil, fmt.Errorf("xrdfs ls -l lists %s twice", p)
		}
		ents[p] = lsEntry{dir: strings.HasPrefix(f[0], "d"), size: size}
	}
	return ents, nil
}

// notFound reports whether a client's error output says the object does
// not exist (xrdcp: kXR_NotFound 3011; ecstore: "does not exist" or
// "no such object").
func notFound(out string) bool {
	return strings.Contains(out, "[3011]") || strings.Contains(out, "file does not exist") ||
		strings.Contains(out, "no such object") || strings.Contains(out, "no such file")
}
