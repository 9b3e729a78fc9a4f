package bench

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"
)

// WriteTable writes results as one table with a row per run and
// operation type: mode, concurrency, op, successful ops, ops/s, MB/s
// (10^6 bytes), p50, p99 and max latency, and errors.
func WriteTable(w io.Writer, results ...*Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "mode\tconc\top\tops\tops/s\tMB/s\tp50\tp99\tmax\terrors\t\n")
	for _, r := range results {
		for _, s := range r.Ops {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t\n", r.Mode, r.Concurrency, s.Op, s.Ops,
				rate(s.OpsPerSec), mbps(s), latency(s.P50), latency(s.P99), latency(s.Max), s.Errors)
		}
	}
	return tw.Flush()
}

// mbps formats the data rate of s, "-" for operations that move no data.
func mbps(s OpStats) string {
	if s.Bytes == 0 {
		return "-"
	}
	return rate(s.MBPerSec)
}

// rate formats a rate with three or more significant digits. The
// thresholds are those of the value as printed: 9.996 is "10.0", not
// "10.00".
func rate(v float64) string {
	switch {
	case v >= 99.95:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 9.995:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// latency formats d with three significant digits ("812µs", "4.21ms").
func latency(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	// Round to three digits first, so that the unit and the decimals fit
	// the value printed: 9.9996ms is "10.0ms", 999.7µs "1.00ms".
	if d >= 1000 {
		p := time.Duration(1)
		for d/p >= 1000 {
			p *= 10
		}
		d = (d + p/2) / p * p
	}
	units := []struct {
		name string
		d    time.Duration
	}{{"s", time.Second}, {"ms", time.Millisecond}, {"µs", time.Microsecond}}
	for _, u := range units {
		if d >= u.d {
			v := float64(d) / float64(u.d)
			return strconv.FormatFloat(v, 'f', max(0, 2-digits(v)), 64) + u.name
		}
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}

// digits returns the number of digits before the point of v >= 1, minus 1.
func digits(v float64) int {
	n := 0
	for v >= 10 {
		v /= 10
		n++
	}
	return n
}
