package s3

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/jwtauth"
)

// TestKeyScopes: an access key limited to storage scopes reads, creates
// and deletes only where they allow, sees only the buckets it reaches,
// copies only from what it may read, and a multi-object delete refuses
// the keys it may not delete one by one; an unlimited key is unaffected.
func TestKeyScopes(t *testing.T) {
	const ak, sk = "LIMITED", "limited/secret"
	g, err := jwtauth.StaticGrant(ak, "storage.read:/data storage.create:/data/in storage.modify:/data/scratch")
	if err != nil {
		t.Fatal(err)
	}
	inOnly, err := jwtauth.StaticGrant("INONLY", "storage.read:/data/in")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	failures := map[string]int{}
	ts := newTestServer(t, func(o *Options) {
		o.Credentials[ak] = sk
		o.Credentials["INONLY"] = "in-only/secret"
		o.Grants = map[string]*jwtauth.Grant{ak: g, "INONLY": inOnly}
		o.Hooks.AuthFailure = func(frontend, reason string) {
			mu.Lock()
			failures[frontend+" "+reason]++
			mu.Unlock()
		}
	})
	ts.must(200, "PUT", "/data", nil, nil)
	ts.must(200, "PUT", "/other", nil, nil)
	ts.must(200, "PUT", "/data/in/old", []byte("old"), nil)
	ts.must(200, "PUT", "/other/x", []byte("x"), nil)
	lim := *ts
	lim.signer = testSigner{ak: ak, sk: sk, region: "us-east-1", now: time.Now}

	lim.must(200, "PUT", "/data/in/new", []byte("new"), nil)
	lim.fails(403, "AccessDenied", "PUT", "/data/in/old", []byte("replace"), nil)
	lim.fails(403, "AccessDenied", "DELETE", "/data/in/new", nil, nil)
	lim.must(200, "PUT", "/data/scratch/s", []byte("s"), nil)
	lim.must(204, "DELETE", "/data/scratch/s", nil, nil)
	if got := lim.get("/data/in/old"); string(got) != "old" {
		t.Errorf("read in the read scope: %q", got)
	}
	lim.fails(403, "AccessDenied", "GET", "/other/x", nil, nil)
	lim.fails(403, "AccessDenied", "PUT", "/other/y", []byte("y"), nil)
	lim.fails(403, "AccessDenied", "PUT", "/newbucket", nil, nil)
	lim.fails(403, "AccessDenied", "GET", "/other?list-type=2", nil, nil)
	lim.must(200, "GET", "/data?list-type=2&prefix=in/", nil, nil)
	in := *ts
	in.signer = testSigner{ak: "INONLY", sk: "in-only/secret", region: "us-east-1", now: time.Now}
	ts.must(200, "PUT", "/data/inbox/private", []byte("private"), nil)
	in.must(200, "GET", "/data?list-type=2&prefix=in/", nil, nil)
	in.must(200, "GET", "/data?list-type=2&prefix=in/ol", nil, nil)
	for _, listing := range []string{"/data?list-type=2", "/data?list-type=2&prefix=in", "/data?uploads", "/data"} {
		in.fails(403, "AccessDenied", "GET", listing, nil, nil) // would show inbox/private
	}
	in.fails(403, "AccessDenied", "GET", "/data/inbox/private", nil, nil)
	ts.must(http.StatusNoContent, "DELETE", "/data/inbox/private", nil, nil)

	if r := lim.must(200, "GET", "/", nil, nil); !strings.Contains(string(r.body), "<Name>data</Name>") || strings.Contains(string(r.body), "<Name>other</Name>") {
		t.Errorf("bucket list of the limited key:\n%s", r.body)
	}
	lim.fails(403, "AccessDenied", "PUT", "/data/scratch/copy", nil, map[string]string{"X-Amz-Copy-Source": "/other/x"})
	lim.must(200, "PUT", "/data/scratch/copy", nil, map[string]string{"X-Amz-Copy-Source": "/data/in/old"})

	body := []byte(`<Delete><Object><Key>scratch/copy</Key></Object><Object><Key>in/old</Key></Object></Delete>`)
	r := lim.must(200, "POST", "/data?delete", body, map[string]string{"Content-MD5": b64(md5sum(body))})
	if !strings.Contains(string(r.body), "<Deleted><Key>scratch/copy</Key>") || !strings.Contains(string(r.body), "<Key>in/old</Key><Code>AccessDenied</Code>") {
		t.Errorf("multi-object delete with one key out of scope:\n%s", r.body)
	}
	if got := ts.get("/data/in/old"); string(got) != "old" {
		t.Errorf("an object the limited key could not delete: %q", got)
	}
	for _, p := range []string{"/data/in/old", "/data/in/new", "/other/x"} {
		ts.must(http.StatusNoContent, "DELETE", p, nil, nil) // the unlimited key
	}
	wrong := *ts
	wrong.signer = testSigner{ak: ak, sk: "not-the-secret", region: "us-east-1", now: time.Now}
	wrong.fails(403, "SignatureDoesNotMatch", "GET", "/data/in/new", nil, nil)
	mu.Lock()
	defer mu.Unlock()
	// 13 refusals above: 11 by checkScopes, a copy's source and a key of
	// the multi-object delete; and the wrong secret.
	if failures["s3 permission"] != 13 || failures["s3 credentials"] != 1 || len(failures) != 2 {
		t.Errorf("auth failures reported: %v", failures)
	}
}
