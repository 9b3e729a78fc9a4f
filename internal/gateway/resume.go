package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ecstore/ecstore/internal/xrootd"
)

// An upload whose connection breaks is kept for a while, so that its
// client can take it up again: XrdCl's write recovery (on by default in
// xrdcp and the Python bindings) logs in again, ends the broken session
// (kXR_endsess), opens the file again with kXR_open_updt and no
// kXR_new or kXR_delete, and sends again the writes it had no answer
// for. Against a plain xrootd that simply goes on writing the file;
// here the upload, which lives in the gateway until its close, is
// parked when its connection ends and resumed by that open. Writes the
// client sends again that the gateway took before the break are skipped:
// the client sends the same bytes.

// ParkFor is how long an upload whose connection broke waits for its
// client to take it up again before it is discarded.
const ParkFor = time.Minute

// MaxParked bounds the uploads kept at once for their clients: each holds
// the block it was filling (10 MiB at 8+2 with 1 MiB chunks). Past it, an
// upload whose connection breaks is discarded, as all were before.
const MaxParked = 64

// resumeWait bounds how long a resuming open waits for the broken
// connection's session to end and park the upload (its client may see
// the break, and log in again, before the gateway does).
const resumeWait = 10 * time.Second

// uploadKey names an upload for its client's recovery: the path, and the
// client process (user or token holder, process id and host, which
// XrdCl logs in again with), and whether it authenticated: an anonymous
// client naming itself as a token's holder does not take up the
// holder's upload.
type uploadKey struct {
	path, client string
}

func keyOf(ctx context.Context, path string) uploadKey {
	id := xrootd.PeerIdentity(ctx)
	return uploadKey{path: path, client: fmt.Sprintf("%s.%d@%s auth=%v", id.Holder, id.PID, id.Remote.Addr(), id.Authenticated)}
}

// uploads are the uploads of FS that their clients may take up again
// after a broken connection.
type uploads struct {
	mu sync.Mutex
	m  map[uploadKey]*writeFile
	// parked counts the uploads of m kept for their clients, but for
	// the committed ones (which hold no buffers).
	parked int
	// shut: the gateway is stopping; nothing is kept any more.
	shut bool
	// parkFor is ParkFor; tests shorten it.
	parkFor time.Duration
}

// add registers wf, an upload just started; a later one of the same
// client and path takes its place for recovery (one kept for that
// client is discarded: the client started again).
func (u *uploads) add(wf *writeFile) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[uploadKey]*writeFile{}
	}
	if old := u.m[wf.key]; old != nil && old.expiry != nil && old.expiry.Stop() {
		u.unparkLocked(old)
		go old.w.Abort()
	}
	wf.parked = make(chan struct{})
	u.m[wf.key] = wf
}

// unparkLocked ends wf's stay: it is no longer kept. u.mu must be held.
func (u *uploads) unparkLocked(wf *writeFile) {
	wf.expiry = nil
	if !wf.committed {
		u.parked--
	}
	if u.m[wf.key] == wf {
		delete(u.m, wf.key)
	}
}

// remove forgets wf, committed or discarded.
func (u *uploads) remove(wf *writeFile) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m[wf.key] == wf {
		delete(u.m, wf.key)
	}
}

// park keeps wf, whose connection ended before its close, for its
// client to take up again within parkFor; it is discarded then.
func (u *uploads) park(wf *writeFile) {
	u.mu.Lock()
	if u.m[wf.key] != wf || u.parked >= MaxParked && !wf.committed || u.shut {
		full := u.m[wf.key] == wf && !u.shut
		if u.m[wf.key] == wf {
			delete(u.m, wf.key)
		}
		close(wf.parked) // a resume waiting for it finds it gone
		u.mu.Unlock()
		if full {
			wf.log.Warn("an upload's connection broke before its close, with as many uploads kept for their clients as may be: discarded",
				"path", wf.name, "kept", MaxParked)
		}
		if !wf.committed {
			wf.hooks.broken("discarded")
		}
		wf.w.Abort()
		return
	}
	defer u.mu.Unlock()
	if !wf.committed {
		u.parked++
	}
	wf.expiry = time.AfterFunc(u.parkFor, func() {
		u.mu.Lock()
		mine := wf.expiry != nil // not taken up, nor discarded, meanwhile
		if mine {
			u.unparkLocked(wf)
		}
		u.mu.Unlock()
		if mine && !wf.committed {
			wf.hooks.broken("expired")
			wf.w.Abort()
			wf.log.Warn("an upload whose connection broke was not taken up again by its client: discarded",
				"path", wf.name, "written", wf.w.Size(), "waited", u.parkFor)
		}
	})
	close(wf.parked)
	if !wf.committed {
		wf.hooks.broken("kept")
		wf.log.Info("an upload's connection broke before its close: kept for its client to take up again",
			"path", wf.name, "written", wf.w.Size(), "for", u.parkFor)
	}
}

// DiscardBrokenUploads is for a gateway that stops: the uploads kept for
// their clients are discarded, and so is every upload whose connection
// ends from now on (no client can take it up again).
func (f *FS) DiscardBrokenUploads() {
	u := &f.uploads
	u.mu.Lock()
	u.shut = true
	var gone []*writeFile
	for _, wf := range u.m {
		if wf.expiry != nil && wf.expiry.Stop() {
			gone = append(gone, wf)
		}
	}
	for _, wf := range gone {
		u.unparkLocked(wf)
	}
	u.mu.Unlock()
	for _, wf := range gone {
		if !wf.committed {
			wf.hooks.broken("discarded")
		}
		wf.w.Abort()
	}
}

// errNoUpload: there is no upload to take up again.
var errNoUpload = errors.New("no upload of this client to take up again")

// resume gives the upload at key back to its client, once the session
// that held it has ended (within resumeWait).
func (u *uploads) resume(ctx context.Context, key uploadKey) (*writeFile, error) {
	u.mu.Lock()
	wf := u.m[key]
	var parked chan struct{}
	if wf != nil {
		parked = wf.parked
	}
	u.mu.Unlock()
	if wf == nil {
		return nil, errNoUpload
	}
	t := time.NewTimer(resumeWait)
	defer t.Stop()
	select {
	case <-parked:
	case <-t.C:
		return nil, fmt.Errorf("an upload of this client is still open on another connection after %v", resumeWait)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m[key] != wf || wf.expiry == nil || !wf.expiry.Stop() {
		return nil, errNoUpload // discarded meanwhile
	}
	wf.expiry = nil
	if !wf.committed {
		u.parked--
	}
	wf.parked = make(chan struct{})
	wf.resumed = true
	if wf.cut {
		// The payload of a write was cut by the break: what it carried
		// before is written, and the client sends the write again.
		wf.err, wf.cut = nil, false
	}
	wf.hooks.broken("resumed")
	wf.log.Info("an upload whose connection broke was taken up again by its client",
		"path", wf.name, "written", wf.w.Size())
	return wf, nil
}

// resumable reports whether wf, whose connection ended without a close,
// may be taken up again: an upload whose client asked for nothing to be
// kept unless closed (kXR_posc) is not, nor one whose writing failed
// other than by the break.
func (wf *writeFile) resumable() bool {
	return wf.uploads != nil && !wf.posc && (wf.err == nil || wf.cut) && wf.w.Err() == nil
}
