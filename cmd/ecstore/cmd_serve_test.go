package main

import "testing"

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
