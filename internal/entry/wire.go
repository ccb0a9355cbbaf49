package entry

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fleet-role/fleet-role/internal/quantile"
)

// Version is the wire format version this package writes and reads (the "v"
// field). A reader refuses any other.
const Version = 1

// timeLayout writes t0 and fsync.at: RFC 3339, UTC, milliseconds.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// wire is the JSON form of an Entry; docs/entry.md describes every field.
// Columns run across the n samples in order; "runs" fields are [value,
// count] pairs whose counts add up to the column's length.
type wire struct {
	V    int    `json:"v"`
	Node string `json:"node"`
	N    int    `json:"n"`
	T0   string `json:"t0,omitempty"`
	// DtMs is the milliseconds since the previous sample (0 first). A step
	// of the wall clock can make one negative.
	DtMs        []int64             `json:"dt_ms"`
	Restart     []int               `json:"restart,omitempty"`
	Link        []linkRun           `json:"link"`
	ConnectUs   map[string][]*int64 `json:"connect_us,omitempty"`
	ConnectFail map[string][]pair   `json:"connect_fail,omitempty"`
	MemTotalKiB []pair              `json:"mem_total_kib"`
	MemAvailKiB []uint64            `json:"mem_available_kib"`
	MemStallUs  []*int64            `json:"mem_full_stall_us,omitempty"`
	WakeLateUs  []*int64            `json:"wakeup_late_us,omitempty"`
	Errors      []pair              `json:"errors,omitempty"`
	Strings     []string            `json:"strings,omitempty"`
	Etcd        *wireEtcd           `json:"etcd,omitempty"`
	Fsync       *wireFsync          `json:"fsync,omitempty"`
	// Shrunk and Refused tell the controller why a record holds less than
	// it should (docs/records.md, "Capacity").
	Shrunk  int    `json:"shrunk,omitempty"`
	Refused string `json:"refused,omitempty"`
	// Withheld tells it why the record holds no samples at all.
	Withheld string `json:"withheld,omitempty"`
}

// wireEtcd holds the voter columns. Present is a run column over the n
// samples (1: the sample has etcd data); every other column runs over the
// samples that have it, except Err, which names samples by their index.
type wireEtcd struct {
	Present        []pair                 `json:"present"`
	MemberID       []idRun                `json:"member_id"`
	IsLeader       []pair                 `json:"is_leader"`
	IsLearner      []pair                 `json:"is_learner"`
	HasLeader      []pair                 `json:"has_leader"`
	ConnectedPeers []pair                 `json:"connected_peers"`
	KnownPeers     []pair                 `json:"known_peers"`
	LeaderChanges  []pair                 `json:"leader_changes"`
	WALFsync       []*[]uint64            `json:"wal_fsync"`
	BackendCommit  []*[]uint64            `json:"backend_commit"`
	PeerRTT        map[string][]*[]uint64 `json:"peer_rtt,omitempty"`
	DBSizeKiB      []uint64               `json:"db_size_kib"`
	QuotaBytes     []pair                 `json:"quota_bytes"`
	Err            []pair                 `json:"err,omitempty"`
	Bounds         wireBounds             `json:"bounds"`
}

type wireBounds struct {
	WALFsync      []float64 `json:"wal_fsync,omitempty"`
	BackendCommit []float64 `json:"backend_commit,omitempty"`
	PeerRTT       []float64 `json:"peer_rtt,omitempty"`
}

type wireFsync struct {
	At           string `json:"at"`
	Dir          string `json:"dir"`
	Filesystem   string `json:"filesystem"`
	MeasuredDisk bool   `json:"measured_disk"`
	Writes       int    `json:"writes"`
	P99Us        int64  `json:"p99_us"`
	MaxUs        int64  `json:"max_us"`
	Err          string `json:"err,omitempty"`
	Skipped      string `json:"skipped,omitempty"`
}

type linkRun struct {
	If    string `json:"if"`
	Class string `json:"class"`
	N     int    `json:"n"`
}

type idRun struct {
	ID string `json:"id"`
	N  int    `json:"n"`
}

// pair is a two-number array: a run's [value, count] or an [index, string]
// reference. Decoding refuses any other length, which encoding/json's
// fixed-size arrays would silently pad or cut.
type pair [2]uint64

// Encode writes e in the wire format, the text of its ConfigMap key. It
// refuses values the format cannot carry: negative, NaN or infinite seconds,
// histograms with other bounds than the entry's first of their kind.
func Encode(e Entry) (string, error) {
	w, err := toWire(e)
	if err != nil {
		return "", fmt.Errorf("encode entry of %s: %w", e.Node, err)
	}
	b, err := json.Marshal(w)
	if err != nil {
		return "", fmt.Errorf("encode entry of %s: %w", e.Node, err)
	}
	return string(b), nil
}

// Decode reads an entry strictly: an unknown version or field, a column of
// the wrong length, a negative value or an index out of range is an error
// naming the field. Its limits are the largest the settings can hold
// (window 10,000, max_servers 7, and never more than a ConfigMap holds);
// callers that know the settings should use DecodeLimited with LimitsFor.
func Decode(raw string) (Entry, error) {
	return DecodeLimited(raw, defaultLimits())
}

// DecodeLimited reads an entry as Decode does, and refuses one that
// outgrows l, naming the field and the limit, before decoding allocates for
// it: what decoding allocates is bounded by l, whatever the text.
func DecodeLimited(raw string, l Limits) (Entry, error) {
	e, _, err := decode(raw, l, false)
	return e, err
}

// DecodeByVoter reads an entry as DecodeLimited does, and refuses what it
// refuses, but leaves every sample's Connect map nil and returns the
// connects by voter instead, one column each: a reader that judges the
// connects voter by voter (the decision, every recording host each
// period) needs no map per sample. FillConnects makes the maps.
func DecodeByVoter(raw string, l Limits) (Entry, map[string]*Connects, error) {
	return decode(raw, l, true)
}

func decode(raw string, l Limits, byVoter bool) (Entry, map[string]*Connects, error) {
	return decodeInto(raw, l, byVoter, nil, nil)
}

// decodeInto decodes with the wire form's columns (dead once the entry is
// built: the entry shares none of them) and the etcd samples' histograms
// cut from scratch, and the entry's samples and columns from a; either nil
// allocates afresh.
func decodeInto(raw string, l Limits, byVoter bool, scratch, a *arena) (Entry, map[string]*Connects, error) {
	if len(raw) > l.MaxBytes {
		return Entry{}, nil, fmt.Errorf("decode entry: %d bytes, over the limit of %d (%s)", len(raw), l.MaxBytes, l.bytesBasis())
	}
	w, err := decodeWireInto(raw, l, scratch)
	if err == nil {
		err = w.checkSizes(l)
	}
	if err != nil {
		return Entry{}, nil, fmt.Errorf("decode entry: %w", err)
	}
	e, cols, err := fromWireInto(w, l, byVoter, a, scratch)
	if err != nil {
		return Entry{}, nil, fmt.Errorf("decode entry: %w", err)
	}
	return e, cols, nil
}

// micros turns seconds into whole microseconds, refusing what the format
// cannot carry.
func micros(field string, s float64) (int64, error) {
	if math.IsNaN(s) || math.IsInf(s, 0) || s < 0 {
		return 0, fmt.Errorf("%s: %v seconds is not a duration", field, s)
	}
	if s*1e6 > maxMicros {
		return 0, fmt.Errorf("%s: %v seconds is longer than the format carries", field, s)
	}
	return int64(math.Round(s * 1e6)), nil
}

func seconds(us int64) float64 { return float64(us) / 1e6 }

// optMicros puts sample i's optional figure v (seconds) into the column of
// n samples *col as whole microseconds, making the column at its first
// figure: a column with no figure at all stays nil, and the field is then
// left out.
func optMicros(col *[]*int64, i, n int, what string, v *float64) error {
	if v == nil {
		return nil
	}
	us, err := micros(fmt.Sprintf("sample %d: %s", i, what), *v)
	if err != nil {
		return err
	}
	if *col == nil {
		*col = make([]*int64, n)
	}
	(*col)[i] = &us
	return nil
}

// strtab interns the entry's error texts: a voter down for a whole window
// fails the same way every sample.
type strtab struct {
	list []string
	idx  map[string]int
}

func (t *strtab) ref(s string) uint64 {
	s = cutText(s)
	if i, ok := t.idx[s]; ok {
		return uint64(i)
	}
	if t.idx == nil {
		t.idx = map[string]int{}
	}
	t.idx[s] = len(t.list)
	t.list = append(t.list, s)
	return uint64(len(t.list) - 1)
}

// runsOf encodes a column as [value, count] runs.
func runsOf(col []uint64) []pair {
	var out []pair
	for _, v := range col {
		if n := len(out); n > 0 && out[n-1][0] == v {
			out[n-1][1]++
			continue
		}
		out = append(out, pair{v, 1})
	}
	return out
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// cutMark ends a text cut to MaxTextBytes.
const cutMark = " [cut]"

// cutText makes s a text the format carries: valid UTF-8 (encoding/json
// would write each invalid byte as a 3-byte U+FFFD, and the text read back
// would be longer) of at most MaxTextBytes, cut at a character with cutMark
// at its end. A text already within both comes back unchanged.
func cutText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxTextBytes {
		return s
	}
	end := MaxTextBytes - len(cutMark)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + cutMark
}

func toWire(e Entry) (wire, error) {
	if e.Node == "" {
		return wire{}, errors.New("node: empty")
	}
	// What a host cannot have is refused rather than written: the entry
	// would be refused by every reader.
	if len(e.Node) > MaxNodeNameBytes {
		return wire{}, fmt.Errorf("node: %d bytes, over the limit of %d (a node name is a DNS subdomain)", len(e.Node), MaxNodeNameBytes)
	}
	for i, s := range e.Samples {
		if len(s.Link.Interface) > MaxInterfaceBytes {
			return wire{}, fmt.Errorf("sample %d: interface name of %d bytes, over Linux's %d", i, len(s.Link.Interface), MaxInterfaceBytes)
		}
		for v := range s.Connect {
			if len(v) > MaxNodeNameBytes || !NodeNameChars(v) {
				return wire{}, fmt.Errorf("sample %d: voter name %.40q is not a node name (a DNS subdomain of at most %d bytes)", i, v, MaxNodeNameBytes)
			}
		}
		if x := s.Etcd; x != nil {
			if len(x.MemberID) > MaxMemberIDBytes {
				return wire{}, fmt.Errorf("sample %d: member ID of %d bytes, over the %d hex digits of a uint64", i, len(x.MemberID), MaxMemberIDBytes)
			}
			for id := range x.PeerRTT {
				if len(id) > MaxMemberIDBytes || !MemberIDChars(id) {
					return wire{}, fmt.Errorf("sample %d: peer member ID %.40q is not a uint64 in lowercase hex", i, id)
				}
			}
		}
	}
	n := len(e.Samples)
	if e.Shrunk < 0 {
		return wire{}, fmt.Errorf("shrunk: %d is negative", e.Shrunk)
	}
	w := wire{V: Version, Node: e.Node, N: n, DtMs: make([]int64, n), MemAvailKiB: make([]uint64, n), Shrunk: e.Shrunk, Refused: e.Refused, Withheld: e.Withheld}
	var st strtab
	var prevMs int64
	total := make([]uint64, n)
	var stall, wake []*int64
	voters := map[string]bool{}
	for _, s := range e.Samples {
		for v := range s.Connect {
			voters[v] = true
		}
	}
	if len(voters) > 0 {
		w.ConnectUs = map[string][]*int64{}
		for v := range voters {
			w.ConnectUs[v] = make([]*int64, n)
		}
	}
	for i, s := range e.Samples {
		ms := s.At.UnixMilli()
		if i == 0 {
			w.T0 = time.UnixMilli(ms).UTC().Format(timeLayout)
		} else {
			w.DtMs[i] = ms - prevMs
			if w.DtMs[i] > maxStepMs || w.DtMs[i] < -maxStepMs {
				return wire{}, fmt.Errorf("sample %d: %v is too far from the sample before", i, s.At)
			}
		}
		if y := s.At.UTC().Year(); y < 1 || y > 9999 {
			return wire{}, fmt.Errorf("sample %d: time %v out of range", i, s.At)
		}
		prevMs = ms
		if s.Restart {
			w.Restart = append(w.Restart, i)
		}
		if s.Link.Class != ClassWired && s.Link.Class != ClassWifi && s.Link.Class != ClassUnknown {
			return wire{}, fmt.Errorf("sample %d: link class %q is not wired, wifi or unknown", i, s.Link.Class)
		}
		// Linux allows any bytes in an interface name; JSON would write each
		// invalid one as a 3-byte U+FFFD, past IFNAMSIZ, so each run of them
		// is written as one "?", which keeps the name within it.
		iface := strings.ToValidUTF8(s.Link.Interface, "?")
		if k := len(w.Link); k > 0 && w.Link[k-1].If == iface && w.Link[k-1].Class == s.Link.Class {
			w.Link[k-1].N++
		} else {
			w.Link = append(w.Link, linkRun{If: iface, Class: s.Link.Class, N: 1})
		}
		for v, c := range s.Connect {
			if c.Err != "" {
				if w.ConnectFail == nil {
					w.ConnectFail = map[string][]pair{}
				}
				w.ConnectFail[v] = append(w.ConnectFail[v], pair{uint64(i), st.ref(c.Err)})
				continue
			}
			us, err := micros(fmt.Sprintf("sample %d: connect to %s", i, v), c.Seconds)
			if err != nil {
				return wire{}, err
			}
			w.ConnectUs[v][i] = &us
		}
		total[i] = s.MemTotalBytes / 1024
		w.MemAvailKiB[i] = s.MemAvailableBytes / 1024
		if err := optMicros(&stall, i, n, "memory full stall", s.MemFullStallSeconds); err != nil {
			return wire{}, err
		}
		if err := optMicros(&wake, i, n, "wake-up lateness", s.WakeupLateSeconds); err != nil {
			return wire{}, err
		}
		for _, msg := range s.Errors {
			w.Errors = append(w.Errors, pair{uint64(i), st.ref(msg)})
		}
	}
	w.Link = slices.Clip(w.Link)
	w.MemTotalKiB = runsOf(total)
	w.MemStallUs, w.WakeLateUs = stall, wake
	if n == 0 {
		w.Link = []linkRun{}
		w.MemTotalKiB = []pair{}
	}
	etcd, err := etcdToWire(e.Samples, &st)
	if err != nil {
		return wire{}, err
	}
	w.Etcd = etcd
	if f := e.Fsync; f != nil {
		p99, err := micros("fsync: p99", f.P99Seconds)
		if err != nil {
			return wire{}, err
		}
		max, err := micros("fsync: max", f.MaxSeconds)
		if err != nil {
			return wire{}, err
		}
		if f.Writes < 0 {
			return wire{}, fmt.Errorf("fsync: writes %d is negative", f.Writes)
		}
		// As for interface names: a path may hold any bytes.
		dir := strings.ToValidUTF8(f.Dir, "?")
		if len(dir) > MaxPathBytes {
			return wire{}, fmt.Errorf("fsync: dir of %d bytes, over Linux's PATH_MAX %d", len(dir), MaxPathBytes)
		}
		w.Fsync = &wireFsync{At: f.At.UTC().Format(time.RFC3339Nano), Dir: dir, Filesystem: cutText(f.Filesystem),
			MeasuredDisk: f.MeasuredDisk, Writes: f.Writes, P99Us: p99, MaxUs: max, Err: cutText(f.Err), Skipped: cutText(f.Skipped)}
	}
	w.Strings = st.list
	return w, nil
}

// kindBounds settles the one set of bounds a histogram kind has in an entry.
type kindBounds struct {
	name   string
	bounds []float64
	set    bool
}

// sparse encodes h as [bucket, count] pairs flattened, for nonzero buckets;
// nil for a histogram that is not there.
func (k *kindBounds) sparse(where string, h quantile.Histogram) (*[]uint64, error) {
	if len(h.Bounds) == 0 && len(h.Counts) == 0 {
		return nil, nil
	}
	if err := h.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if !k.set {
		k.bounds, k.set = h.Bounds, true
	} else if !slices.Equal(k.bounds, h.Bounds) {
		return nil, fmt.Errorf("%s: bucket bounds differ from the entry's other %s histograms", where, k.name)
	}
	out := []uint64{}
	for i, c := range h.Counts {
		if c > 0 {
			out = append(out, uint64(i), c)
		}
	}
	return &out, nil
}

func etcdToWire(samples []Sample, st *strtab) (*wireEtcd, error) {
	present := make([]uint64, len(samples))
	has := false
	for i, s := range samples {
		if s.Etcd != nil {
			present[i], has = 1, true
		}
	}
	if !has {
		return nil, nil
	}
	w := &wireEtcd{Present: runsOf(present)}
	wal := kindBounds{name: "wal_fsync"}
	backend := kindBounds{name: "backend_commit"}
	rtt := kindBounds{name: "peer_rtt"}
	var leader, learner, hasLeader, connected, known, changes, quota []uint64
	peers := map[string]bool{}
	for _, s := range samples {
		if s.Etcd != nil {
			for id := range s.Etcd.PeerRTT {
				peers[id] = true
			}
		}
	}
	if len(peers) > 0 {
		w.PeerRTT = map[string][]*[]uint64{}
	}
	m := 0
	for i, s := range samples {
		x := s.Etcd
		if x == nil {
			continue
		}
		if k := len(w.MemberID); k > 0 && w.MemberID[k-1].ID == x.MemberID {
			w.MemberID[k-1].N++
		} else {
			w.MemberID = append(w.MemberID, idRun{ID: x.MemberID, N: 1})
		}
		if x.ConnectedPeers < 0 || x.KnownPeers < 0 {
			return nil, fmt.Errorf("sample %d: etcd peer counts %d/%d are negative", i, x.ConnectedPeers, x.KnownPeers)
		}
		leader = append(leader, b2u(x.IsLeader))
		learner = append(learner, b2u(x.IsLearner))
		hasLeader = append(hasLeader, b2u(x.HasLeader))
		connected = append(connected, uint64(x.ConnectedPeers))
		known = append(known, uint64(x.KnownPeers))
		changes = append(changes, x.LeaderChanges)
		quota = append(quota, x.QuotaBytes)
		w.DBSizeKiB = append(w.DBSizeKiB, x.DBSizeBytes/1024)
		sp, err := wal.sparse(fmt.Sprintf("sample %d: etcd wal_fsync", i), x.WALFsync)
		if err != nil {
			return nil, err
		}
		w.WALFsync = append(w.WALFsync, sp)
		if sp, err = backend.sparse(fmt.Sprintf("sample %d: etcd backend_commit", i), x.BackendCommit); err != nil {
			return nil, err
		}
		w.BackendCommit = append(w.BackendCommit, sp)
		for id := range peers {
			col := w.PeerRTT[id]
			var sp *[]uint64
			if h, ok := x.PeerRTT[id]; ok {
				if sp, err = rtt.sparse(fmt.Sprintf("sample %d: etcd peer_rtt to %s", i, id), h); err != nil {
					return nil, err
				}
				if sp == nil {
					sp = &[]uint64{}
				}
			}
			w.PeerRTT[id] = append(col, sp)
		}
		if x.Err != "" {
			w.Err = append(w.Err, pair{uint64(i), st.ref(x.Err)})
		}
		m++
	}
	w.IsLeader, w.IsLearner, w.HasLeader = runsOf(leader), runsOf(learner), runsOf(hasLeader)
	w.ConnectedPeers, w.KnownPeers, w.LeaderChanges = runsOf(connected), runsOf(known), runsOf(changes)
	w.QuotaBytes = runsOf(quota)
	w.Bounds = wireBounds{WALFsync: wal.bounds, BackendCommit: backend.bounds, PeerRTT: rtt.bounds}
	return w, nil
}
