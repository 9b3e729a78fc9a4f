package gateway

import (
	"context"
	"fmt"
	"hash/adler32"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ecstore/ecstore/internal/testcluster"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// Regression (issue note): kXR_dirlist with kXR_dcksm (xrdfs ls -C) was
// answered as kXR_dstat, without checksums. Each object is listed with
// the checksum kept in its metadata (what kXR_query kXR_Qcksum answers),
// a directory with none.
func TestListChecksums(t *testing.T) {
	_, cl := serve(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 4))
	objects := map[string][]byte{
		"big":   testcluster.Rand(r, 300<<10+7), // several blocks
		"small": []byte("checksum this content"),
		"empty": nil,
	}
	for name, data := range objects {
		upload(t, cl, "/run/"+name, data)
	}
	if err := cl.Mkdir(ctx, "/run/sub", 0o755, false); err != nil {
		t.Fatal(err)
	}
	for _, ask := range []string{"", "adler32", "crc32c"} {
		t.Run("cks.type="+ask, func(t *testing.T) {
			list, alg, err := cl.DirlistChecksums(ctx, "/run", ask)
			if err != nil {
				t.Fatal(err)
			}
			want := ask
			if want == "" {
				want = "adler32" // the first the gateway names
			}
			if alg != want {
				t.Errorf("algorithm %q, want %q", alg, want)
			}
			if len(list) != len(objects)+1 {
				t.Errorf("%d entries, want %d: %+v", len(list), len(objects)+1, list)
			}
			for _, e := range list {
				if e.Name == "sub" {
					if !e.IsDir() || e.Checksum != "" {
						t.Errorf("sub: %+v", e)
					}
					continue
				}
				data, ok := objects[e.Name]
				_, want, err := cl.Checksum(ctx, "/run/"+e.Name, alg)
				if !ok || err != nil || e.Checksum != want || e.Size != int64(len(data)) {
					t.Errorf("%s: checksum %q size %d; query checksum says %q (%v), size %d", e.Name, e.Checksum, e.Size, want, err, len(data))
				}
				if alg == "adler32" && e.Checksum != fmt.Sprintf("%08x", adler32.Checksum(data)) {
					t.Errorf("%s: adler32 %s of %d bytes", e.Name, e.Checksum, len(data))
				}
			}
		})
	}
	if _, _, err := cl.DirlistChecksums(ctx, "/run", "md5"); !hasCode(err, xrootd.ErrServerError) {
		t.Errorf("md5: %v, want kXR_ServerError as xrootd answers", err)
	}
	if _, _, err := cl.DirlistChecksums(ctx, "/nope", ""); !hasCode(err, xrootd.ErrNotFound) {
		t.Errorf("missing directory: %v", err)
	}
}

// A listing of an object answers as xrootd answers a listing of a file:
// kXR_FSError, "not a directory" (xrdnode takes that answer from a node
// for node.ErrNotDir), with or without stat and checksums; not
// kXR_NotFound.
func TestListingAnObjectIsNotADirectory(t *testing.T) {
	_, cl := serve(t)
	ctx := context.Background()
	upload(t, cl, "/d/obj", []byte("an object"))
	for _, p := range []string{"/d/obj", "/d/obj/below"} {
		_, err := cl.Dirlist(ctx, p, false)
		if !hasCode(err, xrootd.ErrFSError) || !strings.HasSuffix(err.Error(), "not a directory") {
			t.Errorf("dirlist %s: %v", p, err)
		}
		if _, err := cl.Dirlist(ctx, p, true); !hasCode(err, xrootd.ErrFSError) {
			t.Errorf("dirlist with stat %s: %v", p, err)
		}
		if _, _, err := cl.DirlistChecksums(ctx, p, ""); !hasCode(err, xrootd.ErrFSError) {
			t.Errorf("dirlist with checksums %s: %v", p, err)
		}
	}
}
