//go:build interop

package interop

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ecstore/ecstore/internal/testport"
	"github.com/ecstore/ecstore/internal/testtool"
)

// TestAttributesAcrossFrontends: the extended attributes xrdcp --xattr
// gives an object stay with it through the other frontends' copies and
// renames (aws s3 cp and copy-object with either metadata directive, a
// WebDAV COPY and MOVE, xrdfs mv), and S3 does not show them as
// x-amz-meta-* (aws s3api head-object). And the headers S3 keeps are
// bounded.
func TestAttributesAcrossFrontends(t *testing.T) {
	for _, tool := range []string{"xrdcp", "xrdfs", "setfattr", "curl"} {
		testtool.Need(t, tool)
	}
	aws := testtool.Need(t, "aws")
	work := t.TempDir()
	auth := filepath.Join(work, "auth.conf")
	if err := os.WriteFile(auth, []byte(fmt.Sprintf("access-key = %s:%s\nhttp-token = %s\n", httpKeyID, httpKeySecret, httpToken)), 0o600); err != nil {
		t.Fatal(err)
	}
	awsEnv(t, work, httpKeyID, httpKeySecret)
	s3addr, httpAddr := testport.Addr(t), testport.Addr(t)
	gw := startGateway(t, work, false, "--data", filepath.Join(work, "data"), "--fsync=false",
		"--s3-addr", s3addr, "--http-addr", httpAddr, "--auth-file", auth)
	s3 := func(args ...string) string {
		t.Helper()
		return must(t, aws, append([]string{"--endpoint-url", "http://" + s3addr}, args...)...)
	}
	web := "http://" + httpAddr
	dav := func(method, from, to string) {
		t.Helper()
		must(t, "curl", "-sS", "--fail", "-X", method, "-H", "Authorization: Bearer "+httpToken,
			"-H", "Destination: "+web+to, web+from)
	}
	attrs := func(path string) {
		t.Helper()
		out := must(t, "xrdfs", gw.url, "xattr", path, "list")
		if !strings.Contains(out, `foo="bar"`) || !strings.Contains(out, `baz="qux"`) {
			t.Errorf("xattr list %s: %q, want foo and baz", path, out)
		}
	}

	s3("s3", "mb", "s3://xbk")
	src := filepath.Join(work, "src")
	if err := os.WriteFile(src, []byte("attributed data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, "setfattr", "-n", "user.foo", "-v", "bar", src)
	must(t, "setfattr", "-n", "user.baz", "-v", "qux", src)
	must(t, "xrdcp", "--nopbar", "--xattr", src, gw.obj("/xbk/a"))
	attrs("/xbk/a")
	if out := s3("s3api", "head-object", "--bucket", "xbk", "--key", "a"); strings.Contains(out, "foo") || strings.Contains(out, "xrootd") {
		t.Errorf("head-object shows the attributes:\n%s", out)
	}

	s3("s3", "cp", "--only-show-errors", "s3://xbk/a", "s3://xbk/s3copy")
	attrs("/xbk/s3copy")
	s3("s3api", "copy-object", "--bucket", "xbk", "--key", "a", "--copy-source", "xbk/a",
		"--metadata-directive", "REPLACE", "--content-type", "text/plain", "--metadata", "k=v")
	attrs("/xbk/a")
	if out := s3("s3api", "head-object", "--bucket", "xbk", "--key", "a"); !strings.Contains(out, "text/plain") || !strings.Contains(out, `"k": "v"`) {
		t.Errorf("head-object after copy-object REPLACE:\n%s", out)
	}
	dav("COPY", "/xbk/a", "/xbk/davcopy")
	attrs("/xbk/davcopy")
	dav("MOVE", "/xbk/davcopy", "/xbk/davmoved")
	attrs("/xbk/davmoved")
	must(t, "xrdfs", gw.url, "mv", "/xbk/davmoved", "/xbk/mv")
	attrs("/xbk/mv")

	// The headers S3 keeps hold 8 KiB at most (AWS's limit on a PUT's
	// headers): aws s3api put-object with a longer Content-Disposition
	// is refused, so no object sends back a header line longer than
	// clients read (Python's http.client, under the aws cli: 64 KiB).
	long := "attachment; filename=" + strings.Repeat("n", 9000)
	out := mustFail(t, aws, "--endpoint-url", "http://"+s3addr, "s3api", "put-object", "--bucket", "xbk", "--key", "long",
		"--body", src, "--content-disposition", long)
	if !strings.Contains(out, "MetadataTooLarge") {
		t.Errorf("put-object with a Content-Disposition of %d bytes: %s, want MetadataTooLarge", len(long), out)
	}
	s3("s3api", "put-object", "--bucket", "xbk", "--key", "long", "--body", src, "--content-disposition", long[:8000])
	if out := s3("s3api", "head-object", "--bucket", "xbk", "--key", "long"); !strings.Contains(out, long[:8000]) {
		t.Errorf("head-object of a Content-Disposition of 8000 bytes: %.200s...", out)
	}
}

// boto3Metadata is the script of TestS3MetadataBoto3: boto3 (Debian's
// python3-boto3) puts, copies and uploads in parts objects with metadata
// that is not US-ASCII and reads it back with head_object and
// get_object. A botocore that refuses such values itself (Debian's
// 1.29 checks that metadata is ASCII) is given them as RFC 2047
// encoded-words, which AWS decodes before storing; values read back
// are decoded from RFC 2047 unless botocore did. The raw answer headers
// must be US-ASCII: the gateway sends what is not as =?UTF-8?B?...?=.
const boto3Metadata = `
import email.header, os, sys
import boto3, botocore.exceptions
from botocore.config import Config

s3 = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT"], region_name="us-east-1",
                  aws_access_key_id=os.environ["S3_KEY"], aws_secret_access_key=os.environ["S3_SECRET"],
                  config=Config(s3={"addressing_style": "path"}))
meta = {"word": "café", "han": "中文 ☕", "plain": "ascii only"}
failed = []

def encoded(m):
    return {k: email.header.Header(v, "utf-8").encode() if not v.isascii() else v for k, v in m.items()}

def call(fn, **kw):
    try:
        return fn(Metadata=meta, **kw)
    except botocore.exceptions.ParamValidationError:
        return fn(Metadata=encoded(meta), **kw)

def decoded(v):
    return str(email.header.make_header(email.header.decode_header(v))) if "=?" in v else v

def check(what, resp, want=meta, missing=None):
    got = {k: decoded(v) for k, v in resp["Metadata"].items()}
    if got != want:
        failed.append("%s: metadata %r, want %r" % (what, got, want))
    for k, v in resp["ResponseMetadata"]["HTTPHeaders"].items():
        if k.startswith("x-amz-meta-") and not (v.isascii() and v.isprintable()):
            failed.append("%s: header %s: %r is not printable US-ASCII" % (what, k, v))
    if resp.get("MissingMeta") != missing:
        failed.append("%s: MissingMeta %r, want %r" % (what, resp.get("MissingMeta"), missing))

b = "mbk"
call(s3.put_object, Bucket=b, Key="put", Body=b"data")
check("head_object of put_object", s3.head_object(Bucket=b, Key="put"))
word = s3.head_object(Bucket=b, Key="put")["ResponseMetadata"]["HTTPHeaders"]["x-amz-meta-word"]
if word != "=?UTF-8?B?Y2Fmw6k=?=":
    failed.append("x-amz-meta-word %r, want =?UTF-8?B?Y2Fmw6k=?=" % word)
g = s3.get_object(Bucket=b, Key="put")
g["Body"].read()
check("get_object", g)

s3.copy_object(Bucket=b, Key="copy", CopySource={"Bucket": b, "Key": "put"})
check("head_object of copy_object (COPY)", s3.head_object(Bucket=b, Key="copy"))
call(s3.copy_object, Bucket=b, Key="attr", CopySource={"Bucket": b, "Key": "attr"}, MetadataDirective="REPLACE")
check("head_object of copy_object (REPLACE)", s3.head_object(Bucket=b, Key="attr"))

up = call(s3.create_multipart_upload, Bucket=b, Key="mpu")
part = s3.upload_part(Bucket=b, Key="mpu", UploadId=up["UploadId"], PartNumber=1, Body=b"part")
s3.complete_multipart_upload(Bucket=b, Key="mpu", UploadId=up["UploadId"],
                             MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
check("head_object of a multipart upload", s3.head_object(Bucket=b, Key="mpu"))

# Metadata without a name is not stored; HEAD counts it (MissingMeta).
s3.put_object(Bucket=b, Key="nameless", Body=b"x", Metadata={"": "nameless", "ok": "kept"})
check("head_object of nameless metadata", s3.head_object(Bucket=b, Key="nameless"), {"ok": "kept"}, 1)

if failed:
    sys.exit("\n".join(failed))
print("ok")
`

// TestS3MetadataBoto3 puts metadata that is not US-ASCII with boto3
// (put_object, copy_object with either directive, a multipart upload)
// and reads it back with head_object and get_object: the gateway sent
// it back as raw UTF-8 in response headers, where AWS sends RFC 2047
// encoded-words. Metadata without a name is dropped and counted
// (MissingMeta), as AWS does. The object copied onto itself with
// REPLACE keeps the extended attribute xrdcp --xattr gave it.
func TestS3MetadataBoto3(t *testing.T) {
	for _, tool := range []string{"xrdcp", "xrdfs", "setfattr"} {
		testtool.Need(t, tool)
	}
	if out, err := run(t, pythonBin, "-c", "import boto3"); err != nil {
		missing(t, "python3-boto3 for %s: %v\n%s", pythonBin, err, out)
	}
	work := t.TempDir()
	auth := filepath.Join(work, "auth.conf")
	if err := os.WriteFile(auth, []byte(fmt.Sprintf("access-key = %s:%s\n", httpKeyID, httpKeySecret)), 0o600); err != nil {
		t.Fatal(err)
	}
	s3addr := testport.Addr(t)
	gw := startGateway(t, work, false, "--data", filepath.Join(work, "data"), "--fsync=false",
		"--s3-addr", s3addr, "--auth-file", auth)
	src := filepath.Join(work, "src")
	if err := os.WriteFile(src, []byte("attributed data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, "setfattr", "-n", "user.word", "-v", "café", src)
	must(t, "xrdfs", gw.url, "mkdir", "-p", "/mbk")
	must(t, "xrdcp", "--nopbar", "--xattr", src, gw.obj("/mbk/attr"))
	t.Setenv("S3_ENDPOINT", "http://"+s3addr)
	t.Setenv("S3_KEY", httpKeyID)
	t.Setenv("S3_SECRET", httpKeySecret)
	if out := must(t, pythonBin, "-c", boto3Metadata); strings.TrimSpace(out) != "ok" {
		t.Errorf("boto3: %s", out)
	}
	if out := must(t, "xrdfs", gw.url, "xattr", "/mbk/attr", "list"); !strings.Contains(out, `word="café"`) {
		t.Errorf("xattr list /mbk/attr after copy_object REPLACE: %q, want word=\"café\"", out)
	}
}
