// Command report turns the raw measurements of bench/run.sh into the
// suite's one table: every figure with its durability, its ratio to the
// machine limit of its path and to the baseline it is compared with, and
// a PASS/MISS verdict against the targets of issue 5. It prints the table
// on stdout and writes it, with the machine's description and the limit
// arithmetic, as Markdown to --out.
//
// Usage:
//
//	report --in RESULTS.tsv --out RESULTS.md
//
// The input has one "key<TAB>value" line per measurement (rates in MB/s
// or ops/s, times in seconds, memory in MiB) and "info.<name><TAB>text"
// lines describing the machine and the run. A measurement that failed
// has a value that is not a number (its error); its row shows ERR and
// report exits with status 1 after writing everything. Standard library
// only.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// The geometry the suite runs ecstore with.
const (
	dataChunks   = 8
	parityChunks = 2
	chunkMiB     = 1
	streams      = 8
	// blocksPerStream is how many blocks of memory a stream may hold in
	// the gateway under the RSS target; baseMiB the gateway's own share.
	blocksPerStream = 4
	baseMiB         = 64
)

// expansion is (k+m)/k: the bytes that go to the nodes per object byte.
const expansion = float64(dataChunks+parityChunks) / dataChunks

func main() {
	in := flag.String("in", "", "raw results `FILE` written by bench/run.sh")
	out := flag.String("out", "", "Markdown `FILE` to write (default: stdout only)")
	flag.Parse()
	if *in == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: report --in RESULTS.tsv [--out RESULTS.md]")
		os.Exit(2)
	}
	res, err := readResults(*in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	rep := build(res)
	var md strings.Builder
	writeMarkdown(&md, res, rep)
	fmt.Print(rep.table)
	if *out != "" {
		if err := os.WriteFile(*out, []byte(md.String()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
	}
	if rep.errors > 0 {
		for _, f := range rep.failed {
			fmt.Fprintf(os.Stderr, "report: failed: %s\n", f)
		}
		fmt.Fprintf(os.Stderr, "report: %d measurements failed (ERR rows)\n", rep.errors)
		os.Exit(1)
	}
}

// results holds the raw measurements and the info lines.
type results struct {
	vals  map[string]string
	info  map[string]string
	notes []string // the info.note lines, in order
}

func readResults(name string) (*results, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := &results{vals: map[string]string{}, info: map[string]string{}}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "\t")
		if !ok {
			return nil, fmt.Errorf("%s:%d: no tab in %q", name, n, line)
		}
		if k == "info.note" {
			r.notes = append(r.notes, v)
		} else if name, ok := strings.CutPrefix(k, "info."); ok {
			r.info[name] = v
		} else {
			r.vals[k] = v
		}
	}
	return r, sc.Err()
}

// num returns the measurement key as a number; ok is false when it is
// missing or failed.
func (r *results) num(key string) (float64, bool) {
	v, err := strconv.ParseFloat(r.vals[key], 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

// pathLimit is the machine limit of one data path, derived from the
// measured limits.
type pathLimit struct {
	name    string
	formula string
	value   float64
	ok      bool
}

// check is one target a row must meet.
type check struct {
	kind string  // "limit", "base", "min" (value ≥), "max" (value ≤)
	x    float64 // ratio or absolute threshold
}

// row is one line of the table.
type row struct {
	id, what, durability, unit string
	key                        string // measurement key
	limit                      string // pathLimit name, or ""
	baseKey, baseID            string // baseline measurement, or ""
	checks                     []check
	target                     string
}

// report is what build computes.
type report struct {
	limits []pathLimit
	rows   [][]string // formatted cells
	table  string     // the Markdown table
	errors int
	failed []string // "id (what): message" of each failed measurement
}

func build(r *results) *report {
	l := func(id string) (float64, bool) {
		if id == "write_any" {
			// A write without fsync is never slower than the same write
			// with one; max absorbs the noise of a shared machine.
			a, oka := r.num("limit.write")
			b, okb := r.num("limit.write_fsync")
			return math.Max(a, b), oka && okb
		}
		return r.num("limit." + id)
	}
	min2 := func(name, formula string, a, b string, da, db float64) pathLimit {
		va, oka := l(a)
		vb, okb := l(b)
		return pathLimit{name, formula, math.Min(va/da, vb/db), oka && okb}
	}
	e := strconv.FormatFloat(expansion, 'f', -1, 64)
	limits := []pathLimit{
		min2("xrootd put", "min(L1, max(L3, L4))", "tcp1", "write_any", 1, 1),
		min2("xrootd put+fsync", "min(L1, L4)", "tcp1", "write_fsync", 1, 1),
		min2("xrootd get", "min(L1, L5)", "tcp1", "read", 1, 1),
		min2("nodes put", fmt.Sprintf("min(L1 / %s, L4 / %s)", trimFloat(1+expansion), e), "tcp1", "write_fsync", 1+expansion, expansion),
		min2("nodes get", "min(L1 / 2, L5)", "tcp1", "read", 2, 1),
		min2("local put", fmt.Sprintf("min(L1, L4 / %s)", e), "tcp1", "write_fsync", 1, expansion),
		min2("local get", "min(L1, L5)", "tcp1", "read", 1, 1),
		min2("nodes 8-stream put", fmt.Sprintf("min(L2 / %s, L7 / %s)", trimFloat(1+expansion), e), "tcp8", "write_fsync8", 1+expansion, expansion),
		min2("nodes 8-stream get", "min(L2 / 2, L8)", "tcp8", "read8", 2, 1),
		min2("local 8-stream put", fmt.Sprintf("min(L2, L7 / %s)", e), "tcp8", "write_fsync8", 1, expansion),
		min2("local 8-stream get", "min(L2, L8)", "tcp8", "read8", 1, 1),
	}
	limitOf := map[string]pathLimit{}
	for _, p := range limits {
		limitOf[p.name] = p
	}

	size := r.info["size"]
	stream := r.info["stream_size"]
	const (
		none    = "none (xrootd does not fsync)"
		synced  = "fsync of the file after xrdcp (timed)"
		ksync   = "kXR_sync before close (--fsync)"
		durable = "fsync on commit (ecstore default)"
		read    = "- (read)"
	)
	rows := []row{
		{id: "L1", what: "loopback TCP, 1 stream", unit: "MB/s", key: "limit.tcp1"},
		{id: "L2", what: "loopback TCP, 8 streams (aggregate)", unit: "MB/s", key: "limit.tcp8"},
		{id: "L3", what: "disk sequential write", durability: "none", unit: "MB/s", key: "limit.write"},
		{id: "L4", what: "disk sequential write + fsync", durability: "fsync at end (timed)", unit: "MB/s", key: "limit.write_fsync"},
		{id: "L5", what: "disk sequential read, page cache dropped", durability: "-", unit: "MB/s", key: "limit.read"},
		{id: "L6", what: "memcpy", unit: "MB/s", key: "limit.memcpy"},
		{id: "L7", what: fmt.Sprintf("disk write + fsync, %d files at once (aggregate)", streams), durability: "fsync of each file at end (timed)", unit: "MB/s", key: "limit.write_fsync8"},
		{id: "L8", what: fmt.Sprintf("disk read, %d files at once, page cache dropped (aggregate)", streams), durability: "-", unit: "MB/s", key: "limit.read8"},
		{id: "X1", what: "xrootd: xrdcp put " + size, durability: none, unit: "MB/s", key: "xrootd.put", limit: "xrootd put"},
		{id: "X2", what: "xrootd: xrdcp put " + size + " + sync FILE", durability: synced, unit: "MB/s", key: "xrootd.put_fsync", limit: "xrootd put+fsync"},
		{id: "X3", what: "xrootd: xrdcp get " + size + " (cold)", durability: read, unit: "MB/s", key: "xrootd.get", limit: "xrootd get"},
	}
	n := 4
	smallOps := []string{"put", "get", "rm"}
	for _, op := range smallOps {
		rows = append(rows, row{id: fmt.Sprintf("X%d", n), what: "xrootd: small 27 KB " + op + ", conc 8", durability: none,
			unit: "ops/s", key: "xrootd.small.nofsync.c8." + op})
		n++
	}
	xsmall := map[string]string{} // "c8.put" -> row id
	for _, c := range []int{1, 8, 64} {
		for _, op := range smallOps {
			id := fmt.Sprintf("X%d", n)
			xsmall[fmt.Sprintf("c%d.%s", c, op)] = id
			d := ksync
			if op != "put" {
				d = "-"
			}
			rows = append(rows, row{id: id, what: fmt.Sprintf("xrootd: small 27 KB %s, conc %d", op, c), durability: d,
				unit: "ops/s", key: fmt.Sprintf("xrootd.small.fsync.c%d.%s", c, op)})
			n++
		}
	}
	// Random reads of 30 KB (ecstore bench --mode random): no target.
	randomWhat := map[string]string{
		"readv": "random 30 KB reads in vectors of 64 (kXR_readv), 1 client",
		"read":  "random 30 KB reads (kXR_read), 4 clients",
	}
	xrandom := map[string]string{}
	for _, k := range []string{"readv", "read"} {
		id := fmt.Sprintf("X%d", n)
		xrandom[k] = id
		rows = append(rows, row{id: id, what: "xrootd: " + randomWhat[k] + " of a " + size + " file just written", durability: "- (read, page cache warm)",
			unit: "reads/s", key: "xrootd.random." + k})
		n++
	}
	// The same 8 parallel xrdcp of one plain xrootd: what those clients
	// reach on this machine from a server that does no erasure coding.
	xstreams := map[string]string{}
	for _, k := range []struct{ op, what, durability string }{
		{"put", "put", none}, {"get", "get", read},
	} {
		id := fmt.Sprintf("X%d", n)
		xstreams[k.op] = id
		what := fmt.Sprintf("xrootd: %d × xrdcp %s %s in parallel (aggregate)", streams, k.what, stream)
		if k.op == "get" {
			what = fmt.Sprintf("xrootd: %d × xrdcp get %s in parallel (aggregate, cold)", streams, stream)
		}
		rows = append(rows, row{id: id, what: what, durability: k.durability, unit: "MB/s", key: "xrootd.streams." + k.op})
		n++
	}
	smallTarget := map[string]float64{"put": 200, "get": 1500, "rm": 500}
	budget := float64(baseMiB + blocksPerStream*dataChunks*chunkMiB*streams)
	for _, cl := range []struct{ p, id, name string }{{"nodes", "N", "10 ecstore nodes"}, {"local", "D", "10 local dirs"}} {
		n := 1
		next := func() string { id := fmt.Sprintf("%s%d", cl.id, n); n++; return id }
		gw := "ecstore " + fmt.Sprintf("%d+%d", dataChunks, parityChunks) + " on " + cl.name + ": "
		getID := fmt.Sprintf("%s2", cl.id)
		rows = append(rows,
			row{id: next(), what: gw + "xrdcp put " + size, durability: durable, unit: "MB/s", key: cl.p + ".put",
				limit: cl.p + " put", baseKey: "xrootd.put_fsync", baseID: "X2",
				checks: []check{{"limit", 0.6}, {"base", 2}}, target: "≥ 0.60 limit, ≥ 2× X2"},
			row{id: next(), what: gw + "xrdcp get " + size + " (cold)", durability: read, unit: "MB/s", key: cl.p + ".get",
				limit: cl.p + " get", baseKey: "xrootd.get", baseID: "X3",
				checks: []check{{"limit", 0.6}, {"base", 2}}, target: "≥ 0.60 limit, ≥ 2× X3"})
		killed := "2 nodes SIGKILLed"
		if cl.p == "local" {
			killed = "2 node dirs moved away, gateway restarted"
		}
		// The degraded get is compared with healthy gets timed right
		// before it (row <id>3h, numbered outside the sequence), not
		// with row 2's from minutes earlier: the disk's rate drifts.
		healthyID := fmt.Sprintf("%s3h", cl.id)
		rows = append(rows,
			row{id: healthyID, what: gw + "xrdcp get " + size + " (cold), healthy, right before the next row", durability: read, unit: "MB/s",
				key: cl.p + ".get_before_kill", limit: cl.p + " get", baseKey: cl.p + ".get", baseID: getID},
			row{id: next(), what: gw + "xrdcp get, " + killed, durability: read, unit: "MB/s", key: cl.p + ".get_killed2",
				limit: cl.p + " get", baseKey: cl.p + ".get_before_kill", baseID: healthyID, checks: []check{{"base", 0.8}}, target: "≥ 0.80 × " + healthyID})
		if cl.p == "nodes" {
			rows = append(rows,
				row{id: next(), what: gw + "xrdcp get, 1 node SIGSTOPped", durability: read, unit: "MB/s", key: "nodes.get_stopped1",
					limit: "nodes get", baseKey: "nodes.get", baseID: getID, checks: []check{{"base", 0.5}}, target: "≥ 0.50 × " + getID},
				row{id: next(), what: gw + "stall of that get (time beyond " + getID + "'s rate)", unit: "s", key: "nodes.stopped_stall",
					checks: []check{{"max", 5}}, target: "< 5 s (no timeout-length stall)"},
				row{id: next(), what: gw + "xrdcp get, 1 node SIGSTOPped 0.2 s into it", durability: read, unit: "MB/s", key: "nodes.get_hung1",
					limit: "nodes get", baseKey: "nodes.get", baseID: getID, checks: []check{{"base", 0.5}}, target: "≥ 0.50 × " + getID},
				row{id: next(), what: gw + "xrdcp put, 1 node SIGSTOPped 0.2 s into it (dropped once it alone held the write up for 1 s)", durability: durable, unit: "MB/s",
					key: "nodes.put_hung1", limit: "nodes put", baseKey: "nodes.put", baseID: fmt.Sprintf("%s1", cl.id)})
		}
		for _, c := range []int{1, 8, 64} {
			for _, op := range smallOps {
				k := fmt.Sprintf("c%d.%s", c, op)
				rw := row{id: next(), what: fmt.Sprintf("%ssmall 27 KB %s, conc %d", gw, op, c), durability: durable, unit: "ops/s",
					key: cl.p + ".small." + k, baseKey: "xrootd.small.fsync." + k, baseID: xsmall[k]}
				if op == "get" {
					rw.durability = read
				}
				if c == 8 {
					rw.checks = []check{{"min", smallTarget[op]}, {"base", 0.5}}
					rw.target = fmt.Sprintf("≥ %.0f ops/s, ≥ 0.5× %s", smallTarget[op], xsmall[k])
				}
				rows = append(rows, rw)
			}
		}
		rows = append(rows,
			row{id: next(), what: gw + fmt.Sprintf("%d × xrdcp put %s in parallel (aggregate)", streams, stream), durability: durable, unit: "MB/s",
				key: cl.p + ".streams.put", limit: cl.p + " 8-stream put", baseKey: "xrootd.streams.put", baseID: xstreams["put"],
				checks: []check{{"limit", 0.8}}, target: "≥ 0.80 limit"},
			row{id: next(), what: gw + fmt.Sprintf("%d × xrdcp get %s in parallel (aggregate, cold)", streams, stream), durability: read, unit: "MB/s",
				key: cl.p + ".streams.get", limit: cl.p + " 8-stream get", baseKey: "xrootd.streams.get", baseID: xstreams["get"],
				checks: []check{{"limit", 0.8}}, target: "≥ 0.80 limit"},
			row{id: next(), what: gw + "gateway peak RSS (VmHWM) after the streams", unit: "MiB", key: cl.p + ".rss",
				checks: []check{{"max", budget}}, target: fmt.Sprintf("≤ %.0f MiB (%d + %d×%d blocks of %d MiB)", budget, baseMiB, streams, blocksPerStream, dataChunks*chunkMiB)})
		randomRows := func() {
			for _, k := range []string{"readv", "read"} {
				rows = append(rows, row{id: next(), what: gw + randomWhat[k] + " of a " + size + " object just written",
					durability: "- (read, archives written with O_DIRECT)", unit: "reads/s",
					key: cl.p + ".random." + k, baseKey: "xrootd.random." + k, baseID: xrandom[k]})
			}
		}
		if cl.p == "nodes" {
			randomRows()
		}
		if cl.p == "local" {
			rows = append(rows,
				row{id: next(), what: gw + "xrdcp put " + size + ", gateway with --page-checksums (as xrootd)", durability: durable, unit: "MB/s",
					key: "local.put_pg", limit: "local put", baseKey: "xrootd.put_fsync", baseID: "X2"},
				row{id: next(), what: gw + "xrdcp get " + size + " (cold), gateway with --page-checksums (as xrootd)", durability: read, unit: "MB/s",
					key: "local.get_pg", limit: "local get", baseKey: "xrootd.get", baseID: "X3"})
			// One node directory on a FUSE mount that freezes (its
			// server SIGSTOPped): the local counterpart of the
			// SIGSTOPped node, against healthy gets of the same setup.
			fuse := "ecstore " + fmt.Sprintf("%d+%d", dataChunks, parityChunks) + " on 10 local dirs, one on a FUSE (bindfs) mount: "
			frozenBase := next()
			rows = append(rows,
				row{id: frozenBase, what: fuse + "xrdcp get " + size + " (cold), healthy, right before the next row", durability: read, unit: "MB/s",
					key: "local.get_before_freeze", limit: "local get", baseKey: "local.get", baseID: getID},
				row{id: next(), what: fuse + "xrdcp get, that mount frozen (bindfs SIGSTOPped)", durability: read, unit: "MB/s",
					key: "local.get_frozen1", limit: "local get", baseKey: "local.get_before_freeze", baseID: frozenBase,
					checks: []check{{"base", 0.5}}, target: "≥ 0.50 × " + frozenBase},
				row{id: next(), what: fuse + "stall of that get (time beyond " + frozenBase + "'s rate)", unit: "s", key: "local.frozen_stall",
					checks: []check{{"max", 5}}, target: "< 5 s (no timeout-length stall)"})
			randomRows() // last, keeping the ids of the rows above
		}
	}

	rep := &report{limits: limits}
	header := []string{"id", "measurement", "durability", "result", "unit", "÷ path limit", "÷ baseline", "CPU s/GB (server, nodes)", "busy", "target", "verdict"}
	for _, rw := range rows {
		v, ok := r.num(rw.key)
		cells := []string{rw.id, rw.what, orDash(rw.durability), "ERR", rw.unit, "-", "-", cpuCell(r, rw.key), busyCell(r, rw.key), orDash(rw.target), "-"}
		if !ok {
			rep.errors++
			msg := r.vals[rw.key]
			if msg == "" {
				msg = "not measured"
			}
			cells[10] = "ERR (see below)"
			rep.failed = append(rep.failed, fmt.Sprintf("%s (%s): %s", rw.id, rw.what, msg))
			rep.rows = append(rep.rows, cells)
			continue
		}
		cells[3] = formatNum(v)
		var ratioLimit, ratioBase float64
		var haveLimit, haveBase bool
		if p, found := limitOf[rw.limit]; found && p.ok && p.value > 0 {
			ratioLimit, haveLimit = v/p.value, true
			cells[5] = fmt.Sprintf("%s of %s", formatRatio(ratioLimit), formatNum(p.value))
		}
		if rw.baseKey != "" {
			if b, ok := r.num(rw.baseKey); ok && b > 0 {
				ratioBase, haveBase = v/b, true
				cells[6] = fmt.Sprintf("%s × %s", formatRatio(ratioBase), rw.baseID)
			}
		}
		verdict := ""
		for _, c := range rw.checks {
			var pass, known bool
			switch c.kind {
			case "limit":
				pass, known = ratioLimit >= c.x, haveLimit
			case "base":
				pass, known = ratioBase >= c.x, haveBase
			case "min":
				pass, known = v >= c.x, true
			case "max":
				pass, known = v <= c.x, true
			}
			switch {
			case !known:
				verdict = "ERR"
			case !pass && verdict != "ERR":
				verdict = "MISS"
			case verdict == "":
				verdict = "PASS"
			}
		}
		if verdict == "ERR" {
			rep.errors++
			rep.failed = append(rep.failed, fmt.Sprintf("%s (%s): the limit or baseline it is compared with failed", rw.id, rw.what))
		}
		cells[10] = orDash(verdict)
		rep.rows = append(rep.rows, cells)
	}
	rep.table = markdownTable(header, rep.rows)
	return rep
}

// cpuCell is the CPU the whole machine spent per GB moved while the
// measurement key ran, with the server's (the gateway or xrootd) and the
// ecstore nodes' shares in brackets where they were measured; "-" when
// none was recorded.
func cpuCell(r *results, key string) string {
	all, ok := r.num(key + ".cpu")
	if !ok {
		return "-"
	}
	var parts []string
	for _, k := range []string{".srvcpu", ".nodecpu"} {
		if v, ok := r.num(key + k); ok {
			parts = append(parts, strconv.FormatFloat(v, 'f', 2, 64))
		}
	}
	cell := strconv.FormatFloat(all, 'f', 2, 64)
	if len(parts) > 0 {
		cell += " (" + strings.Join(parts, ", ") + ")"
	}
	return cell
}

// busyCell is the share of the machine's cores busy while key ran.
func busyCell(r *results, key string) string {
	b, ok := r.num(key + ".busy")
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*b)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// formatRatio prints a ratio rounded down to two decimals, so that a
// ratio shown as equal to a target's threshold meets it.
func formatRatio(v float64) string {
	return strconv.FormatFloat(math.Floor(v*100)/100, 'f', 2, 64)
}

// formatNum prints v with about three significant digits.
func formatNum(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// rightAligned reports whether column i of the results table holds
// numbers (result, the two ratios, CPU and busy).
func rightAligned(i int) bool {
	switch i {
	case 3, 5, 6, 7, 8:
		return true
	}
	return false
}

// markdownTable renders a Markdown table with padded columns, readable
// as plain text too.
func markdownTable(header []string, rows [][]string) string {
	width := make([]int, len(header))
	for _, r := range append([][]string{header}, rows...) {
		for i, c := range r {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for i, c := range cells {
			c = strings.ReplaceAll(c, "|", "/")
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if rightAligned(i) {
				fmt.Fprintf(&b, " %s%s |", pad, c)
			} else {
				fmt.Fprintf(&b, " %s%s |", c, pad)
			}
		}
		b.WriteString("\n")
	}
	line(header)
	b.WriteString("|")
	for i, w := range width {
		if rightAligned(i) {
			fmt.Fprintf(&b, "%s:|", strings.Repeat("-", w+1))
		} else {
			fmt.Fprintf(&b, "%s|", strings.Repeat("-", w+2))
		}
	}
	b.WriteString("\n")
	for _, r := range rows {
		line(r)
	}
	return b.String()
}

// writeMarkdown writes the whole RESULTS.md.
func writeMarkdown(w io.Writer, r *results, rep *report) {
	info := func(k string) string {
		if v := r.info[k]; v != "" {
			return v
		}
		return "unknown"
	}
	fmt.Fprintf(w, "# ecstore benchmark suite\n\n")
	fmt.Fprintf(w, "Written by `bench/run.sh%s` on %s. ", map[bool]string{true: " --quick", false: ""}[r.info["mode"] == "quick"], info("date"))
	if r.info["mode"] == "quick" {
		fmt.Fprintf(w, "**This is a --quick smoke run with small sizes: its numbers are not measurements to quote.** ")
	}
	fmt.Fprintf(w, "Every number below was measured in this one run on this machine; rates are MB/s (10^6 bytes/s).\n\n")
	fmt.Fprintf(w, "## Machine\n\n")
	for _, kv := range [][2]string{
		{"CPU", info("cpu") + ", " + info("cores") + " cores"},
		{"RAM", info("ram")},
		{"kernel", info("kernel")},
		{"node directories", info("fs") + " (working directory " + info("workdir") + ")"},
		{"Go", info("go")},
		{"ecstore", "git " + info("git") + ", binary " + info("ecstore_version")},
		{"XRootD", info("xrootd_version")},
		{"load average", "at start " + info("load_start") + "; at end " + info("load_end")},
		{"run time", info("elapsed")},
	} {
		fmt.Fprintf(w, "- **%s**: %s\n", kv[0], kv[1])
	}
	if note := r.info["fs_warning"]; note != "" {
		fmt.Fprintf(w, "\n**Warning:** %s\n", note)
	}
	fmt.Fprintf(w, "\n## Results\n\n")
	fmt.Fprintf(w, "Object size %s for the single transfers, %d streams of %s, small-object phases of %s each "+
		"(ecstore bench --mode small, 27 KB objects). ecstore runs %d+%d with %d MiB chunks and no spares, "+
		"in its default durable mode (every archive fsynced, renamed, directory fsynced before the close is acknowledged), "+
		"with the background healer off so that rebuild traffic does not mix into the figures. "+
		"Gets marked cold read files whose pages were dropped from the page cache first (bench/limits evict: "+
		"each stored file is read once, fsynced and dropped with posix_fadvise DONTNEED), so that every cold read, xrootd's and ecstore's, "+
		"fills pages the kernel has just freed: on a virtual machine whose balloon reports free pages to the host, a page free for a few seconds "+
		"costs a host fault at its first touch (a cold 1 GiB get through the gateway ran at 718 MB/s into such pages, 1004 MB/s into recycled ones), "+
		"and without the read, files written through the page cache (xrootd) and with O_DIRECT (ecstore) would be read under different conditions. "+
		"Each timed single get (X3, the healthy gets of ecstore, N3h and D3h, and the degraded get on a restarted gateway, D3) follows one untimed get of the same file, so that every server is timed in its steady state: "+
		"a gateway's first get after a put faults in fresh heap, which cost 0.3-0.8 s of CPU per GiB on this virtual machine; "+
		"xrdcp gets write to /dev/null. "+
		"The single transfers (except those with a node SIGSTOPped, N4-N7, timed once: a repeat would find the node already known to hang) and the 8-stream rows are the median of %s runs, each cold get with its pages dropped again before it; the notes list every run's rate.\n\n",
		info("size"), streams, info("stream_size"), info("small_phase"), dataChunks, parityChunks, chunkMiB, info("repeats"))
	io.WriteString(w, rep.table)
	fmt.Fprintf(w, "\nVerdicts: PASS/MISS against the issue-5 targets; `-` where no target applies.\n")
	if len(rep.failed) > 0 {
		fmt.Fprintf(w, "\n**Failed measurements:**\n\n")
		for _, f := range rep.failed {
			fmt.Fprintf(w, "- %s\n", f)
		}
	}

	fmt.Fprintf(w, "\n## Limit arithmetic\n\n")
	fmt.Fprintf(w, "Each path is bounded by the slowest resource it uses, counting how many times each object byte crosses it "+
		"(the resources overlap, so the bound is the minimum, not a sum). On this one machine loopback TCP is CPU-bound: "+
		"every hop (client→gateway, gateway→node) shares the same cores, so a path that moves each byte n times over loopback "+
		"gets at most L/n. With %d+%d, a put sends (k+m)/k = %s× the object's bytes to the nodes (data plus parity), "+
		"and a healthy get reads only the data chunks, 1×. A degraded get still reads k chunks per block, 1×, plus the decode.\n\n",
		dataChunks, parityChunks, strconv.FormatFloat(expansion, 'f', -1, 64))
	fmt.Fprintf(w, "- plain xrootd put: client→server 1× loopback, 1× disk → min(L1, max(L3, L4)) (a write without fsync is never slower than with one; the max absorbs noise); durable with the fsync: min(L1, L4); get: min(L1, L5).\n")
	fmt.Fprintf(w, "- gateway on ecstore nodes, put: client→gateway 1× + gateway→nodes %s× = %s× over loopback, then %s× to disk with fsync → min(L1/%s, L4/%s). "+
		"Get: nodes→gateway 1× + gateway→client 1× = 2× over loopback, 1× disk read → min(L1/2, L5).\n",
		trimFloat(expansion), trimFloat(1+expansion), trimFloat(expansion), trimFloat(1+expansion), trimFloat(expansion))
	fmt.Fprintf(w, "- gateway on local directories, put: client→gateway 1× loopback, %s× to disk with fsync → min(L1, L4/%s). Get: 1× disk read, 1× loopback → min(L1, L5).\n",
		trimFloat(expansion), trimFloat(expansion))
	fmt.Fprintf(w, "- %d parallel streams: the same with L2 (the %d-stream loopback aggregate) instead of L1, and L7 and L8 (%d files written or read at once) instead of L4 and L5.\n", streams, streams, streams)
	fmt.Fprintf(w, "- memcpy (L6) bounds the user-space copies each byte needs (xrootd protocol buffers, block assembly, encode); it is shown for scale and is not part of the minimum.\n")
	fmt.Fprintf(w, "- the peak-RSS budget is %d MiB for the gateway plus %d blocks of k × chunk = %d MiB per stream: %d MiB for %d streams.\n\n",
		baseMiB, blocksPerStream, dataChunks*chunkMiB, baseMiB+blocksPerStream*dataChunks*chunkMiB*streams, streams)
	var pl [][]string
	for _, p := range rep.limits {
		v := "ERR"
		if p.ok {
			v = formatNum(p.value)
		}
		pl = append(pl, []string{p.name, p.formula, v})
	}
	io.WriteString(w, markdownTableLeft([]string{"path", "machine limit", "MB/s"}, pl))
	writeCPU(w, r)

	fmt.Fprintf(w, "\n## Notes\n\n")
	fmt.Fprintf(w, "- Durability: ecstore rows run in the default durable mode. Plain xrootd does not fsync on close: X1 and X4–X6 are "+
		"without any fsync; X2 adds a timed `sync FILE` (fsync of the written file) after xrdcp, and X7–X15 use "+
		"`ecstore bench --fsync` (kXR_sync before each close), so that durable ecstore rows are compared with durable xrootd rows.\n")
	fmt.Fprintf(w, "- Page checksums: plain xrootd offers kXR_pgread and kXR_pgwrite, so xrdcp computes a CRC32C for every 4 KiB page "+
		"it reads or writes, in software in Debian's client library (about 2 s of CPU per GiB here). The ecstore gateway does not offer them "+
		"by default (`--page-checksums` turns them on), so xrdcp reads and writes plainly; the gateway verifies every chunk against its archive's "+
		"CRC-32 either way. D16 and D17 run the gateway with page checksums, like xrootd, for comparison.\n")
	fmt.Fprintf(w, "- Small-object gets read objects written seconds earlier (page cache warm), on both sides.\n")
	fmt.Fprintf(w, "- The stall (N5) is the SIGSTOPped get's time minus the time the same bytes take at the healthy rate N2.\n")
	fmt.Fprintf(w, "- Local directories cannot be taken away from a running gateway (it keeps the directories it opened), "+
		"so D3 moves two node directories away and restarts the gateway before the timed get; D3h is timed on a gateway started the same way with every directory in place. "+
		"A directory can instead stop answering in place: D18-D20 put one of the ten on a bindfs (FUSE) mount and SIGSTOP its server before the get of D19, "+
		"which freezes every system call on that directory in the kernel, as an NFS mount whose server is gone does; the stall (D20) is D19's time minus D18's.\n")
	fmt.Fprintf(w, "- N3 and D3 (two nodes lost) are compared with N3h and D3h, healthy gets of the same object timed right before them, "+
		"rather than with N2 and D2 from minutes earlier: the disk's read rate drifts by a third within minutes here, "+
		"which a ratio across that time would carry.\n")
	fmt.Fprintf(w, "- The machine is shared (see the load average): treat differences of less than ~20%% as noise.\n")
	for _, n := range r.notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
}

// trimFloat prints v without trailing zeros.
func trimFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// markdownTableLeft is a plain left-aligned Markdown table.
func markdownTableLeft(header []string, rows [][]string) string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(header, " | ") + " |\n|")
	for range header {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return b.String()
}

// writeCPU writes the section on the CPU of the bulk transfers: what
// each row spent per GB against what its loopback hops alone cost, and
// the rate its CPU per GB allows with every core busy.
func writeCPU(w io.Writer, r *results) {
	cores, _ := strconv.ParseFloat(r.info["cores"], 64)
	lo1, ok1 := r.num("limit.tcp1.cpu")
	lo8, ok8 := r.num("limit.tcp8.cpu")
	if !ok1 && !ok8 || cores <= 0 {
		return
	}
	fmt.Fprintf(w, "\n## Where the CPU goes\n\n")
	fmt.Fprintf(w, "The CPU column is the CPU time of the whole machine (every process and the kernel, from /proc/stat) per GB the row moved, "+
		"with the server's share (the gateway, or xrootd) and the ecstore nodes' in brackets (the rest is xrdcp and the kernel's work outside them); "+
		"busy is the share of the %.0f cores in use meanwhile. Every process here shares the same cores, so a row near 100%% busy "+
		"goes as fast as its CPU per GB allows (cores ÷ CPU per GB), whatever the disk and loopback rates of the limits above. "+
		"Loopback TCP alone, sender and receiver, takes the CPU of L1 (1 stream) or L2 (%d streams) per GB; a path that crosses loopback n times "+
		"needs n times that before any disk, checksum or erasure-coding work: its loopback floor. "+
		"The machine's figure counts whatever else ran meanwhile (see the load average); the server's and the nodes' are those processes' own.\n\n", cores, streams)
	type cpuRow struct {
		id, key   string
		crossings float64
		eight     bool
	}
	rows := []cpuRow{
		{"X2", "xrootd.put_fsync", 1, false}, {"X3", "xrootd.get", 1, false},
		{"N1", "nodes.put", 1 + expansion, false}, {"N2", "nodes.get", 2, false},
		{"D1", "local.put", 1, false}, {"D2", "local.get", 1, false},
		{"X18", "xrootd.streams.put", 1, true}, {"X19", "xrootd.streams.get", 1, true},
		{"N17", "nodes.streams.put", 1 + expansion, true}, {"N18", "nodes.streams.get", 2, true},
		{"D13", "local.streams.put", 1, true}, {"D14", "local.streams.get", 1, true},
	}
	var out [][]string
	for _, c := range rows {
		v, okv := r.num(c.key)
		cpu, okc := r.num(c.key + ".cpu")
		if !okv || !okc || cpu <= 0 {
			continue
		}
		lo, okl := lo1, ok1
		ref := "L1"
		if c.eight {
			lo, okl, ref = lo8, ok8, "L2"
		}
		floor := "-"
		if okl {
			floor = fmt.Sprintf("%s × %s = %.2f", trimFloat(c.crossings), ref, c.crossings*lo)
		}
		out = append(out, []string{c.id, formatNum(v), strconv.FormatFloat(cpu, 'f', 2, 64), busyCell(r, c.key), floor,
			formatNum(cores / cpu * 1e3)})
	}
	io.WriteString(w, markdownTableLeft([]string{"row", "MB/s", "CPU s/GB", "busy", "loopback floor s/GB", "MB/s with every core busy"}, out))
}
