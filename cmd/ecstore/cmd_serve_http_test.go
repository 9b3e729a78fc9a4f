package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/cluster"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func writeTestFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestServeHTTPUsageErrors(t *testing.T) {
	t.Setenv("ECSTORE_ACCESS_KEY", "")
	t.Setenv("ECSTORE_SECRET_KEY", "")
	data := filepath.Join(t.TempDir(), "data")
	base := []string{"serve", "--data", data, "--fsync=false", "--root-addr", "127.0.0.1:0", "--metrics-addr="}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"anonymous writes beyond loopback", []string{"--http-addr", "0.0.0.0:0", "--http-anonymous-writes"}, "loopback"},
		{"anonymous writes without http", []string{"--http-anonymous-writes"}, "loopback"},
		{"http without credentials", []string{"--http-addr", "127.0.0.1:0"}, "--http-addr needs credentials"},
		{"s3 without a key", []string{"--s3-addr", "127.0.0.1:0"}, "--s3-addr needs an access key"},
		{"auth file with cluster keys", []string{"--http-addr", "127.0.0.1:0", "--auth-file", writeTestFile(t, "a", "ec = 4+2\n")}, "belongs in the cluster config"},
		{"auth file missing", []string{"--auth-file", "/nonexistent/auth"}, "--auth-file"},
		{"bad auth file", []string{"--auth-file", writeTestFile(t, "b", "http-token = short\n")}, "at least 16"},
		{"bad http address", []string{"--http-addr", "nowhere"}, "bad listen address"},
		{"negative expiry", []string{"--s3-upload-expiry=-1s"}, "must not be negative"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := ecstore(t, nil, append(slices.Clone(base), tt.args...)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("exit %d, want %d with %q:\n%s", r.code, exitUsage, tt.want, r.stderr)
			}
		})
	}
}

func TestGatherAccess(t *testing.T) {
	parse := func(text string) *cluster.Config {
		c, err := cluster.ParseConfig(strings.NewReader(text), "test")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cfg := parse("access-key = A:a\nhttp-token = token-one-0123456789\n")
	extra := parse("access-key = B:b\nhttp-token = token-two-0123456789\nhttp-anonymous-read = true\n")
	t.Setenv("ECSTORE_ACCESS_KEY", "E")
	t.Setenv("ECSTORE_SECRET_KEY", "e")
	a, err := gatherAccess(cfg, extra)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(a.keys, map[string]string{"A": "a", "B": "b", "E": "e"}) || len(a.tokens) != 2 || !a.anonRead {
		t.Fatalf("access %+v", a)
	}
	t.Setenv("ECSTORE_ACCESS_KEY", "A")
	if _, err := gatherAccess(cfg, nil); err == nil || !strings.Contains(err.Error(), "two different secrets") {
		t.Fatalf("conflicting environment key: %v", err)
	}
	t.Setenv("ECSTORE_SECRET_KEY", "")
	if _, err := gatherAccess(cfg, nil); err == nil {
		t.Fatal("an access key without a secret in the environment is accepted")
	}
}

// The HTTP listener serves the cluster with the configured token, counts
// its requests in /metrics, and stops with the gateway.
func TestServeHTTP(t *testing.T) {
	t.Setenv("ECSTORE_ACCESS_KEY", "")
	t.Setenv("ECSTORE_SECRET_KEY", "")
	const token = "serve-test-token-0123456789"
	auth := writeTestFile(t, "auth", "http-token = "+token+"\n")
	metrics := "127.0.0.1:" + freeTestPort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	e := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &stderr, isTerminal: func(io.Writer) bool { return false }}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, e, []string{"serve", "--data", filepath.Join(t.TempDir(), "data"), "--fsync=false", "--ec", "2+1", "--spares", "0",
			"--root-addr", "127.0.0.1:0", "--metrics-addr", metrics, "--http-addr", "127.0.0.1:0", "--auth-file", auth})
	}()
	re := regexp.MustCompile(`HTTP on http://(\S+)\n`)
	var addr string
	for deadline := time.Now().Add(20 * time.Second); addr == ""; time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d:\n%s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", stderr.String())
		}
	}
	do := func(method, path, tok string, body string) *http.Response {
		t.Helper()
		r, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
		if tok != "" {
			r.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if r := do("PUT", "/d/o", "", "data"); r.StatusCode != 401 {
		t.Fatalf("anonymous PUT: %d", r.StatusCode)
	}
	if r := do("PUT", "/d/o", "a-wrong-token-0123456789", "data"); r.StatusCode != 403 {
		t.Fatalf("PUT with a wrong token: %d", r.StatusCode)
	}
	if r := do("PUT", "/d/o", token, "hello http"); r.StatusCode != 201 {
		t.Fatalf("PUT: %d", r.StatusCode)
	}
	r := do("GET", "/d/o", token, "")
	if b, _ := io.ReadAll(r.Body); r.StatusCode != 200 || string(b) != "hello http" {
		t.Fatalf("GET: %d %q", r.StatusCode, b)
	}
	m, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(m.Body)
	m.Body.Close()
	for _, want := range []string{`ec_gateway_requests_total{op="http_put",status="ok"} 1`, `ec_gateway_requests_total{op="http_put",status="error"} 2`,
		`ec_gateway_bytes_total{direction="write"} 10`, `ec_gateway_auth_failures_total{frontend="http",reason="credentials"} 1`} {
		if !strings.Contains(string(text), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("serve exited %d:\n%s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// freeTestPort returns a loopback TCP port that was free a moment ago.
func freeTestPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// TestServeSettingsFromConfig: `ecstore serve --config FILE` takes its
// listeners and other serve flags from the file's gateway settings; a
// flag on the command line wins over the file; a bad value in the file
// is a usage error naming it.
func TestServeSettingsFromConfig(t *testing.T) {
	t.Setenv("ECSTORE_ACCESS_KEY", "")
	t.Setenv("ECSTORE_SECRET_KEY", "")
	dir := t.TempDir()
	var nodes []string
	for i := range 3 {
		d := filepath.Join(dir, fmt.Sprint("n", i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, d)
	}
	const token = "config-test-token-0123456789"
	fromFile, fromFlag := "127.0.0.1:"+freeTestPort(t), "127.0.0.1:"+freeTestPort(t)
	conf := writeTestFile(t, "ecstore.conf", "ec = 2+1\nspares = 0\nfsync = false\nnodes = "+strings.Join(nodes, ", ")+"\n"+
		"token = "+token+"\nroot-addr = 127.0.0.1:0\nmetrics-addr =\nheal = false\nhttp-addr = "+fromFile+"\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	e := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &stderr, isTerminal: func(io.Writer) bool { return false }}
	done := make(chan int, 1)
	go func() { done <- run(ctx, e, []string{"serve", "--config", conf, "--http-addr", fromFlag}) }()
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(stderr.String(), "HTTP on http://"+fromFlag); time.Sleep(10 * time.Millisecond) {
		select {
		case code := <-done:
			t.Fatalf("serve exited %d:\n%s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start on the command line's --http-addr:\n%s", stderr.String())
		}
	}
	if strings.Contains(stderr.String(), "metrics on") {
		t.Errorf("metrics served although the config turns them off:\n%s", stderr.String())
	}
	r, _ := http.NewRequest("PUT", "http://"+fromFlag+"/c/o", strings.NewReader("configured"))
	r.Header.Set("Authorization", "Bearer "+token)
	if resp, err := http.DefaultClient.Do(r); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT with the config's token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("serve exited %d:\n%s", code, stderr.String())
	}

	bad := writeTestFile(t, "bad.conf", "ec = 2+1\nspares = 0\nnodes = "+strings.Join(nodes, ", ")+"\nheal = maybe\n")
	if r := ecstore(t, nil, "serve", "--config", bad); r.code != exitUsage || !strings.Contains(r.stderr, "bad.conf: heal = maybe") {
		t.Errorf("a bad gateway setting: exit %d\n%s", r.code, r.stderr)
	}
}
