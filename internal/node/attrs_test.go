package node

import (
	"maps"
	"net/url"
	"testing"
)

// decodeAttrsByParseQuery is what DecodeAttrs did before it parsed the
// pairs itself: the reference it must agree with.
func decodeAttrsByParseQuery(b []byte) map[string]string {
	v, _ := url.ParseQuery(string(b))
	attrs := map[string]string{}
	for k, vals := range v {
		if ValidAttrKey(k) && len(vals) > 0 {
			attrs[k] = vals[len(vals)-1]
		}
	}
	if len(attrs) == 0 {
		return nil
	}
	return attrs
}

func TestAttrsRoundTrip(t *testing.T) {
	for _, attrs := range []map[string]string{
		nil,
		{"v": "AAECAw", "s": "27000", "e": "8+2", "c": "1048576", "k": "3"},
		{"u.name": "a b&c=d%e+f;g", "x-y_z": ""},
	} {
		got := DecodeAttrs(EncodeAttrs(attrs))
		if !maps.Equal(got, attrs) {
			t.Errorf("DecodeAttrs(EncodeAttrs(%v)) = %v", attrs, got)
		}
	}
}

// FuzzDecodeAttrs checks DecodeAttrs against url.ParseQuery on any input
// (seeds in testdata/fuzz/FuzzDecodeAttrs).
func FuzzDecodeAttrs(f *testing.F) {
	for _, s := range []string{"", "a=1&b=2", "a=1&a=2", "a=%zz&b=2", "a;b=1&c=2", "&&=x&k", "k=a+b%2B", "bad key=1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, want := DecodeAttrs(b), decodeAttrsByParseQuery(b)
		if len(got) == 0 && len(want) == 0 {
			return
		}
		if !maps.Equal(got, want) {
			t.Fatalf("DecodeAttrs(%q) = %v, url.ParseQuery gives %v", b, got, want)
		}
	})
}
