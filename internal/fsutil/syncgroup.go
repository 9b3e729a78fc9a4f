package fsutil

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// SyncGroup shares the fsyncs of a directory among the callers that ask
// for one at the same time (group commit). A caller asks after its own
// change to the directory (a create, rename or removal) is done, and
// returns only after an fsync that started later than that has finished,
// so its change is as durable as with an fsync of its own. When an fsync
// of the directory is already running, which may have started before
// the change, the caller waits for it to end and then joins the next one,
// which one waiting caller runs for all the others that joined it. Under
// concurrent creations and removals in one directory, each fsync (on most
// disks a cache flush) then covers many of them.
//
// Directories are told apart by device and inode, so callers may reach
// one through different names and descriptors. The zero value is ready
// to use; a nil *SyncGroup fsyncs every time.
type SyncGroup struct {
	mu    sync.Mutex
	dirs  map[dirID]*dirSyncs
	fsync func(*os.File) error // nil: (*os.File).Sync; tests hold and count fsyncs
}

type dirID struct{ dev, ino uint64 }

// dirSyncs is the state of one directory with callers in Sync.
type dirSyncs struct {
	running *syncCall // the fsync in progress, if any
	next    *syncCall // the one to start when it ends, gathering callers
	callers int       // in Sync for this directory; at 0 it is forgotten
}

// syncCall is one fsync, shared by the callers that joined it.
type syncCall struct {
	done    chan struct{} // closed when err is set
	err     error
	callers int // that joined it, under SyncGroup.mu
}

// Sync fsyncs the directory d, or waits for an fsync of the same
// directory that starts after the call does. The error is the fsync's,
// unwrapped, as from d.Sync().
func (g *SyncGroup) Sync(d *os.File) error {
	if g == nil {
		return d.Sync()
	}
	id, ok := idOf(d)
	if !ok {
		return d.Sync() // cannot tell which directory it is: on its own
	}

	g.mu.Lock()
	if g.dirs == nil {
		g.dirs = make(map[dirID]*dirSyncs)
	}
	ds := g.dirs[id]
	if ds == nil {
		ds = &dirSyncs{}
		g.dirs[id] = ds
	}
	ds.callers++
	call, prev, lead := ds.next, (*syncCall)(nil), false
	if call == nil {
		// Nobody is gathering callers: this caller starts the next
		// fsync, at once or after the running one.
		call, prev, lead = &syncCall{done: make(chan struct{})}, ds.running, true
		if prev == nil {
			ds.running = call
		} else {
			ds.next = call
		}
	}
	call.callers++
	g.mu.Unlock()

	if lead {
		if prev != nil {
			<-prev.done
			g.mu.Lock()
			ds.running, ds.next = call, nil // callers arriving now wait for call and then start another
			g.mu.Unlock()
		}
		if g.fsync != nil {
			call.err = g.fsync(d)
		} else {
			call.err = d.Sync()
		}
		g.mu.Lock()
		ds.running = nil
		close(call.done)
		g.mu.Unlock()
	} else {
		<-call.done
	}

	g.mu.Lock()
	if ds.callers--; ds.callers == 0 {
		delete(g.dirs, id)
	}
	g.mu.Unlock()
	return call.err
}

// idOf identifies the directory open as d.
func idOf(d *os.File) (dirID, bool) {
	var st unix.Stat_t
	var err error
	if cerr := withFd(d, func(fd int) { err = unix.Fstat(fd, &st) }); cerr != nil || err != nil {
		return dirID{}, false
	}
	return dirID{dev: uint64(st.Dev), ino: st.Ino}, true
}

// waiting is the number of callers that joined the next fsync of d's
// directory, for tests; g.mu must be held.
func (g *SyncGroup) waiting(d *os.File) int {
	id, _ := idOf(d)
	if ds := g.dirs[id]; ds != nil && ds.next != nil {
		return ds.next.callers
	}
	return 0
}
