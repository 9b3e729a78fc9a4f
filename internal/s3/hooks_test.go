package s3

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/gateway"
)

// The metrics hooks see every request by method and outcome, and the
// object bytes clients write and read.
func TestHooks(t *testing.T) {
	var mu sync.Mutex
	ops := map[string]int{}
	moved := map[string]int{}
	ts := newTestServer(t, func(o *Options) {
		o.Hooks = gateway.Hooks{
			Request: func(op string, _ time.Duration, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					op += " error"
				}
				ops[op]++
			},
			Bytes: func(dir string, n int) {
				mu.Lock()
				defer mu.Unlock()
				moved[dir] += n
			},
		}
	})
	data := bytes.Repeat([]byte("metrics "), 1000)
	ts.must(200, "PUT", "/hkb", nil, nil)
	ts.must(200, "PUT", "/hkb/obj", data, nil)
	ts.must(200, "GET", "/hkb/obj", nil, nil)
	ts.must(206, "GET", "/hkb/obj", nil, map[string]string{"Range": "bytes=0-99"})
	ts.fails(404, "", "HEAD", "/hkb/missing", nil, nil)
	mu.Lock()
	defer mu.Unlock()
	if ops["s3_put"] != 2 || ops["s3_get"] != 2 || ops["s3_head error"] != 1 {
		t.Errorf("requests %v", ops)
	}
	if moved["write"] != len(data) || moved["read"] != len(data)+100 {
		t.Errorf("bytes %v, want write %d, read %d", moved, len(data), len(data)+100)
	}
}
