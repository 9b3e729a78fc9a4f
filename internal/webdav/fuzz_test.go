package webdav

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"strings"
	"testing"

	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/object"
)

// The fuzz targets cover every parser of untrusted request bytes. Their
// seeds are in testdata/fuzz/<target>/ and run as ordinary tests; run
// one with, for example, go test -fuzz FuzzParseRange -fuzztime 30s.

func FuzzParseRange(f *testing.F) {
	f.Add("bytes=0-9", int64(100))
	f.Add("bytes=-5", int64(3))
	f.Add("bytes=0-1, 5-6,,-3", int64(10))
	f.Fuzz(func(t *testing.T, h string, size int64) {
		if size < 0 {
			size = -(size + 1)
		}
		ranges, err := parseRanges(h, size)
		if err != nil {
			if err != errUnsatisfiable || ranges != nil {
				t.Fatalf("parseRanges(%q, %d): %v with %v", h, size, err, ranges)
			}
			return
		}
		if len(ranges) > maxRanges {
			t.Fatalf("parseRanges(%q, %d): %d ranges", h, size, len(ranges))
		}
		var total int64
		for _, r := range ranges {
			if r.start < 0 || r.length <= 0 || r.start > size-r.length {
				t.Fatalf("parseRanges(%q, %d) = [%d, +%d) outside the object", h, size, r.start, r.length)
			}
			total += r.length
		}
		if total > size {
			t.Fatalf("parseRanges(%q, %d): %d bytes in all, more than the object", h, size, total)
		}
	})
}

// checkCleaned asserts what cleanPath promises of a path it accepted.
func checkCleaned(t *testing.T, in, p string) {
	t.Helper()
	if err := node.CheckPath(p); err != nil {
		t.Fatalf("%q cleaned to %q, which is no valid path: %v", in, p, err)
	}
	for _, el := range strings.Split(p, "/")[1:] {
		if el == ".." || el == "." || (el == "" && p != "/") {
			t.Fatalf("%q cleaned to %q", in, p)
		}
	}
	if first, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/"); strings.HasPrefix(first, reservedPrefix) {
		t.Fatalf("%q cleaned to the reserved %q", in, p)
	}
}

func FuzzCleanPath(f *testing.F) {
	f.Add("/a/b/")
	f.Add("/a/../b")
	f.Fuzz(func(t *testing.T, in string) {
		p, _, err := cleanPath(in)
		if err == nil {
			checkCleaned(t, in, p)
			again, _, err := cleanPath(p)
			if err != nil || again != p {
				t.Fatalf("cleanPath(%q) = %q, whose cleaning gives %q, %v", in, p, again, err)
			}
		}
	})
}

func FuzzDestination(f *testing.F) {
	f.Add("http://host:80/a/b%20c", "host:80", "")
	f.Add("/x/y", "h", "proxy.example")
	f.Fuzz(func(t *testing.T, value, host, fwd string) {
		p, err := parseDestination(value, host, fwd)
		if err == nil {
			checkCleaned(t, value, p)
		} else if statusOf(err) < 400 {
			t.Fatalf("parseDestination(%q): %v with status %d", value, err, statusOf(err))
		}
	})
}

func FuzzPropfind(f *testing.F) {
	f.Add([]byte(`<D:propfind xmlns:D="DAV:"><D:prop><D:getetag/><X:y xmlns:X="u"/></D:prop></D:propfind>`))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, body []byte) {
		pf, err := parsePropfind(body)
		if err != nil {
			if statusOf(err) != 400 {
				t.Fatalf("status %d for a bad body", statusOf(err))
			}
			return
		}
		if pf.mode != someProp && len(pf.names) > 0 {
			t.Fatalf("mode %d with names", pf.mode)
		}
		// Whatever was asked for, the answer is well-formed XML.
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		w.WriteString(`<D:multistatus xmlns:D="DAV:">`)
		for _, info := range []*object.Info{{Name: "o<&>", Size: 3, Version: "v"}, {Name: "d", IsDir: true}} {
			writeResponse(w, "/x/"+info.Name, info, pf)
		}
		w.WriteString("</D:multistatus>")
		w.Flush()
		d := xml.NewDecoder(&buf)
		for {
			_, err := d.Token()
			if err != nil {
				if err.Error() != "EOF" {
					t.Fatalf("response for %q is not XML: %v\n%s", body, err, buf.String())
				}
				break
			}
		}
	})
}

func FuzzWantDigest(f *testing.F) {
	f.Add("adler32;q=0.5, crc32c")
	f.Fuzz(func(t *testing.T, h string) {
		algs := parseWantDigest(h)
		seen := map[string]bool{}
		for _, a := range algs {
			if seen[a] || (a != "adler32" && a != "crc32c") {
				t.Fatalf("parseWantDigest(%q) = %q", h, algs)
			}
			seen[a] = true
		}
		if _, err := newDigestCheck(h); err != nil && statusOf(err) != 400 {
			t.Fatalf("newDigestCheck(%q): %v", h, err)
		}
	})
}
