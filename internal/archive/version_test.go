package archive

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestVersionOrder checks that versions sort by commit time as strings,
// across changes in the number of significant digits.
func TestVersionOrder(t *testing.T) {
	var times []time.Time
	for _, ns := range []int64{0, 1, 9, 10, 999_999_999, 1e9, 1e9 + 1, 1763766000123456788,
		1763766000123456789, 1763766000123456790, 1e18, math.MaxInt64 - 1, math.MaxInt64} {
		times = append(times, time.Unix(0, ns))
	}
	times = append(times, time.Date(2262, 4, 11, 23, 47, 16, 0, time.UTC)) // near the int64 limit
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	var vs []Version
	for _, tm := range times {
		v := NewVersion(tm)
		if !v.Valid() {
			t.Fatalf("NewVersion(%v) = %q is not valid", tm, v)
		}
		if got := v.Time(); !got.Equal(tm) {
			t.Fatalf("NewVersion(%v).Time() = %v", tm, got)
		}
		vs = append(vs, v)
	}
	if !slices.IsSorted(vs) {
		t.Fatalf("versions are not in time order as strings: %q", vs)
	}
	// Two writes in the same nanosecond get distinct versions.
	a, b := NewVersion(times[5]), NewVersion(times[5])
	if a == b || a.Time() != b.Time() {
		t.Fatalf("same-time versions %q and %q", a, b)
	}
	// Time zones do not matter.
	tm := time.Date(2025, 11, 21, 23, 0, 0, 1, time.FixedZone("x", -7*3600))
	if v := NewVersion(tm); !v.Time().Equal(tm) || v[:22] != NewVersion(tm.UTC())[:22] {
		t.Fatalf("zone changes version %q", v)
	}
}

func TestVersionValid(t *testing.T) {
	const anyTime = -2
	for _, tc := range []struct {
		v     Version
		valid bool
		ns    int64 // Time().UnixNano(); -1: zero time; anyTime: unspecified
	}{
		{testVersion, true, 1763766000123456789},
		{"0000000000000000000000-0000000000000000", true, 0},
		{"0009223372036854775807-ffffffffffffffff", true, math.MaxInt64},
		{"", false, -1},
		{"-", false, -1},
		{"0001763766000123456789", false, -1},
		{"0001763766000123456789-", false, anyTime},
		{"001763766000123456789-9f86d081884c7d65", false, anyTime},  // 21 digits
		{"0001763766000123456789-9f86d081884c7d6", false, anyTime},  // 15 hex digits
		{"0001763766000123456789-9F86D081884C7D65", false, anyTime}, // upper case
		{"0001763766000123456789-9f86d081884c7d6g", false, anyTime},
		{"000176376600012345678x-9f86d081884c7d65", false, -1},
		{"+001763766000123456789-9f86d081884c7d65", false, anyTime},
		{"0001763766000123456789-9f86d08188-c7d65", false, anyTime},
		{"0001763766000123456789_9f86d081884c7d65", false, -1},
	} {
		if got := tc.v.Valid(); got != tc.valid {
			t.Errorf("%q.Valid() = %v, want %v", tc.v, got, tc.valid)
		}
		got := tc.v.Time()
		if tc.ns == anyTime {
			continue
		}
		if tc.ns < 0 {
			if !got.IsZero() {
				t.Errorf("%q.Time() = %v, want zero", tc.v, got)
			}
		} else if got.UnixNano() != tc.ns {
			t.Errorf("%q.Time() = %v, want %d ns", tc.v, got, tc.ns)
		}
	}
}

func TestVersionPacked(t *testing.T) {
	for _, v := range []Version{
		NewVersion(time.Unix(0, 1795658584449607137)),
		NewVersion(time.Unix(0, 0)),
		"0000000000000000000001-0000000000000000",
		"0018446744073709551615-ffffffffffffffff", // the largest time that fits
	} {
		p, ok := v.Packed()
		if !ok || len(p) != 22 {
			t.Fatalf("%s.Packed() = %q, %v; want 22 characters", v, p, ok)
		}
		if strings.Trim(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			t.Errorf("%s.Packed() = %q: not URL-safe", v, p)
		}
		got, err := UnpackVersion(p)
		if err != nil || got != v {
			t.Errorf("UnpackVersion(%q) = %q, %v; want %q", p, got, err, v)
		}
	}
	for _, v := range []Version{"", "1-2", "0018446744073709551616-0000000000000000", "0000000000000000000001-000000000000000g"} {
		if p, ok := v.Packed(); ok {
			t.Errorf("%q.Packed() = %q, true; want false", v, p)
		}
	}
	for _, s := range []string{"", "AAAA", "AAAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAA!A", "AAAAAAAAAAAAAAAAAAAAA="} {
		if v, err := UnpackVersion(s); err == nil {
			t.Errorf("UnpackVersion(%q) = %q, nil; want an error", s, v)
		}
	}
}
