//go:build interop

package webdav

// Interoperability with the real HTTP and WebDAV clients shipped by
// Debian: curl and davix (davix-ls, davix-get, davix-put, davix-mkdir,
// davix-rm). The server is this package's handler over a local test
// cluster, listening on loopback. A missing client skips its test,
// except with CI=true, where it fails (scripts/install-deps.sh installs
// them).
//
//	go test -tags interop -run Interop -v ./internal/webdav/
//
// davix 0.8.4 answers a Basic challenge only over https, so over plain
// http it is given its credentials as a header (-H "Authorization: ...").

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/xml"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/testcluster"
	"github.com/ecstore/ecstore/internal/testtool"
)

// interop is a server on a 4+2 cluster of 64 KiB chunks plus a scratch
// directory for the clients.
type interop struct {
	t    *testing.T
	ts   *testServer
	url  string
	home string
}

func newInterop(t *testing.T, mod ...func(*Options)) *interop {
	t.Helper()
	c := testcluster.New(t, 6, layout.Geometry{K: 4, M: 2, ChunkSize: 64 << 10})
	ts := newTestServerOn(t, c, c.Store, mod...)
	return &interop{t: t, ts: ts, url: ts.srv.URL, home: t.TempDir()}
}

// run runs a client; it returns stdout and stderr together.
func (ix *interop) run(name string, args ...string) (string, error) {
	ix.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + ix.home, "LANG=C.UTF-8", "TZ=UTC"}
	cmd.Dir = ix.home
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (ix *interop) must(name string, args ...string) string {
	ix.t.Helper()
	out, err := ix.run(name, args...)
	if err != nil {
		ix.t.Fatal(err)
	}
	return out
}

// curl runs curl and returns the HTTP status and the headers it
// received; -o names where the body goes.
func (ix *interop) curl(args ...string) (status string, headers string) {
	ix.t.Helper()
	hdrFile := filepath.Join(ix.home, "headers.txt")
	out := ix.must("/usr/bin/curl", append([]string{"-sS", "-D", hdrFile, "-w", "%{http_code}"}, args...)...)
	h, _ := os.ReadFile(hdrFile)
	return out[max(0, len(out)-3):], string(h)
}

func (ix *interop) file(name string, data []byte) string {
	ix.t.Helper()
	p := filepath.Join(ix.home, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		ix.t.Fatal(err)
	}
	return p
}

func header(headers, name string) string {
	m := regexp.MustCompile(`(?mi)^`+regexp.QuoteMeta(name)+`: *(.*?)\r?$`).FindAllStringSubmatch(headers, -1)
	if m == nil {
		return ""
	}
	return m[len(m)-1][1]
}

func sameBytes(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes differ from the %d expected", path, len(got), len(want))
	}
}

func TestInteropCurl(t *testing.T) {
	curl := testtool.Need(t, "/usr/bin/curl")
	ix := newInterop(t)
	rng := testRand(t)
	bearer := "Authorization: Bearer " + testToken
	data := testcluster.Rand(rng, 3<<20+12345) // 3 MiB: many 256 KiB blocks
	up := ix.file("up.bin", data)
	down := filepath.Join(ix.home, "down.bin")

	// Credentials: none is 401 with a challenge, a wrong token 403, and
	// nothing is stored; Basic with an access key works like a token.
	st, h := ix.curl("-T", up, ix.url+"/curl/obj.bin")
	if st != "401" || !strings.Contains(h, "Www-Authenticate: Basic") || !strings.Contains(h, "Www-Authenticate: Bearer") {
		t.Fatalf("no credentials: %s\n%s", st, h)
	}
	if st, _ := ix.curl("-H", "Authorization: Bearer wrong-token-0123456789", "-T", up, ix.url+"/curl/obj.bin"); st != "403" {
		t.Fatalf("wrong token: %s", st)
	}
	if st, _ := ix.curl("-u", testKey+":wrong", "-o", down, ix.url+"/"); st != "403" {
		t.Fatalf("wrong secret: %s", st)
	}
	if ix.ts.exists("/curl/obj.bin") {
		t.Fatal("a refused PUT stored the object")
	}

	// PUT, then GET, HEAD and ranges.
	if st, _ := ix.curl("-H", bearer, "-T", up, ix.url+"/curl/obj.bin"); st != "201" {
		t.Fatalf("PUT: %s", st)
	}
	if st, _ := ix.curl("-u", testKey+":"+testSecret, "-o", down, ix.url+"/curl/obj.bin"); st != "200" {
		t.Fatalf("GET: %s", st)
	}
	sameBytes(t, down, data)
	st, h = ix.curl("-H", bearer, "-I", "-H", "Want-Digest: adler32", ix.url+"/curl/obj.bin")
	wantAdler := fmt.Sprintf("adler32=%08x", adler32.Checksum(data))
	if st != "200" || header(h, "Content-Length") != fmt.Sprint(len(data)) || header(h, "Accept-Ranges") != "bytes" ||
		header(h, "ETag") == "" || header(h, "Last-Modified") == "" || header(h, "Digest") != wantAdler {
		t.Fatalf("HEAD: %s\n%s", st, h)
	}
	_, h = ix.curl("-H", bearer, "-o", down, "-H", "Want-Digest: crc32c", ix.url+"/curl/obj.bin")
	crc := binary.BigEndian.AppendUint32(nil, crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)))
	if header(h, "Digest") != "crc32c="+base64.StdEncoding.EncodeToString(crc) {
		t.Fatalf("crc32c digest %q", header(h, "Digest"))
	}
	st, h = ix.curl("-H", bearer, "-r", "1000000-1999999", "-o", down, ix.url+"/curl/obj.bin")
	if st != "206" || header(h, "Content-Range") != fmt.Sprintf("bytes 1000000-1999999/%d", len(data)) {
		t.Fatalf("range: %s\n%s", st, h)
	}
	sameBytes(t, down, data[1000000:2000000])
	if st, h = ix.curl("-H", bearer, "-r", "-10", "-o", down, ix.url+"/curl/obj.bin"); st != "206" {
		t.Fatalf("suffix range: %s\n%s", st, h)
	}
	sameBytes(t, down, data[len(data)-10:])
	st, h = ix.curl("-H", bearer, "-r", "99999999-", "-o", down, ix.url+"/curl/obj.bin")
	if st != "416" || header(h, "Content-Range") != fmt.Sprintf("bytes */%d", len(data)) {
		t.Fatalf("range past the end: %s\n%s", st, h)
	}
	// Resuming a download (-C -) asks for the rest with a range.
	ix.file("partial.bin", data[:777777])
	ix.must(curl, "-sS", "--fail", "-H", bearer, "-C", "-", "-o", filepath.Join(ix.home, "partial.bin"), ix.url+"/curl/obj.bin")
	sameBytes(t, filepath.Join(ix.home, "partial.bin"), data)

	// MKCOL, MOVE, PROPFIND, DELETE.
	if st, _ := ix.curl("-H", bearer, "-X", "MKCOL", ix.url+"/curl/sub"); st != "201" {
		t.Fatalf("MKCOL: %s", st)
	}
	if st, _ := ix.curl("-H", bearer, "-X", "MKCOL", ix.url+"/curl/sub"); st != "405" {
		t.Fatalf("second MKCOL: %s", st)
	}
	if st, _ := ix.curl("-H", bearer, "-X", "MOVE", "-H", "Destination: "+ix.url+"/curl/sub/moved%20obj.bin", ix.url+"/curl/obj.bin"); st != "201" {
		t.Fatalf("MOVE: %s", st)
	}
	body := filepath.Join(ix.home, "propfind.xml")
	if st, _ := ix.curl("-H", bearer, "-X", "PROPFIND", "-H", "Depth: 1", "-o", body, ix.url+"/curl/sub/"); st != "207" {
		t.Fatalf("PROPFIND: %s", st)
	}
	var ms multistatus
	b, _ := os.ReadFile(body)
	if err := xml.Unmarshal(b, &ms); err != nil || len(ms.Responses) != 2 || ms.Responses[1].Href != "/curl/sub/moved%20obj.bin" ||
		*ms.Responses[1].Propstats[0].Prop.ContentLength != fmt.Sprint(len(data)) {
		t.Fatalf("PROPFIND Depth 1: %v\n%s", err, b)
	}
	if st, _ := ix.curl("-H", bearer, "-X", "PROPFIND", "-H", "Depth: infinity", "-o", body, ix.url+"/curl/"); st != "403" {
		t.Fatalf("PROPFIND Depth infinity: %s", st)
	}
	if st, _ := ix.curl("-H", bearer, "-X", "DELETE", ix.url+"/curl/sub"); st != "409" {
		t.Fatalf("DELETE of a full collection: %s", st)
	}
	if st, _ := ix.curl("-H", bearer, "-X", "DELETE", ix.url+"/curl/sub/moved%20obj.bin"); st != "204" {
		t.Fatalf("DELETE: %s", st)
	}
	if st, _ := ix.curl("-H", bearer, "-X", "DELETE", ix.url+"/curl/sub"); st != "204" {
		t.Fatalf("DELETE of an empty collection: %s", st)
	}
	if st, _ := ix.curl("-H", bearer, "-o", down, ix.url+"/curl/sub/moved%20obj.bin"); st != "404" {
		t.Fatalf("GET after DELETE: %s", st)
	}
	// A chunked upload (no Content-Length) from standard input.
	ix.must("/bin/sh", "-c", fmt.Sprintf("cat %s | %s -sS --fail -H %q -T - %s", up, curl, bearer, ix.url+"/curl/chunked.bin"))
	if !bytes.Equal(ix.ts.get("/curl/chunked.bin"), data) {
		t.Fatal("chunked PUT differs")
	}
}

func TestInteropDavix(t *testing.T) {
	for _, tool := range []string{"davix-ls", "davix-get", "davix-put", "davix-mkdir", "davix-rm"} {
		testtool.Need(t, "/usr/bin/"+tool)
	}
	ix := newInterop(t)
	rng := testRand(t)
	tok := []string{"-H", "Authorization: Bearer " + testToken}
	basicHdr := []string{"-H", "Authorization: " + basic(testKey, testSecret)}
	davix := func(tool string, creds []string, args ...string) string {
		t.Helper()
		return ix.must("/usr/bin/"+tool, append(append([]string{"--retry", "0"}, creds...), args...)...)
	}
	big := testcluster.Rand(rng, 5<<20+3)
	small := testcluster.Rand(rng, 1000)
	bigF, smallF := ix.file("big.bin", big), ix.file("small.bin", small)

	davix("davix-mkdir", tok, ix.url+"/dav")
	davix("davix-mkdir", basicHdr, ix.url+"/dav/sub")
	davix("davix-put", tok, bigF, ix.url+"/dav/big.bin")
	davix("davix-put", basicHdr, smallF, ix.url+"/dav/sub/small%20file.bin")
	if !bytes.Equal(ix.ts.get("/dav/big.bin"), big) || !bytes.Equal(ix.ts.get("/dav/sub/small file.bin"), small) {
		t.Fatal("davix-put content differs")
	}
	ls := davix("davix-ls", tok, "-l", ix.url+"/dav/")
	if !regexp.MustCompile(`(?m)^-\S+ +\d+ +5242883 .* big\.bin$`).MatchString(ls) ||
		!regexp.MustCompile(`(?m)^d\S+ .* sub$`).MatchString(ls) {
		t.Fatalf("davix-ls -l /dav:\n%s", ls)
	}
	// davix prints the names as the hrefs have them: URL-escaped.
	if ls := davix("davix-ls", basicHdr, ix.url+"/dav/sub"); strings.TrimSpace(ls) != "small%20file.bin" {
		t.Fatalf("davix-ls /dav/sub:\n%s", ls)
	}
	down := filepath.Join(ix.home, "down.bin")
	davix("davix-get", tok, ix.url+"/dav/big.bin", down)
	sameBytes(t, down, big)
	davix("davix-get", basicHdr, ix.url+"/dav/sub/small%20file.bin", down)
	sameBytes(t, down, small)

	// Wrong or missing credentials fail, and change nothing.
	wrong := []string{"-H", "Authorization: Bearer wrong-token-0123456789"}
	for _, c := range [][]string{wrong, nil} {
		if out, err := ix.run("/usr/bin/davix-put", append(append([]string{"--retry", "0"}, c...), smallF, ix.url+"/dav/big.bin")...); err == nil {
			t.Fatalf("davix-put with credentials %q succeeded:\n%s", c, out)
		}
		if out, err := ix.run("/usr/bin/davix-get", append(append([]string{"--retry", "0"}, c...), ix.url+"/dav/big.bin", down)...); err == nil {
			t.Fatalf("davix-get with credentials %q succeeded:\n%s", c, out)
		}
	}
	if !bytes.Equal(ix.ts.get("/dav/big.bin"), big) {
		t.Fatal("a refused davix-put changed the object")
	}

	davix("davix-rm", tok, ix.url+"/dav/sub/small%20file.bin")
	davix("davix-rm", tok, ix.url+"/dav/sub")
	davix("davix-rm", tok, ix.url+"/dav/big.bin")
	if ix.ts.exists("/dav/big.bin") || ix.ts.exists("/dav/sub") {
		t.Fatal("davix-rm left objects")
	}
	if _, err := ix.run("/usr/bin/davix-get", append(append([]string{"--retry", "0"}, tok...), ix.url+"/dav/big.bin", down)...); err == nil {
		t.Fatal("davix-get of a removed object succeeded")
	}
}

// With anonymous reads, davix and curl read without credentials but
// cannot write.
func TestInteropAnonymousRead(t *testing.T) {
	testtool.Need(t, "/usr/bin/curl")
	testtool.Need(t, "/usr/bin/davix-get")
	ix := newInterop(t, func(o *Options) { o.AnonymousRead = true })
	ix.ts.put("/pub/file", []byte("public data"))
	down := filepath.Join(ix.home, "down")
	ix.must("/usr/bin/davix-get", "--retry", "0", ix.url+"/pub/file", down)
	sameBytes(t, down, []byte("public data"))
	if st, h := ix.curl("-T", down, ix.url+"/pub/new"); st != "401" || !strings.Contains(h, "Www-Authenticate") {
		t.Fatalf("anonymous PUT: %s\n%s", st, h)
	}
	if st, _ := ix.curl("-X", "DELETE", ix.url+"/pub/file"); st != "401" {
		t.Fatalf("anonymous DELETE: %s", st)
	}
	if ix.ts.exists("/pub/new") || !ix.ts.exists("/pub/file") {
		t.Fatal("an anonymous write went through")
	}
}
