package main

import (
	"testing"
	"time"
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
