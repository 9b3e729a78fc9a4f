package fsutil

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// FlushEvery is how many bytes written to a file a Flusher lets pass
// before it makes them durable in the background. Archive data is
// written with O_DIRECT, which on a virtual disk (and on a drive with a
// volatile write cache) lands in a cache the fsync of the commit then
// has to empty: on this project's test hosts a 1 GiB put's ten fsyncs
// took 0.4-1.1 s after the last byte, a quarter of the put. Flushed as
// it goes, the commit's fsync finds at most about this much per file
// left to write.
const FlushEvery = 32 << 20

// A Flusher makes a file that is being written durable a piece at a
// time, in the background: after every FlushEvery bytes written it
// starts an fdatasync of the file, unless the last one is still under
// way. The fsync that commits the file then has little left to do.
//
// A failed background flush is kept and reported by Wait: once an fsync
// has reported a write-back error, later ones on the file need not (the
// error is consumed), so the caller's own fsync could otherwise report
// success for data that was lost.
//
// Wrote and Wait are called by the file's one writer (or under its
// lock); the flush itself runs on a goroutine of its own.
type Flusher struct {
	f     *os.File
	every int64
	since int64         // bytes written since the last flush began
	done  chan struct{} // closed when the running flush ends; nil if none ran

	mu  sync.Mutex
	err error // the first failed flush
	// sync is unix.Fdatasync; tests replace it.
	sync func(fd int) error
}

// NewFlusher returns a Flusher of f that flushes every `every` bytes
// (FlushEvery when every is 0).
func NewFlusher(f *os.File, every int64) *Flusher {
	if every <= 0 {
		every = FlushEvery
	}
	return &Flusher{f: f, every: every, sync: unix.Fdatasync}
}

// Wrote counts n bytes written to the file, and starts a flush when
// enough have been written since the last one began and it has ended.
func (fl *Flusher) Wrote(n int) {
	if fl == nil {
		return
	}
	fl.since += int64(n)
	if fl.since < fl.every {
		return
	}
	if fl.done != nil {
		select {
		case <-fl.done:
		default:
			return // the last flush is still under way: the next write asks again
		}
	}
	fl.since = 0
	done := make(chan struct{})
	fl.done = done
	rc, err := fl.f.SyscallConn()
	if err != nil {
		fl.fail(err)
		close(done)
		return
	}
	go func() {
		defer close(done)
		var serr error
		if cerr := rc.Control(func(fd uintptr) { serr = fl.sync(int(fd)) }); cerr != nil {
			serr = cerr
		}
		if serr != nil {
			fl.fail(&os.PathError{Op: "fdatasync", Path: fl.f.Name(), Err: serr})
		}
	}()
}

func (fl *Flusher) fail(err error) {
	fl.mu.Lock()
	if fl.err == nil {
		fl.err = err
	}
	fl.mu.Unlock()
}

// Wait waits for a running flush to end and returns the first error a
// flush met. Call it before the file's own fsync, and before the file is
// closed.
func (fl *Flusher) Wait() error {
	if fl == nil {
		return nil
	}
	if fl.done != nil {
		<-fl.done
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.err
}
