package archive

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ecstore/ecstore/internal/layout"
)

// FormatVersion is the version of the archive format this package writes.
// Readers refuse archives with a newer format version.
const FormatVersion = 1

// MetadataName is the name of the metadata entry inside an archive.
const MetadataName = "ecstore.meta.json"

// maxMetadataSize bounds the metadata entry a reader accepts.
const maxMetadataSize = 1 << 20

// Version identifies one write of an object: the commit time in
// nanoseconds and 64 random bits, formatted so that string order is time
// order ("0001763766000123456789-9f86d081884c7d65").
type Version string

// NewVersion returns a fresh version for a write committed at t.
func NewVersion(t time.Time) Version {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("archive: crypto/rand failed: " + err.Error()) // never happens on Linux
	}
	return Version(fmt.Sprintf("%022d-%016x", t.UnixNano(), binary.BigEndian.Uint64(b[:])))
}

// Time returns the commit time encoded in v (zero if malformed).
func (v Version) Time() time.Time {
	ns, _, ok := strings.Cut(string(v), "-")
	if !ok {
		return time.Time{}
	}
	n, err := strconv.ParseInt(ns, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Valid reports whether v has the form NewVersion produces.
func (v Version) Valid() bool {
	a, b, ok := strings.Cut(string(v), "-")
	if !ok || len(a) != 22 || len(b) != 16 {
		return false
	}
	for _, c := range a {
		if c < '0' || c > '9' {
			return false
		}
	}
	for _, c := range b {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// Packed returns v in 22 characters, the unpadded base64url encoding of
// its time (8 bytes, big-endian) and its random part (8 bytes), for where
// space is tight: a local archive's extended attributes (docs/FORMAT.md
// §10). It returns false when v is not Valid or its time does not fit.
func (v Version) Packed() (string, bool) {
	if !v.Valid() {
		return "", false
	}
	ns, rnd, _ := strings.Cut(string(v), "-")
	t, err := strconv.ParseUint(ns, 10, 64)
	if err != nil {
		return "", false
	}
	r, _ := strconv.ParseUint(rnd, 16, 64) // Valid: 16 hex digits
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], t)
	binary.BigEndian.PutUint64(b[8:], r)
	return base64.RawURLEncoding.EncodeToString(b[:]), true
}

// UnpackVersion returns the Version that Packed encoded as s.
func UnpackVersion(s string) (Version, error) {
	var b [16]byte
	if len(s) != base64.RawURLEncoding.EncodedLen(len(b)) {
		return "", fmt.Errorf("archive: packed version %q: %d characters, want 22", s, len(s))
	}
	if _, err := base64.RawURLEncoding.Decode(b[:], []byte(s)); err != nil {
		return "", fmt.Errorf("archive: packed version %q: %w", s, err)
	}
	return Version(fmt.Sprintf("%022d-%016x", binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:]))), nil
}

// Metadata describes the whole object and this archive's place in it. The
// same metadata, except Slot, is stored in every archive of an object
// version. It is encoded as JSON (see docs/FORMAT.md).
type Metadata struct {
	Format    int       `json:"format"`
	Path      string    `json:"path"` // object path when written
	Version   Version   `json:"version"`
	Size      int64     `json:"size"`
	K         int       `json:"k"`
	M         int       `json:"m"`
	ChunkSize int64     `json:"chunk_size"`
	Placement []string  `json:"placement"` // node ids, one per slot
	Slot      int       `json:"slot"`      // this archive's index in Placement
	MTime     time.Time `json:"mtime"`
	Adler32   string    `json:"adler32"` // whole object, 8 hex digits
	CRC32C    string    `json:"crc32c"`  // whole object, 8 hex digits
	// PageCRC32C is the page size of the archive's page checksums
	// (PageSize), or 0 when it has none (see Index.Pages).
	PageCRC32C int `json:"page_crc32c,omitempty"`
	// User holds user metadata (content type, S3 x-amz-meta-*), if any.
	User map[string]string `json:"user,omitempty"`
}

// Geometry returns the object's geometry.
func (m *Metadata) Geometry() layout.Geometry {
	return layout.Geometry{K: m.K, M: m.M, ChunkSize: m.ChunkSize}
}

// Layout returns the object's layout.
func (m *Metadata) Layout() layout.Layout {
	return layout.Layout{Geometry: m.Geometry(), Size: m.Size}
}

// Validate checks the metadata for internal consistency; every field of
// an archive read from a node is untrusted.
func (m *Metadata) Validate() error {
	switch {
	case m.Format < 1:
		return fmt.Errorf("%w: metadata format %d", ErrFormat, m.Format)
	case m.Format > FormatVersion:
		return fmt.Errorf("%w: format version %d is newer than %d; upgrade ecstore", ErrVersion, m.Format, FormatVersion)
	case !m.Version.Valid():
		return fmt.Errorf("%w: bad version %q", ErrFormat, m.Version)
	case m.Size < 0:
		return fmt.Errorf("%w: negative size", ErrFormat)
	case len(m.Placement) != m.K+m.M:
		return fmt.Errorf("%w: placement has %d nodes, geometry %d+%d", ErrFormat, len(m.Placement), m.K, m.M)
	case m.Slot < 0 || m.Slot >= len(m.Placement):
		return fmt.Errorf("%w: slot %d out of range", ErrFormat, m.Slot)
	case len(m.Adler32) != 8 || len(m.CRC32C) != 8:
		return fmt.Errorf("%w: bad object checksums", ErrFormat)
	}
	// JSON decoding accepts times that JSON encoding refuses (a zone
	// offset of 24:00); metadata that cannot be written back is invalid.
	if _, err := m.MTime.MarshalJSON(); err != nil {
		return fmt.Errorf("%w: mtime: %v", ErrFormat, err)
	}
	if err := m.Geometry().Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrFormat, err)
	}
	return nil
}

// SameObject reports whether two archives' metadata describe the same
// object version: the version, size, geometry and whole-object checksums
// agree. The slot may differ, and so may the placement: it records where
// the slots were meant to go, which is not what makes two archives parts
// of one write.
func (m *Metadata) SameObject(o *Metadata) bool {
	return m.Version == o.Version && m.Size == o.Size && m.K == o.K && m.M == o.M &&
		m.ChunkSize == o.ChunkSize && m.Adler32 == o.Adler32 && m.CRC32C == o.CRC32C &&
		len(m.Placement) == len(o.Placement)
}

// encode returns the metadata entry's bytes: indented JSON (one space),
// with <, > and & written as themselves rather than HTML-escaped (6 bytes
// each, of the 1 MiB readers take), and no trailing newline.
func (m *Metadata) encode() ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.SetIndent("", " ")
	if err := e.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// CheckSize fails with ErrMetadataTooLarge when m, encoded, passes the
// 1 MiB readers take, which Writer.Close refuses. A writer that knows
// some fields only later (the size, version and checksums, known at the
// end of the write) checks its user metadata early by setting those at
// their widest (WidestMetadata).
func (m *Metadata) CheckSize() error {
	p, err := m.encode()
	if err != nil {
		return fmt.Errorf("archive: encode metadata: %w", err)
	}
	if len(p) > maxMetadataSize {
		return fmt.Errorf("%w: metadata of %d bytes exceeds %d", ErrMetadataTooLarge, len(p), maxMetadataSize)
	}
	return nil
}

// WidestMetadata returns the metadata of an object at path with the given
// geometry, placement and user metadata, every other field at its widest
// encoding: if it passes CheckSize, so does the metadata of any write of
// that object (up to node ids of other lengths than placement's).
func WidestMetadata(path string, k, m int, chunkSize int64, placement []string, user map[string]string) *Metadata {
	return &Metadata{
		Format: FormatVersion, Path: path,
		Version: Version(strings.Repeat("9", 22) + "-" + strings.Repeat("f", 16)),
		Size:    math.MaxInt64, K: k, M: m, ChunkSize: chunkSize,
		Placement: placement, Slot: max(len(placement)-1, 0),
		MTime:   time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC),
		Adler32: "ffffffff", CRC32C: "ffffffff", PageCRC32C: PageSize,
		User: user,
	}
}

// clone returns a copy of m that shares nothing with it.
func (m *Metadata) clone() *Metadata {
	c := *m
	c.Placement = slices.Clone(m.Placement)
	c.User = maps.Clone(m.User)
	return &c
}

func decodeMetadata(p []byte) (*Metadata, error) {
	if m, ok := decoded.get(p); ok {
		return m, nil
	}
	var m Metadata
	if err := json.Unmarshal(p, &m); err != nil {
		return nil, fmt.Errorf("%w: metadata: %v", ErrFormat, err)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	decoded.put(p, &m)
	return &m, nil
}

// decoded holds recently decoded metadata, by its bytes. Reading a small
// object opens all of its 1+M replicas and decodes each one's metadata,
// and a stat does it again; encoding/json takes 10-20 µs for each, about
// 7% of a gateway's CPU serving small gets. Decoding is a function of the
// bytes alone, so a hit is exact. Only valid metadata of at most
// maxCachedMetadata bytes is kept (an archive's may be up to 1 MiB).
var decoded = metadataCache{budget: 1 << 20}

// maxCachedMetadata bounds the metadata kept in decoded: ecstore's own
// is a few hundred bytes, plus at most 2 KiB of S3 user metadata.
const maxCachedMetadata = 4 << 10

// metadataCache keeps two generations of entries, each of at most budget
// bytes (counting each entry as twice its encoded size: the key and the
// decoded copy). When the current one is full it becomes the old one and
// the old one is dropped; a hit in the old generation moves the entry to
// the current one.
type metadataCache struct {
	budget   int
	mu       sync.Mutex
	cur, old map[string]*Metadata
	used     int // bytes in cur
}

// get returns a copy of the metadata decoded from p, if it is kept.
func (c *metadataCache) get(p []byte) (*Metadata, bool) {
	c.mu.Lock()
	m, ok := c.cur[string(p)]
	if !ok {
		if m, ok = c.old[string(p)]; ok {
			c.addLocked(string(p), m)
		}
	}
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	return m.clone(), true
}

// put keeps a copy of m, decoded from p.
func (c *metadataCache) put(p []byte, m *Metadata) {
	if len(p) > maxCachedMetadata {
		return
	}
	m = m.clone()
	c.mu.Lock()
	c.addLocked(string(p), m)
	c.mu.Unlock()
}

func (c *metadataCache) addLocked(key string, m *Metadata) {
	cost := 2 * len(key)
	if c.used+cost > c.budget {
		c.old, c.cur, c.used = c.cur, nil, 0
	}
	if c.cur == nil {
		c.cur = map[string]*Metadata{}
	}
	c.cur[key] = m
	c.used += cost
}
