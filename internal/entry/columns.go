package entry

import (
	"encoding/json"
	"fmt"
	"math"
)

// The numeric columns are most of an entry's bytes, and encoding/json's
// reflection made reading them most of a decision's time. Decode therefore
// takes them as raw JSON and reads them here by hand, with the field's name in
// every error; everything else, and all of encoding, stays encoding/json's.

// wireIn is wire as Decode reads it: the numeric columns raw.
type wireIn struct {
	V           int                        `json:"v"`
	Node        string                     `json:"node"`
	N           int                        `json:"n"`
	T0          string                     `json:"t0,omitempty"`
	DtMs        json.RawMessage            `json:"dt_ms"`
	Restart     []int                      `json:"restart,omitempty"`
	Link        []linkRun                  `json:"link"`
	ConnectUs   map[string]json.RawMessage `json:"connect_us,omitempty"`
	ConnectFail map[string][]pair          `json:"connect_fail,omitempty"`
	MemTotalKiB []pair                     `json:"mem_total_kib"`
	MemAvailKiB json.RawMessage            `json:"mem_available_kib"`
	MemStallUs  json.RawMessage            `json:"mem_full_stall_us,omitempty"`
	Errors      []pair                     `json:"errors,omitempty"`
	Strings     []string                   `json:"strings,omitempty"`
	Etcd        *wireEtcdIn                `json:"etcd,omitempty"`
	Fsync       *wireFsync                 `json:"fsync,omitempty"`
	Shrunk      int                        `json:"shrunk,omitempty"`
	Refused     string                     `json:"refused,omitempty"`
}

type wireEtcdIn struct {
	Present        []pair                     `json:"present"`
	MemberID       []idRun                    `json:"member_id"`
	IsLeader       []pair                     `json:"is_leader"`
	IsLearner      []pair                     `json:"is_learner"`
	HasLeader      []pair                     `json:"has_leader"`
	ConnectedPeers []pair                     `json:"connected_peers"`
	KnownPeers     []pair                     `json:"known_peers"`
	LeaderChanges  []pair                     `json:"leader_changes"`
	WALFsync       json.RawMessage            `json:"wal_fsync"`
	BackendCommit  json.RawMessage            `json:"backend_commit"`
	PeerRTT        map[string]json.RawMessage `json:"peer_rtt,omitempty"`
	DBSizeKiB      json.RawMessage            `json:"db_size_kib"`
	QuotaBytes     []pair                     `json:"quota_bytes"`
	Err            []pair                     `json:"err,omitempty"`
	Bounds         wireBounds                 `json:"bounds"`
}

// toWire reads the raw columns into wire, refusing a column longer than
// l.MaxSamples and a sparse histogram longer than its buckets allow before
// they grow past them.
func (in *wireIn) toWire(l Limits) (wire, error) {
	col := colLimit{max: l.MaxSamples, l: &l}
	hist := colLimit{max: 2 * (l.MaxBounds + 1), l: &l, hist: true}
	w := wire{V: in.V, Node: in.Node, N: in.N, T0: in.T0, Restart: in.Restart, Link: in.Link,
		ConnectFail: in.ConnectFail, MemTotalKiB: in.MemTotalKiB, Errors: in.Errors, Strings: in.Strings, Fsync: in.Fsync,
		Shrunk: in.Shrunk, Refused: in.Refused}
	var err error
	if w.DtMs, err = readInts("dt_ms", in.DtMs, col); err != nil {
		return w, err
	}
	if in.ConnectUs != nil {
		w.ConnectUs = make(map[string][]*int64, len(in.ConnectUs))
		for k, raw := range in.ConnectUs {
			if w.ConnectUs[k], err = readOptInts(fmt.Sprintf("connect_us[%q]", k), raw, col); err != nil {
				return w, err
			}
		}
	}
	if w.MemAvailKiB, err = readUints("mem_available_kib", in.MemAvailKiB, col); err != nil {
		return w, err
	}
	if w.MemStallUs, err = readOptInts("mem_full_stall_us", in.MemStallUs, col); err != nil {
		return w, err
	}
	if in.Etcd == nil {
		return w, nil
	}
	e := in.Etcd
	w.Etcd = &wireEtcd{Present: e.Present, MemberID: e.MemberID, IsLeader: e.IsLeader, IsLearner: e.IsLearner,
		HasLeader: e.HasLeader, ConnectedPeers: e.ConnectedPeers, KnownPeers: e.KnownPeers, LeaderChanges: e.LeaderChanges,
		QuotaBytes: e.QuotaBytes, Err: e.Err, Bounds: e.Bounds}
	if w.Etcd.WALFsync, err = readOptUintArrays("etcd.wal_fsync", e.WALFsync, col, hist); err != nil {
		return w, err
	}
	if w.Etcd.BackendCommit, err = readOptUintArrays("etcd.backend_commit", e.BackendCommit, col, hist); err != nil {
		return w, err
	}
	if e.PeerRTT != nil {
		w.Etcd.PeerRTT = make(map[string][]*[]uint64, len(e.PeerRTT))
		for k, raw := range e.PeerRTT {
			if w.Etcd.PeerRTT[k], err = readOptUintArrays(fmt.Sprintf("etcd.peer_rtt[%q]", k), raw, col, hist); err != nil {
				return w, err
			}
		}
	}
	if w.Etcd.DBSizeKiB, err = readUints("etcd.db_size_kib", e.DBSizeKiB, col); err != nil {
		return w, err
	}
	return w, nil
}

// cols reads one raw JSON column. encoding/json has already checked that the
// text is well-formed JSON; what is checked here is its shape and numbers.
type cols struct {
	field string
	b     []byte
	i     int
}

func (c *cols) peek() byte {
	for c.i < len(c.b) {
		switch c.b[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
			continue
		}
		return c.b[c.i]
	}
	return 0
}

func (c *cols) errorf(format string, a ...any) error {
	return fmt.Errorf("%s: "+format, append([]any{c.field}, a...)...)
}

// null consumes a null if one is next.
func (c *cols) null() bool {
	if c.peek() == 'n' && len(c.b)-c.i >= 4 && string(c.b[c.i:c.i+4]) == "null" {
		c.i += 4
		return true
	}
	return false
}

// colLimit is the most elements one array may have: a column's samples,
// or a sparse histogram's numbers.
type colLimit struct {
	max  int
	l    *Limits
	hist bool
}

func (c colLimit) why() string {
	switch {
	case c.l == nil:
		return "the reader's limit"
	case c.hist:
		return fmt.Sprintf("a [bucket, count] pair for each of %d bounds and +Inf", c.l.MaxBounds)
	}
	return c.l.samplesBasis()
}

// array calls elem for each element of the array that is next, with its
// index, refusing more than lim.max elements before reading one past it.
func (c *cols) array(lim colLimit, elem func(k int) error) error {
	if c.peek() != '[' {
		return c.errorf("want an array")
	}
	c.i++
	if c.peek() == ']' {
		c.i++
		return nil
	}
	for k := 0; ; k++ {
		if k >= lim.max {
			return c.errorf("more than %d values, over the limit of %d (%s)", lim.max, lim.max, lim.why())
		}
		if err := elem(k); err != nil {
			return err
		}
		switch c.peek() {
		case ',':
			c.i++
		case ']':
			c.i++
			return nil
		default:
			return c.errorf("want , or ] after element %d", k)
		}
	}
}

// digits reads the integer literal that is next as a sign and a magnitude,
// without allocating; a fraction or an exponent is refused, as encoding/json
// refuses them for an integer, and so is a magnitude past 2^64-1.
func (c *cols) digits(k int) (neg bool, mag uint64, err error) {
	c.peek()
	if c.i < len(c.b) && c.b[c.i] == '-' {
		neg = true
		c.i++
	}
	start := c.i
	for c.i < len(c.b) && c.b[c.i] >= '0' && c.b[c.i] <= '9' {
		d := uint64(c.b[c.i] - '0')
		if mag > (math.MaxUint64-d)/10 {
			return false, 0, c.errorf("element %d does not fit 64 bits", k)
		}
		mag = mag*10 + d
		c.i++
	}
	if c.i < len(c.b) && (c.b[c.i] == '.' || c.b[c.i] == 'e' || c.b[c.i] == 'E') {
		return false, 0, c.errorf("element %d is not a whole number", k)
	}
	if c.i == start {
		return false, 0, c.errorf("element %d is not a number", k)
	}
	return neg, mag, nil
}

func (c *cols) int(k int) (int64, error) {
	neg, mag, err := c.digits(k)
	switch {
	case err != nil:
		return 0, err
	case neg && mag <= 1<<63:
		return -int64(mag-1) - 1, nil // -2^63 itself fits
	case !neg && mag <= math.MaxInt64:
		return int64(mag), nil
	}
	return 0, c.errorf("element %d does not fit an int64", k)
}

func (c *cols) uint(k int) (uint64, error) {
	neg, mag, err := c.digits(k)
	if err != nil {
		return 0, err
	}
	if neg && mag != 0 {
		return 0, c.errorf("element %d: -%d is not a whole number of at least 0", k, mag)
	}
	return mag, nil
}

// read runs fn over raw as one value of field; absent or null raw reads as
// nothing (fn is not called).
func read(field string, raw json.RawMessage, fn func(c *cols) error) error {
	c := &cols{field: field, b: raw}
	if len(raw) == 0 || c.null() {
		return nil
	}
	if err := fn(c); err != nil {
		return err
	}
	if c.peek() != 0 {
		return c.errorf("data after the array")
	}
	return nil
}

func readInts(field string, raw json.RawMessage, lim colLimit) (out []int64, err error) {
	err = read(field, raw, func(c *cols) error {
		out = []int64{}
		return c.array(lim, func(k int) error {
			v, err := c.int(k)
			out = append(out, v)
			return err
		})
	})
	return out, err
}

func readUints(field string, raw json.RawMessage, lim colLimit) (out []uint64, err error) {
	err = read(field, raw, func(c *cols) error {
		out = []uint64{}
		return c.array(lim, func(k int) error {
			v, err := c.uint(k)
			out = append(out, v)
			return err
		})
	})
	return out, err
}

// readOptInts reads integers and nulls; the integers share one backing array.
func readOptInts(field string, raw json.RawMessage, lim colLimit) (out []*int64, err error) {
	err = read(field, raw, func(c *cols) error {
		out = []*int64{}
		var vals []int64
		var at []int
		if err := c.array(lim, func(k int) error {
			out = append(out, nil)
			if c.null() {
				return nil
			}
			v, err := c.int(k)
			vals = append(vals, v)
			at = append(at, k)
			return err
		}); err != nil {
			return err
		}
		for j, k := range at {
			out[k] = &vals[j]
		}
		return nil
	})
	return out, err
}

// readOptUintArrays reads arrays of whole numbers and nulls: the sparse
// histograms, one a sample. The numbers share one backing array.
func readOptUintArrays(field string, raw json.RawMessage, lim, inner colLimit) (out []*[]uint64, err error) {
	err = read(field, raw, func(c *cols) error {
		var vals []uint64
		var ends []int // where each element's numbers end in vals; -1 for null
		if err := c.array(lim, func(k int) error {
			if c.null() {
				ends = append(ends, -1)
				return nil
			}
			err := c.array(inner, func(j int) error {
				v, err := c.uint(j)
				vals = append(vals, v)
				return err
			})
			if err != nil {
				return fmt.Errorf("element %d: %w", k, err)
			}
			ends = append(ends, len(vals))
			return nil
		}); err != nil {
			return err
		}
		out = make([]*[]uint64, len(ends))
		cols := make([][]uint64, len(ends))
		start := 0
		for k, end := range ends {
			if end < 0 {
				continue
			}
			cols[k] = vals[start:end:end]
			out[k] = &cols[k]
			start = end
		}
		return nil
	})
	return out, err
}
