package main

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// Regression: a source file whose size changed while it was read (a file
// still being written; a /proc file, which says 0 bytes) was stored
// whole by put, with no word, and committed by cp before cp compared the
// bytes sent with the size: the object differed from the file as it was
// announced. Both now fail before the commit, and nothing is stored.
func TestUploadOfAFileThatChangedSize(t *testing.T) {
	const grown = "/proc/self/status" // a regular file of size 0 that reads ~1 KB
	t.Run("put", func(t *testing.T) {
		c := newTestCluster(t)
		c.put("/keep", []byte("k"))
		r := ecstore(t, nil, c.cmd("put", grown, "/grown")...)
		if r.code != exitError || !strings.Contains(r.stderr, grown+" grew while it was read") || !strings.Contains(r.stderr, "nothing was stored") {
			t.Errorf("exit %d, stderr %q", r.code, r.stderr)
		}
		assertNothingVisible(t, c, "/", "/grown")
	})
	t.Run("cp", func(t *testing.T) {
		url := gatewayURL(t)
		r := ecstore(t, nil, "cp", grown, url+"/up/grown")
		if r.code != exitError || !strings.Contains(r.stderr, grown+" grew while it was read") {
			t.Errorf("exit %d, stderr %q", r.code, r.stderr)
		}
		if r := ecstore(t, nil, "stat", url+"/up/grown"); r.code == 0 {
			t.Errorf("the upload was committed:\n%s", r.stdout)
		}
	})
}

func TestSizedReader(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		size       int64
		err        string // "" for none
	}{
		{"exact", "hello", 5, ""},
		{"empty", "", 0, ""},
		{"short", "hel", 5, "f shrank while it was read: 3 of the 5 bytes it had"},
		{"long", "hello!", 5, "f grew while it was read: it had 5 bytes"},
		{"grew from nothing", "x", 0, "f grew while it was read: it had 0 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, wrap := range []func(io.Reader) io.Reader{func(r io.Reader) io.Reader { return r }, iotest.OneByteReader, iotest.DataErrReader} {
				got, err := io.ReadAll(&sizedReader{r: wrap(strings.NewReader(tc.data)), size: tc.size, name: "f"})
				switch {
				case tc.err == "" && err != nil:
					t.Fatalf("read %q: %v", got, err)
				case tc.err == "" && string(got) != tc.data:
					t.Fatalf("read %q, want %q", got, tc.data)
				case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
					t.Fatalf("read %q: error %v, want %q", got, err, tc.err)
				case int64(len(got)) > tc.size:
					t.Fatalf("read %d bytes of a source of %d", len(got), tc.size)
				}
			}
		})
	}
	// An error of the source is the source's.
	boom := errors.New("boom")
	_, err := io.ReadAll(&sizedReader{r: io.MultiReader(bytes.NewReader([]byte("ab")), iotest.ErrReader(boom)), size: 5, name: "f"})
	if !errors.Is(err, boom) {
		t.Errorf("source error: %v", err)
	}
}
