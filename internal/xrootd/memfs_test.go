package xrootd

import (
	"context"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"io"
	"io/fs"
	"iter"
	"path"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// memFS is an in-memory FileSystem for tests: a map of path → node. It
// implements every optional interface.
type memFS struct {
	mu    sync.Mutex
	nodes map[string]*memNode
	// aborted counts files aborted at disconnect.
	aborted int
	// streamed counts writes taken through WriteFrom.
	streamed int
	// failOpen, when set, is returned by Open for that path.
	failOpen map[string]error
	nextID   uint64
}

type memNode struct {
	dir   bool
	data  []byte
	mode  fs.FileMode
	mtime time.Time
	id    uint64
}

func newMemFS() *memFS {
	m := &memFS{nodes: map[string]*memNode{}, failOpen: map[string]error{}}
	m.nodes["/"] = m.newNode(true, 0o755)
	return m
}

func (m *memFS) newNode(dir bool, perm fs.FileMode) *memNode {
	m.nextID++
	return &memNode{dir: dir, mode: perm, mtime: time.Now(), id: m.nextID}
}

// put stores a file directly (test setup).
func (m *memFS) put(name string, data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mkdirAll(path.Dir(name))
	n := m.newNode(false, 0o644)
	n.data = append([]byte(nil), data...)
	m.nodes[name] = n
}

// get returns a copy of a file's bytes.
func (m *memFS) get(name string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.nodes[name]
	if !ok || n.dir {
		return nil, false
	}
	return append([]byte(nil), n.data...), true
}

func (m *memFS) mkdirAll(dir string) {
	for d := dir; ; d = path.Dir(d) {
		if _, ok := m.nodes[d]; !ok {
			m.nodes[d] = m.newNode(true, 0o755)
		}
		if d == "/" {
			return
		}
	}
}

func (m *memFS) info(name string, n *memNode) FileInfo {
	mode := n.mode
	if n.dir {
		mode |= fs.ModeDir
	}
	return FileInfo{Name: path.Base(name), ID: n.id, Size: int64(len(n.data)), Mode: mode, ModTime: n.mtime, Owner: "test", Group: "test"}
}

func (m *memFS) Open(ctx context.Context, name string, opts OpenOptions) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.failOpen[name]; err != nil {
		return nil, err
	}
	n, exists := m.nodes[name]
	switch {
	case exists && n.dir:
		return nil, Errorf(ErrIsDirectory, "%s is a directory", name)
	case exists && opts.Flags&OpenNew != 0:
		return nil, fmt.Errorf("open %s: %w", name, fs.ErrExist)
	case !exists && !opts.Flags.Create():
		return nil, fmt.Errorf("open %s: %w", name, fs.ErrNotExist)
	}
	if opts.Flags.Create() && (!exists || opts.Flags&OpenDelete != 0) {
		// Like xrootd, create missing parents whether or not kXR_mkpath
		// is set: xrdcp does not set it.
		for d := path.Dir(name); d != "/"; d = path.Dir(d) {
			if p, ok := m.nodes[d]; ok && !p.dir {
				return nil, Errorf(ErrNotFile, "%s is not a directory", d)
			}
		}
		m.mkdirAll(path.Dir(name))
		perm := opts.Perm
		if perm == 0 {
			perm = 0o600
		}
		n = m.newNode(false, perm)
		m.nodes[name] = n
	}
	return &memFile{fs: m, name: name, node: n}, nil
}

func (m *memFS) Stat(ctx context.Context, name string) (FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.nodes[name]
	if !ok {
		return FileInfo{}, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	return m.info(name, n), nil
}

func (m *memFS) List(ctx context.Context, dir string) iter.Seq2[FileInfo, error] {
	return func(yield func(FileInfo, error) bool) {
		m.mu.Lock()
		d, ok := m.nodes[dir]
		if !ok || !d.dir {
			m.mu.Unlock()
			err := fs.ErrNotExist
			if ok {
				err = syscall.ENOTDIR // as os.ReadDir says, and xrootd
			}
			yield(FileInfo{}, fmt.Errorf("list %s: %w", dir, err))
			return
		}
		var out []FileInfo
		prefix := strings.TrimSuffix(dir, "/") + "/"
		for p, n := range m.nodes {
			if p != "/" && strings.HasPrefix(p, prefix) && !strings.Contains(p[len(prefix):], "/") {
				out = append(out, m.info(p, n))
			}
		}
		m.mu.Unlock()
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		for _, fi := range out {
			if ctx.Err() != nil {
				yield(FileInfo{}, ctx.Err())
				return
			}
			if !yield(fi, nil) {
				return
			}
		}
	}
}

func (m *memFS) children(dir string) int {
	prefix := strings.TrimSuffix(dir, "/") + "/"
	c := 0
	for p := range m.nodes {
		if p != "/" && strings.HasPrefix(p, prefix) {
			c++
		}
	}
	return c
}

func (m *memFS) Remove(ctx context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.nodes[name]
	switch {
	case !ok:
		return fmt.Errorf("rm %s: %w", name, fs.ErrNotExist)
	case n.dir:
		return Errorf(ErrIsDirectory, "%s is a directory", name)
	}
	delete(m.nodes, name)
	return nil
}

func (m *memFS) Rename(ctx context.Context, oldName, newName string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.nodes[oldName]
	if !ok {
		return fmt.Errorf("mv %s: %w", oldName, fs.ErrNotExist)
	}
	if _, ok := m.nodes[path.Dir(newName)]; !ok {
		return fmt.Errorf("mv to %s: parent: %w", newName, fs.ErrNotExist)
	}
	if n.dir {
		prefix := oldName + "/"
		for p, c := range m.nodes {
			if strings.HasPrefix(p, prefix) {
				delete(m.nodes, p)
				m.nodes[newName+"/"+p[len(prefix):]] = c
			}
		}
	}
	delete(m.nodes, oldName)
	m.nodes[newName] = n
	return nil
}

func (m *memFS) Mkdir(ctx context.Context, name string, perm fs.FileMode, parents bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n, ok := m.nodes[name]; ok {
		if parents && n.dir {
			return nil
		}
		return fmt.Errorf("mkdir %s: %w", name, fs.ErrExist)
	}
	if _, ok := m.nodes[path.Dir(name)]; !ok {
		if !parents {
			return fmt.Errorf("mkdir %s: parent: %w", name, fs.ErrNotExist)
		}
		m.mkdirAll(path.Dir(name))
	}
	m.nodes[name] = m.newNode(true, perm)
	return nil
}

func (m *memFS) Rmdir(ctx context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.nodes[name]
	switch {
	case !ok:
		return fmt.Errorf("rmdir %s: %w", name, fs.ErrNotExist)
	case !n.dir:
		return Errorf(ErrNotFile, "%s is not a directory", name)
	case m.children(name) > 0:
		return Errorf(ErrFSError, "%s is not empty", name)
	case name == "/":
		return Errorf(ErrNotAuthorized, "cannot remove /")
	}
	delete(m.nodes, name)
	return nil
}

func (m *memFS) Truncate(ctx context.Context, name string, size int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.nodes[name]
	if !ok || n.dir {
		return fmt.Errorf("truncate %s: %w", name, fs.ErrNotExist)
	}
	return n.truncate(size)
}

// memMaxSize bounds files so that hostile offsets cannot exhaust memory.
const memMaxSize = 1 << 30

func (n *memNode) truncate(size int64) error {
	if size > memMaxSize {
		return Errorf(ErrNoSpace, "size %d exceeds the test file system's limit", size)
	}
	if size <= int64(len(n.data)) {
		n.data = n.data[:size]
	} else {
		n.data = append(n.data, make([]byte, size-int64(len(n.data)))...)
	}
	n.mtime = time.Now()
	return nil
}

func (m *memFS) Chmod(ctx context.Context, name string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.nodes[name]
	if !ok {
		return fmt.Errorf("chmod %s: %w", name, fs.ErrNotExist)
	}
	n.mode = perm
	return nil
}

func (m *memFS) ChecksumAlgorithms() []string { return []string{"adler32", "crc32c"} }

func (m *memFS) Checksum(ctx context.Context, name, alg string) (string, error) {
	data, ok := m.get(name)
	if !ok {
		return "", fmt.Errorf("checksum %s: %w", name, fs.ErrNotExist)
	}
	switch alg {
	case "adler32":
		return fmt.Sprintf("%08x", adler32.Checksum(data)), nil
	case "crc32c":
		return fmt.Sprintf("%08x", crc32.Checksum(data, castagnoli)), nil
	}
	return "", Errorf(ErrUnsupported, "no %s", alg)
}

// ListChecksums lists dir as List does, with the files' checksums.
func (m *memFS) ListChecksums(ctx context.Context, dir, alg string) iter.Seq2[ChecksumEntry, error] {
	return func(yield func(ChecksumEntry, error) bool) {
		for fi, err := range m.List(ctx, dir) {
			e := ChecksumEntry{FileInfo: fi}
			if err == nil && !fi.IsDir() {
				e.Checksum, _ = m.Checksum(ctx, path.Join(dir, fi.Name), alg)
			}
			if !yield(e, err) {
				return
			}
		}
	}
}

func (m *memFS) Space(ctx context.Context, name string) (Space, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var used int64
	for _, n := range m.nodes {
		used += int64(len(n.data))
	}
	const total = 1 << 40
	return Space{Total: total, Free: total - used, Used: used}, nil
}

// memFile is an open memFS file.
type memFile struct {
	fs   *memFS
	name string
	node *memNode
}

func (f *memFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// WriteFrom takes a large write from the connection. Bytes before a
// failure of r are written, as a file that streams to disk would.
func (f *memFile) WriteFrom(ctx context.Context, r io.Reader, off, n int64) (int64, error) {
	buf := make([]byte, n)
	got, err := io.ReadFull(r, buf)
	if got > 0 {
		if _, werr := f.WriteAt(ctx, buf[:got], off); werr != nil {
			return int64(got), werr
		}
	}
	f.fs.mu.Lock()
	f.fs.streamed++
	f.fs.mu.Unlock()
	return int64(got), err
}

func (f *memFile) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if end := off + int64(len(p)); end > int64(len(f.node.data)) {
		if err := f.node.truncate(end); err != nil {
			return 0, err
		}
	}
	copy(f.node.data[off:], p)
	f.node.mtime = time.Now()
	return len(p), nil
}

func (f *memFile) Truncate(ctx context.Context, size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return f.node.truncate(size)
}

func (f *memFile) Sync(ctx context.Context) error { return nil }

func (f *memFile) Stat(ctx context.Context) (FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return f.fs.info(f.name, f.node), nil
}

func (f *memFile) Close(ctx context.Context) error { return nil }

func (f *memFile) Abort(ctx context.Context) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.fs.aborted++
	return nil
}
