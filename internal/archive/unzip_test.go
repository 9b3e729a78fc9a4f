package archive

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/testtool"
)

// TestUnzip checks that Info-ZIP's unzip lists and verifies archives with
// no ecstore code, and catches a corrupted chunk.
func TestUnzip(t *testing.T) {
	unzip := testtool.Need(t, "unzip")
	dir := t.TempDir()
	for _, tc := range []struct {
		g          layout.Geometry
		size       int64
		slot       int
		wantBlocks int
	}{
		{layout.Geometry{K: 1, M: 0, ChunkSize: 16}, 0, 0, 0},
		{layout.Geometry{K: 2, M: 1, ChunkSize: 8}, 1, 2, 1},
		{layout.Geometry{K: 4, M: 2, ChunkSize: 100}, 1234, 5, 4},
		{layout.Geometry{K: 8, M: 2, ChunkSize: 4096}, 3*8*4096 + 1, 3, 4},
	} {
		name := fmt.Sprintf("%d+%d-%d-size%d-slot%d", tc.g.K, tc.g.M, tc.g.ChunkSize, tc.size, tc.slot)
		t.Run(name, func(t *testing.T) {
			data, meta := buildArchive(t, tc.g, tc.size, tc.slot)
			path := filepath.Join(dir, name+".zip")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			idx := mustParse(t, data)
			if len(idx.Chunks) != tc.wantBlocks {
				t.Fatalf("%d chunks, want %d", len(idx.Chunks), tc.wantBlocks)
			}

			out := run(t, unzip, "-l", path)
			for _, c := range idx.Chunks {
				if !strings.Contains(out, " "+c.Name+"\n") {
					t.Errorf("unzip -l does not list %s:\n%s", c.Name, out)
				}
			}
			groups := (len(idx.Chunks) + PageGroup - 1) / PageGroup // page checksum entries
			wantCount := fmt.Sprintf(" %d file", len(idx.Chunks)+groups+1)
			if !strings.Contains(out, " "+MetadataName+"\n") || !strings.Contains(out, wantCount) {
				t.Errorf("unzip -l: want %s and %q:\n%s", MetadataName, wantCount, out)
			}
			// The date format depends on the build and locale.
			if !strings.Contains(out, "23:00") || !strings.Contains(out, "2025") {
				t.Errorf("unzip -l: want the DOS time of %v:\n%s", testTime, out)
			}

			out = run(t, unzip, "-t", path)
			if !strings.Contains(out, "No errors detected") {
				t.Errorf("unzip -t:\n%s", out)
			}

			// unzip -p extracts the metadata entry as written.
			m, err := decodeMetadata([]byte(run(t, unzip, "-p", path, MetadataName)))
			if err != nil || !metaEqual(m, meta) {
				t.Errorf("unzip -p %s: %v", MetadataName, err)
			}

			// A flipped bit in any chunk is a CRC error for unzip -t.
			for _, c := range idx.Chunks {
				bad := bytes.Clone(data)
				bad[c.Offset+c.Span()-1] ^= 0x10
				badPath := filepath.Join(dir, name+".bad.zip")
				if err := os.WriteFile(badPath, bad, 0o644); err != nil {
					t.Fatal(err)
				}
				out, err := exec.Command(unzip, "-t", badPath).CombinedOutput()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || !strings.Contains(string(out), "bad CRC") || !strings.Contains(string(out), c.Name) {
					t.Errorf("unzip -t of corrupt %s: %v\n%s", c.Name, err, out)
				}
			}
		})
	}
}

func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return string(out)
}
