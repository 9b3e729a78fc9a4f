package object

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/ecstore/ecstore/internal/archive"
	"github.com/ecstore/ecstore/internal/erasure"
	"github.com/ecstore/ecstore/internal/node"
)

// Health classifies an object's redundancy.
type Health int

// Health values, from best to worst.
const (
	Healthy       Health = iota // every chunk of every block present and (deep) verified
	Degraded                    // readable, but some chunks are missing or corrupt
	Unrecoverable               // some block has fewer than K good chunks
	Removed                     // remnants of a removed object (tombstoned): debris
)

func (h Health) String() string {
	switch h {
	case Healthy:
		return "healthy"
	case Degraded:
		return "degraded"
	case Unrecoverable:
		return "unrecoverable"
	case Removed:
		return "removed"
	}
	return fmt.Sprintf("Health(%d)", int(h))
}

// SlotReport is the state of one placement slot's archive.
type SlotReport struct {
	Slot    int
	Node    string  // node the placement names for the slot
	FoundOn string  // node holding the archive ("" when missing)
	Err     error   // why the archive is missing or unusable, if known
	Bad     []int64 // blocks whose chunk in this archive failed its CRC (deep only)
}

// StaleArchive is an archive at the object's path that belongs to another
// version than the one readers use (debris of an overwrite or a failed
// write) or could not be parsed.
type StaleArchive struct {
	Node    string
	Version archive.Version // "" when unparseable
	Err     error
	// Malformed marks a file the node served whose bytes are not a
	// well-formed archive (truncated, overwritten): useless to readers,
	// safe to remove once the object is readable without it.
	Malformed bool
}

// Inspection is a full account of one object's archives.
type Inspection struct {
	Path   string
	Info   *Info // nil when no version has archives
	Health Health
	Slots  []SlotReport
	Stale  []StaleArchive
	// MinGood is the fewest good chunks any block has (deep), or the
	// number of archives found (shallow).
	MinGood int
	// SumErr reports a whole-object checksum mismatch (deep only).
	SumErr error
}

// Problems lists the missing and corrupt chunks, one line each.
func (in *Inspection) Problems() []string {
	var out []string
	for _, s := range in.Slots {
		switch {
		case s.FoundOn == "":
			msg := fmt.Sprintf("slot %d: archive missing on node %s", s.Slot, s.Node)
			if s.Err != nil {
				msg += fmt.Sprintf(" (%v)", s.Err)
			}
			out = append(out, msg)
		case len(s.Bad) > 0:
			for _, b := range s.Bad {
				out = append(out, fmt.Sprintf("slot %d: node %s: chunk of block %d fails its checksum", s.Slot, s.FoundOn, b))
			}
		}
	}
	for _, st := range in.Stale {
		if st.Malformed {
			out = append(out, fmt.Sprintf("node %s: damaged archive: %v", st.Node, st.Err))
		} else if st.Err != nil {
			out = append(out, fmt.Sprintf("node %s: unreadable archive: %v", st.Node, st.Err))
		} else {
			out = append(out, fmt.Sprintf("node %s: stale archive of version %s", st.Node, st.Version))
		}
	}
	if in.SumErr != nil {
		out = append(out, in.SumErr.Error())
	}
	return out
}

// Inspect examines every node for the object at path. Shallow inspection
// checks that every slot's archive exists and parses; deep inspection also
// verifies every chunk's CRC and the whole-object checksums. It returns an
// error only when nothing is known of the object (ErrNotExist) or ctx ends.
func (s *Store) Inspect(ctx context.Context, path string, deep bool) (*Inspection, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	results := s.probe(ctx, path, s.nodes)
	if err := ctx.Err(); err != nil {
		for _, r := range results {
			if r.ref != nil {
				r.ref.file.Close()
			}
		}
		return nil, err
	}
	loc, ok := choose(results)
	in := &Inspection{Path: path}
	if loc == nil {
		onlyMalformed := true
		for _, r := range results {
			if r.err != nil {
				in.Stale = append(in.Stale, StaleArchive{Node: r.node.ID(), Err: r.err, Malformed: r.malformed})
				onlyMalformed = onlyMalformed && r.malformed
			}
		}
		switch {
		case len(in.Stale) == 0:
			return nil, fmt.Errorf("object %s: %w", path, ErrNotExist)
		case onlyMalformed && len(results) == len(s.nodes) && s.deletedUpTo(ctx, path) != "":
			// Every node answered, no readable archive is left and the
			// object was removed: the damaged files are its remnants.
			in.Health = Removed
		default:
			in.Health = Unrecoverable
		}
		return in, nil
	}
	// Remnants of removed or replaced versions are debris, reported stale.
	kept, loc, ok := s.dropHidden(ctx, path, results, loc, ok)
	var debris []StaleArchive
	for _, r := range results {
		if r.ref != nil && !slices.ContainsFunc(kept, func(k probeResult) bool { return k.ref == r.ref }) {
			debris = append(debris, StaleArchive{Node: r.node.ID(), Version: r.ref.idx.Meta.Version})
		}
	}
	results = kept
	// unreadable lists the nodes that failed or hold a damaged file: of a
	// removed object, damaged files are remnants like the others.
	unreadable := func() []StaleArchive {
		var out []StaleArchive
		for _, r := range results {
			if r.err != nil {
				out = append(out, StaleArchive{Node: r.node.ID(), Err: r.err, Malformed: r.malformed})
			}
		}
		return out
	}
	if loc == nil {
		in.Health = Removed
		in.Stale = append(debris, unreadable()...)
		return in, nil
	}
	defer loc.close()
	if !ok {
		if s.tombstoneOf(ctx, path).hides(newestVersion(results)) {
			// Remnants of a removed object: every archive found is debris.
			in.Health = Removed
			in.Stale = append(in.Stale, debris...)
			for _, r := range results {
				if r.ref != nil {
					in.Stale = append(in.Stale, StaleArchive{Node: r.node.ID(), Version: r.ref.idx.Meta.Version})
				}
			}
			in.Stale = append(in.Stale, unreadable()...)
			return in, nil
		}
	}
	in.Info = infoFromMeta(path, loc.meta, loc.found)
	in.Stale = append(in.Stale, debris...)
	for _, r := range loc.stale {
		in.Stale = append(in.Stale, StaleArchive{Node: r.node.ID(), Version: r.idx.Meta.Version})
	}
	nodeErr := map[string]error{}
	for _, r := range results {
		if r.err != nil {
			nodeErr[r.node.ID()] = r.err
			in.Stale = append(in.Stale, StaleArchive{Node: r.node.ID(), Err: r.err, Malformed: r.malformed})
		}
	}
	width := len(loc.slots)
	in.Slots = make([]SlotReport, width)
	for i, ref := range loc.slots {
		sr := SlotReport{Slot: i, Node: loc.meta.Placement[i]}
		if ref != nil {
			sr.FoundOn = ref.node.ID()
		} else {
			sr.Err = nodeErr[sr.Node]
		}
		in.Slots[i] = sr
	}
	in.MinGood = loc.found
	readable := in.MinGood // counting other copies of slots (alts)
	if deep {
		var err error
		if readable, err = s.deepCheck(ctx, in, loc); err != nil {
			return nil, err
		}
	}
	switch {
	case !ok || readable < loc.meta.K:
		in.Health = Unrecoverable
	case in.MinGood < width || in.SumErr != nil:
		in.Health = Degraded
	}
	if in.SumErr != nil && in.Health == Healthy {
		in.Health = Degraded
	}
	return in, nil
}

// checkPages checks the page checksums of chunk b of ref's archive, if
// it has them, against the chunk's verified data: a reader would find a
// page that does not match them bad (and read the chunk whole).
func checkPages(ctx context.Context, ref *archiveRef, b int64, data []byte) error {
	span, ok := ref.idx.Pages(b)
	if !ok {
		return nil
	}
	want := archive.AppendPageCRCs(nil, data)
	got := make([]byte, len(want))
	if err := archive.ReadFull(ctx, ref.idx.Source(ref.file), got, span.CRCs); err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("block %d: page checksums do not match the chunk: %w", b, archive.ErrChecksum)
	}
	return nil
}

// deepCheck reads every chunk of every archive and then the whole object.
// It returns the fewest chunks any block can be read from, counting, for
// a slot whose chunk fails its checksum, another copy of the slot's
// archive (a rebuild's, on another node) whose chunk verifies: readers
// use those copies, so the block is readable, though the slot is
// reported bad (and repaired) all the same.
func (s *Store) deepCheck(ctx context.Context, in *Inspection, loc *located) (int, error) {
	l := loc.meta.Layout()
	blocks := l.Blocks()
	good := make([]int, blocks)
	readable := make([]int, blocks)
	var buf []byte
	// verifies reads chunk b of ref's archive: ok when it and its page
	// checksums verify; readable when the chunk does (a reader reads a
	// chunk whose page checksums are wrong whole, and gets it right).
	verifies := func(ref *archiveRef, b int64) (ok, readable bool, err error) {
		c := &ref.idx.Chunks[b]
		if int64(cap(buf)) < c.Span() {
			buf = make([]byte, c.Span())
		}
		data, err := archive.ReadChunk(ctx, ref.idx.Source(ref.file), c, buf)
		if err == nil {
			readable = true
			err = checkPages(ctx, ref, b, data)
		}
		if errors.Is(err, node.ErrLeftRunning) {
			buf = nil // the read left running may still write into it
		}
		if err != nil && ctx.Err() != nil {
			return false, false, ctx.Err()
		}
		return err == nil, readable, nil
	}
	for slot, ref := range loc.slots {
		if ref == nil {
			continue
		}
		for b := int64(0); b < blocks; b++ {
			ok, chunkOK, err := verifies(ref, b)
			if err != nil {
				return 0, err
			}
			if ok {
				good[b]++
				readable[b]++
				continue
			}
			in.Slots[slot].Bad = append(in.Slots[slot].Bad, b)
			if chunkOK {
				readable[b]++ // only its page checksums are wrong
				continue
			}
			for _, alt := range loc.alts[slot] {
				if _, ok, err := verifies(alt, b); err != nil {
					return 0, err
				} else if ok {
					readable[b]++
					break
				}
			}
		}
	}
	in.MinGood = len(loc.slots)
	minReadable := len(loc.slots)
	for b := range good {
		in.MinGood = min(in.MinGood, good[b])
		minReadable = min(minReadable, readable[b])
	}
	if blocks == 0 {
		in.MinGood, minReadable = loc.found, loc.found
	}
	if minReadable < loc.meta.K {
		return minReadable, nil
	}
	// Whole-object checksums, through the normal (verifying) read path.
	r, err := s.Open(ctx, in.Path)
	if err != nil {
		in.SumErr = fmt.Errorf("whole-object read failed: %w", err)
		return minReadable, nil
	}
	defer r.Close()
	if r.loc.meta.Version != loc.meta.Version {
		return minReadable, nil // overwritten meanwhile
	}
	sums := erasure.NewObjectSums()
	if _, err := r.WriteTo(ctx, sums); err != nil && !errors.Is(err, io.EOF) {
		in.SumErr = fmt.Errorf("whole-object read failed: %w", err)
		return minReadable, nil
	}
	if a, c := erasure.FormatSum(sums.Adler32()), erasure.FormatSum(sums.CRC32C()); a != loc.meta.Adler32 || c != loc.meta.CRC32C {
		in.SumErr = fmt.Errorf("whole-object checksums adler32 %s crc32c %s, metadata says %s %s", a, c, loc.meta.Adler32, loc.meta.CRC32C)
	}
	return minReadable, nil
}

// RemoveMalformed deletes the file at path on node nodeID if it is still
// not a well-formed archive: a repair must not delete an archive that a
// rebuild or a new write put there since the inspection. It reports
// whether it removed the file.
func (s *Store) RemoveMalformed(ctx context.Context, nodeID, path string) (bool, error) {
	return s.removeIfStill(ctx, nodeID, path, "damaged archive", func(r probeResult) bool { return r.malformed })
}

// RemoveArchiveOf deletes the archive at path on node nodeID if it is
// still one of version v: what a repair judged debris (a remnant, a stale
// archive) may have been replaced since by a write through a gateway,
// which this process does not order with (InTurn orders only its own).
// The check and the removal are two requests: a commit between them is
// not caught, a window of one round trip rather than of a whole
// inspection. It reports whether it removed the archive.
func (s *Store) RemoveArchiveOf(ctx context.Context, nodeID, path string, v archive.Version) (bool, error) {
	return s.removeIfStill(ctx, nodeID, path, "archive", func(r probeResult) bool {
		return r.ref != nil && r.ref.idx.Meta.Version == v
	})
}

// removeIfStill probes path on node nodeID and removes the file there if
// judge, shown what the probe found, says it is still what was judged
// debris. Nothing there, or a node that does not answer (an error), is
// left alone.
func (s *Store) removeIfStill(ctx context.Context, nodeID, path, what string, judge func(probeResult) bool) (bool, error) {
	if err := checkPath(path); err != nil {
		return false, err
	}
	n, ok := s.Node(nodeID)
	if !ok {
		return false, fmt.Errorf("remove %s %s: no node %s", what, path, nodeID)
	}
	r := probeOne(ctx, path, n)
	still := judge(r)
	if r.ref != nil {
		r.ref.file.Close()
	}
	switch {
	case r.err != nil && !r.malformed:
		return false, fmt.Errorf("remove %s: %w", what, r.err)
	case !still:
		return false, nil // gone, or something else now
	}
	if err := n.Remove(ctx, path); err != nil && !errors.Is(err, node.ErrNotExist) {
		return false, fmt.Errorf("node %s: remove %s %s: %w", nodeID, what, path, err)
	}
	return true, nil
}
