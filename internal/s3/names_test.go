package s3

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestObjectPath(t *testing.T) {
	for _, c := range []struct {
		key, path string
		dir       bool
		err       error
	}{
		{"k", "/b/k", false, nil},
		{"a/b/c", "/b/a/b/c", false, nil},
		{"a b/ü+", "/b/a b/ü+", false, nil},
		{".dot/..dots", "/b/.dot/..dots", false, nil},
		{"dir/", "/b/dir", true, nil},
		{"a/b/", "/b/a/b", true, nil},
		{"", "", false, ErrInvalidArgument},
		{"/lead", "", false, ErrInvalidArgument},
		{"a//b", "", false, ErrInvalidArgument},
		{"a/", "/b/a", true, nil},
		{"a//", "", false, ErrInvalidArgument},
		{"./a", "", false, ErrInvalidArgument},
		{"a/..", "", false, ErrInvalidArgument},
		{"a\x00b", "", false, ErrInvalidArgument},
		{"a\nb", "", false, ErrInvalidArgument},
		{".x.ecstore-tmp.1", "", false, ErrInvalidArgument},
		{strings.Repeat("e", 200), "/b/" + strings.Repeat("e", 200), false, nil},
		{strings.Repeat("e", 201), "", false, ErrKeyTooLong},
		{strings.Repeat("e/", 513), "", false, ErrKeyTooLong},
	} {
		path, dir, err := objectPath("b", c.key)
		if !errors.Is(err, c.err) && !(err == nil && c.err == nil) || path != c.path || dir != c.dir {
			t.Errorf("objectPath(%q) = %q, %v, %v; want %q, %v, %v", c.key, path, dir, err, c.path, c.dir, c.err)
		}
	}
}

func TestBucketNames(t *testing.T) {
	for name, ok := range map[string]bool{
		"abc": true, "my.bucket-1": true, "a" + strings.Repeat("b", 62): true, "1.2.3.a": true,
		"ab": false, "Abc": false, "a_b": false, "-ab": false, "ab-": false, "a..b": false,
		"10.0.0.1": false, strings.Repeat("b", 64): false, ".ab": false,
	} {
		if validBucketName(name) != ok {
			t.Errorf("validBucketName(%q) = %v", name, !ok)
		}
	}
	for name, ok := range map[string]bool{"Legacy_Bucket": true, "ab": true, ".ecstore-uploads": false, "a/b": false, "": false} {
		if bucketPathOK(name) != ok {
			t.Errorf("bucketPathOK(%q) = %v", name, !ok)
		}
	}
}

// The aws-chunked decoder never panics, never returns more bytes than it
// was given, and with a signer accepts nothing it did not sign.
func FuzzChunkedReader(f *testing.F) {
	f.Add(awsStreaming.body(), true)
	f.Add(awsStreamingTrailer.body(), true)
	f.Add("5\r\nhello\r\n0\r\nx-amz-checksum-crc32:NhCmhg==\r\n\r\n", false)
	f.Add("ffffffffffffffff\r\n", false)
	f.Add("3;chunk-signature=00\r\nabc\r\n0;chunk-signature=00\r\n\r\n", true)
	f.Fuzz(func(t *testing.T, body string, signed bool) {
		cr := &chunkedReader{br: bufio.NewReaderSize(strings.NewReader(body), 64<<10), trailer: true}
		if signed {
			cr.signer = &chunkSigner{key: signingKey(awsExampleSecret, "20130524", "us-east-1", "s3"),
				amzDate: awsExampleDate, scope: "20130524/us-east-1/s3/aws4_request", prev: awsStreaming.seed}
		}
		out, err := io.ReadAll(cr)
		if len(out) > len(body) {
			t.Fatalf("decoded %d bytes from %d", len(out), len(body))
		}
		ex := awsStreaming.body()
		if signed && err == nil && body != ex && body != ex[:len(ex)-2] {
			t.Fatalf("accepted a body that is not the signed example: %q", body)
		}
	})
}
