package main

import (
	"testing"
	"time"
)

func TestFormatProgress(t *testing.T) {
	tests := []struct {
		name     string
		n, total int64
		elapsed  time.Duration
		final    bool
		want     string
	}{
		{"start", 0, 100 << 20, 0, false, "/x  0 B / 100.0 MiB    0% [                    ]  0.0 MB/s"},
		{"half", 50 << 20, 100 << 20, 2 * time.Second, false, "/x  50.0 MiB / 100.0 MiB   50% [==========          ]  26.2 MB/s  ETA 0:02"},
		{"done", 100 << 20, 100 << 20, 4 * time.Second, true, "/x  100.0 MiB / 100.0 MiB  100% [====================]  26.2 MB/s  in 0:04"},
		{"unknown size", 3 << 30, -1, 100 * time.Second, false, "/x  3.0 GiB  32.2 MB/s"},
		{"long eta", 1 << 20, 10 << 30, time.Second, false, "/x  1.0 MiB / 10.0 GiB    0% [                    ]  1.0 MB/s  ETA 2:50:39"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := formatProgress("/x", tt.n, tt.total, tt.elapsed, tt.final); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
	if got := formatProgress("/a/very/long/path/name/of/an/object.root", 0, -1, 0, false); got != "…/name/of/an/object.root  0 B  0.0 MB/s" {
		t.Errorf("long label: %q", got)
	}
}
