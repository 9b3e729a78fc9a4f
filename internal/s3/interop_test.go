//go:build interop

package s3

// Interoperability with the real S3 clients shipped by Debian: awscli
// (/usr/bin/aws), boto3 (python3-boto3, run by /usr/bin/python3, not a
// pyenv interpreter), rclone and s3cmd, plus curl for presigned URLs.
// The server is this package's handler over a local test cluster,
// listening on loopback. A missing client skips its test, except with
// CI=true, where it fails (scripts/install-deps.sh installs them).
//
//	go test -tags interop -run Interop -v ./internal/s3/

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/testcluster"
	"github.com/ecstore/ecstore/internal/testtool"
)

// interop is a server plus the environment for the client tools.
type interop struct {
	t        *testing.T
	ts       *testServer
	endpoint string // http://127.0.0.1:port
	hostPort string
	home     string
	env      []string
}

func newInterop(t *testing.T) *interop {
	t.Helper()
	c := testcluster.New(t, 6, layout.Geometry{K: 4, M: 2, ChunkSize: 256 << 10})
	ts := newTestServerOn(t, c, func(o *Options) { o.MinPartSize = 5 << 20 })
	home := t.TempDir()
	ix := &interop{t: t, ts: ts, endpoint: ts.srv.URL, hostPort: strings.TrimPrefix(ts.srv.URL, "http://"), home: home}
	ix.env = []string{
		"PATH=/usr/bin:/bin", "HOME=" + home, "LANG=C.UTF-8", "TZ=UTC",
		"AWS_ACCESS_KEY_ID=" + testAK, "AWS_SECRET_ACCESS_KEY=" + testSecret, "AWS_DEFAULT_REGION=us-east-1",
		"AWS_CONFIG_FILE=" + filepath.Join(home, "aws-config"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "aws-credentials"),
		"AWS_EC2_METADATA_DISABLED=true", "AWS_PAGER=",
	}
	return ix
}

// run runs a client and returns its stdout; stderr is in the error.
func (ix *interop) run(extraEnv []string, name string, args ...string) (string, error) {
	ix.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(append([]string(nil), ix.env...), extraEnv...)
	cmd.Dir = ix.home
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\nstderr: %s", name, strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

func (ix *interop) must(extraEnv []string, name string, args ...string) string {
	ix.t.Helper()
	out, err := ix.run(extraEnv, name, args...)
	if err != nil {
		ix.t.Fatal(err)
	}
	return out
}

func (ix *interop) aws(args ...string) string {
	ix.t.Helper()
	return ix.must(nil, "/usr/bin/aws", append([]string{"--endpoint-url", ix.endpoint}, args...)...)
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func sameFile(t *testing.T, a, b string) {
	t.Helper()
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(x, y) {
		t.Fatalf("%s (%d bytes) and %s (%d bytes) differ", a, len(x), b, len(y))
	}
}

// treeOf maps the relative paths of the files under root to their content.
func treeOf(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		m[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sameTree(t *testing.T, a, b string) {
	t.Helper()
	ta, tb := treeOf(t, a), treeOf(t, b)
	if len(ta) != len(tb) {
		t.Fatalf("%s has %d files, %s has %d", a, len(ta), b, len(tb))
	}
	for k, v := range ta {
		if tb[k] != v {
			t.Fatalf("%s differs between %s and %s", k, a, b)
		}
	}
}

// makeTree writes n small files under root, in nested directories.
func makeTree(t *testing.T, root string, n int) {
	rng := testRand(t)
	for i := range n {
		p := filepath.Join(root, fmt.Sprintf("d%d", i%7), fmt.Sprintf("s%d", i%3), fmt.Sprintf("file %03d.txt", i))
		writeFile(t, p, testcluster.Rand(rng, int64(rng.IntN(3000))))
	}
}

func TestInteropAWSCLI(t *testing.T) {
	testtool.Need(t, "/usr/bin/aws")
	ix := newInterop(t)
	rng := testRand(t)
	ix.aws("s3", "mb", "s3://awscli")

	// cp of a 64 MiB file, multipart by default (8 MiB parts), and back.
	big := filepath.Join(ix.home, "big.bin")
	writeFile(t, big, testcluster.Rand(rng, 64<<20))
	ix.aws("s3", "cp", big, "s3://awscli/data/big.bin")
	down := filepath.Join(ix.home, "big.down")
	ix.aws("s3", "cp", "s3://awscli/data/big.bin", down)
	sameFile(t, big, down)
	var head struct{ ETag string }
	if err := json.Unmarshal([]byte(ix.aws("s3api", "head-object", "--bucket", "awscli", "--key", "data/big.bin")), &head); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(head.ETag, `-8"`) {
		t.Errorf("64 MiB upload ETag %s, want 8 parts", head.ETag)
	}
	if left := ix.ts.uploadsLeft(); len(left) != 0 {
		t.Fatalf("parts left after the upload: %q", left)
	}

	// sync of 1000 small files up and back, then nothing left to sync.
	src, back := filepath.Join(ix.home, "tree"), filepath.Join(ix.home, "tree.back")
	makeTree(t, src, 1000)
	ix.aws("s3", "sync", src, "s3://awscli/tree")
	ix.aws("s3", "sync", "s3://awscli/tree", back)
	sameTree(t, src, back)
	if out := ix.aws("s3", "sync", src, "s3://awscli/tree"); strings.TrimSpace(out) != "" {
		t.Errorf("second sync up was not empty:\n%s", out)
	}
	if out := ix.aws("s3", "sync", "s3://awscli/tree", back); strings.TrimSpace(out) != "" {
		t.Errorf("second sync down was not empty:\n%s", out)
	}

	// ls: recursive, and by prefix.
	rec := ix.aws("s3", "ls", "--recursive", "s3://awscli/")
	var keys []string
	lsLine := regexp.MustCompile(`^\S+ \S+ +\d+ (.*)$`)
	for _, line := range strings.Split(strings.TrimSpace(rec), "\n") {
		m := lsLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("ls line %q", line)
		}
		keys = append(keys, m[1])
	}
	want := []string{"data/big.bin"}
	for k := range treeOf(t, src) {
		want = append(want, "tree/"+k)
	}
	sort.Strings(want)
	sort.Strings(keys)
	if strings.Join(keys, "\n") != strings.Join(want, "\n") {
		t.Fatalf("ls --recursive listed %d keys, want %d:\n%s", len(keys), len(want), rec)
	}
	top := ix.aws("s3", "ls", "s3://awscli/")
	if !strings.Contains(top, "PRE data/") || !strings.Contains(top, "PRE tree/") {
		t.Errorf("ls of the bucket:\n%s", top)
	}
	sub := ix.aws("s3", "ls", "s3://awscli/tree/d3/")
	if strings.Count(sub, "PRE ") != 3 {
		t.Errorf("ls tree/d3/:\n%s", sub)
	}
	files := ix.aws("s3", "ls", "s3://awscli/tree/d3/s1/file")
	if n := strings.Count(files, "file "); n == 0 || strings.Contains(files, "PRE") {
		t.Errorf("ls with a key prefix:\n%s", files)
	}

	// rm --recursive empties the bucket, and rb removes it.
	ix.aws("s3", "rm", "--recursive", "s3://awscli/")
	if out := ix.aws("s3", "ls", "--recursive", "s3://awscli/"); strings.TrimSpace(out) != "" {
		t.Fatalf("after rm --recursive:\n%s", out)
	}
	ix.aws("s3", "rb", "s3://awscli")
}

func TestInteropAWSMultipartAPI(t *testing.T) {
	testtool.Need(t, "/usr/bin/aws")
	ix := newInterop(t)
	rng := testRand(t)
	ix.aws("s3", "mb", "s3://mpu")
	p1, p2 := filepath.Join(ix.home, "p1"), filepath.Join(ix.home, "p2")
	writeFile(t, p1, testcluster.Rand(rng, 5<<20))
	writeFile(t, p2, testcluster.Rand(rng, 1<<20+17))
	var created struct{ UploadId string }
	if err := json.Unmarshal([]byte(ix.aws("s3api", "create-multipart-upload", "--bucket", "mpu", "--key", "obj", "--metadata", "k=v")), &created); err != nil {
		t.Fatal(err)
	}
	var etags []string
	for i, p := range []string{p1, p2} {
		var up struct{ ETag string }
		out := ix.aws("s3api", "upload-part", "--bucket", "mpu", "--key", "obj", "--upload-id", created.UploadId,
			"--part-number", fmt.Sprint(i+1), "--body", p)
		if err := json.Unmarshal([]byte(out), &up); err != nil {
			t.Fatal(err)
		}
		etags = append(etags, up.ETag)
	}
	var parts struct {
		Parts []struct {
			PartNumber int
			Size       int64
			ETag       string
		}
	}
	if err := json.Unmarshal([]byte(ix.aws("s3api", "list-parts", "--bucket", "mpu", "--key", "obj", "--upload-id", created.UploadId)), &parts); err != nil {
		t.Fatal(err)
	}
	if len(parts.Parts) != 2 || parts.Parts[0].ETag != etags[0] || parts.Parts[1].Size != 1<<20+17 {
		t.Fatalf("list-parts: %+v", parts)
	}
	var ups struct {
		Uploads []struct{ Key, UploadId string }
	}
	if err := json.Unmarshal([]byte(ix.aws("s3api", "list-multipart-uploads", "--bucket", "mpu")), &ups); err != nil {
		t.Fatal(err)
	}
	if len(ups.Uploads) != 1 || ups.Uploads[0].UploadId != created.UploadId {
		t.Fatalf("list-multipart-uploads: %+v", ups)
	}
	mpu := fmt.Sprintf(`{"Parts":[{"ETag":%q,"PartNumber":1},{"ETag":%q,"PartNumber":2}]}`, etags[0], etags[1])
	ix.aws("s3api", "complete-multipart-upload", "--bucket", "mpu", "--key", "obj", "--upload-id", created.UploadId, "--multipart-upload", mpu)
	down := filepath.Join(ix.home, "down")
	out := ix.aws("s3api", "get-object", "--bucket", "mpu", "--key", "obj", down)
	a, _ := os.ReadFile(p1)
	b, _ := os.ReadFile(p2)
	got, _ := os.ReadFile(down)
	if !bytes.Equal(got, append(a, b...)) || !strings.Contains(out, `-2\"`) || !strings.Contains(out, `"k": "v"`) {
		t.Fatalf("get-object: %d bytes, %s", len(got), out)
	}

	// An upload aborted midway leaves no object and no parts.
	if err := json.Unmarshal([]byte(ix.aws("s3api", "create-multipart-upload", "--bucket", "mpu", "--key", "aborted")), &created); err != nil {
		t.Fatal(err)
	}
	ix.aws("s3api", "upload-part", "--bucket", "mpu", "--key", "aborted", "--upload-id", created.UploadId, "--part-number", "1", "--body", p1)
	ix.aws("s3api", "abort-multipart-upload", "--bucket", "mpu", "--key", "aborted", "--upload-id", created.UploadId)
	if _, err := ix.run(nil, "/usr/bin/aws", "--endpoint-url", ix.endpoint, "s3api", "head-object", "--bucket", "mpu", "--key", "aborted"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("aborted upload visible: %v", err)
	}
	if out := ix.aws("s3api", "list-multipart-uploads", "--bucket", "mpu"); strings.Contains(out, "UploadId") {
		t.Fatalf("aborted upload listed: %s", out)
	}
	if left := ix.ts.uploadsLeft(); len(left) != 0 {
		t.Fatalf("orphaned parts: %q", left)
	}
}

const boto3Script = `
import sys, json, boto3
from botocore.config import Config
endpoint, ak, sk, bucket = sys.argv[1:5]
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ak, aws_secret_access_key=sk,
                  region_name="us-east-1", config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
op = sys.argv[5]
if op == "presign":
    key = sys.argv[6]
    print(s3.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=600))
    print(s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=600))
elif op == "roundtrip":
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="a/b c+d.txt", Body=b"hello boto3", ContentType="text/plain", Metadata={"who": "boto3"})
    h = s3.head_object(Bucket=bucket, Key="a/b c+d.txt")
    assert h["ContentType"] == "text/plain" and h["Metadata"] == {"who": "boto3"}, h
    assert s3.get_object(Bucket=bucket, Key="a/b c+d.txt", Range="bytes=6-")["Body"].read() == b"boto3"
    s3.copy_object(Bucket=bucket, Key="copy", CopySource={"Bucket": bucket, "Key": "a/b c+d.txt"})
    for i in range(25):
        s3.put_object(Bucket=bucket, Key="many/%02d" % i, Body=b"x" * i)
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, PaginationConfig={"PageSize": 7}):
        keys += [o["Key"] for o in page.get("Contents", [])]
    assert keys == ["a/b c+d.txt", "copy"] + ["many/%02d" % i for i in range(25)], keys
    keys = []
    for page in s3.get_paginator("list_objects").paginate(Bucket=bucket, Delimiter="/", PaginationConfig={"PageSize": 1}):
        keys += [o["Key"] for o in page.get("Contents", [])] + [p["Prefix"] for p in page.get("CommonPrefixes", [])]
    assert keys == ["a/", "copy", "many/"], keys
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "many/%02d" % i} for i in range(25)] + [{"Key": "copy"}, {"Key": "a/b c+d.txt"}]})
    assert len(r["Deleted"]) == 27, r
    try:
        s3.get_object(Bucket=bucket, Key="copy")
        raise SystemExit("deleted key still readable")
    except s3.exceptions.NoSuchKey:
        pass
    s3.delete_bucket(Bucket=bucket)
    print("ok")
`

func TestInteropBoto3(t *testing.T) {
	testtool.Need(t, "/usr/bin/python3")
	ix := newInterop(t)
	if _, err := ix.run(nil, "/usr/bin/python3", "-c", "import boto3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("python3-boto3 is missing: %v", err)
		}
		t.Skipf("python3-boto3 is missing: %v", err)
	}
	testtool.Need(t, "/usr/bin/curl")
	script := filepath.Join(ix.home, "s3test.py")
	writeFile(t, script, []byte(boto3Script))
	if out := ix.must(nil, "/usr/bin/python3", script, ix.endpoint, testAK, testSecret, "boto", "roundtrip"); strings.TrimSpace(out) != "ok" {
		t.Fatalf("boto3 round trip: %s", out)
	}

	ix.ts.must(200, "PUT", "/pre", nil, nil)
	urls := strings.Fields(ix.must(nil, "/usr/bin/python3", script, ix.endpoint, testAK, testSecret, "pre", "presign", "dir/by curl.bin"))
	if len(urls) != 2 {
		t.Fatalf("presign output %q", urls)
	}
	file := filepath.Join(ix.home, "upload.bin")
	writeFile(t, file, testcluster.Rand(testRand(t), 3<<20+5))
	ix.must(nil, "/usr/bin/curl", "-sS", "--fail", "-T", file, urls[0])
	down := filepath.Join(ix.home, "download.bin")
	ix.must(nil, "/usr/bin/curl", "-sS", "--fail", "-o", down, urls[1])
	sameFile(t, file, down)

	// A URL signed with the wrong secret: 403 SignatureDoesNotMatch for
	// GET and PUT, and nothing changes.
	bad := strings.Fields(ix.must(nil, "/usr/bin/python3", script, ix.endpoint, testAK, "wrong-secret", "pre", "presign", "dir/by curl.bin"))
	other := filepath.Join(ix.home, "other.bin")
	writeFile(t, other, []byte("must not be stored"))
	for _, c := range []struct{ args []string }{
		{[]string{"-T", other, bad[0]}},
		{[]string{bad[1]}},
	} {
		out := ix.must(nil, "/usr/bin/curl", append([]string{"-sS", "-o", filepath.Join(ix.home, "err.xml"), "-w", "%{http_code}"}, c.args...)...)
		body, _ := os.ReadFile(filepath.Join(ix.home, "err.xml"))
		if out != "403" || !bytes.Contains(body, []byte("<Code>SignatureDoesNotMatch</Code>")) {
			t.Fatalf("wrong secret: status %s, body %s", out, body)
		}
	}
	ix.must(nil, "/usr/bin/curl", "-sS", "--fail", "-o", down, urls[1])
	sameFile(t, file, down)
}

func TestInteropWrongSecretAWSCLI(t *testing.T) {
	testtool.Need(t, "/usr/bin/aws")
	ix := newInterop(t)
	ix.aws("s3", "mb", "s3://sec")
	f := filepath.Join(ix.home, "f")
	writeFile(t, f, []byte("original"))
	ix.aws("s3", "cp", f, "s3://sec/k")
	writeFile(t, f, []byte("changed"))
	wrong := []string{"AWS_SECRET_ACCESS_KEY=wrong"}
	for _, args := range [][]string{{"s3", "cp", f, "s3://sec/k"}, {"s3", "rm", "s3://sec/k"}, {"s3", "mb", "s3://sec2"}, {"s3", "ls", "s3://sec"}} {
		_, err := ix.run(wrong, "/usr/bin/aws", append([]string{"--endpoint-url", ix.endpoint}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "SignatureDoesNotMatch") {
			t.Fatalf("%v with a wrong secret: %v", args, err)
		}
	}
	if got := ix.ts.get("/sec/k"); string(got) != "original" {
		t.Fatalf("object is now %q", got)
	}
	ix.ts.fails(404, "NoSuchBucket", "HEAD", "/sec2", nil, nil)
}

func TestInteropRclone(t *testing.T) {
	testtool.Need(t, "/usr/bin/rclone")
	ix := newInterop(t)
	env := []string{"RCLONE_CONFIG_ECS_TYPE=s3", "RCLONE_CONFIG_ECS_PROVIDER=Other", "RCLONE_CONFIG_ECS_ENV_AUTH=false",
		"RCLONE_CONFIG_ECS_ACCESS_KEY_ID=" + testAK, "RCLONE_CONFIG_ECS_SECRET_ACCESS_KEY=" + testSecret,
		"RCLONE_CONFIG_ECS_ENDPOINT=" + ix.endpoint, "RCLONE_CONFIG_ECS_REGION=us-east-1", "RCLONE_CONFIG=/dev/null"}
	src, back := filepath.Join(ix.home, "src"), filepath.Join(ix.home, "back")
	makeTree(t, src, 40)
	writeFile(t, filepath.Join(src, "big", "multipart.bin"), testcluster.Rand(testRand(t), 12<<20))
	flags := []string{"--s3-upload-cutoff", "5M", "--s3-chunk-size", "5M"}
	ix.must(env, "/usr/bin/rclone", append([]string{"mkdir", "ecs:rcl"}, flags...)...)
	ix.must(env, "/usr/bin/rclone", append([]string{"copy", src, "ecs:rcl/dir"}, flags...)...)
	ix.must(env, "/usr/bin/rclone", append([]string{"check", src, "ecs:rcl/dir"}, flags...)...)
	ix.must(env, "/usr/bin/rclone", append([]string{"copy", "ecs:rcl/dir", back}, flags...)...)
	sameTree(t, src, back)
	ls := ix.must(env, "/usr/bin/rclone", "lsf", "-R", "ecs:rcl/dir/big")
	if strings.TrimSpace(ls) != "multipart.bin" {
		t.Fatalf("rclone lsf: %q", ls)
	}
	ix.must(env, "/usr/bin/rclone", "purge", "ecs:rcl")
	ix.ts.fails(404, "NoSuchBucket", "HEAD", "/rcl", nil, nil)
}

func TestInteropS3cmd(t *testing.T) {
	testtool.Need(t, "/usr/bin/s3cmd")
	ix := newInterop(t)
	cfg := filepath.Join(ix.home, "s3cfg")
	writeFile(t, cfg, []byte(fmt.Sprintf("[default]\naccess_key = %s\nsecret_key = %s\nhost_base = %s\nhost_bucket = %s\n"+
		"use_https = False\nsignature_v2 = False\nbucket_location = us-east-1\ncheck_ssl_certificate = False\n",
		testAK, testSecret, ix.hostPort, ix.hostPort)))
	s3cmd := func(args ...string) string {
		t.Helper()
		return ix.must(nil, "/usr/bin/s3cmd", append([]string{"-c", cfg}, args...)...)
	}
	rng := testRand(t)
	small, big := filepath.Join(ix.home, "small.txt"), filepath.Join(ix.home, "big.bin")
	writeFile(t, small, []byte("hello s3cmd"))
	writeFile(t, big, testcluster.Rand(rng, 12<<20))
	s3cmd("mb", "s3://s3c")
	s3cmd("put", small, "s3://s3c/dir/small.txt")
	s3cmd("put", "--multipart-chunk-size-mb=5", big, "s3://s3c/dir/big.bin")
	ls := s3cmd("ls", "s3://s3c/dir/")
	if !strings.Contains(ls, "s3://s3c/dir/small.txt") || !strings.Contains(ls, "s3://s3c/dir/big.bin") {
		t.Fatalf("s3cmd ls:\n%s", ls)
	}
	if top := s3cmd("ls", "s3://s3c"); !strings.Contains(top, "DIR") || !strings.Contains(top, "s3://s3c/dir/") {
		t.Fatalf("s3cmd ls of the bucket:\n%s", top)
	}
	if buckets := s3cmd("ls"); !strings.Contains(buckets, "s3://s3c") {
		t.Fatalf("s3cmd ls (buckets):\n%s", buckets)
	}
	for _, f := range []string{small, big} {
		out := f + ".down"
		s3cmd("get", "s3://s3c/dir/"+filepath.Base(f), out)
		sameFile(t, f, out)
	}
	s3cmd("del", "--recursive", "--force", "s3://s3c/dir/")
	s3cmd("rb", "s3://s3c")
}
