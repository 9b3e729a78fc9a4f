//go:build fault

package fault

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestGatewayKillDuringPuts: the gateway is killed with SIGKILL while 20
// xrdcp puts run in parallel (15 new objects, 5 overwrites). After it is
// restarted, every path is either absent (new) or old (overwritten), or
// complete with the new bytes — and a put that xrdcp reported done must
// be the new bytes — and xrdfs ls -l lists exactly the complete objects
// with their sizes. fsck --json lists the temporary files the dead writes
// left on the nodes (as writes in progress while they are young, as
// debris with --debris-age 0s); repair with the default debris age keeps
// them, repair --debris-age 0s removes them all, and fsck --deep is then
// clean.
func TestGatewayKillDuringPuts(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 5))
	c := newCluster(t, clusterOptions{kind: remoteNodes})
	bodies := newContents(t, workDir(t, c, "bodies"), seed)
	tmp := workDir(t, c, "downloads")

	const n, overwrites = 20, 5
	olds := map[string]*content{}
	news := map[string]*content{}
	var paths []string
	for i := range n {
		p := fmt.Sprintf("/crash/o%02d", i)
		paths = append(paths, p)
		if i < overwrites {
			olds[p] = bodies.make(1*mib + rng.Int64N(4*mib))
			put(t, c, p, olds[p])
		}
		news[p] = bodies.make(2*mib + rng.Int64N(18*mib))
	}
	// prev is what each path held before the attempt (nil: absent).
	prev := map[string]*content{}
	for p, c := range olds {
		prev[p] = c
	}
	logs := workDir(t, c, "xrdcp-logs")
	xrdLog := func(p string, attempt int) string {
		return filepath.Join(logs, fmt.Sprintf("%s.%d.log", strings.TrimPrefix(strings.ReplaceAll(p, "/", "_"), "_"), attempt))
	}
	var temps map[string][]string
	cut := false // some write was cut short
	for attempt := 1; ; attempt++ {
		// Kill at a random moment within 400 ms (less on a retry) of the
		// first write reaching a node: the 20 puts take 0.5-1.5 s
		// together on two cores, so some may be done, some committing,
		// most in flight. (A kill moment counted from the start, within
		// 1.3 s, came after every put on a quiet machine three times in
		// a row: CI at 45735fa, seed 312778048573501907.)
		delay := time.Duration(rng.Int64N(int64(400*time.Millisecond) / int64(attempt)))
		results := make([]result, n)
		var wg sync.WaitGroup
		start := time.Now()
		for i, p := range paths {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// The client's debug log, for a put reported done that is
				// not (see below).
				env := []string{"XRD_LOGLEVEL=Debug", "XRD_LOGFILE=" + xrdLog(p, attempt)}
				results[i] = runIn(2*time.Minute, env, "xrdcp", "--nopbar", "-f", news[p].file, c.obj(p))
			}()
		}
		for deadline := time.Now().Add(10 * time.Second); len(c.tempFiles()) == 0 && time.Now().Before(deadline); {
			time.Sleep(2 * time.Millisecond)
		}
		time.Sleep(delay)
		c.gw.kill()
		killed := time.Since(start)
		wg.Wait()
		done := 0
		for i, r := range results {
			if r.ok() {
				done++
				if r.elapsed > killed {
					// Not a failure in itself: xrdcp exits some
					// milliseconds after its close is answered (22 ms
					// after the kill once, the object there). A put
					// reported done must be readable, checked below.
					t.Logf("xrdcp of %s exited 0 after the gateway was killed: %v", paths[i], r)
				}
			}
		}
		temps = c.tempFiles()
		t.Logf("attempt %d: gateway SIGKILLed at %v: %d of %d puts had completed; %d nodes hold temporary files",
			attempt, killed.Round(time.Millisecond), done, n, len(temps))
		from := c.gw.logSize()
		if err := c.gw.restart(); err != nil {
			t.Fatal(err)
		}
		c.waitGateway(from)

		// Every path: absent/old or the complete new bytes.
		found := map[string]*content{}
		for i, p := range paths {
			cands := []*content{news[p]}
			if prev[p] != nil {
				cands = append(cands, prev[p])
			}
			got, diff, r := getVia(t, c, tmp, p, 2*time.Minute, cands...)
			if got != nil {
				found[p] = got
			}
			switch {
			case !r.ok() && prev[p] == nil && notFound(r.out):
				switch {
				case !results[i].ok():
				case !closeAnswered(xrdLog(p, attempt)):
					t.Logf("%s: xrdcp reported the put done, the gateway never answered its close, and the object is absent: %s", p, xrdcpCloseWithoutServer)
				default:
					t.Errorf("%s: xrdcp reported the put done (%v), but the object is absent: %s\nthe nodes hold:\n%s\nxrdcp's debug log ends:\n%s",
						p, results[i], oneLine(r), c.filesOf(p), tailFile(xrdLog(p, attempt), 40))
				}
			case !r.ok():
				t.Errorf("%s: after the crash: %v", p, r)
			case got == nil:
				t.Errorf("%s: after the crash, wrong bytes (partial object?): %s", p, diff)
			case results[i].ok() && got != news[p] && !closeAnswered(xrdLog(p, attempt)):
				t.Logf("%s: xrdcp reported the put done, the gateway never answered its close, and the object holds %v: %s", p, got, xrdcpCloseWithoutServer)
			case results[i].ok() && got != news[p]:
				t.Errorf("%s: xrdcp reported the put done, but the object holds %v", p, got)
			default:
				if got == news[p] {
					mustList(t, c, p, got.size)
				}
			}
		}
		ls := run(time.Minute, "xrdfs", c.addr, "ls", "-l", "/crash")
		if !ls.ok() {
			t.Fatalf("%v", ls)
		}
		ents, err := parseLs(ls.out)
		if err != nil {
			t.Fatal(err)
		}
		for p, e := range ents {
			if news[p] == nil || e.size != news[p].size && (prev[p] == nil || e.size != prev[p].size) {
				t.Errorf("xrdfs ls -l /crash lists %s with size %d: a partial or unknown object", p, e.size)
			}
		}
		for p, got := range found {
			prev[p] = got
		}
		cut = len(temps) > 0
		// Reads complete the commits that the kill interrupted after
		// their first rename; what is left is the debris of the writes
		// it interrupted before.
		before := countFiles(temps)
		temps = c.tempFiles()
		t.Logf("the reads completed interrupted commits from %d of %d temporary files", before-countFiles(temps), before)
		if cut || attempt == 3 {
			break
		}
		t.Logf("no write was cut short; trying again with another kill moment")
	}
	if !cut {
		t.Fatalf("three gateway kills left no temporary file: the puts were too fast to interrupt")
	}
	var want []string
	for id, files := range temps {
		for _, f := range files {
			want = append(want, id+":"+f)
		}
	}
	sort.Strings(want)
	t.Logf("%d temporary files on %d nodes: %v", len(want), len(temps), want[:min(len(want), 3)])
	debrisOf := func(rep *fsckReport, inProgress bool) []string {
		var got []string
		for _, d := range rep.Debris {
			if d.InProgress == inProgress {
				got = append(got, d.Node+":"+d.Path)
			}
		}
		sort.Strings(got)
		return got
	}
	// Young temporary files are writes in progress for the default
	// --debris-age (1h): listed, not debris.
	rep, _ := fsck(t, c)
	if got := debrisOf(rep, true); !slices.Equal(got, want) {
		t.Errorf("fsck --json lists these temporary files as in progress:\n  %v\nwant the ones on disk:\n  %v", got, want)
	}
	rep, r := fsck(t, c, "--debris-age", "0s")
	if got := debrisOf(rep, false); !slices.Equal(got, want) || len(want) > 0 && r.code == 0 {
		t.Errorf("fsck --json --debris-age 0s (exit %d) lists %d debris files, want the %d temporary files on disk%s",
			r.code, len(got), len(want), zeroAgeNote(rep))
	}
	// Repair keeps young temporary files by default, removes them with
	// --debris-age 0s.
	mustRepair(t, c)
	if left := c.tempFiles(); len(left) != len(temps) {
		t.Errorf("repair with the default --debris-age removed young temporary files: %v left of %v", left, temps)
	}
	out := mustRepair(t, c, "--debris-age", "0s")
	t.Logf("repair --debris-age 0s: %s", lastLines(out, 1))
	if left := c.tempFiles(); len(left) > 0 {
		t.Errorf("repair --debris-age 0s left temporary files on %d nodes%s", len(left), zeroAgeNote(rep))
		// Go on with the smallest non-zero age, to check the rest.
		out = mustRepair(t, c, "--debris-age", debrisAgeNow)
		t.Logf("repair --debris-age %s: %s", debrisAgeNow, lastLines(out, 1))
		if left := c.tempFiles(); len(left) > 0 {
			t.Errorf("repair --debris-age %s left temporary files: %v", debrisAgeNow, left)
		}
	}
	rep = mustBeClean(t, c, "--debris-age", debrisAgeNow)
	for _, o := range rep.Objects {
		if !strings.HasPrefix(o.Path, "/crash/") || news[o.Path] == nil {
			t.Errorf("fsck knows object %s, which no put wrote", o.Path)
		}
	}
}

// tailFile returns the last n lines of file, or why it cannot.
// xrdcpCloseWithoutServer explains a put that xrdcp reported done but
// the gateway never committed.
const xrdcpCloseWithoutServer = "XrdCl 5.5's File::Close reports success without sending the close " +
	"when it finds the connection already gone (FileStateHandler::Close takes the server to have closed " +
	"the file, as a plain xrootd does at a disconnect); a gateway killed after answering the last write " +
	"and before the close arrives cannot commit what it held in memory. A gateway that lives on commits " +
	"such an upload when it holds every byte announced (gateway.TestUploadWholeAtDisconnectIsCommitted)."

// closeAnswered reports whether xrdcp's debug log shows the server's
// answer to a kXR_close: XrdCl logs "Calling MsgHandler ... kXR_close ...
// with status: [SUCCESS]" only for an answer that came.
func closeAnswered(logFile string) bool {
	b, err := os.ReadFile(logFile)
	if err != nil {
		return true // no evidence either way: judge the put as answered
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.Contains(line, "Calling MsgHandler") && strings.Contains(line, "kXR_close") && strings.Contains(line, "[SUCCESS]") {
			return true
		}
	}
	return false
}

func tailFile(file string, n int) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func countFiles(m map[string][]string) int {
	n := 0
	for _, files := range m {
		n += len(files)
	}
	return n
}

// debrisAgeNow is the --debris-age that makes every temporary file debris.
// It is not "0s": the CLI passes 0 to internal/repair, whose zero value
// means the default (1h), so "--debris-age 0s" counts nothing as debris
// (a bug that TestGatewayKillDuringPuts reports).
const debrisAgeNow = "1ns"

// zeroAgeNote explains a fsck or repair with --debris-age 0s that treated
// young temporary files as writes in progress.
func zeroAgeNote(rep *fsckReport) string {
	young := 0
	for _, d := range rep.Debris {
		if d.InProgress {
			young++
		}
	}
	if young == 0 {
		return ""
	}
	return fmt.Sprintf(" — with --debris-age 0s it still calls %d of them writes in progress: BUG, 0 is taken as the default 1h (CheckOptions.DebrisAge zero value)", young)
}
