// Package placement chooses the storage nodes of a new object and the order
// in which a reader probes nodes to find an existing one. It is pure and
// deterministic: the same path and node set give the same answer.
//
// Nodes are ranked by weighted rendezvous (highest-random-weight) hashing
// of (node id, object path): every node gets a pseudo-random score for the
// path, scaled by its free space, and the best scores win. Objects thus
// spread evenly, fuller nodes receive fewer new objects, and adding or
// removing a node moves only the objects that rank it highest. Free space
// is quantised to 1/64 of the freest node so that small changes in free
// space do not reorder placements.
//
// Because each archive records the whole placement, a reader needs to find
// only one archive: it probes nodes in Rank order and falls back to asking
// every node.
package placement

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"sort"
)

// ErrNotEnoughNodes means fewer usable nodes exist than an object needs.
var ErrNotEnoughNodes = errors.New("placement: not enough usable nodes")

// Node is what placement knows of a storage node.
type Node struct {
	ID   string
	Free int64 // free bytes (0: full); negative: unknown
	Down bool  // unreachable or excluded from new writes
}

// weightSteps is the resolution of free-space weighting.
const weightSteps = 64

// Rank orders every node by its score for path, best first. Down nodes are
// ranked too (a reader may still find archives there), by the same score.
func Rank(path string, nodes []Node) []Node {
	maxFree := int64(0)
	for _, n := range nodes {
		maxFree = max(maxFree, n.Free)
	}
	type scored struct {
		n     Node
		score float64
	}
	s := make([]scored, len(nodes))
	for i, n := range nodes {
		s[i] = scored{n, score(path, n.ID, weight(n.Free, maxFree))}
	}
	sort.Slice(s, func(i, j int) bool {
		if s[i].score != s[j].score {
			return s[i].score > s[j].score
		}
		return s[i].n.ID < s[j].n.ID // ties broken by name, for determinism
	})
	out := make([]Node, len(s))
	for i := range s {
		out[i] = s[i].n
	}
	return out
}

// Choose picks width distinct up nodes for a new object at path, plus up
// to spares further up nodes to fall back on, in rank order. Nodes with
// less than minFree bytes free are used only when nothing else is left,
// full ones (no byte free) last of all.
func Choose(path string, nodes []Node, width, spares int, minFree int64) (primary, spare []string, err error) {
	var roomy, tight, full []string
	for _, n := range Rank(path, nodes) {
		switch {
		case n.Down:
		case n.Free == 0:
			full = append(full, n.ID)
		case n.Free > 0 && n.Free < minFree:
			tight = append(tight, n.ID)
		default: // room, or unknown
			roomy = append(roomy, n.ID)
		}
	}
	all := append(append(roomy, tight...), full...)
	if len(all) < width {
		return nil, nil, fmt.Errorf("%w: %d up, object needs %d", ErrNotEnoughNodes, len(all), width)
	}
	primary = all[:width:width]
	spare = all[width:min(len(all), width+spares)]
	return primary, spare, nil
}

func weight(free, maxFree int64) float64 {
	if maxFree <= 0 || free <= 0 {
		return 1
	}
	return math.Max(1, math.Ceil(float64(free)*weightSteps/float64(maxFree)))
}

// score is the weighted rendezvous score -w/ln(u) with u in (0, 1) derived
// from a hash of (id, path).
func score(path, id string, w float64) float64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	h.Write([]byte{0})
	h.Write([]byte(path))
	x := mix(h.Sum64())
	u := (float64(x>>11) + 0.5) / (1 << 53)
	return -w / math.Log(u)
}

// mix is the splitmix64 finaliser: FNV alone avalanches poorly on short,
// similar inputs such as "node-01" and "node-02".
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
