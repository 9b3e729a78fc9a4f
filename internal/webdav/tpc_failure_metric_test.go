package webdav

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestFailedThirdPartyCopyCountsAsAnError: an HTTP third-party
// pull whose source fails mid-transfer answers 202 and "failure: ..."
// in the body; ec_gateway_requests_total must count it as an error,
// as root:// counts a failed tpc_pull.
// Regression (found by review): it was counted as status="ok".
func TestFailedThirdPartyCopyCountsAsAnError(t *testing.T) {
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100000")
		w.Write(make([]byte, 1000))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // breaks off
	}))
	defer src.Close()
	ts := newTestServer(t)
	ts.must(http.StatusCreated, "MKCOL", "/tpc", nil, nil)
	r := ts.must(http.StatusAccepted, "COPY", "/tpc/broken", nil, map[string]string{"Source": src.URL + "/f"})
	if !strings.Contains(string(r.body), "failure: ") {
		t.Fatalf("body: %s", r.body)
	}
	ops := ts.opsRecorded()
	last := ops[len(ops)-1]
	if last != "http_copy error" {
		t.Errorf("failed third-party copy recorded as %q, want \"http_copy error\"", last)
	}
}
