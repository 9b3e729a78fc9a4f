package object

import (
	"fmt"
	"strconv"
	"time"

	"github.com/ecstore/ecstore/internal/archive"
	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
)

// The object summary kept in the extended attributes of every archive
// (node.Attributes, docs/FORMAT.md §10), so that listings need not read
// archives. The keys are short so that the whole summary of an archive
// stays within 64 bytes in node.Local's encoding: ext4 then keeps it inside
// the file's inode rather than in an extra block per file, which would
// cost a block allocation at every write, a block release (and, with
// -o discard, a discard) at every removal, and 4 KiB of disk per archive.
const (
	attrVersion = "v" // archive.Version.Packed
	attrSize    = "s" // object size in bytes
	attrEC      = "e" // "K+M"
	attrChunk   = "c" // chunk size, layout.FormatSize ("1MiB")
	attrSlot    = "n" // the archive's slot
	attrMTime   = "t" // nanoseconds since 1970, only when not the version's time to the µs
	attrNoUser  = "u" // "0": the object has no user metadata; absent when it has (or was written before the key)
)

// The long keys that earlier ecstore versions wrote: still read, and
// written for a version that does not pack.
const (
	legacyVersion = "version"
	legacySize    = "size"
	legacyEC      = "ec"
	legacyChunk   = "chunk"
	legacySlot    = "slot"
	legacyMTime   = "mtime"
)

// summaryAttrs is the summary of m, the metadata of slot m.Slot's archive.
func summaryAttrs(m *archive.Metadata) map[string]string {
	packed, ok := m.Version.Packed()
	if !ok {
		return map[string]string{
			legacyVersion: string(m.Version),
			legacySize:    strconv.FormatInt(m.Size, 10),
			legacyEC:      fmt.Sprintf("%d+%d", m.K, m.M),
			legacyChunk:   strconv.FormatInt(m.ChunkSize, 10),
			legacySlot:    strconv.Itoa(m.Slot),
			legacyMTime:   strconv.FormatInt(m.MTime.UnixNano(), 10),
		}
	}
	a := map[string]string{
		attrVersion: packed,
		attrSize:    strconv.FormatInt(m.Size, 10),
		attrEC:      fmt.Sprintf("%d+%d", m.K, m.M),
		attrChunk:   layout.FormatSize(m.ChunkSize),
		attrSlot:    strconv.Itoa(m.Slot),
	}
	if !m.MTime.Equal(versionMTime(m.Version)) {
		a[attrMTime] = strconv.FormatInt(m.MTime.UnixNano(), 10)
	}
	if len(m.User) == 0 {
		a[attrNoUser] = "0"
	}
	return a
}

// versionMTime is the modification time of a version written by this
// package: its commit time to the microsecond.
func versionMTime(v archive.Version) time.Time {
	return v.Time().UTC().Truncate(time.Microsecond)
}

// summary is what an archive's attributes say about its object.
type summary struct {
	version archive.Version
	size    int64
	mtime   time.Time
	geo     layout.Geometry // ChunkSize 0 when written before it was kept
	slot    int             // the archive's slot; -1 when not kept
	noUser  bool            // the object has no user metadata (false: it has, or unknown)
}

// parseSummary reads the summary in an archive's attributes, in either
// set of keys; false when there is none or it is malformed.
func parseSummary(a map[string]string) (summary, bool) {
	var (
		s                        summary
		sizeKey, ecKey, chunkKey = attrSize, attrEC, attrChunk
		slotKey                  = attrSlot
		parseChunk               = layout.ParseSize
		err                      error
	)
	if p, ok := a[attrVersion]; ok {
		if s.version, err = archive.UnpackVersion(p); err != nil {
			return summary{}, false
		}
		s.mtime = versionMTime(s.version)
		if t, ok := a[attrMTime]; ok {
			ns, err := strconv.ParseInt(t, 10, 64)
			if err != nil {
				return summary{}, false
			}
			s.mtime = time.Unix(0, ns).UTC()
		}
	} else {
		s.version = archive.Version(a[legacyVersion])
		ns, err := strconv.ParseInt(a[legacyMTime], 10, 64)
		if s.version == "" || err != nil {
			return summary{}, false
		}
		s.mtime = time.Unix(0, ns).UTC()
		sizeKey, ecKey, chunkKey, slotKey = legacySize, legacyEC, legacyChunk, legacySlot
		parseChunk = func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }
	}
	if s.geo.K, s.geo.M, err = layout.ParseEC(a[ecKey]); err != nil {
		return summary{}, false
	}
	if s.size, err = strconv.ParseInt(a[sizeKey], 10, 64); err != nil {
		return summary{}, false
	}
	s.geo.ChunkSize, _ = parseChunk(a[chunkKey])
	s.slot = -1
	if n, err := strconv.Atoi(a[slotKey]); err == nil && n >= 0 && n < s.geo.Width() {
		s.slot = n
	}
	s.noUser = a[attrNoUser] == "0"
	return s, true
}

// visibleBySummaries reports whether n slots of a version, counted by
// their summaries (by a listing or rm), show it visible without asking
// the tombstones: at least K, and more than M unless all K+M (M or fewer
// may be the remnants of a removal that tombstones hide).
func visibleBySummaries(n, k, m int) bool {
	return n >= k && (n > m || n == k+m)
}

// listedFile is what a listing knows of one archive it listed: its node
// and, once its attributes were read (with the listing or after it),
// whether they hold a summary, and the summary. Keeping the parsed
// summary rather than the attributes keeps a large listing small: a
// listing of 22036 objects on 10 nodes held 66 k attribute maps, 77 MB
// of gateway heap, and ran the collector back to back.
type listedFile struct {
	node  node.Node
	known bool // the attributes were read
	ok    bool // and hold a summary
	sum   summary
}

// setAttrs records the attributes read for f; nil means none were read.
func (f *listedFile) setAttrs(attrs map[string]string) {
	if attrs == nil {
		return
	}
	f.known = true
	f.sum, f.ok = parseSummary(attrs)
}

// summaryFromFiles builds a listing entry from the summaries of the
// archives listed under one name when the newest version among them has
// at least K archives, and more than M unless it has them all. The entry
// remembers the nodes of the newest version's archives (Info.listedOn,
// for Describe).
func summaryFromFiles(path, name string, files []listedFile) (*Info, bool) {
	count := map[archive.Version]int{}
	var newest summary
	for _, f := range files {
		if !f.ok {
			return nil, false
		}
		count[f.sum.version]++
		if f.sum.version > newest.version {
			newest = f.sum
		}
	}
	n := count[newest.version]
	if len(files) == 0 || !visibleBySummaries(n, newest.geo.K, newest.geo.M) {
		return nil, false // Stat asks the tombstones
	}
	for _, f := range files {
		if f.sum.version == newest.version && (f.sum.size != newest.size || !f.sum.mtime.Equal(newest.mtime) || f.sum.geo != newest.geo) {
			return nil, false // a summary that disagrees (damaged): Stat reads the archives
		}
	}
	info := &Info{Path: path, Name: name, Size: newest.size, MTime: newest.mtime,
		Version: newest.version, Archives: n, Geometry: newest.geo, NoUserMeta: newest.noUser}
	for _, f := range files {
		if f.sum.version == newest.version {
			info.listedOn = append(info.listedOn, f.node)
		}
	}
	return info, true
}
