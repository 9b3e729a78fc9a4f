package xrootd

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"
)

// FileInfo describes a file or directory as kXR_stat, kXR_open with
// kXR_retstat and kXR_dirlist with kXR_dstat report it (see kXR_stat in the specification).
//
// On the wire it is the text "id size flags mtime ctime atime mode owner
// group"; servers older than protocol 5 send only the first four tokens,
// and then ChangeTime, AccessTime, Owner and Group are zero.
type FileInfo struct {
	// Name is the base name in a directory listing; empty for stat.
	Name string
	// ID identifies the file on its server (xrootd uses device and inode).
	ID   uint64
	Size int64 // bytes
	// Mode holds the permission bits and fs.ModeDir for directories.
	Mode fs.FileMode
	// Flags are the protocol's stat flags. Server derives them from Mode
	// (see StatFlagsFor) and ignores this field; Client fills it from the
	// response.
	Flags      StatFlags
	ModTime    time.Time // mtime
	ChangeTime time.Time // ctime; ModTime when unknown
	AccessTime time.Time // atime; ModTime when unknown
	Owner      string    // user name, "-" on the wire when empty
	Group      string    // group name, "-" on the wire when empty
}

// IsDir reports whether the entry is a directory.
func (fi *FileInfo) IsDir() bool { return fi.Mode.IsDir() || fi.Flags&StatIsDir != 0 }

// StatFlagsFor derives the protocol stat flags from a file mode: kXR_isDir
// for directories, kXR_other for anything neither regular nor directory,
// kXR_readable, kXR_writable and kXR_xset from any of the permission
// classes.
func StatFlagsFor(m fs.FileMode) StatFlags {
	var f StatFlags
	switch {
	case m.IsDir():
		f |= StatIsDir
	case !m.IsRegular():
		f |= StatOther
	}
	if m&0o444 != 0 {
		f |= StatReadable
	}
	if m&0o222 != 0 {
		f |= StatWritable
	}
	if m&0o111 != 0 {
		f |= StatXset
	}
	return f
}

// wireToken returns s, or "-" when s is empty or would break the
// blank-separated stat text.
func wireToken(s string) string {
	if s == "" || strings.ContainsAny(s, " \n\x00") {
		return "-"
	}
	return s
}

func unixSeconds(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// AppendStat appends the stat text of fi (without terminator) to b, in
// the extended form xrootd 5 sends. Zero change and access times are
// replaced by the modification time.
func AppendStat(b []byte, fi *FileInfo) []byte {
	mt := unixSeconds(fi.ModTime)
	ct, at := unixSeconds(fi.ChangeTime), unixSeconds(fi.AccessTime)
	if ct == 0 {
		ct = mt
	}
	if at == 0 {
		at = mt
	}
	b = strconv.AppendUint(b, fi.ID, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, fi.Size, 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(StatFlagsFor(fi.Mode)), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, mt, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, ct, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, at, 10)
	b = append(b, ' ', '0')
	b = strconv.AppendUint(b, uint64(fi.Mode.Perm()), 8)
	b = append(b, ' ')
	b = append(b, wireToken(fi.Owner)...)
	b = append(b, ' ')
	return append(b, wireToken(fi.Group)...)
}

// ParseStat decodes a stat text (with or without a trailing NUL) as the
// server sends it for kXR_stat, kXR_open with kXR_retstat and each entry of
// a kXR_dirlist with kXR_dstat.
func ParseStat(text string) (FileInfo, error) {
	var fi FileInfo
	text = strings.TrimRight(text, "\x00\n")
	tok := strings.Fields(text)
	if len(tok) < 4 {
		return fi, fmt.Errorf("%w: stat %q has %d fields, want at least 4", ErrMalformed, text, len(tok))
	}
	var err error
	if fi.ID, err = strconv.ParseUint(tok[0], 10, 64); err != nil {
		// Some servers send negative or other non-numeric ids; keep going.
		fi.ID = 0
	}
	if fi.Size, err = strconv.ParseInt(tok[1], 10, 64); err != nil || fi.Size < 0 {
		return fi, fmt.Errorf("%w: stat size %q", ErrMalformed, tok[1])
	}
	flags, err := strconv.ParseUint(tok[2], 10, 32)
	if err != nil {
		return fi, fmt.Errorf("%w: stat flags %q", ErrMalformed, tok[2])
	}
	fi.Flags = StatFlags(flags)
	mt, err := strconv.ParseInt(tok[3], 10, 64)
	if err != nil {
		return fi, fmt.Errorf("%w: stat mtime %q", ErrMalformed, tok[3])
	}
	fi.ModTime = time.Unix(mt, 0)
	if len(tok) >= 9 {
		ct, err1 := strconv.ParseInt(tok[4], 10, 64)
		at, err2 := strconv.ParseInt(tok[5], 10, 64)
		mode, err3 := strconv.ParseUint(tok[6], 8, 32)
		if err1 != nil || err2 != nil || err3 != nil {
			return fi, fmt.Errorf("%w: extended stat %q", ErrMalformed, text)
		}
		fi.ChangeTime, fi.AccessTime = time.Unix(ct, 0), time.Unix(at, 0)
		fi.Mode = fs.FileMode(mode).Perm()
		fi.Owner, fi.Group = tok[7], tok[8]
	} else {
		// Derive permissions from the flags, owner class only.
		if fi.Flags&StatReadable != 0 {
			fi.Mode |= 0o400
		}
		if fi.Flags&StatWritable != 0 {
			fi.Mode |= 0o200
		}
		if fi.Flags&StatXset != 0 {
			fi.Mode |= 0o100
		}
	}
	if fi.Flags&StatIsDir != 0 {
		fi.Mode |= fs.ModeDir
	} else if fi.Flags&StatOther != 0 {
		fi.Mode |= fs.ModeIrregular
	}
	return fi, nil
}

// dirlistStatLead is the first entry of a kXR_dstat listing: "." with an
// all-zero stat, which tells the client that stat lines follow.
const dirlistStatLead = ".\n0 0 0 0\n"

// ParseDirlist decodes the complete body of a kXR_dirlist response (all
// kXR_oksofar parts concatenated with the final kXR_ok). Listings that
// start with the "." lead entry carry a stat line after each name (and
// may carry a checksum after it, which ParseDirlistChecksums reads).
func ParseDirlist(body []byte) ([]FileInfo, error) {
	var out []FileInfo
	err := eachDirlistEntry(body, func(n int) { out = make([]FileInfo, 0, n) }, func(name, stat string) error {
		fi := FileInfo{Name: name}
		if stat != "" {
			var err error
			if fi, err = ParseStat(stat); err != nil {
				return fmt.Errorf("dirlist entry %q: %w", name, err)
			}
			fi.Name = name
		}
		out = append(out, fi)
		return nil
	})
	return out, err
}

// eachDirlistEntry splits a kXR_dirlist body into its entries: it calls
// start with their number, then fn with each entry's name and stat line
// (empty in a listing without stat).
func eachDirlistEntry(body []byte, start func(n int), fn func(name, stat string) error) error {
	s := string(bytes.TrimRight(body, "\x00"))
	if s == "" {
		return nil
	}
	withStat := false
	if strings.HasPrefix(s, dirlistStatLead) || s == strings.TrimSuffix(dirlistStatLead, "\n") {
		withStat = true
		s = strings.TrimPrefix(s, strings.TrimSuffix(dirlistStatLead, "\n"))
		s = strings.TrimPrefix(s, "\n")
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return nil
	}
	if !withStat {
		start(len(lines))
		for _, l := range lines {
			if l != "" {
				if err := fn(l, ""); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if len(lines)%2 != 0 {
		return fmt.Errorf("%w: dirlist with stat has an odd number of lines (%d)", ErrMalformed, len(lines))
	}
	start(len(lines) / 2)
	for i := 0; i < len(lines); i += 2 {
		if err := fn(lines[i], lines[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// A kXR_dirlist with kXR_dcksm follows each entry's stat with its
// checksum, as xrootd 5 sends it (XrdXrootdProtocol::do_DirStat):
// " [ adler32:0a1b2c3d ]", or " [ adler32:none ]" for an entry that has
// none (a directory, a file whose checksum is not kept).
const (
	checksumOpen  = " [ "
	checksumClose = " ]"
	checksumNone  = "none"
)

// AppendChecksumField appends the checksum field of a kXR_dcksm listing
// entry (to follow its stat text) to b: sum of algorithm alg, or "none"
// when sum is empty or could not be read back as one token.
func AppendChecksumField(b []byte, alg, sum string) []byte {
	if !checksumToken(sum) {
		sum = checksumNone
	}
	b = append(b, checksumOpen...)
	b = append(b, alg...)
	b = append(b, ':')
	b = append(b, sum...)
	return append(b, checksumClose...)
}

// checksumToken reports whether s can be an algorithm name or checksum
// value in a listing's checksum field.
func checksumToken(s string) bool {
	return s != "" && !strings.ContainsAny(s, " \n\x00:[]")
}

// ParseDirlistChecksums decodes the body of a kXR_dirlist response with
// kXR_dcksm: the entries with their stat and checksum (Checksum empty for
// "none", or when the server sent no checksum, as xrootd without
// checksums configured answers), and the algorithm the server named. A
// listing whose entries name different algorithms is malformed.
func ParseDirlistChecksums(body []byte) (list []ChecksumEntry, algorithm string, err error) {
	err = eachDirlistEntry(body, func(n int) { list = make([]ChecksumEntry, 0, n) }, func(name, stat string) error {
		if stat == "" {
			return fmt.Errorf("%w: dirlist entry %q without stat", ErrMalformed, name)
		}
		var alg, sum string
		if i := strings.LastIndex(stat, checksumOpen); i >= 0 && i+len(checksumOpen)+len(checksumClose) <= len(stat) && strings.HasSuffix(stat, checksumClose) {
			field := stat[i+len(checksumOpen) : len(stat)-len(checksumClose)]
			var ok bool
			if alg, sum, ok = strings.Cut(field, ":"); !ok || !checksumToken(alg) || !checksumToken(sum) {
				return fmt.Errorf("%w: dirlist entry %q: checksum %q", ErrMalformed, name, field)
			}
			if sum == checksumNone {
				sum = ""
			}
			stat = stat[:i]
		}
		switch {
		case alg == "":
		case algorithm == "":
			algorithm = alg
		case alg != algorithm:
			return fmt.Errorf("%w: dirlist entry %q has a %s checksum, others %s", ErrMalformed, name, alg, algorithm)
		}
		fi, err := ParseStat(stat)
		if err != nil {
			return fmt.Errorf("dirlist entry %q: %w", name, err)
		}
		fi.Name = name
		list = append(list, ChecksumEntry{FileInfo: fi, Checksum: sum})
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return list, algorithm, nil
}

// AttrListArg is the query argument of a listing with attributes
// (AttrLister): the directory, then this key with the attribute's name.
const AttrListArg = "ecstore.listattr"

// CloseSyncsKey is the kXR_query config key by which ecstore's data
// server says whether a file's close makes it durable ("1": it runs with
// fsync on, and a close fsyncs what the file's last kXR_sync did not) or
// not ("0"). A client that wants a file durable then need not send
// kXR_sync before the close. Other servers echo the key.
const CloseSyncsKey = "ecstore.closesyncs"

// RemoveAttrArg is the query argument of a removal that says what it
// removed (AttrRemover): the file's path, then this key with the name of
// the attribute to answer with.
const RemoveAttrArg = "ecstore.rmattr"

// The first byte of an answer to a removal that says what it removed:
// the attribute's value follows removedWithAttr; removedNoAttr, alone,
// says the file had no such attribute.
const (
	removedWithAttr = 'A'
	removedNoAttr   = 'N'
)

// AppendRemoveAttr appends the answer to a removal that says what it
// removed: the value of the attribute asked for, when the file had it.
func AppendRemoveAttr(b, value []byte, had bool) []byte {
	if !had {
		return append(b, removedNoAttr)
	}
	return append(append(b, removedWithAttr), value...)
}

// ParseRemoveAttr parses the answer to a removal that says what it
// removed (AppendRemoveAttr). value aliases b.
func ParseRemoveAttr(b []byte) (value []byte, had bool, err error) {
	switch {
	case len(b) == 1 && b[0] == removedNoAttr:
		return nil, false, nil
	case len(b) >= 1 && b[0] == removedWithAttr:
		if len(b)-1 > MaxFattrValue {
			return nil, false, fmt.Errorf("%w: removal answers a %d-byte attribute, more than %d", ErrMalformed, len(b)-1, MaxFattrValue)
		}
		return b[1:], true, nil
	}
	return nil, false, fmt.Errorf("%w: removal answer of %d bytes starts with neither %q nor %q", ErrMalformed, len(b), removedWithAttr, removedNoAttr)
}

// OpenWholeArg is the query argument of an open that reads small files
// whole (WholeOpener): the file's path, then this key with the size of
// the largest file to answer whole.
const OpenWholeArg = "ecstore.open"

// The first byte of an answer to an open that reads small files whole
// says which it is: the file's content follows openWholeContent, a
// kXR_open answer with stat information (OpenResponse) follows
// openWholeHandle.
const (
	openWholeContent = 'W'
	openWholeHandle  = 'O'
)

// AppendOpenWholeHandle appends the answer to an open that reads small
// files whole that leaves the file open: r, as kXR_open answers it (with
// its Stat).
func AppendOpenWholeHandle(b []byte, r *OpenResponse) []byte {
	return r.AppendTo(append(b, openWholeHandle))
}

// ParseOpenWhole decodes the answer to an open that reads small files
// whole: the file's content (a part of body), or the open file's handle
// and stat information.
func ParseOpenWhole(body []byte) (content []byte, open *OpenResponse, err error) {
	if len(body) == 0 {
		return nil, nil, fmt.Errorf("%w: empty answer to an open", ErrMalformed)
	}
	switch body[0] {
	case openWholeContent:
		return body[1:len(body):len(body)], nil, nil
	case openWholeHandle:
		r, err := ParseOpenResponse(body[1:])
		if err != nil {
			return nil, nil, err
		}
		if r.Stat == nil {
			return nil, nil, fmt.Errorf("%w: an open's answer without stat information", ErrMalformed)
		}
		return nil, &r, nil
	}
	return nil, nil, fmt.Errorf("%w: answer to an open of kind %q", ErrMalformed, body[0])
}

// AppendAttrListEntry appends one entry of the answer to a listing with
// attributes (AttrLister): three lines, the name, its stat as kXR_dirlist
// with kXR_dstat gives it, and "=" with the value in unpadded URL-safe
// base64, or an empty line when the entry has no value.
func AppendAttrListEntry(b []byte, e *AttrEntry) []byte {
	b = append(b, e.Name...)
	b = append(b, '\n')
	b = AppendStat(b, &e.FileInfo)
	b = append(b, '\n')
	if e.HasValue {
		b = append(b, '=')
		b = base64.RawURLEncoding.AppendEncode(b, e.Value)
	}
	return append(b, '\n')
}

// ParseAttrList parses the answer to a listing with attributes (entries
// as AppendAttrListEntry writes them; trailing NULs ignored). A name
// that could not be a directory entry ("", ".", "..", or one with a
// '/') makes the answer malformed.
func ParseAttrList(body []byte) ([]AttrEntry, error) {
	s := string(bytes.TrimRight(body, "\x00"))
	if s == "" {
		return nil, nil
	}
	if !strings.HasSuffix(s, "\n") {
		return nil, fmt.Errorf("%w: attribute listing does not end with a newline", ErrMalformed)
	}
	lines := strings.Split(s[:len(s)-1], "\n")
	if len(lines)%3 != 0 {
		return nil, fmt.Errorf("%w: attribute listing of %d lines, not entries of 3", ErrMalformed, len(lines))
	}
	out := make([]AttrEntry, 0, len(lines)/3)
	for i := 0; i < len(lines); i += 3 {
		name := lines[i]
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
			return nil, fmt.Errorf("%w: attribute listing names entry %q", ErrMalformed, name)
		}
		fi, err := ParseStat(lines[i+1])
		if err != nil {
			return nil, fmt.Errorf("attribute listing entry %q: %w", name, err)
		}
		fi.Name = name
		e := AttrEntry{FileInfo: fi}
		if v := lines[i+2]; v != "" {
			if v[0] != '=' {
				return nil, fmt.Errorf("%w: attribute listing entry %q: value line %q", ErrMalformed, name, v)
			}
			if e.Value, err = base64.RawURLEncoding.DecodeString(v[1:]); err != nil {
				return nil, fmt.Errorf("%w: attribute listing entry %q: %v", ErrMalformed, name, err)
			}
			e.HasValue = true
		}
		out = append(out, e)
	}
	return out, nil
}

// AppendErrorBody appends a kXR_error body: the code and the
// NUL-terminated message.
func AppendErrorBody(b []byte, code ErrorCode, msg string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(code))
	b = append(b, msg...)
	return append(b, 0)
}

// ParseErrorBody decodes a kXR_error body.
func ParseErrorBody(body []byte) (*Error, error) {
	if len(body) < 4 {
		return nil, fmt.Errorf("%w: kXR_error body of %d bytes", ErrMalformed, len(body))
	}
	msg := body[4:]
	if i := bytes.IndexByte(msg, 0); i >= 0 {
		msg = msg[:i]
	}
	return &Error{Code: ErrorCode(int32(binary.BigEndian.Uint32(body))), Message: string(msg)}, nil
}

// parseWaitBody decodes a kXR_wait or kXR_waitresp body: seconds and an
// optional message.
func parseWaitBody(body []byte) (time.Duration, string, error) {
	if len(body) < 4 {
		return 0, "", fmt.Errorf("%w: kXR_wait body of %d bytes", ErrMalformed, len(body))
	}
	secs := int32(binary.BigEndian.Uint32(body))
	return time.Duration(max(secs, 0)) * time.Second, string(bytes.TrimRight(body[4:], "\x00")), nil
}

// parseRedirectBody decodes a kXR_redirect body: port and host[?cgi].
func parseRedirectBody(body []byte) (*RedirectError, error) {
	if len(body) < 4 {
		return nil, fmt.Errorf("%w: kXR_redirect body of %d bytes", ErrMalformed, len(body))
	}
	return &RedirectError{Port: int32(binary.BigEndian.Uint32(body)), Host: string(bytes.TrimRight(body[4:], "\x00"))}, nil
}

// parseAsyncResponse extracts the response embedded in a kXR_attn
// kXR_asynresp body: actnum, 4 reserved bytes, then a full response header
// and its body.
func parseAsyncResponse(body []byte) (*ResponseFrame, bool, error) {
	if len(body) < 4 {
		return nil, false, fmt.Errorf("%w: kXR_attn body of %d bytes", ErrMalformed, len(body))
	}
	if int32(binary.BigEndian.Uint32(body)) != attnAsyncResp {
		return nil, false, nil
	}
	if len(body) < 8+ResponseHeaderLen {
		return nil, false, fmt.Errorf("%w: kXR_asynresp body of %d bytes", ErrMalformed, len(body))
	}
	h := body[8:]
	f := &ResponseFrame{Status: Status(binary.BigEndian.Uint16(h[2:4]))}
	copy(f.StreamID[:], h[0:2])
	n := int32(binary.BigEndian.Uint32(h[4:8]))
	rest := h[ResponseHeaderLen:]
	if n < 0 || int(n) > len(rest) {
		return nil, false, fmt.Errorf("%w: kXR_asynresp embedded dlen %d with %d bytes", ErrMalformed, n, len(rest))
	}
	f.Body = rest[:n]
	if f.Status == StatusStatus {
		return nil, false, fmt.Errorf("%w: kXR_status inside kXR_asynresp", ErrMalformed)
	}
	return f, true, nil
}

// AppendAsyncResponse appends a kXR_attn kXR_asynresp body that carries the
// response frame f (which must not be a kXR_status frame).
func AppendAsyncResponse(b []byte, f *ResponseFrame) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(attnAsyncResp))
	b = append(b, 0, 0, 0, 0)
	return f.AppendTo(b)
}

// ProtocolResponse is the body of the kXR_protocol response.
type ProtocolResponse struct {
	Version int32  // pval: the server's protocol version
	Flags   uint32 // FlagIsServer, FlagSupPgRW, ...
	// Security holds the security requirements structure when the server
	// sent one; this package never does.
	Security []byte
}

// AppendTo appends the encoded body.
func (p *ProtocolResponse) AppendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(p.Version))
	b = binary.BigEndian.AppendUint32(b, p.Flags)
	return append(b, p.Security...)
}

// ParseProtocolResponse decodes the body of a kXR_protocol response.
func ParseProtocolResponse(body []byte) (ProtocolResponse, error) {
	if len(body) < 8 {
		return ProtocolResponse{}, fmt.Errorf("%w: kXR_protocol response of %d bytes", ErrMalformed, len(body))
	}
	return ProtocolResponse{
		Version:  int32(binary.BigEndian.Uint32(body)),
		Flags:    binary.BigEndian.Uint32(body[4:]),
		Security: body[8:],
	}, nil
}

// LoginResponse is the body of the kXR_login response: the session id and,
// when the server requires authentication, its security token ("&P=...").
type LoginResponse struct {
	SessionID [16]byte // sessid
	Security  string   // security token; empty when no authentication is needed
}

// ParseLoginResponse decodes the body of a kXR_login response.
func ParseLoginResponse(body []byte) (LoginResponse, error) {
	var r LoginResponse
	if len(body) < 16 {
		return r, fmt.Errorf("%w: kXR_login response of %d bytes", ErrMalformed, len(body))
	}
	copy(r.SessionID[:], body)
	r.Security = string(bytes.TrimRight(body[16:], "\x00"))
	return r, nil
}

// OpenResponse is the body of the kXR_open response.
type OpenResponse struct {
	Handle FileHandle // fhandle for later requests
	// Stat is set when the request had kXR_retstat (or kXR_compress) and
	// the server sent stat information.
	Stat *FileInfo
}

// AppendTo appends the encoded body. With a Stat, the compression size and
// type (always zero) and the NUL-terminated stat text follow the handle.
func (r *OpenResponse) AppendTo(b []byte) []byte {
	b = append(b, r.Handle[:]...)
	if r.Stat == nil {
		return b
	}
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0)
	b = AppendStat(b, r.Stat)
	return append(b, 0)
}

// ParseOpenResponse decodes the body of a kXR_open response.
func ParseOpenResponse(body []byte) (OpenResponse, error) {
	var r OpenResponse
	if len(body) < 4 {
		return r, fmt.Errorf("%w: kXR_open response of %d bytes", ErrMalformed, len(body))
	}
	copy(r.Handle[:], body)
	if len(body) > 12 {
		fi, err := ParseStat(string(body[12:]))
		if err != nil {
			return r, fmt.Errorf("open response: %w", err)
		}
		r.Stat = &fi
	}
	return r, nil
}

// ParseReadVResponse splits the body of a kXR_readv response into its
// elements: a 16-byte descriptor (handle, length, offset) followed by the
// data. The returned segments alias body.
func ParseReadVResponse(body []byte) ([]ReadSegment, [][]byte, error) {
	var segs []ReadSegment
	var data [][]byte
	for len(body) > 0 {
		if len(body) < readVItemLen {
			return nil, nil, fmt.Errorf("%w: readv response element header of %d bytes", ErrMalformed, len(body))
		}
		s := parseSegment(body)
		body = body[readVItemLen:]
		if s.Length < 0 || int(s.Length) > len(body) {
			return nil, nil, fmt.Errorf("%w: readv response element of %d bytes with %d left", ErrMalformed, s.Length, len(body))
		}
		segs = append(segs, s)
		data = append(data, body[:s.Length])
		body = body[s.Length:]
	}
	return segs, data, nil
}
