//go:build fault

package fault

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSchedule runs a seeded random schedule of operations and faults on
// each cluster configuration and checks the cluster against a model after
// every step:
//
//   - every get returns exactly the model's bytes; an error is accepted
//     only for a path whose last operation timed out or failed in a way
//     that leaves its outcome open;
//   - xrdfs ls -l shows exactly the model's objects, with their sizes;
//   - a put that fails leaves the old content (or absence) readable;
//   - while at most M nodes are faulty, every client operation completes
//     within -op-bound (a slower one is killed, reported as a liveness
//     failure, and its outcome becomes uncertain in the model).
//
// At the end every fault is healed (SIGCONT, restarts, disks freed),
// repair --deep runs, and fsck --deep --json must report a clean cluster
// holding exactly the model's objects, every one of which must read back
// bit-exact. A summary line gives the steps, faults by kind, transfers,
// runtime and repair throughput.
func TestSchedule(t *testing.T) {
	for _, k := range []kind{remoteNodes, localDirs} {
		t.Run("config="+k.String(), func(t *testing.T) {
			seed := testSeed(t)
			c := newCluster(t, clusterOptions{kind: k, heal: true})
			s := newSchedule(t, c, seed)
			s.run()
		})
	}
}

// Step kinds of the schedule. Node faults and revivals are drawn only
// when the fault budget allows them.
const (
	stepPut      = "put"
	stepGet      = "get"
	stepRm       = "rm"
	stepMv       = "mv"
	stepKill     = "kill"     // SIGKILL a node (local dirs: its disk disappears)
	stepStop     = "sigstop"  // SIGSTOP a node (remote nodes only)
	stepRevive   = "revive"   // SIGCONT, restart, disk back, or disk freed
	stepCorrupt  = "corrupt"  // flip bytes of an archive on disk
	stepTruncate = "truncate" // cut an archive short on disk
	stepFill     = "fill"     // fill a node's disk
	stepRepair   = "repair"   // ecstore repair (sometimes --deep, --rate)
)

var stepWeights = []struct {
	kind   string
	weight int
}{
	{stepPut, 22}, {stepGet, 12}, {stepRm, 7}, {stepMv, 5},
	{stepKill, 5}, {stepStop, 4}, {stepRevive, 9}, {stepCorrupt, 6},
	{stepTruncate, 3}, {stepFill, 3}, {stepRepair, 4},
}

// schedule is one run of the random schedule on one cluster.
type schedule struct {
	t       *testing.T
	c       *cluster
	seed    uint64
	rng     *rand.Rand
	model   model
	bodies  *contents
	tmp     string // downloads
	pool    []string
	skip    map[string]bool
	opBound time.Duration

	step     int
	start    time.Time
	stopped  map[int]int // node -> step it was SIGSTOPped at
	counts   map[string]int
	liveness []string
	failed   bool                // a safety violation ended the schedule
	hangSeen bool                // a liveness failure happened with a node SIGSTOPped
	hist     map[string][]string // path -> its last operations
	faultLog []string            // the last node faults and revivals

	repairBytes float64
	repairSecs  float64
}

func newSchedule(t *testing.T, c *cluster, seed uint64) *schedule {
	s := &schedule{
		t: t, c: c, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		model: model{}, bodies: newContents(t, filepath.Join(c.work, "bodies"), seed),
		tmp: filepath.Join(c.work, "downloads"), skip: map[string]bool{}, opBound: *opBoundFlag,
		stopped: map[int]int{}, counts: map[string]int{}, hist: map[string][]string{},
	}
	if err := os.MkdirAll(s.tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"/d0", "/d1"} {
		for i := range 12 {
			s.pool = append(s.pool, fmt.Sprintf("%s/o%02d", d, i))
		}
	}
	for _, k := range strings.Split(*excludeFlag, ",") {
		if k = strings.TrimSpace(k); k != "" {
			s.skip[k] = true
		}
	}
	if c.kind == localDirs {
		s.skip[stepStop] = true // the gateway opens local directories itself: nothing to SIGSTOP
	}
	if !c.tmpfs {
		s.skip[stepFill] = true
	}
	return s
}

// logf records a line of the schedule's history.
func (s *schedule) logf(format string, args ...any) {
	s.t.Helper()
	s.t.Logf("[%s step %d] %s", s.c.kind, s.step, fmt.Sprintf(format, args...))
}

// note adds a line to the history of paths (or, with none, of node
// faults) that violation messages quote.
func (s *schedule) note(line string, paths ...string) {
	line = fmt.Sprintf("step %d [%s]: %s", s.step, s.c.describe(), line)
	if len(paths) == 0 {
		s.faultLog = append(s.faultLog, line)
		if len(s.faultLog) > 6 {
			s.faultLog = s.faultLog[1:]
		}
	}
	for _, p := range paths {
		h := append(s.hist[p], line)
		if len(h) > 4 {
			h = h[1:]
		}
		s.hist[p] = h
	}
}

// pathViolation is violation with the history of path and of the faults.
func (s *schedule) pathViolation(p, format string, args ...any) {
	s.t.Helper()
	s.violation("%s\n  history of %s:\n    %s\n  last faults:\n    %s\n  archives on disk now:\n    %s", fmt.Sprintf(format, args...), p,
		strings.Join(s.hist[p], "\n    "), strings.Join(s.faultLog, "\n    "), strings.Join(s.c.diskView(p), "\n    "))
}

// violation reports a safety violation and ends the schedule.
func (s *schedule) violation(format string, args ...any) {
	s.t.Helper()
	s.t.Errorf("[%s step %d, seed %d, faults: %s] VIOLATION: %s", s.c.kind, s.step, baseSeed(), s.c.describe(), fmt.Sprintf(format, args...))
	s.failed = true
}

// slow records a liveness failure: a client operation that did not
// complete within the bound while at most M nodes were faulty.
func (s *schedule) slow(r result) {
	s.t.Helper()
	msg := fmt.Sprintf("step %d (%s): %s did not complete within %v", s.step, s.c.describe(), r.cmd, s.opBound)
	s.liveness = append(s.liveness, msg)
	s.logf("LIVENESS: %s", msg)
	if len(s.stopped) > 0 && !s.hangSeen {
		s.hangSeen = true
		s.logf("from now on SIGSTOPped nodes are continued at once and no node is SIGSTOPped again: the failure is recorded, and more would only slow the schedule down")
	}
}

func (s *schedule) run() {
	t := s.t
	s.start = time.Now()
	for _, d := range []string{"/d0", "/d1"} {
		mustRun(t, time.Minute, "xrdfs", s.c.addr, "mkdir", "-p", d)
	}
	t.Logf("schedule: config=%s seed=%d max steps %d, max duration %v, op bound %v, skipping %v",
		s.c.kind, baseSeed(), *stepsFlag, *durationFlag, s.opBound, s.skipped())
	for s.step = 1; s.step <= *stepsFlag && time.Since(s.start) < *durationFlag && !s.failed; s.step++ {
		kind := s.draw()
		s.counts["step "+kind]++
		touched := s.do(kind)
		if s.failed {
			break
		}
		s.check(touched, s.step%8 == 0)
	}
	steps := s.step - 1
	if s.failed {
		t.Logf("schedule stopped at step %d after a violation; replay with -seed=%d", steps, baseSeed())
		s.summary(steps)
		return
	}
	s.finish()
	s.summary(steps)
	if len(s.liveness) > 0 {
		n := min(len(s.liveness), 12)
		t.Errorf("%d client operations exceeded the %v bound with at most M nodes faulty (first %d):\n  %s\n(engine bug: namespace operations and writes wait on a SIGSTOPped node; see TestHungNode)",
			len(s.liveness), s.opBound, n, strings.Join(s.liveness[:n], "\n  "))
	}
}

func (s *schedule) skipped() []string {
	var out []string
	for k := range s.skip {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// draw picks the next step kind.
func (s *schedule) draw() string {
	total := 0
	var kinds []string
	var weights []int
	for _, w := range stepWeights {
		if s.skip[w.kind] || !s.possible(w.kind) {
			continue
		}
		weight := w.weight
		if w.kind == stepRevive {
			weight *= s.c.faulty() // the more faults, the likelier a revival
		}
		kinds = append(kinds, w.kind)
		weights = append(weights, weight)
		total += weight
	}
	// A SIGSTOPped node is continued within two steps (at once once a
	// hung node has stalled an operation).
	for _, at := range s.stopped {
		if (s.step-at >= 2 || s.hangSeen) && !s.skip[stepRevive] {
			return stepRevive
		}
	}
	x := s.rng.IntN(total)
	for i, w := range weights {
		if x < w {
			return kinds[i]
		}
		x -= w
	}
	return kinds[len(kinds)-1]
}

// possible reports whether a step kind can run in the current state.
func (s *schedule) possible(kind string) bool {
	switch kind {
	case stepStop:
		return s.c.faulty() < geoM && !s.hangSeen
	case stepKill, stepFill:
		return s.c.faulty() < geoM
	case stepRevive:
		return s.c.faulty() > 0
	case stepRm, stepMv, stepCorrupt, stepTruncate:
		return len(s.model) > 0
	}
	return true
}

// do runs one step and returns the paths it touched.
func (s *schedule) do(kind string) []string {
	switch kind {
	case stepPut:
		return s.doPut()
	case stepGet:
		p := s.pool[s.rng.IntN(len(s.pool))]
		return []string{p}
	case stepRm:
		return s.doRm()
	case stepMv:
		return s.doMv()
	case stepKill, stepStop, stepFill:
		s.doNodeFault(kind)
	case stepRevive:
		s.doRevive()
	case stepCorrupt, stepTruncate:
		return s.doDamage(kind)
	case stepRepair:
		s.doRepair(false)
	}
	return nil
}

// randomSize draws an object size: mostly up to 3 MiB, sometimes empty,
// tiny, or 9 MiB (two blocks).
func (s *schedule) randomSize() int64 {
	switch x := s.rng.IntN(20); {
	case x == 0:
		return 0
	case x <= 2:
		return 1 + s.rng.Int64N(4*kib)
	case x == 3:
		return 9*mib + s.rng.Int64N(64*kib)
	default:
		return s.rng.Int64N(3*mib + 1)
	}
}

func (s *schedule) doPut() []string {
	p := s.pool[s.rng.IntN(len(s.pool))]
	body := s.bodies.make(s.randomSize())
	old := s.model.get(p)
	var r result
	via := "xrdcp"
	if s.rng.IntN(10) < 3 {
		via = "ecstore cp"
		r = run(s.opBound, ecstoreBin, "cp", "-f", body.file, s.c.obj(p))
	} else {
		r = run(s.opBound, "xrdcp", "--nopbar", "-f", body.file, s.c.obj(p))
	}
	s.counts["puts"]++
	switch {
	case r.timedOut:
		s.slow(r)
		s.model.widen(p, "put timed out", body)
	case r.err != nil && strings.Contains(r.out, "outcome in doubt"):
		// object.ErrInDoubt: more than M archives renamed, fewer than K;
		// the next read completes the commit if the other archives'
		// nodes answer.
		s.counts["puts failed"]++
		s.model.widen(p, "put in doubt", body)
	case r.err != nil:
		s.counts["puts failed"]++
		s.logf("put %s %v via %s FAILED (model keeps %v): %s", p, body, via, old, strings.TrimSpace(r.out))
		s.note(fmt.Sprintf("put %v failed: %s", body, oneLine(r)), p)
		return []string{p}
	default:
		s.model.set(p, body)
	}
	s.logf("put %s %v via %s: %s in %v", p, body, via, okText(r), r.elapsed.Round(time.Millisecond))
	s.note(fmt.Sprintf("put %v: %s", body, okText(r)), p)
	return []string{p}
}

func okText(r result) string {
	switch {
	case r.timedOut:
		return "TIMED OUT"
	case r.err != nil:
		return "failed"
	}
	return "ok"
}

// presentPath picks a path the model holds (or, one time in eight, any
// path of the pool).
func (s *schedule) presentPath() string {
	paths := s.model.paths()
	if len(paths) == 0 || s.rng.IntN(8) == 0 {
		return s.pool[s.rng.IntN(len(s.pool))]
	}
	return paths[s.rng.IntN(len(paths))]
}

func (s *schedule) doRm() []string {
	p := s.presentPath()
	e := s.model.get(p)
	r := run(s.opBound, "xrdfs", s.c.addr, "rm", p)
	switch {
	case r.timedOut:
		s.slow(r)
		s.model.widen(p, "rm timed out", nil)
	case r.err != nil && e.certain() && e.states[0] == nil && notFound(r.out):
		// Removing what is not there fails, as it should.
	case r.err != nil:
		s.counts["rm failed"]++
		s.model.widen(p, "rm failed", nil)
	default:
		if e.certain() && e.states[0] == nil {
			s.violation("rm %s succeeded but the model says it is absent", p)
		}
		s.model.set(p, nil)
	}
	s.logf("rm %s (was %v): %s in %v %s", p, e, okText(r), r.elapsed.Round(time.Millisecond), oneLine(r))
	s.note(fmt.Sprintf("rm (was %v): %s", e, okText(r)), p)
	return []string{p}
}

func (s *schedule) doMv() []string {
	from := s.presentPath()
	to := s.pool[s.rng.IntN(len(s.pool))]
	if to == from {
		return nil
	}
	ef, et := s.model.get(from), s.model.get(to)
	r := run(s.opBound, "xrdfs", s.c.addr, "mv", from, to)
	switch {
	case r.timedOut || r.err != nil && !(ef.certain() && ef.states[0] == nil):
		if r.timedOut {
			s.slow(r)
		} else {
			s.counts["mv failed"]++
		}
		s.model.widen(from, "mv "+from+" "+to+" "+okText(r), nil)
		s.model.widen(to, "mv "+from+" "+to+" "+okText(r), ef.present()...)
	case r.err != nil:
		// Moving what is not there fails, as it should.
	default:
		present := ef.present()
		if len(present) == 0 {
			s.violation("mv %s %s succeeded but the model says %s is absent", from, to, from)
			break
		}
		// The target holds whatever the source held.
		s.model[to] = &entry{states: present, why: ef.why}
		if len(present) == 1 {
			s.model[to].why = ""
		}
		s.model.set(from, nil)
	}
	s.logf("mv %s (%v) -> %s (%v): %s in %v %s", from, ef, to, et, okText(r), r.elapsed.Round(time.Millisecond), oneLine(r))
	s.note(fmt.Sprintf("mv %s (%v) -> %s (%v): %s", from, ef, to, et, okText(r)), from, to)
	return []string{from, to}
}

func oneLine(r result) string {
	if r.ok() {
		return ""
	}
	out := strings.Join(strings.Fields(r.out), " ")
	if len(out) > 300 {
		out = out[:300] + "…"
	}
	return "[" + out + "]"
}

// budgetOK reports whether every object keeps at least K good archives
// on available nodes if node `without` also became unavailable (-1: no
// node), and if the archive file `damaged` also went bad ("" : none).
func (s *schedule) budgetOK(without int, damaged string) (bool, string) {
	avail := func(i int) bool { return i != without && s.c.nodes[i].available() }
	availNow := func(i int) bool { return s.c.nodes[i].available() }
	for _, p := range s.model.paths() {
		e := s.model[p]
		archives := s.c.scanObject(p, true)
		now := -geoK
		for _, st := range e.present() {
			now = max(now, goodArchives(archives, st, availNow))
		}
		if now < 0 {
			continue // already unreadable (a state the next read settles): nothing to keep
		}
		for _, a := range archives {
			if a.file == damaged {
				a.bad = append(a.bad, -1)
			}
		}
		after := -geoK
		for _, st := range e.present() {
			after = max(after, goodArchives(archives, st, avail))
		}
		if after < 0 {
			return false, fmt.Sprintf("%s would be %d good archives short", p, -after)
		}
	}
	return true, ""
}

func (s *schedule) doNodeFault(kind string) {
	var cands []int
	for i, n := range s.c.nodes {
		if !n.faulty() {
			cands = append(cands, i)
		}
	}
	s.rng.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	for _, i := range cands {
		if kind != stepFill {
			if ok, why := s.budgetOK(i, ""); !ok {
				s.logf("%s node %s skipped: %s", kind, s.c.nodes[i].id, why)
				continue
			}
		}
		switch kind {
		case stepKill:
			s.c.kill(i)
		case stepStop:
			s.c.stop(i)
			s.stopped[i] = s.step
		case stepFill:
			leave := s.rng.Int64N(mib)
			if err := s.c.fill(i, leave); err != nil {
				s.t.Fatalf("fill node %s: %v", s.c.nodes[i].id, err)
			}
		}
		s.counts["fault "+kind]++
		s.logf("%s node %s -> %s", kind, s.c.nodes[i].id, s.c.describe())
		s.note(fmt.Sprintf("%s node %s", kind, s.c.nodes[i].id))
		return
	}
	s.logf("%s: no node can fail within the budget", kind)
}

func (s *schedule) doRevive() {
	var cands []int
	for i, n := range s.c.nodes {
		if n.faulty() {
			cands = append(cands, i)
		}
	}
	// A node stopped for two steps goes first.
	i := cands[s.rng.IntN(len(cands))]
	for j, at := range s.stopped {
		if s.step-at >= 2 || s.hangSeen {
			i = j
		}
	}
	n := s.c.nodes[i]
	what := ""
	switch {
	case n.full && (n.state == nodeUp || s.rng.IntN(2) == 0):
		s.c.unfill(i)
		what = "unfill"
	default:
		what = map[nodeState]string{nodeKilled: "restart", nodeStopped: "sigcont", nodeOffline: "restore"}[n.state]
		s.c.revive(i)
		delete(s.stopped, i)
	}
	s.counts["fault "+what]++
	s.logf("%s node %s -> %s", what, n.id, s.c.describe())
	s.note(fmt.Sprintf("%s node %s", what, n.id))
}

// doDamage corrupts or truncates one archive of an object on disk.
func (s *schedule) doDamage(kind string) []string {
	paths := s.model.paths()
	s.rng.Shuffle(len(paths), func(i, j int) { paths[i], paths[j] = paths[j], paths[i] })
	for _, p := range paths {
		archives := s.c.scanObject(p, true)
		var good []*diskArchive
		for _, a := range archives {
			if a.good() {
				good = append(good, a)
			}
		}
		if len(good) == 0 {
			continue
		}
		a := good[s.rng.IntN(len(good))]
		if ok, _ := s.budgetOK(-1, a.file); !ok {
			continue
		}
		var what string
		switch kind {
		case stepCorrupt:
			what = s.corrupt(a)
		case stepTruncate:
			n := s.rng.Int64N(a.size)
			if err := os.Truncate(a.file, n); err != nil {
				s.t.Fatal(err)
			}
			what = fmt.Sprintf("truncated from %d to %d bytes", a.size, n)
		}
		s.counts["fault "+kind]++
		s.logf("%s archive of %s on node %s: %s", kind, p, s.c.nodes[a.node].id, what)
		s.note(fmt.Sprintf("%s archive on node %s", kind, s.c.nodes[a.node].id), p)
		return []string{p}
	}
	s.logf("%s: no archive can be damaged within the budget", kind)
	return nil
}

// corrupt flips 1 to 4 random bytes of an archive, mostly in chunk data.
func (s *schedule) corrupt(a *diskArchive) string {
	f, err := os.OpenFile(a.file, os.O_RDWR, 0)
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	var offs []string
	for range 1 + s.rng.IntN(4) {
		var off int64
		if len(a.idx.Chunks) > 0 && s.rng.IntN(4) > 0 {
			c := a.idx.Chunks[s.rng.IntN(len(a.idx.Chunks))]
			if c.Size == 0 {
				continue
			}
			off = c.Offset + c.Span() - c.Size + s.rng.Int64N(c.Size)
		} else {
			off = s.rng.Int64N(a.size)
		}
		var b [1]byte
		if _, err := f.ReadAt(b[:], off); err != nil {
			s.t.Fatal(err)
		}
		b[0] ^= byte(1 + s.rng.IntN(255))
		if _, err := f.WriteAt(b[:], off); err != nil {
			s.t.Fatal(err)
		}
		offs = append(offs, strconv.FormatInt(off, 10))
	}
	return "flipped bytes at offsets " + strings.Join(offs, ",")
}

var rebuiltRE = regexp.MustCompile(`rebuilt (\S+ \S+|\S+) in ([0-9.]+)s`)

// doRepair runs ecstore repair on the cluster while the gateway serves.
func (s *schedule) doRepair(final bool) result {
	args := []string{}
	if final || s.rng.IntN(2) == 0 {
		args = append(args, "--deep")
	}
	if !final && s.rng.IntN(3) == 0 {
		args = append(args, "--rate", "100MB")
	}
	if final {
		args = append(args, "--debris-age", debrisAgeNow)
	}
	r := s.c.cli(2*time.Minute, "repair", args...)
	s.counts["fault repair"]++
	s.noteRepair(r)
	s.note(fmt.Sprintf("repair %s: exit %d", strings.Join(args, " "), r.code))
	s.logf("repair %s: exit %d in %v: %s", strings.Join(args, " "), r.code, r.elapsed.Round(time.Millisecond), lastLines(r.out, 4))
	return r
}

// noteRepair adds a repair's rebuilt bytes and time to the totals.
func (s *schedule) noteRepair(r result) {
	b, secs := repairStats(r.out)
	s.repairBytes += b
	s.repairSecs += secs
}

// repairStats parses the bytes rebuilt and the seconds taken from the
// last line of ecstore repair ("rebuilt 1.1 MiB in 0.3s").
func repairStats(out string) (bytes, secs float64) {
	m := rebuiltRE.FindStringSubmatch(out)
	if m == nil {
		return 0, 0
	}
	b, err1 := parseHumanSize(m[1])
	sec, err2 := strconv.ParseFloat(m[2], 64)
	if err1 != nil || err2 != nil {
		return 0, 0
	}
	return b, sec
}

// parseHumanSize parses sizes as layout.HumanSize prints them ("0 B",
// "375000 bytes", "1.1 MiB").
func parseHumanSize(v string) (float64, error) {
	f := strings.Fields(v)
	if len(f) == 0 {
		return 0, fmt.Errorf("empty size")
	}
	x, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, err
	}
	if len(f) == 1 {
		return x, nil
	}
	mult := map[string]float64{"B": 1, "bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}[f[1]]
	if mult == 0 {
		return 0, fmt.Errorf("unknown unit in %q", v)
	}
	return x * mult, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// check verifies the cluster against the model after a step: the listing,
// the touched paths and a few others (all of them when full).
func (s *schedule) check(touched []string, full bool) {
	s.checkLs()
	if s.failed {
		return
	}
	paths := slices.Clone(touched)
	if full {
		paths = append(paths, s.model.paths()...)
	} else {
		for range 2 {
			paths = append(paths, s.pool[s.rng.IntN(len(s.pool))])
		}
	}
	seen := map[string]bool{}
	for i, p := range paths {
		if seen[p] {
			continue
		}
		if i >= len(touched) && time.Since(s.start) > *durationFlag {
			return // out of time: the final checks read everything
		}
		seen[p] = true
		s.checkGet(p, false)
		if s.failed {
			return
		}
	}
}

// checkLs compares xrdfs ls -l of the two directories with the model.
func (s *schedule) checkLs() {
	for _, dir := range []string{"/d0", "/d1"} {
		r := run(s.opBound, "xrdfs", s.c.addr, "ls", "-l", dir)
		s.counts["ls"]++
		if r.timedOut {
			s.slow(r)
			continue
		}
		if r.err != nil {
			s.violation("%v", r)
			return
		}
		got, err := parseLs(r.out)
		if err != nil {
			s.violation("%v:\n%s", err, r.out)
			return
		}
		for p, le := range got {
			e, ok := s.model[p]
			if !ok {
				s.pathViolation(p, "xrdfs ls -l %s lists %s (size %d), which the model says is absent", dir, p, le.size)
				return
			}
			match := false
			for _, c := range e.present() {
				match = match || !le.dir && le.size == c.size
			}
			if !match {
				s.pathViolation(p, "xrdfs ls -l %s lists %s with size %d (dir %v), the model says %v", dir, p, le.size, le.dir, e)
				return
			}
		}
		for _, p := range s.model.paths() {
			if !strings.HasPrefix(p, dir+"/") {
				continue
			}
			if _, ok := got[p]; !ok && !s.model[p].mayBeAbsent() {
				s.pathViolation(p, "xrdfs ls -l %s does not list %s, the model says %v:\n%s", dir, p, s.model[p], r.out)
				return
			}
		}
	}
}

// checkGet reads path through a randomly chosen client and compares it
// with the model; final demands a definite answer.
func (s *schedule) checkGet(p string, final bool) {
	e := s.model.get(p)
	local := filepath.Join(s.tmp, fmt.Sprintf("get-%d", s.step))
	os.Remove(local)
	defer os.Remove(local)
	var r result
	var via string
	bound := s.opBound
	if final {
		bound = 2 * time.Minute
	}
	switch x := s.rng.IntN(20); {
	case x < 12:
		via = "xrdcp"
		r = run(bound, "xrdcp", "--nopbar", "-f", s.c.obj(p), local)
	case x < 17:
		via = "ecstore cp"
		r = run(bound, ecstoreBin, "cp", "-f", s.c.obj(p), local)
	default:
		// The CLI on the cluster itself, beside the gateway. It dials
		// every node at start-up (10 s connect timeout), so a hung node
		// costs it that much more than a gateway read.
		via = "ecstore get"
		r = s.c.cli(bound+10*time.Second, "get", p, local)
	}
	s.counts["gets"]++
	switch {
	case r.timedOut:
		s.slow(r)
		return
	case r.err == nil:
		got, diff, err := matchFile(local, e.states)
		if err != nil {
			s.t.Fatal(err)
		}
		if got == nil {
			s.pathViolation(p, "get %s via %s returned wrong bytes: %s; the model says %v", p, via, diff, e)
			return
		}
		if !e.certain() {
			s.logf("get %s via %s settles it: %v (was %v)", p, via, got, e)
		}
		s.model.set(p, got)
	case notFound(r.out) && e.mayBeAbsent():
		if !e.certain() {
			s.logf("get %s via %s settles it: absent (was %v)", p, via, e)
		}
		s.model.set(p, nil)
	case !e.certain() && !final:
		s.logf("get %s via %s failed while its state is open (%v): %s", p, via, e, oneLine(r))
	default:
		s.pathViolation(p, "get %s via %s: %s; the model says %v", p, via, oneLine(r), e)
	}
}

// fsckReport is the part of fsck --json the suite reads.
type fsckReport struct {
	Clean   bool           `json:"clean"`
	Counts  map[string]int `json:"counts"`
	Objects []struct {
		Path     string   `json:"path"`
		Health   string   `json:"health"`
		Size     int64    `json:"size"`
		Archives int      `json:"archives"`
		Problems []string `json:"problems"`
		Slots    []struct {
			Slot    int     `json:"slot"`
			Node    string  `json:"node"`
			FoundOn string  `json:"found_on"`
			Error   string  `json:"error"`
			Corrupt []int64 `json:"corrupt_blocks"`
		} `json:"slots"`
	} `json:"objects"`
	Debris []struct {
		Node       string `json:"node"`
		Path       string `json:"path"`
		Object     string `json:"object"`
		InProgress bool   `json:"in_progress"`
	} `json:"debris"`
	NodeErrors []string `json:"node_errors"`
}

// fsck runs ecstore fsck --json with args and parses the report.
func fsck(t testing.TB, c *cluster, args ...string) (*fsckReport, result) {
	t.Helper()
	r := c.cli(2*time.Minute, "fsck", append([]string{"--json", "--log-level", "error"}, args...)...)
	if r.timedOut {
		t.Fatalf("%v", r)
	}
	rep := &fsckReport{}
	// The JSON report is on stdout; the error line (stderr) follows it.
	out := r.out
	if i := strings.LastIndex(out, "\n}"); i >= 0 {
		out = out[:i+2]
	}
	if j := strings.Index(out, "{"); j >= 0 {
		out = out[j:]
	}
	if err := json.Unmarshal([]byte(out), rep); err != nil {
		t.Fatalf("fsck --json: %v\n%s", err, r.out)
	}
	return rep, r
}

// unhealthy lists what fsck found wrong, one line per object or debris.
func (rep *fsckReport) unhealthy() []string {
	var out []string
	for _, o := range rep.Objects {
		if o.Health != "healthy" || len(o.Problems) > 0 {
			out = append(out, fmt.Sprintf("%s %s (%d archives): %s", o.Health, o.Path, o.Archives, strings.Join(o.Problems, "; ")))
		}
	}
	for _, d := range rep.Debris {
		out = append(out, fmt.Sprintf("debris node %s %s (in progress %v)", d.Node, d.Path, d.InProgress))
	}
	for _, e := range rep.NodeErrors {
		out = append(out, "node error: "+e)
	}
	if len(out) == 0 && !rep.Clean {
		out = append(out, fmt.Sprintf("clean=false with no unhealthy object listed; counts %v", rep.Counts))
	}
	return out
}

// finish heals every fault, repairs, and checks that fsck is clean and
// that the cluster holds exactly the model.
func (s *schedule) finish() {
	t := s.t
	s.step++
	s.c.healAll()
	s.stopped = map[int]int{}
	s.logf("final: every node up, disks freed")
	var r result
	for attempt := 1; attempt <= 3; attempt++ {
		r = s.doRepair(true)
		if r.ok() {
			break
		}
		time.Sleep(time.Second)
	}
	if !r.ok() {
		t.Errorf("final repair --deep --debris-age 0s with every node up did not succeed: %v", r)
	}
	rep, fr := fsck(t, s.c, "--deep", "--debris-age", debrisAgeNow)
	if !rep.Clean || fr.code != 0 {
		var disk []string
		for _, o := range rep.Objects {
			if o.Health != "healthy" || len(o.Problems) > 0 {
				disk = append(disk, fmt.Sprintf("%s:\n    %s\n  history:\n    %s", o.Path,
					strings.Join(s.c.diskView(o.Path), "\n    "), strings.Join(s.hist[o.Path], "\n    ")))
			}
		}
		t.Errorf("final fsck --deep --json is not clean (exit %d):\n  %s\narchives on disk:\n  %s", fr.code,
			strings.Join(rep.unhealthy(), "\n  "), strings.Join(disk, "\n  "))
	}
	// fsck's objects must be exactly the model's.
	listed := map[string]int64{}
	for _, o := range rep.Objects {
		listed[o.Path] = o.Size
	}
	for _, p := range s.model.paths() {
		s.checkGet(p, true)
	}
	for _, p := range s.model.paths() {
		size, ok := listed[p]
		if !ok {
			t.Errorf("final fsck does not know %s, which the model holds (%v)", p, s.model[p])
		} else if c := s.model[p].states[0]; c != nil && size != c.size {
			t.Errorf("final fsck: %s has size %d, the model says %v", p, size, s.model[p])
		}
		delete(listed, p)
	}
	for p := range listed {
		if strings.HasPrefix(p, "/d0/") || strings.HasPrefix(p, "/d1/") {
			t.Errorf("final fsck lists %s, which the model says is absent", p)
		}
	}
	s.failed = false
	s.checkLs()
	// Every pool path that the model says is absent must read as absent.
	for _, p := range s.pool {
		if _, ok := s.model[p]; !ok {
			s.checkGet(p, true)
		}
	}
}

func (s *schedule) summary(steps int) {
	var faults []string
	for k, v := range s.counts {
		if strings.HasPrefix(k, "fault ") {
			faults = append(faults, fmt.Sprintf("%s=%d", strings.TrimPrefix(k, "fault "), v))
		}
	}
	sort.Strings(faults)
	rate := 0.0
	if s.repairSecs > 0 {
		rate = s.repairBytes / 1e6 / s.repairSecs
	}
	s.t.Logf("SUMMARY config=%s seed=%d steps=%d runtime=%v faults{%s} puts=%d (failed %d) gets=%d ls=%d repair rebuilt %.1f MB in %.1fs = %.1f MB/s, liveness failures=%d",
		s.c.kind, baseSeed(), steps, time.Since(s.start).Round(time.Millisecond), strings.Join(faults, " "),
		s.counts["puts"], s.counts["puts failed"], s.counts["gets"], s.counts["ls"],
		s.repairBytes/1e6, s.repairSecs, rate, len(s.liveness))
}
