package main

import (
	"context"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/access"
)

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:1094": true, "[::1]:1094": true, "localhost:1094": true, "127.3.4.5:1": true,
		"0.0.0.0:1094": false, ":1094": false, "10.0.0.1:1094": false, "example.org:1094": false, "bad": false,
	} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// Regression (fault suite bug 4): --debris-age 0s was taken as the 1h
// default.
func TestDebrisAgeZero(t *testing.T) {
	if got := debrisAgeOption(0); got >= 0 {
		t.Fatalf("debris age 0 maps to %v, want negative (everything is debris)", got)
	}
	if got := debrisAgeOption(time.Minute); got != time.Minute {
		t.Fatalf("debris age 1m maps to %v", got)
	}
}

// TestServeTLSUsage: a certificate without its key, or tokens required
// without TLS, are usage errors, found before anything listens.
func TestServeTLSUsage(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--tls-cert", dir + "/cert.pem"},
		{"--tls-key", dir + "/key.pem"},
		{"--root-token-required"},
	} {
		args = append([]string{"serve", "--data", dir + "/data", "--root-addr", "127.0.0.1:0", "--metrics-addr="}, args...)
		if r := ecstore(t, nil, args...); r.code != exitUsage {
			t.Errorf("%v: exit %d, want %d\n%s", args, r.code, exitUsage, r.stderr)
		}
	}
}

func TestTokenChecker(t *testing.T) {
	check := tokenChecker(access.NewLive(&access.Set{Tokens: []string{"first-token-0123456789", "second-token-0123456789"}}))
	for tok, want := range map[string]string{"first-token-0123456789": "token 1", "second-token-0123456789": "token 2", "": "", "first-token": ""} {
		holder, grant, err := check(context.Background(), tok)
		if (err == nil) != (want != "") || (err == nil && holder != want) || grant != nil {
			t.Errorf("check(%q) = %q, %v, %v; want %q", tok, holder, grant, err, want)
		}
	}
}
