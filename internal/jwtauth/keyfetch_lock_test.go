package jwtauth

import (
	"context"
	"encoding/base64"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/testissuer"
)

// hangingTransport passes requests through until hang is set; then it
// holds them until their context ends (an issuer that stopped answering:
// a black-holed address, an overloaded IAM).
type hangingTransport struct{ hang atomic.Bool }

func (h *hangingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if h.hang.Load() {
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestKeyFetchDoesNotHoldUpKnownKeys: a check whose key is known is
// answered at once while the issuer's keys are being fetched, even from
// an issuer that stopped answering. Regression (found by review): the
// fetch ran under the issuer's lock, so that every check of its tokens
// waited for it (up to the HTTP client's 10 s timeout per GET), and
// anyone could start one every minRefetch with an unsigned token naming
// the issuer and a made-up kid.
func TestKeyFetchDoesNotHoldUpKnownKeys(t *testing.T) {
	is := testissuer.New(t)
	tr := &hangingTransport{}
	var skip atomic.Int64 // the test's clock runs ahead of the real one by this
	now := func() time.Time { return time.Now().Add(time.Duration(skip.Load())) }
	c, err := New(Options{Issuers: []Issuer{{URL: is.URL}}, Client: &http.Client{Transport: tr, Timeout: 3 * time.Second}, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	good := is.Token(t, is.Claims("alice", "storage.read:/"))
	if _, err := c.Check(ctx, good); err != nil {
		t.Fatal(err) // keys fetched and cached
	}

	tr.hang.Store(true)                         // the issuer stops answering
	skip.Store(int64(minRefetch + time.Second)) // the keys are still fresh
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	forged := enc(`{"alg":"ES256","kid":"made-up"}`) + "." +
		enc(`{"iss":"`+is.URL+`","exp":9999999999}`) + "." + enc("x")
	go c.Check(ctx, forged) // an anonymous client's unsigned token
	time.Sleep(100 * time.Millisecond)

	start := time.Now()
	_, err = c.Check(ctx, good) // its key is cached
	if took := time.Since(start); took > time.Second {
		t.Errorf("a valid token with a cached key took %v to check (err %v): it waited for another caller's key fetch", took.Round(time.Millisecond), err)
	}
}
