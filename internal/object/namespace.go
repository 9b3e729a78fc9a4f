package object

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ecstore/ecstore/internal/archive"
	"github.com/ecstore/ecstore/internal/layout"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/watchdog"
	"github.com/ecstore/ecstore/internal/workers"
)

// Info describes an object or a directory.
type Info struct {
	Path     string
	Name     string
	IsDir    bool
	Size     int64
	MTime    time.Time
	Geometry layout.Geometry
	Version  archive.Version
	Adler32  string // whole-object checksums, 8 hex digits
	CRC32C   string
	// Placement lists the node of every slot; Archives counts the slots
	// whose archive was found (K+M when healthy).
	Placement []string
	Archives  int
	User      map[string]string
	// NoUserMeta is set on an Info that List built from archive summaries
	// saying that the object has no user metadata: User is nil and
	// Describe would add none (an S3 listing then has the ETag without
	// reading an archive).
	NoUserMeta bool
	// listedOn holds the nodes on which List found the archives of
	// Version by their summaries (nil for any other Info): Describe
	// reads the metadata from one of them.
	listedOn []node.Node
}

func infoFromMeta(path string, m *archive.Metadata, found int) *Info {
	_, name := node.Split(path)
	return &Info{Path: path, Name: name, Size: m.Size, MTime: m.MTime, Geometry: m.Geometry(),
		Version: m.Version, Adler32: m.Adler32, CRC32C: m.CRC32C,
		Placement: append([]string(nil), m.Placement...), Archives: found, User: m.User}
}

// forEach runs fn on every node in parallel, each call bounded by
// MetadataTimeout, and returns the errors by node index. A node that does
// not answer in time gets a deadline error (and is marked suspect) rather
// than stalling the operation.
func (s *Store) forEach(ctx context.Context, fn func(ctx context.Context, n node.Node) error) []error {
	return s.forNodes(ctx, s.nodes, fn)
}

// forEachAnswering is forEach for the updates of the namespace (removals,
// renames, tombstones, directories), where a node that fails to answer is
// a case each caller handles (tombstones, remnants, repair): nodes known
// to hang get errHung without a call, as if their calls had timed out at
// once, rather than each costing the operation its shortened deadline
// (HedgeDelay, for every step that asks all nodes: an rm took 0.5 s and
// an mv 0.75 s with one node hung). They are asked when more than M hang
// (hungSkippable), as listings ask them.
func (s *Store) forEachAnswering(ctx context.Context, fn func(ctx context.Context, n node.Node) error) []error {
	hung := s.skippedHung()
	return s.forEach(ctx, func(ctx context.Context, n node.Node) error {
		if hung[n.ID()] {
			return fmt.Errorf("node %s: %w", n.ID(), errHung)
		}
		return fn(ctx, n)
	})
}

// skippedHung returns the nodes known to hang that operations may leave
// out (hungSkippable): at most M; nil when none or more.
func (s *Store) skippedHung() map[string]bool {
	var hung map[string]bool
	for _, n := range s.nodes {
		if s.isHung(n.ID()) {
			if hung == nil {
				hung = map[string]bool{}
			}
			hung[n.ID()] = true
		}
	}
	if len(hung) > s.opts.Geometry.M {
		return nil
	}
	return hung
}

// listParts lists dir on n, handing the entries to fn in parts where
// the node lists in parts (node.PartLister), else all at once; with
// namesOnly, by names where the node lists names more cheaply
// (node.NameLister).
func listParts(ctx context.Context, n node.Node, dir string, namesOnly bool, fn func([]node.FileInfo) error) error {
	nl, names := n.(node.NameLister)
	pl, parts := n.(node.PartLister)
	var (
		fis []node.FileInfo
		err error
	)
	switch {
	case namesOnly && names:
		fis, err = nl.ListNames(ctx, dir)
	case parts:
		return pl.ListParts(ctx, dir, fn)
	default:
		fis, err = n.List(ctx, dir)
	}
	if err != nil {
		return err
	}
	return fn(fis)
}

// forNodes is forEach over the given nodes.
func (s *Store) forNodes(ctx context.Context, nodes []node.Node, fn func(ctx context.Context, n node.Node) error) []error {
	return s.forNodesWithin(ctx, nodes, s.metadataContext, fn)
}

// forNodesListing is forNodes for directory listings, whose answers grow
// with the directory: a node's call is cut off once the node has sent
// nothing for MetadataTimeout (a watchdog that every part of its answer
// restarts), or after listingTimeout in all, not after MetadataTimeout in
// all. A directory of a few hundred thousand entries takes a node longer
// than that to list, and every node lists it at once.
func (s *Store) forNodesListing(ctx context.Context, nodes []node.Node, fn func(ctx context.Context, n node.Node) error) []error {
	return s.forNodesWithin(ctx, nodes, s.listingContext, fn)
}

// listingTimeout bounds a node's listing of one directory however
// steadily its answer comes.
const listingTimeout = 5 * time.Minute

// metadataContext bounds a namespace operation on node id.
func (s *Store) metadataContext(ctx context.Context, id string) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.nodeTimeout(id, s.opts.MetadataTimeout))
}

// listingContext bounds a listing on node id (forNodesListing).
func (s *Store) listingContext(ctx context.Context, id string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, listingTimeout)
	ctx, stop := watchdog.WithIdleTimeout(ctx, s.nodeTimeout(id, s.opts.MetadataTimeout))
	return ctx, func() { stop(); cancel() }
}

// forNodesWithin runs fn on the given nodes in parallel, each call in a
// context from within, and marks a node suspect when its call failed
// because that context expired.
func (s *Store) forNodesWithin(ctx context.Context, nodes []node.Node,
	within func(ctx context.Context, id string) (context.Context, context.CancelFunc),
	fn func(ctx context.Context, n node.Node) error) []error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		// A kept goroutine (workers): a new one per node and request grew
		// its stack through the protocol client every time (5% of the
		// gateway's CPU in a small-object benchmark).
		workers.Go(func() {
			defer wg.Done()
			nctx, cancel := within(ctx, n.ID())
			defer cancel()
			errs[i] = fn(nctx, n)
			if errs[i] != nil && ctx.Err() == nil && nctx.Err() != nil {
				s.markSuspect(n.ID(), true)
				s.opts.Events.nodeError(n.ID(), "metadata", errs[i])
			}
		})
	}
	wg.Wait()
	return errs
}

// pathKinds is what the nodes hold at a path: a directory on some, a
// file (an archive, or debris) on some; belowFile: some hold a file
// where a parent directory of the path would be.
type pathKinds struct{ dir, file, belowFile bool }

// statKinds asks every node not known to hang what it holds at path (one
// kXR_stat each, at once); the error is the first that is not "does not
// exist".
func (s *Store) statKinds(ctx context.Context, path string) (pathKinds, error) {
	var dirs, files, belowFile atomic.Int32
	errs := s.forEach(ctx, func(ctx context.Context, n node.Node) error {
		if s.isHung(n.ID()) {
			return errHung
		}
		fi, err := n.Stat(ctx, path)
		switch {
		case errors.Is(err, node.ErrNotDir):
			belowFile.Add(1)
		case err != nil:
		case fi.IsDir:
			dirs.Add(1)
		default:
			files.Add(1)
		}
		return err
	})
	return pathKinds{dir: dirs.Load() > 0, file: files.Load() > 0, belowFile: belowFile.Load() > 0}, firstReal(errs)
}

// checkParents fails with ErrNotDir when a parent directory of path is an
// object: writing or moving there would put an object below an object,
// the nodes that hold its archives refusing and the others making
// directories. It asks from the parent up, one round trip per level, and
// stops at the first directory; a parent it cannot judge (nodes failing)
// is let be, as the write itself then meets the nodes' refusals.
func (s *Store) checkParents(ctx context.Context, path string) error {
	for d, _ := node.Split(path); d != "/" && d != ""; d, _ = node.Split(d) {
		isDir, err := s.IsDir(ctx, d)
		switch {
		case err == nil && isDir:
			return nil
		case err == nil:
			return fmt.Errorf("object: %s: %w: %s is an object", path, ErrNotDir, d)
		case !errors.Is(err, ErrNotExist):
			return nil
		}
	}
	return nil
}

// IsDir reports whether path is a directory (true) or an object (false),
// as Stat would say, or fails with ErrNotExist when it is neither. Where
// no node holds a file at path, the nodes' kXR_stat answers (one round
// trip) decide it; otherwise the object is looked up as Stat does. It
// is the check for a path that must be a directory (an S3 bucket, a
// key's prefix): Stat of a directory opens no archive but probes for one
// on every node, then asks every node again for the directory's time.
func (s *Store) IsDir(ctx context.Context, path string) (bool, error) {
	if err := checkPath(path); err != nil {
		return false, err
	}
	if path == "/" {
		return true, nil
	}
	k, err := s.statKinds(ctx, path)
	switch {
	case k.file:
		info, err := s.Stat(ctx, path)
		if err != nil {
			return false, err
		}
		return info.IsDir, nil
	case k.dir:
		return true, nil
	case err != nil:
		return false, fmt.Errorf("object: stat %s: %w", path, err)
	}
	return false, fmt.Errorf("object: stat %s: %w", path, ErrNotExist)
}

// firstReal returns the first error that is not "does not exist".
func firstReal(errs []error) error {
	for _, err := range errs {
		if err != nil && !errors.Is(err, node.ErrNotExist) && !errors.Is(err, node.ErrNotDir) {
			return err
		}
	}
	return nil
}

// Stat describes the object or directory at path.
func (s *Store) Stat(ctx context.Context, path string) (*Info, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	if path == "/" {
		return &Info{Path: "/", Name: "/", IsDir: true}, nil
	}
	loc, err := s.locate(ctx, path, forStat)
	if err == nil {
		// Nothing depends on the closes of the archives read: the answer
		// need not wait for their round trips.
		s.inBackground(loc.close)
		return infoFromMeta(path, loc.meta, loc.found), nil
	}
	if errors.Is(err, ErrIsDir) {
		return s.dirInfo(ctx, path)
	}
	return nil, err
}

// describeTries bounds the nodes Describe reads an archive from before
// it falls back to Stat.
const describeTries = 2

// Describe completes an Info that List built from the archives'
// summaries, which say the size, time, version and geometry but not the
// rest of the metadata (user metadata, whole-object checksums,
// placement): it reads the archive of the listed version on one of the
// nodes the listing found it on (an open, a read and a close), where a
// Stat would also read other nodes' summaries or probe every archive
// (S3 listings want each object's ETag, which is user metadata). The
// answer describes the listed version even if a newer one was written
// since, as the rest of the listing does. Any other Info, or reads that
// do not find that version (a node failing, the archive replaced or
// removed meanwhile), get a Stat.
func (s *Store) Describe(ctx context.Context, info *Info) (*Info, error) {
	tries := 0
	for _, n := range info.listedOn {
		if tries == describeTries {
			break
		}
		if s.isSuspect(n.ID()) {
			continue
		}
		tries++
		var r probeResult
		s.forNodes(ctx, []node.Node{n}, func(ctx context.Context, n node.Node) error {
			r = probeOne(ctx, info.Path, n)
			return r.err
		})
		if r.ref == nil {
			continue
		}
		meta := r.ref.idx.Meta
		s.inBackground(func() { r.ref.file.Close() })
		if meta.Version != info.Version {
			break // replaced meanwhile: what is there now is Stat's to say
		}
		return infoFromMeta(info.Path, meta, info.Archives), nil
	}
	return s.Stat(ctx, info.Path)
}

func (s *Store) dirInfo(ctx context.Context, path string) (*Info, error) {
	var mu sync.Mutex
	info := &Info{Path: path, IsDir: true}
	_, info.Name = node.Split(path)
	skip := s.hungSkippable()
	s.forEach(ctx, func(ctx context.Context, n node.Node) error {
		if skip && s.isHung(n.ID()) {
			return errHung
		}
		fi, err := n.Stat(ctx, path)
		if err == nil && fi.IsDir {
			mu.Lock()
			if fi.ModTime.After(info.MTime) {
				info.MTime = fi.ModTime
			}
			mu.Unlock()
		}
		return err
	})
	return info, nil
}

// List returns the objects and directories in dir, sorted by name, one
// entry per object with its real size and modification time. Temporary
// files are hidden. Objects that cannot be read are listed with Archives
// below K.
func (s *Store) List(ctx context.Context, dir string) ([]Info, error) {
	var out []Info
	err := s.ListEach(ctx, dir, func(infos []Info) error {
		out = append(out, infos...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListEach lists dir as List does and hands its entries to fn as they
// are described, in name order, listBatch names at a time: a caller that
// sends a listing on as it goes (a gateway's kXR_dirlist) holds one
// batch of described entries rather than the whole directory's, and its
// first entries go out before the last are described. An error of fn
// stops the listing and is returned.
func (s *Store) ListEach(ctx context.Context, dir string, fn func([]Info) error) error {
	l, err := s.listDir(ctx, dir, false)
	if err != nil {
		return err
	}
	for i := 0; i < len(l.names); i += listBatch {
		if err := fn(s.DescribeListed(ctx, l, l.names[i:min(i+listBatch, len(l.names))])); err != nil {
			return err
		}
	}
	return nil
}

// listBatch is how many names ListEach describes at a time.
const listBatch = 1024

// A Listing is what the nodes listed in a directory, before its objects
// are described: its names, which of them are directories, and the files
// of every other name with the nodes they are on.
type Listing struct {
	dir     string
	names   []string // sorted
	entries map[string]*listEntry
	listed  map[string]int // files listed, by node ID
}

// ListNames lists dir as List does but describes only its directories,
// for a caller that describes some of its objects (DescribeListed), as
// an S3 page of a large directory does: describing an object reads a
// summary of each of its archives, or its archives. Nodes that can list
// names alone more cheaply (node.NameLister) are asked to.
func (s *Store) ListNames(ctx context.Context, dir string) (*Listing, error) {
	return s.listDir(ctx, dir, true)
}

// Entries returns the listing's entries sorted by name: directories
// described (IsDir, MTime), objects by Path and Name only.
func (l *Listing) Entries() []Info {
	out := make([]Info, 0, len(l.names))
	for _, name := range l.names {
		out = append(out, l.entries[name].brief(l.dir, name))
	}
	return out
}

// listDir asks every node for its entries in dir; with namesOnly, nodes
// that list names more cheaply do (node.NameLister).
func (s *Store) listDir(ctx context.Context, dir string, namesOnly bool) (*Listing, error) {
	if err := checkPath(dir); err != nil {
		return nil, err
	}
	if s.hungSkippable() {
		// Nodes known to hang are left out, unless with them out too
		// many are missing: a node marked hung may answer again, and is
		// then asked with the others.
		l, err := s.listDirOnce(ctx, dir, namesOnly, true)
		if err == nil || errors.Is(err, ErrNotExist) || errors.Is(err, ErrNotDir) {
			return l, err
		}
	}
	return s.listDirOnce(ctx, dir, namesOnly, false)
}

// listDirOnce is listDir, leaving out the nodes known to hang with
// skipHung.
func (s *Store) listDirOnce(ctx context.Context, dir string, namesOnly, skipHung bool) (*Listing, error) {
	var mu sync.Mutex
	entries := map[string]*listEntry{}
	files := map[string]int{} // by node ID
	skip := skipHung
	errs := s.forNodesListing(ctx, s.nodes, func(ctx context.Context, n node.Node) error {
		if skip && s.isHung(n.ID()) {
			return errHung
		}
		return listParts(ctx, n, dir, namesOnly, func(fis []node.FileInfo) error {
			mu.Lock()
			defer mu.Unlock()
			for _, fi := range fis {
				if node.IsTemp(fi.Name) || dir == "/" && reservedRoot(fi.Name) {
					continue
				}
				e := entries[fi.Name]
				if e == nil {
					e = &listEntry{}
					// A name may be a slice of a whole part of the
					// node's answer, which it would keep alive.
					entries[strings.Clone(fi.Name)] = e
				}
				if fi.IsDir {
					e.dirs++
					if fi.ModTime.After(e.dirMT) {
						e.dirMT = fi.ModTime
					}
				} else {
					f := listedFile{node: n}
					f.setAttrs(fi.Attrs)
					e.files = append(e.files, f)
					files[n.ID()]++
				}
			}
			return nil
		})
	})
	listed, notDir, failed := 0, 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			listed++
		case errors.Is(err, node.ErrNotDir):
			notDir++
		case !errors.Is(err, node.ErrNotExist):
			failed++
		}
	}
	if listed == 0 {
		if notDir > 0 {
			return nil, fmt.Errorf("object: list %s: %w", dir, ErrNotDir)
		}
		if err := firstReal(errs); err != nil {
			return nil, fmt.Errorf("object: list %s: %w", dir, err)
		}
		return nil, fmt.Errorf("object: list %s: %w", dir, ErrNotExist)
	}
	// An object has its archives on K+M different nodes: with at most M
	// nodes unlisted, each one whose archives all exist shows on a node
	// listed. With more, whole objects may be missing from the listing;
	// it is refused rather than shown incomplete.
	if m := s.opts.Geometry.M; failed > m {
		return nil, fmt.Errorf("object: list %s: %w: %d of %d nodes could not list it, at most %d may fail: %w",
			dir, ErrQuorum, failed, len(s.nodes), m, firstReal(errs))
	}
	l := &Listing{dir: dir, entries: entries, listed: files, names: make([]string, 0, len(entries))}
	for name := range entries {
		l.names = append(l.names, name)
	}
	sort.Strings(l.names)
	return l, nil
}

// DescribeListed describes the entries of l named names as List does,
// in the order of names: objects by the summaries of their archives
// where these show a visible version, by a Stat otherwise. Names that l
// does not hold and objects found not to exist are left out. It keeps
// the attributes it reads in l: calls on one Listing must not overlap.
func (s *Store) DescribeListed(ctx context.Context, l *Listing, names []string) []Info {
	objects := make(map[string]*listEntry, len(names))
	for _, name := range names {
		if e := l.entries[name]; e != nil && e.dirs == 0 {
			objects[name] = e
		}
	}
	s.readListedAttrs(ctx, l, objects)
	out := make([]Info, 0, len(names))
	var slow []int // entries whose summary needs archive reads
	for _, name := range names {
		e := l.entries[name]
		switch {
		case e == nil:
			continue
		case e.dirs == 0:
			if info, ok := summaryFromFiles(node.Join(l.dir, name), name, e.files); ok {
				out = append(out, *info)
				continue
			}
			slow = append(slow, len(out))
		}
		out = append(out, e.brief(l.dir, name))
	}
	return s.fillSlow(ctx, out, slow)
}

// listEntry is what the nodes listed under one name: directories, or
// files (archives) with the nodes they are on.
type listEntry struct {
	dirs  int
	files []listedFile
	dirMT time.Time
}

// brief describes the entry as a listing does before reading anything:
// a directory in full, an object by its path and name.
func (e *listEntry) brief(dir, name string) Info {
	if e.dirs > 0 {
		return Info{Path: node.Join(dir, name), Name: name, IsDir: true, MTime: e.dirMT}
	}
	return Info{Path: node.Join(dir, name), Name: name}
}

// listedAttrReads is how many attribute reads a listing keeps in flight
// on each node.
const listedAttrReads = 16

// readListedAttrs reads the attributes of the files of entries (from
// listing l) that came without them from nodes that keep attributes (a
// remote node's kXR_dirlist carries none), so that their entries are
// described by summaries (summaryFromAttrs) and not by a Stat each,
// which opens and reads archives. A node that lists with attributes
// (node.AttrsLister) is listed again when a quarter or more of the files
// it listed are wanted (relistAttrs); otherwise the attributes are read
// by path, one request per file (readAttrsByPath). Files left without
// attributes (on a node that failed, or gone meanwhile) have their
// entries stated.
func (s *Store) readListedAttrs(ctx context.Context, l *Listing, entries map[string]*listEntry) {
	type nodeFiles struct {
		n     node.Node
		a     node.AttrReader
		files []wantedFile
	}
	byNode := map[string]*nodeFiles{} // by node ID
	for name, e := range entries {
		if e.dirs > 0 {
			continue
		}
		for i := range e.files {
			f := &e.files[i]
			a, ok := s.summaryReader(f.node)
			if f.known || !ok {
				continue
			}
			nf := byNode[f.node.ID()]
			if nf == nil {
				nf = &nodeFiles{n: f.node, a: a}
				byNode[f.node.ID()] = nf
			}
			nf.files = append(nf.files, wantedFile{name, f})
		}
	}
	var wg sync.WaitGroup
	for id, nf := range byNode {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !s.relistAttrs(ctx, l.dir, nf.n, nf.files, l.listed[id]) {
				s.readAttrsByPath(ctx, l.dir, id, nf.a, nf.files)
			}
		}()
	}
	wg.Wait()
}

// wantedFile is a listed archive whose attributes a listing wants: its
// name in the listed directory and what the listing keeps of it.
type wantedFile struct {
	name string
	f    *listedFile
}

// relistShare is the share of a node's listed files (one in relistShare)
// whose attributes a listing must want for relistAttrs to list the node
// again rather than read them by path: on 10 ecstore nodes, an S3 page
// of 1000 small objects in a directory of 2000 (half of each node's
// files) took 564 ms by listings with attributes and 860 ms by reads,
// and in one of 22036 (a twentieth) 19.8 s and 12.7 s for every page.
const relistShare = 4

// relistAttrs gives files (listed on node n in dir, listed files in
// all) the attributes of a new listing of n with attributes, when n can
// list them (node.AttrsLister) and files are at least a relistShare-th
// of its listed files. It reports whether it did: false when it did not
// try, when n turned out to list without attributes, or when the
// listing failed without n timing out (files are then read by path). A
// file the new listing does not hold (gone meanwhile) is left without
// attributes, as are all of them if n timed out (it is then suspect,
// and not asked for summaries again).
func (s *Store) relistAttrs(ctx context.Context, dir string, n node.Node, files []wantedFile, listed int) bool {
	al, ok := n.(node.AttrsLister)
	if !ok || !al.ListsAttrs() || relistShare*len(files) < listed {
		return false
	}
	var fis []node.FileInfo
	errs := s.forNodesListing(ctx, []node.Node{n}, func(ctx context.Context, n node.Node) error {
		var err error
		fis, err = n.List(ctx, dir)
		return err
	})
	switch {
	case errs[0] != nil:
		return s.isSuspect(n.ID())
	case !al.ListsAttrs():
		return false
	}
	attrs := make(map[string]map[string]string, len(fis))
	for _, fi := range fis {
		if !fi.IsDir && fi.Attrs != nil {
			attrs[fi.Name] = fi.Attrs
		}
	}
	for _, w := range files {
		w.f.setAttrs(attrs[w.name])
	}
	return true
}

// readAttrsByPath reads the attributes of files (listed in dir on node
// id, through a) by path, listedAttrReads at a time. After a failure the
// node is asked no more (and is marked suspect if the read timed out).
func (s *Store) readAttrsByPath(ctx context.Context, dir, id string, a node.AttrReader, files []wantedFile) {
	var wg sync.WaitGroup
	var next atomic.Int64
	var failed atomic.Bool
	for range min(listedAttrReads, len(files)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := int(next.Add(1) - 1); k < len(files) && !failed.Load() && ctx.Err() == nil; k = int(next.Add(1) - 1) {
				w := files[k]
				rctx, cancel := context.WithTimeout(ctx, s.nodeTimeout(id, s.opts.MetadataTimeout))
				attrs, err := a.ReadAttrs(rctx, node.Join(dir, w.name))
				timedOut := rctx.Err() != nil
				cancel()
				switch {
				case err == nil:
					w.f.setAttrs(attrs)
				case errors.Is(err, node.ErrNotExist) || errors.Is(err, node.ErrNotDir):
					// Gone meanwhile: the entry is stated.
				default:
					if !failed.Swap(true) && timedOut && ctx.Err() == nil {
						s.markSuspect(id, true)
						s.opts.Events.nodeError(id, "metadata", err)
					}
					return
				}
			}
		}()
	}
	wg.Wait()
}

// fillSlow stats the listed objects that had no usable attributes, a few
// at a time, and drops those that turn out not to exist (remnants of
// removed objects).
func (s *Store) fillSlow(ctx context.Context, out []Info, idx []int) []Info {
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	gone := make([]bool, len(out))
	for _, i := range idx {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			info, err := s.Stat(ctx, out[i].Path)
			switch {
			case err == nil:
				out[i] = *info
			case errors.Is(err, ErrNotExist):
				gone[i] = true
			}
		}()
	}
	wg.Wait()
	kept := out[:0]
	for i, info := range out {
		if !gone[i] {
			kept = append(kept, info)
		}
	}
	return kept
}

// Remove deletes the object at path. It first records a tombstone on
// every reachable node (at least M+1 must take it, or nothing is removed),
// then deletes the archives. Archives on nodes that could not be reached
// stay behind as remnants: fewer than K, hidden by the tombstones, and
// collected by repair.
func (s *Store) Remove(ctx context.Context, path string) error {
	if err := checkPath(path); err != nil {
		return err
	}
	if path == "/" {
		return fmt.Errorf("object: remove /: %w", ErrIsDir)
	}
	// After a commit of path through this gateway, not amid its renames.
	unlock, err := s.paths.lock(ctx, path)
	if err != nil {
		return fmt.Errorf("object: remove %s: %w", path, err)
	}
	defer unlock()
	return s.removeLocked(ctx, path)
}

// removeLocked is Remove for a caller in path's turn (paths.lock).
func (s *Store) removeLocked(ctx context.Context, path string) error {
	if done, err := s.removeBySummary(ctx, path); done {
		return err
	}
	results := s.probe(ctx, path, s.nodes)
	loc, err := s.resolve(ctx, path, results)
	var unrecoverable *UnrecoverableError
	switch {
	case err == nil:
		s.inBackground(loc.close) // only read: the removal need not wait
	case errors.As(err, &unrecoverable):
		// Unreadable, but there: removing it is how an admin gets rid of it.
	case errors.Is(err, ErrNotExist):
		// Nothing visible; what archives were found are removed versions
		// (debris). Clear them while here and say the object is absent,
		// as Stat does.
		s.removeFound(ctx, path, results)
		return fmt.Errorf("object: remove %s: %w", path, err)
	default:
		return fmt.Errorf("object: remove %s: %w", path, err)
	}
	var (
		errs   []error
		newest *archive.Metadata
	)
	for _, r := range results {
		if r.err != nil {
			errs = append(errs, r.err)
		}
		if r.ref != nil && (newest == nil || r.ref.idx.Meta.Version > newest.Version) {
			newest = r.ref.idx.Meta // the file is closed; the index stays
		}
	}
	// Fast path: every node answered, so the archives found are all there
	// are; if each is removed, nothing can come back and no tombstone is
	// needed.
	if len(errs) == 0 && len(results) == len(s.nodes) {
		if s.removeFound(ctx, path, results) {
			return nil
		}
	}
	return s.removeEverywhere(ctx, path, newest.Version, newest.K, newest.M)
}

// removeEverywhere removes version v (or older) of path, stored as K+M
// with parity m: it records tombstones (at least m+1 must take them) and
// then removes the archives on every node that answers. The tombstones
// hide what nodes that did not answer keep (M archives at most are taken
// for remnants); if so many archives the nodes hold could not be removed
// that the version is still visible by them, the removal failed.
func (s *Store) removeEverywhere(ctx context.Context, path string, v archive.Version, k, m int) error {
	if n := s.writeTombstones(ctx, path, v); n < m+1 {
		return fmt.Errorf("object: remove %s: %w: only %d nodes could record the removal, need %d", path, ErrQuorum, n, m+1)
	}
	var removed, kept atomic.Int32
	errs2 := s.forEachAnswering(ctx, func(ctx context.Context, n node.Node) error {
		fi, err := n.Stat(ctx, path)
		if err != nil {
			return err
		}
		if fi.IsDir {
			return nil
		}
		if err := n.Remove(ctx, path); err != nil {
			kept.Add(1)
			return err
		}
		removed.Add(1)
		return nil
	})
	err := firstReal(errs2)
	if left := int(kept.Load()); left > 0 && visibleBySummaries(left, k, m) {
		return fmt.Errorf("object: remove %s: %d archives could not be removed, which keep it visible: %w", path, left, err)
	}
	if err != nil {
		s.warns.log(ctx, s.opts.Logger, "remove left archives on unreachable nodes", nil, "obj", path, "removed", removed.Load(), "err", err)
	}
	return nil
}

// removeBySummary is Remove when every node reads archive summaries by
// path (node.AttrReader) and is not suspect (one that times out is
// marked hung, as by forEach): every node, in parallel, removes its
// archive at path and says which version and slot it held — in one
// request where the node offers it (node.AttrRemover: `ecstore node`),
// else by reading the archive's summary and then removing it — so that
// the removal costs one round trip, or two, however the archives lie.
// What the nodes removed then says what the answer is: the object was
// there when a version found is visible by its summaries (at least K
// slots, more than M unless all), or when tombstones do not hide what
// was found (a degraded object, or an unreadable one, which removing is
// how an admin gets rid of); otherwise what was removed was debris and
// the object did not exist. If a node failed to answer, or to remove
// its archive, tombstones record the removal (removeEverywhere); with
// fewer than M+1 nodes answering none is written and the removal fails
// with ErrQuorum, the object left readable by the archives that the
// failed nodes keep (the two-step Remove leaves it whole: it writes
// tombstones first). done is false, and Remove goes on as usual, when
// nothing was removed and a node failed or holds a directory at path.
func (s *Store) removeBySummary(ctx context.Context, path string) (done bool, err error) {
	idx := make(map[string]int, len(s.nodes))
	hung := s.skippedHung() // not asked: failed at once (forEachAnswering)
	for i, n := range s.nodes {
		if _, ok := s.summaryReader(n); !ok && !hung[n.ID()] {
			return false, nil
		}
		idx[n.ID()] = i
	}
	found := make([]removal, len(s.nodes))
	errs := s.forNodes(ctx, s.nodes, func(ctx context.Context, n node.Node) error {
		if hung[n.ID()] {
			return fmt.Errorf("node %s: %w", n.ID(), errHung)
		}
		r, err := removeReporting(ctx, n, path)
		found[idx[n.ID()]] = r
		return err
	})
	var (
		newest         *summary
		failed, dir    bool
		removedUnknown bool
		versions       = map[archive.Version]*versionFound{}
	)
	for i, r := range found {
		failed = failed || errs[i] != nil
		dir = dir || r.dir
		removedUnknown = removedUnknown || r.unknown
		if sum := r.sum; sum != nil {
			vf := versions[sum.version]
			if vf == nil {
				vf = &versionFound{geo: sum.geo, slots: map[int]bool{}}
				versions[sum.version] = vf
			}
			vf.slots[sum.slot] = true
			if newest == nil || sum.version > newest.version {
				newest = sum
			}
		}
	}
	switch {
	case newest == nil && !removedUnknown && (failed || dir):
		return false, nil // nothing removed: Remove says which nodes failed, or that path is a directory
	case newest == nil && !removedUnknown:
		return true, fmt.Errorf("object: remove %s: %w", path, fmt.Errorf("object %s: %w", path, ErrNotExist))
	case newest == nil:
		// Only archives written without a summary (before they were kept):
		// an object was there, of a version no node said.
		if err := firstReal(errs); err != nil {
			return true, fmt.Errorf("object: remove %s: archives without summaries removed, others may be left: %w", path, err)
		}
		return true, nil
	}
	if err := ctx.Err(); err != nil {
		return true, fmt.Errorf("object: remove %s: %w", path, err)
	}
	g := newest.geo
	visible := false
	for _, vf := range versions {
		visible = visible || visibleBySummaries(len(vf.slots), vf.geo.K, vf.geo.M)
	}
	if !visible && !removedUnknown {
		t := s.tombstoneOf(ctx, path)
		hidden := true
		for v := range versions {
			hidden = hidden && t.hides(v)
		}
		if hidden {
			// Debris of removed versions, now cleared: there was no object.
			return true, fmt.Errorf("object: remove %s: %w", path, fmt.Errorf("object %s: %w", path, ErrNotExist))
		}
	}
	if failed {
		// A node that failed may hold archives: tombstones hide them. They
		// need M+1 nodes; with fewer answering, none is written, so that
		// what the failed nodes keep (at least K archives, as at most M
		// were removed) stays readable rather than hidden by tombstones
		// too few to count as a removal.
		answered := 0
		var first error
		for _, err := range errs {
			if err == nil {
				answered++
			} else if first == nil {
				first = err
			}
		}
		if answered < g.M+1 {
			return true, fmt.Errorf("object: remove %s: %w: only %d nodes answered, need %d to record the removal: %w", path, ErrQuorum, answered, g.M+1, first)
		}
		return true, s.removeEverywhere(ctx, path, newest.version, g.K, g.M)
	}
	return true, nil
}

// versionFound is what removeBySummary found of one version: its
// geometry and the slots of its archives.
type versionFound struct {
	geo   layout.Geometry
	slots map[int]bool
}

// removal is what one node's part of removeBySummary found at path.
type removal struct {
	sum     *summary // the summary of the archive found (removed, unless the node's error says otherwise)
	unknown bool     // a file without a summary was removed
	dir     bool     // a directory is at path; left alone
}

// removeReporting removes the archive at path on n, a node that reads
// summaries, and says what it held: in one request when n is a
// node.AttrRemover that can, else by reading its summary first. A file
// without a summary is removed (an archive written before summaries
// were kept) unless it is a directory, which is left alone. An error
// with a summary means the archive was found but not removed.
func removeReporting(ctx context.Context, n node.Node, path string) (removal, error) {
	if r, ok := n.(node.AttrRemover); ok {
		attrs, err := r.RemoveWithAttrs(ctx, path)
		switch {
		case err == nil:
			if sum, ok := parseSummary(attrs); ok && sum.slot >= 0 {
				return removal{sum: &sum}, nil
			}
			return removal{unknown: true}, nil
		case errors.Is(err, node.ErrNotExist) || errors.Is(err, node.ErrNotDir):
			return removal{}, nil
		case errors.Is(err, node.ErrIsDir):
			return removal{dir: true}, nil
		case !errors.Is(err, node.ErrUnsupported):
			return removal{}, err
		}
	}
	sum, err := readSummary(ctx, n.(node.AttrReader), path)
	switch {
	case errors.Is(err, errNoSummary):
		fi, err := n.Stat(ctx, path)
		switch {
		case errors.Is(err, node.ErrNotExist):
			return removal{}, nil // removed meanwhile
		case err != nil:
			return removal{}, err
		case fi.IsDir:
			return removal{dir: true}, nil
		}
		if err := n.Remove(ctx, path); err != nil && !errors.Is(err, node.ErrNotExist) {
			return removal{}, err
		}
		return removal{unknown: true}, nil
	case err != nil || sum == nil:
		return removal{}, err
	}
	if err := n.Remove(ctx, path); err != nil && !errors.Is(err, node.ErrNotExist) {
		return removal{sum: sum}, err
	}
	return removal{sum: sum}, nil
}

// removeFound removes the archives the probe found, in parallel, and
// reports whether every one was removed.
func (s *Store) removeFound(ctx context.Context, path string, results []probeResult) bool {
	var holders []node.Node
	for _, r := range results {
		if r.ref != nil {
			holders = append(holders, r.node)
		}
	}
	return removeOn(ctx, path, holders)
}

// removeOn removes path on the given nodes, in parallel, and reports
// whether it is gone from every one.
func removeOn(ctx context.Context, path string, nodes []node.Node) bool {
	var wg sync.WaitGroup
	var failed atomic.Bool
	for _, n := range nodes {
		wg.Add(1)
		workers.Go(func() {
			defer wg.Done()
			if err := n.Remove(ctx, path); err != nil && !errors.Is(err, node.ErrNotExist) {
				failed.Store(true)
			}
		})
	}
	wg.Wait()
	return !failed.Load()
}

// Rename moves the object or directory at oldPath to newPath, replacing an
// object at newPath.
func (s *Store) Rename(ctx context.Context, oldPath, newPath string) error {
	for _, p := range []string{oldPath, newPath} {
		if err := checkPath(p); err != nil {
			return err
		}
		if p == "/" {
			return fmt.Errorf("object: rename %s: %w", p, ErrIsDir)
		}
	}
	if oldPath == newPath {
		_, err := s.Stat(ctx, oldPath)
		return err
	}
	if strings.HasPrefix(newPath, oldPath+"/") {
		return fmt.Errorf("object: rename %s into itself: %w", oldPath, node.ErrPath)
	}
	// In both paths' turns (taken in order, so that a rename the other
	// way waits rather than deadlocks): not amid a commit, removal or
	// rebuild of either through this gateway.
	first, second := min(oldPath, newPath), max(oldPath, newPath)
	unlock1, err := s.paths.lock(ctx, first)
	if err != nil {
		return fmt.Errorf("object: rename %s to %s: %w", oldPath, newPath, err)
	}
	defer unlock1()
	unlock2, err := s.paths.lock(ctx, second)
	if err != nil {
		return fmt.Errorf("object: rename %s to %s: %w", oldPath, newPath, err)
	}
	defer unlock2()
	// A parent of the new name that is an object: the nodes holding its
	// archives would refuse the rename and the others make directories
	// and move their archives, splitting the object between two names.
	if err := s.checkParents(ctx, newPath); err != nil {
		return err
	}
	src, err := s.Stat(ctx, oldPath)
	if err != nil {
		return err
	}
	if dst, err := s.Stat(ctx, newPath); err == nil {
		if dst.IsDir != src.IsDir || dst.IsDir {
			return fmt.Errorf("object: rename %s to %s: %w", oldPath, newPath, ErrExist)
		}
		// Drop every archive of the replaced object first, so that none of
		// its versions can outrank the moved one on nodes it does not use.
		if err := s.removeLocked(ctx, newPath); err != nil {
			return err
		}
	}
	// Tombstones at newPath hide older versions than the removed ones
	// (remnants of overwrites): the moved object, which keeps its
	// version, must be excepted before any of its archives is there.
	if !src.IsDir && !s.noteMoved(ctx, newPath, src.Version) {
		return fmt.Errorf("object: rename %s to %s: %w: fewer than %d nodes could record the move at the destination's tombstones", oldPath, newPath, ErrQuorum, s.opts.Geometry.M+1)
	}
	var (
		moved   atomic.Int32
		refused atomic.Pointer[error] // a node that answered but would not rename
		leftMu  sync.Mutex
		left    archive.Version // the newest other version left at oldPath
	)
	rename := func(ctx context.Context, n node.Node) error {
		if err := n.Rename(ctx, oldPath, newPath); err != nil {
			refused.CompareAndSwap(nil, &err)
			return err
		}
		moved.Add(1)
		return nil
	}
	errs := s.forEachAnswering(ctx, func(ctx context.Context, n node.Node) error {
		if !src.IsDir {
			// Only the moved version's archives go. Another version's
			// (an older one it superseded on a node that missed the
			// write, or a removed one hidden here by tombstones) would be
			// at newPath where nothing hides it, newer maybe than the
			// moved object: it is removed instead.
			r := probeOne(ctx, oldPath, n)
			switch {
			case r.ref != nil:
				v := r.ref.idx.Meta.Version
				r.ref.file.Close()
				if v == src.Version {
					return rename(ctx, n)
				}
				if err := n.Remove(ctx, oldPath); err != nil && !errors.Is(err, node.ErrNotExist) {
					leftMu.Lock()
					left = max(left, v)
					leftMu.Unlock()
					return err
				}
				return nil
			case r.err != nil && !r.malformed:
				return r.err
			case r.err == nil && !r.isDir:
				return nil // nothing here
			}
		}
		if _, err := n.Stat(ctx, oldPath); err != nil {
			return err
		}
		return rename(ctx, n)
	})
	if p := refused.Load(); p != nil {
		return fmt.Errorf("object: rename %s to %s: %w", oldPath, newPath, *p)
	}
	if err := firstReal(errs); err != nil {
		if moved.Load() == 0 {
			return fmt.Errorf("object: rename %s to %s: %w", oldPath, newPath, err)
		}
		// Unreachable nodes keep archives under the old name: tombstone it,
		// as Remove does, so that they never bring the old name back (nor
		// another version's that could not be removed).
		if !src.IsDir && src.Version != "" {
			s.writeTombstones(ctx, oldPath, max(src.Version, left))
		}
		s.warns.log(ctx, s.opts.Logger, "rename left archives on unreachable nodes", nil, "obj", oldPath, "to", newPath, "err", err)
	}
	return nil
}

// Mkdir creates directory path (and its parents) on every node.
func (s *Store) Mkdir(ctx context.Context, path string) error {
	if err := checkPath(path); err != nil {
		return err
	}
	if info, err := s.Stat(ctx, path); err == nil && !info.IsDir {
		return fmt.Errorf("object: mkdir %s: %w", path, ErrExist)
	}
	// An object cannot have children: nodes without its archive would
	// happily create the directory.
	for dir, _ := node.Split(path); dir != "/"; dir, _ = node.Split(dir) {
		if info, err := s.Stat(ctx, dir); err == nil && !info.IsDir {
			return fmt.Errorf("object: mkdir %s: %s is an object: %w", path, dir, ErrNotDir)
		}
	}
	errs := s.forEachAnswering(ctx, func(ctx context.Context, n node.Node) error { return n.Mkdir(ctx, path) })
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		}
	}
	if ok == 0 {
		return fmt.Errorf("object: mkdir %s: %w", path, errors.Join(errs...))
	}
	return nil
}

// Rmdir removes the empty directory path from every node.
func (s *Store) Rmdir(ctx context.Context, path string) error {
	if err := checkPath(path); err != nil {
		return err
	}
	if path == "/" {
		return fmt.Errorf("object: rmdir /: %w", node.ErrPath)
	}
	// Where some node holds a file at path, it may be an object (whose
	// archives some nodes refused to make a directory over, leaving the
	// others' directories): that is no directory to remove, and a node's
	// file is never removed as one.
	k, _ := s.statKinds(ctx, path)
	if k.file {
		if info, err := s.Stat(ctx, path); err == nil && !info.IsDir {
			return fmt.Errorf("object: rmdir %s: %w", path, ErrNotDir)
		}
	}
	entries, err := s.List(ctx, path)
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("object: rmdir %s: %w", path, ErrNotEmpty)
	}
	var removed atomic.Int32
	errs := s.forEachAnswering(ctx, func(ctx context.Context, n node.Node) error {
		if k.file {
			if fi, err := n.Stat(ctx, path); err == nil && !fi.IsDir {
				return nil // a file here is not the directory's
			}
		}
		err := n.Remove(ctx, path)
		if errors.Is(err, node.ErrNotEmpty) && s.leftovers.removeIn(ctx, n.ID(), path) {
			err = n.Remove(ctx, path) // it held what failed writes left
		}
		if err == nil {
			removed.Add(1)
		}
		return err
	})
	for _, err := range errs {
		if errors.Is(err, node.ErrNotEmpty) {
			return fmt.Errorf("object: rmdir %s: holds temporary files of writes in progress or of failed writes (repair removes those older than its debris age): %w", path, ErrNotEmpty)
		}
	}
	if err := firstReal(errs); err != nil {
		if removed.Load() == 0 {
			return fmt.Errorf("object: rmdir %s: %w", path, err)
		}
		s.opts.Logger.Warn("rmdir left the directory on unreachable nodes", "dir", path, "err", err)
	}
	return nil
}
