package main

import (
	"context"
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
Stores the local file LOCAL as the object /path, replacing any object
there. LOCAL "-" reads standard input. If /path ends with a slash, the
object is named after LOCAL inside that directory.

The object is streamed: memory use stays a few blocks whatever its size.
It becomes visible only when it is complete; on an error, SIGINT or
SIGTERM the write is aborted and nothing is stored. With the default
--fsync=true the object is on stable storage on every node when put
returns. The first put creates the embedded cluster.

A put succeeds when K+1 archives (the write quorum) are stored. If a
node failed during the write, the object is stored degraded, and put
rebuilds the missing archives on other nodes before it returns, as
the gateway's healer does (--heal=false leaves that to
"ecstore repair"); it says so on stderr, and if the rebuild fails,
the object is still stored and put still succeeds.

Examples:
  ecstore put run1.root /atlas/run1.root
  tar c results | ecstore put - /backup/results.tar
`

// cmdPut is "ecstore put LOCAL /path".
func cmdPut(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "put", "put [flags] LOCAL /path", putHelp)
	cf := fs.addClusterFlags()
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

	w, err := c.Store().Create(ctx, path, &object.CreateOptions{SizeHint: max(size, 0)})
	if err != nil {
		return describe(ctx, path, err)
	}
	in, stop := pump(ctx, src)
	defer stop()
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
