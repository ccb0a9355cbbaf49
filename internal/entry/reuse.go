package entry

import "github.com/fleet-role/fleet-role/internal/quantile"

// Decoder reads entries one after another into memory it reuses: the
// columns, samples and connects of one entry are cut from the same arrays
// as the previous entry's. What DecodeByVoter returns is therefore valid
// only until the Decoder's next decode; its texts (taken from the raw
// entry) stay valid. A reader that judges many entries in turn and keeps
// none of their samples (the decision, for every host that is not an etcd
// member) allocates the arrays once rather than once an entry. It holds
// the same limits as DecodeLimited: what it keeps between entries is at
// most twice what the largest entry it read needed. The zero Decoder is
// ready to use; it is not safe for concurrent use.
type Decoder struct {
	a arena
}

// DecodeByVoter is the package's DecodeByVoter into the Decoder's memory.
func (d *Decoder) DecodeByVoter(raw string, l Limits) (Entry, map[string]*Connects, error) {
	d.a.reset()
	return decodeInto(raw, l, true, &d.a, &d.a)
}

// DecodeKeptByVoter is the package's DecodeByVoter for an entry that is
// kept: what it returns is its own, except its etcd samples' histograms
// (WALFsync, BackendCommit, PeerRTT), which are cut from the Decoder's
// memory with the decoding's scratch (the wire form's columns) and valid
// only until its next decode. A reader that merges a window's histograms
// as soon as it has read them (the decision, for each etcd member) keeps
// the rest of the entry and none of the histograms' memory.
func (d *Decoder) DecodeKeptByVoter(raw string, l Limits) (Entry, map[string]*Connects, error) {
	d.a.reset()
	return decodeInto(raw, l, true, &d.a, nil)
}

// arena is the memory a Decoder reuses; a nil *arena allocates afresh.
type arena struct {
	int64s   chunk[int64]
	ints     chunk[int]
	histPtrs chunk[*[]uint64]
	histCols chunk[[]uint64]
	uint64s  chunk[uint64]
	ptrs     chunk[*int64]
	floats   chunk[float64]
	bools    chunk[bool]
	samples  chunk[Sample]
	connect  chunk[Connect]
	columns  chunk[Connects]
	connects map[string]*Connects
	// peerMaps are the etcd samples' PeerRTT maps, emptied for reuse;
	// peerMapsUsed of them are taken.
	peerMaps     []map[string]quantile.Histogram
	peerMapsUsed int
	wireUs       map[string][]*int64
}

func (a *arena) reset() {
	a.int64s.reset()
	a.ints.reset()
	a.histPtrs.reset()
	a.histCols.reset()
	a.uint64s.reset()
	a.ptrs.reset()
	a.floats.reset()
	a.bools.reset()
	a.samples.reset()
	a.connect.reset()
	a.columns.reset()
	clear(a.connects)
	for _, m := range a.peerMaps[:a.peerMapsUsed] {
		clear(m)
	}
	a.peerMapsUsed = 0
	clear(a.wireUs)
}

// chunk hands out zeroed slices cut from one array, which reset takes back.
type chunk[T any] struct{ base, free []T }

func (c *chunk[T]) reset() { c.free = c.base }

// take is n zeroed values of their own (appending past n reallocates).
// Every caller has held n to the entry's limits before it asks.
func (c *chunk[T]) take(n int) []T {
	if n == 0 {
		return make([]T, 0)
	}
	if len(c.free) < n {
		// Doubling: the arrays settle at the size entries need after a
		// few, and never exceed twice the largest need.
		c.base = make([]T, max(n, 2*len(c.base)))
		c.free = c.base
	}
	s := c.free[:n:n]
	c.free = c.free[n:]
	clear(s)
	return s
}

// take is n zeroed values, from a's chunk that pick names when there is an
// arena, else afresh.
func take[T any](a *arena, pick func(*arena) *chunk[T], n int) []T {
	if a == nil {
		return make([]T, n)
	}
	return pick(a).take(n)
}

// The chunks by type, for take.
func int64s(a *arena) *chunk[int64]       { return &a.int64s }
func ints(a *arena) *chunk[int]           { return &a.ints }
func histPtrs(a *arena) *chunk[*[]uint64] { return &a.histPtrs }
func histCols(a *arena) *chunk[[]uint64]  { return &a.histCols }
func uint64s(a *arena) *chunk[uint64]     { return &a.uint64s }
func ptrs(a *arena) *chunk[*int64]        { return &a.ptrs }
func floats(a *arena) *chunk[float64]     { return &a.floats }
func samples(a *arena) *chunk[Sample]     { return &a.samples }

func newConnects(a *arena, n int) *Connects {
	if a == nil {
		return &Connects{At: make([]bool, n), Connect: make([]Connect, n)}
	}
	c := &a.columns.take(1)[0]
	c.At, c.Connect = a.bools.take(n), a.connect.take(n)
	return c
}

func connectsMap(a *arena, voters int) map[string]*Connects {
	if a == nil {
		return make(map[string]*Connects, voters)
	}
	if a.connects == nil {
		a.connects = make(map[string]*Connects, voters)
	}
	return a.connects
}

// peerMap is an empty map for an etcd sample's PeerRTT.
func peerMap(a *arena) map[string]quantile.Histogram {
	if a == nil {
		return map[string]quantile.Histogram{}
	}
	if a.peerMapsUsed == len(a.peerMaps) {
		a.peerMaps = append(a.peerMaps, map[string]quantile.Histogram{})
	}
	a.peerMapsUsed++
	return a.peerMaps[a.peerMapsUsed-1]
}

func wireUsMap(a *arena) map[string][]*int64 {
	if a == nil {
		return map[string][]*int64{}
	}
	if a.wireUs == nil {
		a.wireUs = map[string][]*int64{}
	}
	return a.wireUs
}
