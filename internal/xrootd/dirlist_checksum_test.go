package xrootd

import (
	"context"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"iter"
	"testing"
)

// Regression (issue note): kXR_dirlist with kXR_dcksm (xrdfs ls -C) was
// answered as kXR_dstat, without checksums. It is answered as xrootd 5.5
// answers it: each stat line followed by " [ alg:value ]", "none" for a
// directory, the client's cks.type or the first algorithm, and an
// algorithm the file system does not keep refused with kXR_ServerError.
func TestDirlistWithChecksums(t *testing.T) {
	m := newMemFS()
	a, b := []byte("hello"), []byte("checksum this content")
	m.put("/data/a.txt", a)
	m.put("/data/b.bin", b)
	m.mkdirAll("/data/sub")
	addr, _ := startServer(t, m, Limits{})
	c := dial(t, addr, nil)
	ctx := context.Background()

	adler := func(p []byte) string { return fmt.Sprintf("%08x", adler32.Checksum(p)) }
	crc := func(p []byte) string {
		return fmt.Sprintf("%08x", crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli)))
	}
	for _, tc := range []struct {
		ask, alg string
		sums     map[string]string
	}{
		{"", "adler32", map[string]string{"a.txt": adler(a), "b.bin": adler(b), "sub": ""}},
		{"adler32", "adler32", map[string]string{"a.txt": adler(a), "b.bin": adler(b), "sub": ""}},
		{"crc32c", "crc32c", map[string]string{"a.txt": crc(a), "b.bin": crc(b), "sub": ""}},
	} {
		t.Run("cks.type="+tc.ask, func(t *testing.T) {
			list, alg, err := c.DirlistChecksums(ctx, "/data", tc.ask)
			if err != nil {
				t.Fatal(err)
			}
			if alg != tc.alg {
				t.Errorf("algorithm %q, want %q", alg, tc.alg)
			}
			got := map[string]string{}
			for _, e := range list {
				got[e.Name] = e.Checksum
				if e.Name == "b.bin" && e.Size != int64(len(b)) {
					t.Errorf("b.bin stat %+v", e.FileInfo)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.sums) {
				t.Errorf("checksums %v, want %v", got, tc.sums)
			}
		})
	}
	if _, _, err := c.DirlistChecksums(ctx, "/data", "md5"); !isCode(err, ErrServerError) {
		t.Errorf("md5: %v, want kXR_ServerError as xrootd answers", err)
	}

	// A Checksummer that lists no checksums answers "none" for each
	// entry; a file system without checksums answers as for kXR_dstat.
	for _, tc := range []struct {
		name string
		h    FileSystem
		alg  string
	}{
		{"checksummer", checksummerOnly{m}, "adler32"},
		{"no checksums", plainFS{m}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, startServerWith(t, &Server{Handler: tc.h, Logger: testLogger(t)}), nil)
			list, alg, err := c.DirlistChecksums(ctx, "/data", "")
			if err != nil || alg != tc.alg || len(list) != 3 {
				t.Fatalf("%d entries, algorithm %q, %v; want 3, %q", len(list), alg, err, tc.alg)
			}
			for _, e := range list {
				if e.Checksum != "" {
					t.Errorf("%s: checksum %q", e.Name, e.Checksum)
				}
			}
		})
	}
}

// checksummerOnly is a Checksummer that is no ChecksumLister.
type checksummerOnly struct{ m *memFS }

func (h checksummerOnly) Open(ctx context.Context, name string, o OpenOptions) (File, error) {
	return h.m.Open(ctx, name, o)
}
func (h checksummerOnly) Stat(ctx context.Context, name string) (FileInfo, error) {
	return h.m.Stat(ctx, name)
}
func (h checksummerOnly) List(ctx context.Context, dir string) iter.Seq2[FileInfo, error] {
	return h.m.List(ctx, dir)
}
func (h checksummerOnly) ChecksumAlgorithms() []string { return h.m.ChecksumAlgorithms() }
func (h checksummerOnly) Checksum(ctx context.Context, name, alg string) (string, error) {
	return h.m.Checksum(ctx, name, alg)
}

// plainFS offers no optional interface.
type plainFS struct{ m *memFS }

func (h plainFS) Open(ctx context.Context, name string, o OpenOptions) (File, error) {
	return h.m.Open(ctx, name, o)
}
func (h plainFS) Stat(ctx context.Context, name string) (FileInfo, error) { return h.m.Stat(ctx, name) }
func (h plainFS) List(ctx context.Context, dir string) iter.Seq2[FileInfo, error] {
	return h.m.List(ctx, dir)
}
