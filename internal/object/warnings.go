package object

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// warnEvery spaces the warnings that an outage repeats for every request
// (a degraded read or write, an archive that cannot be opened, written,
// committed or removed on a node that is down): the first of a kind for
// the same nodes in each such interval is logged at Warn, with the number
// held back since the last one; the others at Debug. The metrics still
// count every one (ec_object_degraded_*, ec_node_errors_total).
const warnEvery = 30 * time.Second

// maxWarnKeys bounds the kinds and node sets a warnings remembers; older
// entries are forgotten first.
const maxWarnKeys = 1024

// warnings is the rate limit behind warnEvery. The zero value is ready.
type warnings struct {
	mu   sync.Mutex
	last map[string]*warnState
}

type warnState struct {
	at   time.Time // when the last Warn of the key was logged
	held int       // warnings of the key logged at Debug since
}

// log logs msg with args at Warn, or at Debug when a warning of the same
// msg about the same nodes was logged at Warn less than warnEvery ago.
// A Warn after some were held back says how many ("held_back").
func (w *warnings) log(ctx context.Context, logger *slog.Logger, msg string, nodes []string, args ...any) {
	key := msg + "\x00" + strings.Join(slices.Sorted(slices.Values(nodes)), ",")
	level, held := w.level(key, time.Now())
	if held > 0 {
		args = append(args, "held_back", held)
	}
	logger.Log(ctx, level, msg, args...)
}

// level decides the level of a warning of key at now.
func (w *warnings) level(key string, now time.Time) (slog.Level, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if st := w.last[key]; st != nil && now.Sub(st.at) < warnEvery {
		st.held++
		return slog.LevelDebug, 0
	}
	if w.last == nil {
		w.last = map[string]*warnState{}
	}
	held := 0
	if st := w.last[key]; st != nil {
		held = st.held
	} else if len(w.last) >= maxWarnKeys {
		w.forgetOldest()
	}
	w.last[key] = &warnState{at: now}
	return slog.LevelWarn, held
}

// forgetOldest drops the entry warned longest ago.
func (w *warnings) forgetOldest() {
	var oldest string
	var at time.Time
	for k, st := range w.last {
		if oldest == "" || st.at.Before(at) {
			oldest, at = k, st.at
		}
	}
	delete(w.last, oldest)
}
