package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/repair"
)

const putHelp = `
Stores the local file LOCAL as the object /path. LOCAL "-" reads
standard input. If /path ends with a slash, the object is named after
LOCAL inside that directory. An object that exists at /path is not
replaced without -f (--force), as xrdcp and cp do: put refuses before it
reads LOCAL.

The object is streamed: memory use stays a few blocks whatever its size.
It becomes visible only when it is complete; on an error, SIGINT or
SIGTERM the write is aborted and nothing is stored. So it is when the
file LOCAL turns out longer or shorter than it was when put began (a
file still being written; "ecstore put - /path < LOCAL" stores what it
reads, whatever the size). With the default --fsync=true the object is
on stable storage on every node when put returns. The first put creates
the embedded cluster.

A put succeeds when K+1 archives (the write quorum) are stored. If a
node failed during the write, the object is stored degraded, and put
rebuilds the missing archives on other nodes before it returns, as
the gateway's healer does (--heal=false leaves that to
"ecstore repair"); it says so on stderr, and if the rebuild fails,
the object is still stored and put still succeeds.

Examples:
  ecstore put run1.root /atlas/run1.root
  ecstore put -f run1.root /atlas/run1.root     # replace the object
  tar c results | ecstore put - /backup/results.tar
`

// cmdPut is "ecstore put LOCAL /path".
func cmdPut(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "put", "put [flags] LOCAL /path", putHelp)
	cf := fs.addClusterFlags()
	force := fs.forceFlag("replace the object at /path if it exists")
	heal := fs.Bool("heal", true, "rebuild at once the archives of nodes that failed during the write")
	pos, err := fs.parse(args, 2, 2)
	if err != nil {
		return err
	}
	local, path := pos[0], pos[1]
	if strings.HasSuffix(path, "/") && local != "-" {
		path += filepath.Base(local)
	}
	if err := checkObjectPath(path); err != nil {
		return err
	}

	src, size := e.stdin, int64(-1)
	if local != "-" {
		f, err := os.Open(local)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return fmt.Errorf("%s: is a directory", local)
		}
		if fi.Mode().IsRegular() {
			size = fi.Size()
		}
		src = f
	}

	var degraded degradedWrite
	c, err := cf.openWith(e, true, object.Events{DegradedWrite: degraded.record})
	if err != nil {
		return err
	}
	defer c.Close()

	opts := &object.CreateOptions{SizeHint: max(size, 0)}
	if !*force {
		// Checked at Create, before any data moves, and again at the
		// commit, for an object stored meanwhile (through this process
		// only: put has no lock on other writers).
		opts.Exclusive = true
		opts.Precondition = func(cur *object.Info) error {
			if cur != nil {
				return object.ErrExist
			}
			return nil
		}
	}
	w, err := c.Store().Create(ctx, path, opts)
	if errors.Is(err, object.ErrExist) {
		return fmt.Errorf("put %s: %s exists (use -f to replace it)", path, path)
	}
	if err != nil {
		return describe(ctx, path, err)
	}
	in, stop := pump(ctx, src)
	defer stop()
	if size >= 0 {
		in = &sizedReader{r: in, size: size, name: local}
	}
	bar := startProgress(e, path, size)
	_, err = w.ReadFrom(progressReader{in, bar})
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		bar.finish(false)
		w.Abort()
		if ctx.Err() != nil {
			return fmt.Errorf("put %s: %w; nothing was stored", path, errInterrupted)
		}
		return fmt.Errorf("put %s: %w; nothing was stored", path, describe(ctx, path, err))
	}
	if err := w.Close(); err != nil {
		bar.finish(false)
		if ctx.Err() != nil {
			return fmt.Errorf("put %s: %w; nothing was stored", path, errInterrupted)
		}
		if errors.Is(err, object.ErrExist) {
			return fmt.Errorf("put %s: %s was stored by another writer meanwhile (use -f to replace it); nothing was stored", path, path)
		}
		return fmt.Errorf("put %s: %w", path, describe(ctx, path, err))
	}
	bar.finish(true)
	if slots := degraded.missing(); len(slots) > 0 {
		healDegradedPut(ctx, e, c.Store(), path, slots, *heal)
	}
	return nil
}

// degradedWrite records the slots a write committed without
// (object.Events.DegradedWrite); a put writes one object.
type degradedWrite struct {
	mu    sync.Mutex
	slots []int
}

func (d *degradedWrite) record(_ string, failed []int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.slots = slices.Clone(failed)
}

func (d *degradedWrite) missing() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.slots
}

// healDegradedPut rebuilds the slots the put of path could not store
// (unless heal is false) and says what it did. The object is stored
// either way: a failed rebuild is a warning, not an error.
func healDegradedPut(ctx context.Context, e *env, s *object.Store, path string, missing []int, heal bool) {
	if !heal {
		fmt.Fprintf(e.stderr, "ecstore: put %s: stored degraded (slots %v missing: their nodes failed); \"ecstore repair\" rebuilds them\n", path, missing)
		return
	}
	_, res, err := repair.Heal(ctx, s, path, nil)
	if err != nil {
		fmt.Fprintf(e.stderr, "ecstore: put %s: stored degraded (slots %v missing: their nodes failed); rebuilding them failed: %v; \"ecstore repair\" rebuilds them once enough nodes answer\n", path, missing, err)
		return
	}
	if res == nil || len(res.Rebuilt) == 0 {
		return // healthy after all (the node's archive was there)
	}
	var done []string
	for _, slot := range slices.Sorted(maps.Keys(res.Rebuilt)) {
		done = append(done, fmt.Sprintf("slot %d on node %s", slot, res.Rebuilt[slot]))
	}
	fmt.Fprintf(e.stderr, "ecstore: put %s: stored degraded (slots %v missing: their nodes failed); rebuilt %s\n", path, missing, strings.Join(done, ", "))
}

// pump returns a reader of src whose Read fails with ctx's error as soon
// as ctx is done, even while a Read of src is blocked (on a terminal or an
// idle pipe). A goroutine copies src into a pipe; stop releases it unless
// it is blocked reading src, which only happens when the process is about
// to exit.
func pump(ctx context.Context, src io.Reader) (io.Reader, func()) {
	pr, pw := io.Pipe()
	go func() {
		buf := make([]byte, 1<<20)
		_, err := io.CopyBuffer(pw, struct{ io.Reader }{src}, buf)
		pw.CloseWithError(err) // nil: EOF
	}()
	unhook := context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) })
	return pr, func() {
		unhook()
		pr.Close()
	}
}

// sizedReader reads a source of size bytes (a regular file's size when
// the transfer began, or a remote file's when it was opened) and fails,
// rather than end, when the source turns out shorter or longer: an
// upload of a file that changed size while it was read (one still being
// written, a /proc file that says 0 bytes) then fails before the commit,
// instead of storing other bytes than the file had when it was named.
// It reads at most size bytes and one more to find the end.
type sizedReader struct {
	r       io.Reader
	size, n int64
	name    string
}

// sizeChangedError is the error of a sizedReader whose source turned out
// shorter or longer than it said.
type sizeChangedError struct {
	name       string
	size, read int64 // read: the bytes read, when shorter
	grew       bool
}

func (e *sizeChangedError) Error() string {
	if e.grew {
		return fmt.Sprintf("%s grew while it was read: it had %d bytes when the copy began", e.name, e.size)
	}
	return fmt.Sprintf("%s shrank while it was read: %d of the %d bytes it had when the copy began", e.name, e.read, e.size)
}

func (s *sizedReader) Read(p []byte) (int, error) {
	if s.n >= s.size {
		var b [1]byte
		for {
			k, err := s.r.Read(b[:])
			switch {
			case k > 0:
				return 0, &sizeChangedError{name: s.name, size: s.size, grew: true}
			case err != nil:
				return 0, err // io.EOF: the end, where it should be
			}
		}
	}
	if rest := s.size - s.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	k, err := s.r.Read(p)
	s.n += int64(k)
	if err == io.EOF && s.n < s.size {
		err = &sizeChangedError{name: s.name, size: s.size, read: s.n}
	}
	return k, err
}
