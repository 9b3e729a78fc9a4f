package xrootd

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"
)

// ListAttrEach hands over the same entries as ParseAttrList of the whole
// answer, however the server cuts the answer into frames (inside names,
// stat lines and values included), each part before the next frame is
// read.
func TestListAttrEachAnySplit(t *testing.T) {
	var body []byte
	mtime := time.Unix(1764160000, 0)
	for i := range 40 {
		e := AttrEntry{FileInfo: FileInfo{Name: fmt.Sprintf("file-%02d", i), Size: int64(i * 1000), ModTime: mtime}}
		if i%3 != 0 {
			e.Value, e.HasValue = []byte(fmt.Sprintf("v=%d&s=%d", i, i*1000)), true
		}
		body = AppendAttrListEntry(body, &e)
	}
	want, err := ParseAttrList(body)
	if err != nil || len(want) != 40 {
		t.Fatalf("ParseAttrList: %d entries, %v", len(want), err)
	}
	r := rand.New(rand.NewPCG(testSeed(t), 7))
	for round := range 30 {
		// Cut points: none in round 0 (one final frame), then random ones.
		var cuts []int
		for p := 0; round > 0 && p < len(body); {
			p += 1 + r.IntN(120)
			if p < len(body) {
				cuts = append(cuts, p)
			}
		}
		fs := &fakeServer{t: t, serve: func(w net.Conn, f *RequestFrame) {
			prev := 0
			for _, c := range cuts {
				w.Write(respond(f.StreamID, StatusOKSoFar, body[prev:c]))
				prev = c
			}
			w.Write(respond(f.StreamID, StatusOK, body[prev:]))
		}}
		c := dial(t, fs.start(), nil)
		var got []AttrEntry
		parts := 0
		err := c.ListAttrEach(testCtx(t), "/d", "ecstore", func(ents []AttrEntry) error {
			parts++
			got = append(got, ents...)
			return nil
		})
		if err != nil {
			t.Fatalf("round %d, cuts %v: %v", round, cuts, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d, cuts %v: entries differ from ParseAttrList's:\n got %+v\nwant %+v", round, cuts, got, want)
		}
		if round > 0 && len(cuts) > 10 && parts < 2 {
			t.Errorf("round %d: %d frames handed over in %d part", round, len(cuts)+1, parts)
		}
		c.Close()
	}
}

// A malformed answer, or an entry longer than MaxResponse, fails the
// listing with a clear error.
func TestListAttrEachRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		frames []string
		want   error
	}{
		{"no final newline", []string{"a\n1 2 0 3\n=eA\nb\n1 2 0 3\n"}, ErrMalformed},
		{"bad name", []string{"../x\n1 2 0 3\n\n"}, ErrMalformed},
		{"bad value", []string{"a\n1 2 0 3\nx\n"}, ErrMalformed},
		{"too long", []string{"a\n1 2 0 3\n=", strings.Repeat("A", 5000), "\n"}, ErrFrameTooLarge},
	} {
		fs := &fakeServer{t: t, serve: func(w net.Conn, f *RequestFrame) {
			for i, fr := range tc.frames {
				st := StatusOKSoFar
				if i == len(tc.frames)-1 {
					st = StatusOK
				}
				w.Write(respond(f.StreamID, st, []byte(fr)))
			}
		}}
		c := dial(t, fs.start(), &DialOptions{MaxResponse: 4096})
		err := c.ListAttrEach(testCtx(t), "/d", "ecstore", func([]AttrEntry) error { return nil })
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
		c.Close()
	}
}
