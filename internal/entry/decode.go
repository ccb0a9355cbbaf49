package entry

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/fleet-role/fleet-role/internal/quantile"
)

// expand turns [value, count] runs into a column of n values.
func expand(field string, runs []pair, n int) ([]uint64, error) {
	out := make([]uint64, 0, n)
	for i, r := range runs {
		if r[1] == 0 {
			return nil, fmt.Errorf("%s: run %d has count 0", field, i)
		}
		if r[1] > uint64(n-len(out)) {
			return nil, fmt.Errorf("%s: runs cover more than %d samples", field, n)
		}
		for range r[1] {
			out = append(out, r[0])
		}
	}
	if len(out) != n {
		return nil, fmt.Errorf("%s: runs cover %d samples, want %d", field, len(out), n)
	}
	return out, nil
}

func expandBool(field string, runs []pair, n int) ([]bool, error) {
	col, err := expand(field, runs, n)
	if err != nil {
		return nil, err
	}
	out := make([]bool, n)
	for i, v := range col {
		if v > 1 {
			return nil, fmt.Errorf("%s: value %d is not 0 or 1", field, v)
		}
		out[i] = v == 1
	}
	return out, nil
}

func checkLen(field string, got, want int) error {
	if got != want {
		return fmt.Errorf("%s: %d values for %d samples", field, got, want)
	}
	return nil
}

// refs checks [index, string] references: indexes ascending (equal allowed
// when several errors share a sample) and in range.
func refs(field string, ps []pair, n int, strs []string, strict bool) error {
	for i, p := range ps {
		if p[0] >= uint64(n) {
			return fmt.Errorf("%s: sample index %d out of range (n = %d)", field, p[0], n)
		}
		if p[1] >= uint64(len(strs)) {
			return fmt.Errorf("%s: string index %d out of range (%d strings)", field, p[1], len(strs))
		}
		if i > 0 && (p[0] < ps[i-1][0] || strict && p[0] == ps[i-1][0]) {
			return fmt.Errorf("%s: sample indexes not ascending at %d", field, i)
		}
	}
	return nil
}

func checkBounds(field string, b []float64) error {
	for i, v := range b {
		if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
			return fmt.Errorf("%s: bound %d is %v, want a positive number of seconds", field, i, v)
		}
		if i > 0 && !(v > b[i-1]) {
			return fmt.Errorf("%s: bounds not ascending at %d", field, i)
		}
	}
	return nil
}

// histKind rebuilds the histograms of one kind (wal_fsync, backend_commit,
// one peer's peer_rtt) from their sparse form. Their bounds slice is shared
// by every histogram of the kind, and their counts are cut from one backing
// array sized before it is allocated: treat both as read-only.
type histKind struct {
	column string
	peer   string // the member ID of a peer_rtt column, named only in errors
	bounds []float64
	pool   *[]uint64 // the kind's rows not yet taken
	// total is the sum of the kind's counts over the window, which the
	// decision adds up: it must fit 64 bits.
	total uint64
}

// histogram rebuilds the histogram of sample j (its index among the etcd
// samples).
func (k *histKind) histogram(j int, sp *[]uint64) (quantile.Histogram, error) {
	if sp == nil {
		return quantile.Histogram{}, nil
	}
	h, err := k.sparse(*sp)
	if err != nil {
		column := k.column
		if k.peer != "" {
			column = fieldKey(column, k.peer)
		}
		return h, fmt.Errorf("%s[%d]: %w", column, j, err)
	}
	return h, nil
}

func (k *histKind) sparse(v []uint64) (quantile.Histogram, error) {
	bounds := k.bounds
	if len(v)%2 != 0 {
		return quantile.Histogram{}, fmt.Errorf("%d numbers, want [bucket, count] pairs", len(v))
	}
	if len(v) > 0 && bounds == nil {
		return quantile.Histogram{}, errors.New("counts without bounds")
	}
	if bounds == nil {
		return quantile.Histogram{}, nil
	}
	width := len(bounds) + 1
	rows := *k.pool
	h := quantile.Histogram{Bounds: bounds, Counts: rows[:width:width]}
	*k.pool = rows[width:]
	for j := 0; j < len(v); j += 2 {
		b, c := v[j], v[j+1]
		if b > uint64(len(bounds)) {
			return quantile.Histogram{}, fmt.Errorf("bucket %d out of range (%d bounds and +Inf)", b, len(bounds))
		}
		if j > 0 && b <= v[j-2] {
			return quantile.Histogram{}, errors.New("buckets not ascending")
		}
		if c == 0 {
			return quantile.Histogram{}, fmt.Errorf("bucket %d has count 0 (omit it)", b)
		}
		var carry uint64
		if k.total, carry = bits.Add64(k.total, c, 0); carry != 0 {
			return quantile.Histogram{}, fmt.Errorf("bucket %d: the counts of the window add up past 2^64-1", b)
		}
		h.Counts[b] = c
	}
	return h, nil
}

// histCounts is the number of bucket counts the histograms of a column
// take: one row of len(bounds)+1 per histogram that is there.
func histCounts(col []*[]uint64, bounds []float64) int {
	if bounds == nil {
		return 0
	}
	k := 0
	for _, sp := range col {
		if sp != nil {
			k++
		}
	}
	return k * (len(bounds) + 1)
}

// maxMicros is the longest duration the format carries, 2^53 µs (285
// years): every such count converts to float64 seconds and back exactly.
const maxMicros = 1 << 53

// maxStepMs bounds one dt_ms step (about 34 years), so that the running sum
// of steps cannot overflow.
const maxStepMs = 1 << 40

func nonNegative(field string, i int, us int64) error {
	if us >= 0 && us <= maxMicros {
		return nil
	}
	if i >= 0 {
		field = fmt.Sprintf("%s[%d]", field, i)
	}
	if us < 0 {
		return fmt.Errorf("%s: %d is negative", field, us)
	}
	return fmt.Errorf("%s: %d µs is longer than the format carries", field, us)
}

func fromWire(w wire, l Limits) (Entry, error) {
	e, _, err := fromWireBy(w, l, false)
	return e, err
}

// fromWireBy builds the entry from its wire form; byVoter leaves the
// samples' Connect maps nil and returns the connects by voter instead.
func fromWireBy(w wire, l Limits, byVoter bool) (e Entry, cols map[string]*Connects, err error) {
	return fromWireInto(w, l, byVoter, nil, nil)
}

// fromWireInto is fromWireBy with the samples and columns cut from a, and
// the etcd samples' histograms (their bucket rows and peer maps) from hs
// (nil: afresh).
func fromWireInto(w wire, l Limits, byVoter bool, a, hs *arena) (e Entry, cols map[string]*Connects, err error) {
	if w.V != Version {
		return Entry{}, nil, fmt.Errorf("v: unsupported version %d (this fleet-role reads %d)", w.V, Version)
	}
	if w.Node == "" {
		return Entry{}, nil, fmt.Errorf("node: empty")
	}
	n := w.N
	if n < 0 {
		return Entry{}, nil, fmt.Errorf("n: %d is negative", n)
	}
	if n > l.MaxSamples {
		return Entry{}, nil, fmt.Errorf("n: %d samples, over the limit of %d (%s)", n, l.MaxSamples, l.samplesBasis())
	}
	// dt_ms is read first: n is believed once a column has its n values.
	if err := checkLen("dt_ms", len(w.DtMs), n); err != nil {
		return Entry{}, nil, err
	}
	// A probe leaves out at most the samples it held.
	if w.Shrunk < 0 || w.Shrunk > l.MaxSamples {
		return Entry{}, nil, fmt.Errorf("shrunk: %d samples, want 0 to %d (%s)", w.Shrunk, l.MaxSamples, l.samplesBasis())
	}
	if len(w.Refused) > MaxTextBytes {
		return Entry{}, nil, fmt.Errorf("refused: %d bytes, over the limit of %d", len(w.Refused), MaxTextBytes)
	}
	if len(w.Withheld) > MaxTextBytes {
		return Entry{}, nil, fmt.Errorf("withheld: %d bytes, over the limit of %d", len(w.Withheld), MaxTextBytes)
	}
	e = Entry{Node: w.Node, Samples: take(a, samples, n), Shrunk: w.Shrunk, Refused: w.Refused, Withheld: w.Withheld}
	if n > 0 {
		var t0 time.Time
		t0, err = time.Parse(time.RFC3339Nano, w.T0)
		if err != nil {
			return Entry{}, nil, fmt.Errorf("t0: %w", err)
		}
		if w.DtMs[0] != 0 {
			return Entry{}, nil, fmt.Errorf("dt_ms: first value %d, want 0", w.DtMs[0])
		}
		ms := t0.UnixMilli()
		for i := range e.Samples {
			if w.DtMs[i] > maxStepMs || w.DtMs[i] < -maxStepMs {
				return Entry{}, nil, fmt.Errorf("dt_ms[%d]: step of %d ms out of range", i, w.DtMs[i])
			}
			ms += w.DtMs[i]
			at := time.UnixMilli(ms).UTC()
			if y := at.Year(); y < 1 || y > 9999 {
				return Entry{}, nil, fmt.Errorf("dt_ms[%d]: sample time %v out of range", i, at)
			}
			e.Samples[i].At = at
		}
	} else if w.T0 != "" {
		return Entry{}, nil, fmt.Errorf("t0: set on an entry with no samples")
	}
	for i, r := range w.Restart {
		if r < 0 || r >= n || i > 0 && r <= w.Restart[i-1] {
			return Entry{}, nil, fmt.Errorf("restart: index %d out of range or not ascending", r)
		}
		e.Samples[r].Restart = true
	}
	k := 0
	for i, r := range w.Link {
		if r.Class != ClassWired && r.Class != ClassWifi && r.Class != ClassUnknown {
			return Entry{}, nil, fmt.Errorf("link: run %d class %q is not wired, wifi or unknown", i, r.Class)
		}
		if r.N <= 0 || r.N > n-k {
			return Entry{}, nil, fmt.Errorf("link: run %d count %d does not fit %d samples", i, r.N, n)
		}
		for range r.N {
			e.Samples[k].Link = Link{Interface: r.If, Class: r.Class}
			k++
		}
	}
	if k != n {
		return Entry{}, nil, fmt.Errorf("link: runs cover %d samples, want %d", k, n)
	}
	// Each sample's map is made once, for every voter it may hold; by
	// voter, a column of each instead.
	voters := len(w.ConnectUs)
	if byVoter {
		cols = connectsMap(a, voters)
	}
	put := func(v string, c *Connects, i int, cn Connect) {
		if c != nil {
			c.At[i], c.Connect[i] = true, cn
			return
		}
		if e.Samples[i].Connect == nil {
			e.Samples[i].Connect = make(map[string]Connect, voters)
		}
		e.Samples[i].Connect[v] = cn
	}
	for _, v := range slices.Sorted(maps.Keys(w.ConnectUs)) {
		col := w.ConnectUs[v]
		if v == "" {
			return Entry{}, nil, fmt.Errorf("%s: empty voter name", fieldKey("connect_us", v))
		}
		if len(col) != n {
			return Entry{}, nil, checkLen(fieldKey("connect_us", v), len(col), n)
		}
		var c *Connects
		if byVoter {
			c = newConnects(a, n)
			cols[v] = c
		}
		for i, us := range col {
			if us == nil {
				continue
			}
			if *us < 0 || *us > maxMicros {
				return Entry{}, nil, nonNegative(fieldKey("connect_us", v), i, *us)
			}
			put(v, c, i, Connect{Seconds: seconds(*us)})
		}
	}
	for _, v := range slices.Sorted(maps.Keys(w.ConnectFail)) {
		field := fieldKey("connect_fail", v)
		col, ok := w.ConnectUs[v]
		if !ok {
			return Entry{}, nil, fmt.Errorf("%s: voter has no connect_us column", field)
		}
		ps := w.ConnectFail[v]
		if err := refs(field, ps, n, w.Strings, true); err != nil {
			return Entry{}, nil, err
		}
		for _, p := range ps {
			if col[p[0]] != nil {
				return Entry{}, nil, fmt.Errorf("%s: sample %d has both a time and a failure", field, p[0])
			}
			put(v, cols[v], int(p[0]), Connect{Err: w.Strings[p[1]]})
		}
	}
	if err := decodeColumns(entryColumns[:], w.cols[:], e.Samples, nil, a); err != nil {
		return Entry{}, nil, err
	}
	if err := refs("errors", w.Errors, n, w.Strings, false); err != nil {
		return Entry{}, nil, err
	}
	for _, p := range w.Errors {
		e.Samples[p[0]].Errors = append(e.Samples[p[0]].Errors, w.Strings[p[1]])
	}
	if w.Etcd != nil {
		if err := etcdFromWire(w.Etcd, e.Samples, w.Strings, l, hs); err != nil {
			return Entry{}, nil, fmt.Errorf("etcd.%w", err)
		}
	}
	if f := w.Fsync; f != nil {
		at, err := time.Parse(time.RFC3339Nano, f.At)
		if err != nil {
			return Entry{}, nil, fmt.Errorf("fsync.at: %w", err)
		}
		if f.Writes < 0 {
			return Entry{}, nil, fmt.Errorf("fsync.writes: %d is negative", f.Writes)
		}
		if err := nonNegative("fsync.p99_us", -1, f.P99Us); err != nil {
			return Entry{}, nil, err
		}
		if err := nonNegative("fsync.max_us", -1, f.MaxUs); err != nil {
			return Entry{}, nil, err
		}
		e.Fsync = &FsyncReading{At: at.UTC(), Dir: f.Dir, Filesystem: f.Filesystem, MeasuredDisk: f.MeasuredDisk,
			Writes: f.Writes, P99Seconds: seconds(f.P99Us), MaxSeconds: seconds(f.MaxUs), Err: f.Err, Skipped: f.Skipped}
	}
	return e, cols, nil
}

func etcdFromWire(w *wireEtcd, samples []Sample, strs []string, l Limits, hs *arena) error {
	present, err := expandBool("present", w.Present, len(samples))
	if err != nil {
		return err
	}
	var idx []int
	for i, p := range present {
		if p {
			idx = append(idx, i)
		}
	}
	m := len(idx)
	var ids []string
	for i, r := range w.MemberID {
		if r.N <= 0 || r.N > m-len(ids) {
			return fmt.Errorf("member_id: run %d count %d does not fit %d samples", i, r.N, m)
		}
		for range r.N {
			ids = append(ids, r.ID)
		}
	}
	if len(ids) != m {
		return fmt.Errorf("member_id: runs cover %d samples, want %d", len(ids), m)
	}
	for _, c := range []struct {
		field string
		n     int
	}{{"wal_fsync", len(w.WALFsync)}, {"backend_commit", len(w.BackendCommit)}} {
		if err := checkLen(c.field, c.n, m); err != nil {
			return err
		}
	}
	// One backing array, not one a sample; afresh, not from an arena, as
	// are their columns' figures: a kept entry owns its etcd samples.
	xs := make([]EtcdSample, m)
	if err := decodeColumns(etcdColumns[:], w.cols[:], xs, idx, nil); err != nil {
		return err
	}
	for _, b := range []struct {
		field string
		v     []float64
	}{{"bounds.wal_fsync", w.Bounds.WALFsync}, {"bounds.backend_commit", w.Bounds.BackendCommit}, {"bounds.peer_rtt", w.Bounds.PeerRTT}} {
		if err := checkBounds(b.field, b.v); err != nil {
			return err
		}
	}
	peers := slices.Sorted(maps.Keys(w.PeerRTT))
	if len(peers) > l.MaxPeers {
		return fmt.Errorf("peer_rtt: %d peers, over the limit of %d (max_servers %d - 1: the other members)", len(peers), l.MaxPeers, l.MaxServers)
	}
	for _, id := range peers {
		if err := checkLen(fmt.Sprintf("peer_rtt[%q]", id), len(w.PeerRTT[id]), m); err != nil {
			return err
		}
	}
	// Every bucket count is allocated at once, after its number is held
	// against the limit: the counts of one histogram per sample and kind.
	counts := histCounts(w.WALFsync, w.Bounds.WALFsync) + histCounts(w.BackendCommit, w.Bounds.BackendCommit)
	for _, id := range peers {
		counts += histCounts(w.PeerRTT[id], w.Bounds.PeerRTT)
	}
	if counts > l.MaxCounts {
		return fmt.Errorf("wal_fsync/backend_commit/peer_rtt: %d bucket counts, over the limit of %d (%d samples x %d histograms x %d buckets)",
			counts, l.MaxCounts, l.MaxSamples, 2+l.MaxPeers, l.MaxBounds+1)
	}
	// Each kind takes its rows from a pool of its own, sized as histCounts
	// counted (a row is cut only for a histogram that is there): one array
	// a kind rather than one for all, so that at the default window each
	// stays a small object of the allocator's, which a large one (past
	// 32 KiB, its own pages) is not; the total was held to the limit above.
	pool := func(col []*[]uint64, bounds []float64) *[]uint64 {
		rows := take(hs, uint64s, histCounts(col, bounds))
		return &rows
	}
	wal := histKind{column: "wal_fsync", bounds: w.Bounds.WALFsync, pool: pool(w.WALFsync, w.Bounds.WALFsync)}
	backend := histKind{column: "backend_commit", bounds: w.Bounds.BackendCommit, pool: pool(w.BackendCommit, w.Bounds.BackendCommit)}
	rtt := make([]histKind, len(peers))
	for p, id := range peers {
		rtt[p] = histKind{column: "peer_rtt", peer: id, bounds: w.Bounds.PeerRTT, pool: pool(w.PeerRTT[id], w.Bounds.PeerRTT)}
	}
	for j, i := range idx {
		x := &xs[j]
		x.MemberID = ids[j]
		if x.WALFsync, err = wal.histogram(j, w.WALFsync[j]); err != nil {
			return err
		}
		if x.BackendCommit, err = backend.histogram(j, w.BackendCommit[j]); err != nil {
			return err
		}
		for p, id := range peers {
			sp := w.PeerRTT[id][j]
			if sp == nil {
				continue
			}
			h, err := rtt[p].histogram(j, sp)
			if err != nil {
				return err
			}
			if x.PeerRTT == nil {
				x.PeerRTT = peerMap(hs)
			}
			x.PeerRTT[id] = h
		}
		samples[i].Etcd = x
	}
	if err := refs("err", w.Err, len(samples), strs, true); err != nil {
		return err
	}
	for _, p := range w.Err {
		if !present[p[0]] {
			return fmt.Errorf("err: sample %d has no etcd data", p[0])
		}
		samples[p[0]].Etcd.Err = strs[p[1]]
	}
	return nil
}
