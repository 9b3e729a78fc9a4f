package xrootd

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Each decoder of untrusted bytes has a fuzz target. Their seed corpora
// live in testdata/fuzz/<FuzzName>/ and run as ordinary tests; regenerate
// them with
//
//	go test -run TestWriteFuzzSeeds -update-fuzz-seeds ./internal/xrootd/
//
// and fuzz one target with, for example,
//
//	go test -run '^$' -fuzz FuzzRequest -fuzztime 30s ./internal/xrootd/

var updateSeeds = flag.Bool("update-fuzz-seeds", false, "rewrite the seed corpora in testdata/fuzz")

// FuzzRequest decodes a request frame and its typed request, then
// checks that encoding is stable: encode → decode → encode gives the same
// bytes.
func FuzzRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := ReadRequestFrame(bytes.NewReader(data), 1<<16)
		if err != nil {
			return
		}
		req, err := ParseRequest(fr)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("ParseRequest error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if req.RequestID() != fr.ID {
			t.Fatalf("request id %v, frame %v", req.RequestID(), fr.ID)
		}
		enc1 := EncodeRequest(fr.StreamID, req).AppendTo(nil)
		fr2, err := ReadRequestFrame(bytes.NewReader(enc1), 1<<20)
		if err != nil {
			t.Fatalf("re-read: %v", err)
		}
		req2, err := ParseRequest(fr2)
		if err != nil {
			t.Fatalf("re-parse of %#v: %v", req, err)
		}
		if enc2 := EncodeRequest(fr.StreamID, req2).AppendTo(nil); !bytes.Equal(enc1, enc2) {
			t.Fatalf("unstable encoding\n% x\n% x", enc1, enc2)
		}
	})
}

// FuzzResponse decodes a response frame, checks that it re-encodes to
// the bytes consumed, and runs every body parser on it.
func FuzzResponse(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		fr, err := ReadResponseFrame(r, 1<<16)
		if err != nil {
			return
		}
		consumed := data[:len(data)-r.Len()]
		if enc := fr.AppendTo(nil); !bytes.Equal(enc, consumed) {
			t.Fatalf("re-encoded\n% x\nconsumed\n% x", enc, consumed)
		}
		isFinal(fr)
		ParseHandshakeResponse(fr)
		ParseErrorBody(fr.Body)
		ParseProtocolResponse(fr.Body)
		ParseLoginResponse(fr.Body)
		ParseOpenResponse(fr.Body)
		ParseOpenWhole(fr.Body)
		ParseDirlist(fr.Body)
		ParseReadVResponse(fr.Body)
		parseWaitBody(fr.Body)
		parseRedirectBody(fr.Body)
		if inner, ok, err := parseAsyncResponse(fr.Body); err == nil && ok {
			// Equal up to the 4 reserved bytes, which are sent as zeros.
			want := bytes.Clone(fr.Body[:8+ResponseHeaderLen+len(inner.Body)])
			copy(want[4:8], make([]byte, 4))
			if !bytes.Equal(AppendAsyncResponse(nil, inner), want) {
				t.Fatal("asynresp does not re-encode")
			}
		}
		if fr.Status == StatusStatus {
			if sb, err := ParseStatusBody(fr.Body); err == nil && len(sb.Info) >= 8 {
				DecodePages(nil, int64(getU64(sb.Info)&(1<<50-1)), fr.Data)
			}
		}
	})
}

// FuzzStatusBody checks that a kXR_status body that verifies re-encodes
// to the same bytes.
func FuzzStatusBody(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		sb, err := ParseStatusBody(body)
		if err != nil {
			return
		}
		if enc := sb.AppendTo(nil); !bytes.Equal(enc, body) {
			t.Fatalf("re-encoded\n% x\nwant\n% x", enc, body)
		}
	})
}

// FuzzStat parses stat text; what parses must survive AppendStat →
// ParseStat → AppendStat unchanged.
func FuzzStat(f *testing.F) {
	f.Fuzz(func(t *testing.T, text string) {
		fi, err := ParseStat(text)
		if err != nil {
			return
		}
		s1 := string(AppendStat(nil, &fi))
		fi2, err := ParseStat(s1)
		if err != nil {
			t.Fatalf("re-parse of %q: %v", s1, err)
		}
		if s2 := string(AppendStat(nil, &fi2)); s1 != s2 {
			t.Fatalf("unstable stat text %q → %q", s1, s2)
		}
		if fi2.Size != fi.Size || fi2.IsDir() != fi.IsDir() || !fi2.ModTime.Equal(fi.ModTime) {
			t.Fatalf("stat changed: %+v → %+v", fi, fi2)
		}
	})
}

// FuzzDirlist parses listing bodies; a parsed listing with stat must
// re-encode (as the server writes it) to a listing that parses the same.
func FuzzDirlist(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		list, err := ParseDirlist(body)
		if err != nil {
			return
		}
		var b []byte
		b = append(b, dirlistStatLead...)
		for _, fi := range list {
			b = append(b, fi.Name...)
			b = append(b, '\n')
			b = AppendStat(b, &fi)
			b = append(b, '\n')
		}
		b[len(b)-1] = 0
		again, err := ParseDirlist(b)
		if err != nil {
			t.Fatalf("re-parse of %q: %v", b, err)
		}
		if len(again) != len(list) {
			t.Fatalf("%d entries became %d", len(list), len(again))
		}
		for i := range list {
			if again[i].Name != list[i].Name || again[i].Size != list[i].Size {
				t.Fatalf("entry %d: %+v became %+v", i, list[i], again[i])
			}
		}
	})
}

// FuzzDirlistChecksums parses listing bodies with checksums (kXR_dcksm);
// a parsed listing must re-encode (as the server writes it) to one that
// parses the same.
func FuzzDirlistChecksums(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		list, alg, err := ParseDirlistChecksums(body)
		if err != nil || len(list) == 0 {
			return
		}
		if alg == "" {
			alg = "adler32"
		}
		b := []byte(dirlistStatLead)
		for _, e := range list {
			b = append(b, e.Name...)
			b = append(b, '\n')
			b = AppendStat(b, &e.FileInfo)
			b = AppendChecksumField(b, alg, e.Checksum)
			b = append(b, '\n')
		}
		b[len(b)-1] = 0
		again, alg2, err := ParseDirlistChecksums(b)
		if err != nil {
			t.Fatalf("re-parse of %q: %v", b, err)
		}
		if alg2 != alg || len(again) != len(list) {
			t.Fatalf("%d entries of %s became %d of %s", len(list), alg, len(again), alg2)
		}
		for i := range list {
			if again[i].Name != list[i].Name || again[i].Size != list[i].Size || again[i].Checksum != list[i].Checksum {
				t.Fatalf("entry %d: %+v became %+v", i, list[i], again[i])
			}
		}
	})
}

// FuzzFattrResponse parses kXR_fattr answers for the names (newline
// separated) asked: never a panic, and a parsed answer has one attribute
// per name, in order.
func FuzzFattrResponse(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte, op uint8, names string) {
		list := strings.Split(names, "\n")
		attrs, err := ParseFattrResponse(body, FattrOp(op), list)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if len(attrs) != len(list) {
			t.Fatalf("%d attributes for %d names", len(attrs), len(list))
		}
		for i, a := range attrs {
			if a.Name != list[i] || a.Err != nil && a.Value != nil {
				t.Fatalf("attribute %d: %+v", i, a)
			}
		}
	})
}

// FuzzPages checks that AppendPages and DecodePages are inverse, for
// encoding arbitrary data and for decoding arbitrary page sequences.
func FuzzPages(f *testing.F) {
	f.Fuzz(func(t *testing.T, offset uint64, b []byte) {
		off := int64(offset & (1<<50 - 1))
		raw := AppendPages(nil, off, b)
		if len(raw) != PagesLen(off, len(b)) {
			t.Fatalf("PagesLen(%d, %d) = %d, encoded %d", off, len(b), PagesLen(off, len(b)), len(raw))
		}
		got, err := DecodePages(nil, off, raw)
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("decode of encoded data: %v", err)
		}
		data, err := DecodePages(nil, off, b)
		if err != nil {
			return
		}
		if again := AppendPages(nil, off, data); !bytes.Equal(again, b) {
			t.Fatalf("decoded pages re-encode differently")
		}
		if n, ok := pagesDataLen(off, len(b)); !ok || n != len(data) {
			t.Fatalf("pagesDataLen = %d %v, decoded %d", n, ok, len(data))
		}
	})
}

// fuzzSeeds returns the seed corpus of every target, keyed by target and
// seed name; each seed is the list of the target's arguments.
func fuzzSeeds(t testing.TB) map[string]map[string][]any {
	req := func(r Request) []byte { return EncodeRequest(StreamID{1, 0}, r).AppendTo(nil) }
	resp := func(sid StreamID, st Status, body []byte) []byte { return respond(sid, st, body) }
	status := func(id RequestID, rt uint8, info, data []byte) []byte {
		sb := StatusBody{StreamID: StreamID{1, 0}, RequestID: id, RespType: rt, DataLen: int32(len(data)), Info: info}
		return (&ResponseFrame{StreamID: StreamID{1, 0}, Status: StatusStatus, Body: sb.AppendTo(nil), Data: data}).AppendTo(nil)
	}
	statText := "42857133594705408 6 48 1795302800 1795302823 1795302800 0644 xrootd xrootd\x00"
	dirStat := ".\n0 0 0 0\nd2\n42855024765763072 4096 51 1795302823 1795302823 1795302823 0750 xrootd xrootd\nh.txt\n" + statText
	attn := append(unhex(t, "00001390 00000000 0200 0000 00000011"), "adler32 e27f6a14\x00"...)
	fi := FileInfo{ID: 3, Size: 12, Mode: 0o644, ModTime: time.Unix(1700000000, 0)}
	pages := AppendPages(nil, 0, []byte("hello\n"))

	return map[string]map[string][]any{
		"FuzzRequest": {
			"protocol":       {req(&ProtocolRequest{ClientVersion: 0x511, Flags: 0x0b, Expect: 3})},
			"login":          {req(&LoginRequest{PID: 7177, Username: "root", Ability: 0xdd, CapVer: 0x85, Token: "xrd.cc=us&xrd.tz=0&xrd.appname=xrdcp&xrd.info=&xrd.hostname=vm&xrd.rn=v5.5.3"})},
			"open-upload":    {req(&OpenRequest{Mode: 0o644, Options: 0x0462, Path: "/big.bin?oss.asize=20000000"})},
			"open-read":      {req(&OpenRequest{Options: 0x0450, Path: "/big.bin"})},
			"stat":           {req(&StatRequest{Path: "/d1/h.txt"})},
			"stat-handle":    {req(&StatRequest{Handle: FileHandle{0, 0, 0, 1}})},
			"statvfs":        {req(&StatRequest{Options: StatVFS, Path: "/"})},
			"statx":          {req(&StatxRequest{Paths: []string{"/a", "/b"}})},
			"read":           {req(&ReadRequest{Offset: 5, Length: 20, HasArgs: true})},
			"read-ahead":     {req(&ReadRequest{Offset: 5, Length: 20, HasArgs: true, ReadAhead: []ReadSegment{{Length: 4096, Offset: 8192}}})},
			"pgread":         {req(&PgReadRequest{Offset: 8 << 20, Length: 8 << 20, HasArgs: true})},
			"readv":          {req(&ReadVRequest{Segments: []ReadSegment{{Length: 5}, {Length: 5, Offset: 9998}}})},
			"write":          {req(&WriteRequest{Offset: 10000, Data: []byte("abc")})},
			"pgwrite":        {req(&PgWriteRequest{Pages: pages})},
			"pgwrite-retry":  {req(&PgWriteRequest{Offset: 4095, Flags: pgRetry, Pages: AppendPages(nil, 4095, []byte("xy"))})},
			"sync":           {req(&SyncRequest{})},
			"close":          {req(&CloseRequest{})},
			"truncate":       {req(&TruncateRequest{Size: 100, Path: "/big.bin"})},
			"dirlist":        {req(&DirlistRequest{Options: DirlistStat, Path: "/d1"})},
			"mkdir":          {req(&MkdirRequest{Options: MkdirPath, Mode: 0o750, Path: "/d1/d2/d3"})},
			"rm":             {req(&RmRequest{Path: "/d1/h.txt"})},
			"rmdir":          {req(&RmdirRequest{Path: "/d1/d2/d3"})},
			"mv":             {req(&MvRequest{Source: "/h.txt", Target: "/d1/h.txt"})},
			"query-checksum": {req(&QueryRequest{InfoType: QueryCksum, Args: []byte("/big.bin?cks.type=adler32\x00")})},
			"query-config":   {req(&QueryRequest{InfoType: QueryConfig, Args: []byte("readv_iov_max readv_ior_max\x00")})},
			"locate":         {req(&LocateRequest{Options: 0x0501, Path: "*/d1"})},
			"endsess":        {req(&EndsessRequest{SessionID: [16]byte{1, 2, 3}})},
			"bind":           {req(&BindRequest{SessionID: [16]byte{0xcc, 0x98, 0x2c, 0xdb, 15: 0x14}})},
			"bind-payload":   {append(req(&BindRequest{})[:20], 0, 0, 0, 2, 'x', 'y')},
			"set":            {req(&SetRequest{Data: "appid xrdcp"})},
			"prepare":        {req(&PrepareRequest{Options: 8, Paths: []string{"/a"}})},
			"chmod":          {req(&ChmodRequest{Mode: 0o644, Path: "/big.bin"})},
			"fattr":          {req(&RawRequest{ID: ReqFattr, Params: [16]byte{4: 1, 5: 1}, Payload: []byte("\x00\x00user.x\x00")})},
			"fattr-get":      {req(&FattrRequest{Op: FattrGet, Path: "/d1/h.txt", Names: []string{"user.ecstore", "user.b"}})},
			"fattr-set":      {req(&FattrRequest{Op: FattrSet, Options: FattrIsNew, Path: "/d1/h.txt", Names: []string{"user.ecstore"}, Values: [][]byte{[]byte("v=1&s=12")}})},
			"fattr-del":      {req(&FattrRequest{Op: FattrDel, Handle: FileHandle{0, 0, 0, 1}, Names: []string{"user.x"}})},
			"fattr-list":     {req(&FattrRequest{Op: FattrList, Options: FattrListValues, Path: "/d1"})},
			"negative-dlen":  {RequestHeader{ID: ReqOpen, Dlen: -1}.AppendTo(nil)},
			"oversized":      {RequestHeader{ID: ReqWrite, Dlen: 1 << 30}.AppendTo(nil)},
			"truncated":      {append(RequestHeader{ID: ReqOpen, Dlen: 10}.AppendTo(nil), "/a"...)},
			"bad-readv":      {append(RequestHeader{ID: ReqReadV, Dlen: 17}.AppendTo(nil), make([]byte, 17)...)},
			"bad-mv":         {append(RequestHeader{ID: ReqMv, Params: [16]byte{15: 40}, Dlen: 5}.AppendTo(nil), "/a /b"...)},
		},
		"FuzzResponse": {
			"handshake":       {AppendHandshakeResponse(nil, ProtocolVersion, DataServer)},
			"protocol":        {resp(StreamID{}, StatusOK, unhex(t, "00000511 00300001"))},
			"login":           {resp(StreamID{}, StatusOK, unhex(t, "01000000ac1b000007000000 01000000"))},
			"login-sec":       {resp(StreamID{}, StatusOK, append(make([]byte, 16), "&P=gsi,v:10000"...))},
			"stat":            {resp(StreamID{1, 0}, StatusOK, []byte(statText))},
			"error":           {resp(StreamID{1, 0}, StatusError, AppendErrorBody(nil, ErrNotFound, "Unable to locate /h.txt; no such file or directory"))},
			"open-retstat":    {resp(StreamID{1, 0}, StatusOK, (&OpenResponse{Stat: &fi}).AppendTo(nil))},
			"dirlist":         {resp(StreamID{1, 0}, StatusOK, []byte(dirStat))},
			"dirlist-oksofar": {resp(StreamID{1, 0}, StatusOKSoFar, []byte("a\nb\n"))},
			"pgread":          {status(ReqPgRead, RespFinal, make([]byte, 8), pages)},
			"pgread-partial":  {status(ReqPgRead, RespPartial, unhex(t, "0000000000a00000"), AppendPages(nil, 0xa00000, make([]byte, 5000)))},
			"pgwrite":         {status(ReqPgWrite, RespFinal, make([]byte, 8), nil)},
			"waitresp":        {resp(StreamID{2, 0}, StatusWaitResp, append(be32(600), "Job scheduled."...))},
			"attn-asynresp":   {resp(StreamID{}, StatusAttn, attn)},
			"wait":            {resp(StreamID{1, 0}, StatusWait, append(be32(5), "busy"...))},
			"redirect":        {resp(StreamID{1, 0}, StatusRedirect, append(be32(1094), "host.example?x=1"...))},
			"readv":           {resp(StreamID{1, 0}, StatusOK, unhex(t, "00000000 00000002 0000000000000010 abcd"))},
			"oversized":       {AppendResponseHeader(nil, StreamID{1, 0}, StatusOK, 1<<30)},
			"bad-status":      {AppendResponseHeader(nil, StreamID{1, 0}, StatusStatus, 3)},
		},
		"FuzzStatusBody": {
			"pgwrite":   {unhex(t, "188c963d 0100 1a 00 00000000 00000000 0000000000000000")},
			"pgread":    {unhex(t, "70cab667 0100 1e 00 00000000 0000000a 0000000000000000")},
			"bad-crc":   {unhex(t, "00000000 0100 1e 00 00000000 0000000a 0000000000000000")},
			"too-short": {[]byte{1, 2, 3}},
		},
		"FuzzStat": {
			"xrootd5":   {statText},
			"directory": {"42855020470795776 4096 51 1795302823 1795302823 1795302823 0750 xrootd xrootd"},
			"old":       {"7 100 16 1000"},
			"root":      {"0 0 0 0"},
			"bad-size":  {"1 -5 0 0"},
			"bad-mode":  {"1 2 3 4 5 6 0999 a b"},
		},
		"FuzzDirlist": {
			"dstat":       {[]byte(dirStat)},
			"plain":       {[]byte("d2\nh.txt\x00")},
			"empty-dstat": {[]byte(".\n0 0 0 0\x00")},
			"odd":         {[]byte(".\n0 0 0 0\nname\x00")},
		},
		"FuzzFattrResponse": {
			"get":     {append(append([]byte{1, 2, 0, 0}, "a\x00\x0b\xd3b\x00"...), append(be32(3), "abc\x00\x00\x00\x00"...)...), uint8(FattrGet), "a\nb"},
			"set":     {[]byte("\x00\x01\x00\x00user.ecstore\x00"), uint8(FattrSet), "user.ecstore"},
			"short":   {[]byte{0}, uint8(FattrDel), "a"},
			"garbage": {[]byte("\x00\x01\xff\xff\xff\xff"), uint8(FattrGet), ""},
		},
		"FuzzPages": {
			"hello":     {uint64(0), []byte("hello\n")},
			"unaligned": {uint64(4095), []byte(strings.Repeat("x", 5000))},
			"encoded":   {uint64(0), pages},
			"crc-only":  {uint64(0), []byte{1, 2, 3, 4}},
			"two-pages": {uint64(100), AppendPages(nil, 100, make([]byte, 4100))},
		},
	}
}

// TestWriteFuzzSeeds writes the seed corpora when -update-fuzz-seeds is
// set, and otherwise checks that every seed is on disk.
func TestWriteFuzzSeeds(t *testing.T) {
	for target, seeds := range fuzzSeeds(t) {
		dir := filepath.Join("testdata", "fuzz", target)
		for name, args := range seeds {
			var b strings.Builder
			b.WriteString("go test fuzz v1\n")
			for _, a := range args {
				switch v := a.(type) {
				case []byte:
					fmt.Fprintf(&b, "[]byte(%q)\n", v)
				case string:
					fmt.Fprintf(&b, "string(%q)\n", v)
				case uint64:
					fmt.Fprintf(&b, "uint64(%d)\n", v)
				case uint8:
					fmt.Fprintf(&b, "byte(%q)\n", v)
				default:
					t.Fatalf("seed %s/%s: unsupported argument %T", target, name, a)
				}
			}
			file := filepath.Join(dir, name)
			if *updateSeeds {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(file)
			if err != nil || string(got) != b.String() {
				t.Errorf("seed %s is missing or stale; run with -update-fuzz-seeds", file)
			}
		}
	}
}

// FuzzAttrList parses answers to a listing with attributes: whatever
// parses is written again by AppendAttrListEntry and parses the same.
func FuzzAttrList(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		list, err := ParseAttrList(body)
		if err != nil {
			return
		}
		var b []byte
		for i := range list {
			b = AppendAttrListEntry(b, &list[i])
		}
		again, err := ParseAttrList(b)
		if err != nil {
			t.Fatalf("re-parse of %q: %v", b, err)
		}
		if len(again) != len(list) {
			t.Fatalf("%d entries became %d", len(list), len(again))
		}
		for i := range list {
			a, e := again[i], list[i]
			if a.Name != e.Name || a.Size != e.Size || a.HasValue != e.HasValue || !bytes.Equal(a.Value, e.Value) {
				t.Fatalf("entry %d: %+v became %+v", i, e, a)
			}
		}
	})
}

// FuzzRemoveAttr parses answers to a removal that says what it removed:
// whatever parses is written again by AppendRemoveAttr and parses the
// same; a value longer than an attribute can be never parses.
func FuzzRemoveAttr(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		value, had, err := ParseRemoveAttr(body)
		if err != nil {
			return
		}
		if len(value) > MaxFattrValue || (!had && value != nil) {
			t.Fatalf("%q parsed as %d bytes, had %v", body, len(value), had)
		}
		again := AppendRemoveAttr(nil, value, had)
		if !bytes.Equal(again, body) {
			t.Fatalf("%q written again as %q", body, again)
		}
	})
}
