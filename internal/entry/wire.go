package entry

import (
	"bytes"
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
// count] pairs whose counts add up to the column's length. marshal writes
// its parts in this order, as one object.
type wire struct {
	wireHead
	cols [len(entryColumns)]colData
	wireErrors
	Etcd *wireEtcd // "etcd", left out when nil
	wireTail
}

type wireHead struct {
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
}

type wireErrors struct {
	Errors  []pair   `json:"errors,omitempty"`
	Strings []string `json:"strings,omitempty"`
}

type wireTail struct {
	Fsync *wireFsync `json:"fsync,omitempty"`
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
// marshal writes its parts in this order, but for the columns: the first
// etcdColumnsBeforeHists of them before wireEtcdHists, the rest after.
type wireEtcd struct {
	wireEtcdHead
	cols [len(etcdColumns)]colData
	wireEtcdHists
	wireEtcdTail
}

type wireEtcdHead struct {
	Present  []pair  `json:"present"`
	MemberID []idRun `json:"member_id"`
}

type wireEtcdHists struct {
	WALFsync      []*[]uint64            `json:"wal_fsync"`
	BackendCommit []*[]uint64            `json:"backend_commit"`
	PeerRTT       map[string][]*[]uint64 `json:"peer_rtt,omitempty"`
}

type wireEtcdTail struct {
	Err    []pair     `json:"err,omitempty"`
	Bounds wireBounds `json:"bounds"`
}

// marshal writes w as Encode does.
func (w *wire) marshal() ([]byte, error) {
	o := newObjectWriter()
	o.open()
	err := o.fields(&w.wireHead)
	writeColumns(o, entryColumns[:], w.cols[:])
	if err == nil {
		err = o.fields(&w.wireErrors)
	}
	if x := w.Etcd; x != nil && err == nil {
		o.key("etcd")
		o.open()
		err = o.fields(&x.wireEtcdHead)
		writeColumns(o, etcdColumns[:etcdColumnsBeforeHists], x.cols[:etcdColumnsBeforeHists])
		if err == nil {
			err = o.fields(&x.wireEtcdHists)
		}
		writeColumns(o, etcdColumns[etcdColumnsBeforeHists:], x.cols[etcdColumnsBeforeHists:])
		if err == nil {
			err = o.fields(&x.wireEtcdTail)
		}
		o.close()
	}
	if err == nil {
		err = o.fields(&w.wireTail)
	}
	o.close()
	return o.out.Bytes(), err
}

// objectWriter writes the format's objects into one buffer: the parts
// encoding/json writes (structs, whose fields it splices into the object
// being written, in place) and the columns, which it writes by hand.
type objectWriter struct {
	out bytes.Buffer
	enc *json.Encoder
}

func newObjectWriter() *objectWriter {
	o := &objectWriter{}
	o.enc = json.NewEncoder(&o.out)
	return o
}

func (o *objectWriter) open()  { o.out.WriteByte('{') }
func (o *objectWriter) close() { o.out.WriteByte('}') }

// opened reports whether the object being written has no field yet.
func (o *objectWriter) opened() bool { return o.out.Bytes()[o.out.Len()-1] == '{' }

// key starts a field of the object being written.
func (o *objectWriter) key(name string) {
	o.out.Write(appendKey(o.out.AvailableBuffer(), !o.opened(), name))
}

// fields writes the fields of v, a struct encoding/json writes as an
// object, into the object being written.
func (o *objectWriter) fields(v any) error {
	opened := o.opened()
	if opened {
		o.out.Truncate(o.out.Len() - 1) // v's own '{' opens the object
	}
	start := o.out.Len()
	if err := o.enc.Encode(v); err != nil {
		return err
	}
	b := o.out.Bytes()
	switch {
	case b[start+1] == '}': // v has no field to write
		if opened {
			start++
		}
		o.out.Truncate(start)
		return nil
	case !opened:
		b[start] = ','
	}
	o.out.Truncate(len(b) - len("}\n"))
	return nil
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
	b, err := w.marshal()
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
	return microsAt(s, func() string { return field })
}

// microsAt is micros naming the field only when it refuses: a window's
// encode turns thousands of readings, and formatting each one's name
// up front was a third of the encode's CPU (BenchmarkWriterPlan's profile).
func microsAt(s float64, field func() string) (int64, error) {
	if math.IsNaN(s) || math.IsInf(s, 0) || s < 0 {
		return 0, fmt.Errorf("%s: %v seconds is not a duration", field(), s)
	}
	if s*1e6 > maxMicros {
		return 0, fmt.Errorf("%s: %v seconds is longer than the format carries", field(), s)
	}
	return int64(math.Round(s * 1e6)), nil
}

func seconds(us int64) float64 { return float64(us) / 1e6 }

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
	var w wire
	w.V, w.Node, w.N, w.DtMs = Version, e.Node, n, make([]int64, n)
	w.Shrunk, w.Refused, w.Withheld = e.Shrunk, e.Refused, e.Withheld
	var st strtab
	var prevMs int64
	rows := make([]*Sample, n)
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
		rows[i] = &e.Samples[i]
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
			us, err := microsAt(c.Seconds, func() string { return fmt.Sprintf("sample %d: connect to %s", i, v) })
			if err != nil {
				return wire{}, err
			}
			w.ConnectUs[v][i] = &us
		}
		for _, msg := range s.Errors {
			w.Errors = append(w.Errors, pair{uint64(i), st.ref(msg)})
		}
	}
	w.Link = slices.Clip(w.Link)
	if n == 0 {
		w.Link = []linkRun{}
	}
	if err := encodeColumns(entryColumns[:], w.cols[:], "", rows, nil); err != nil {
		return wire{}, err
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

func (k *kindBounds) where(i int, peer string) string {
	if peer != "" {
		return fmt.Sprintf("sample %d: etcd %s to %s", i, k.name, peer)
	}
	return fmt.Sprintf("sample %d: etcd %s", i, k.name)
}

// sparse encodes h as [bucket, count] pairs flattened, for nonzero buckets;
// nil for a histogram that is not there.
// Refusals name sample i's histogram of the kind (to peer, for peer_rtt),
// formatted only then (as microsAt says why).
func (k *kindBounds) sparse(i int, peer string, h quantile.Histogram) (*[]uint64, error) {
	if len(h.Bounds) == 0 && len(h.Counts) == 0 {
		return nil, nil
	}
	if err := h.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", k.where(i, peer), err)
	}
	if !k.set {
		k.bounds, k.set = h.Bounds, true
	} else if !slices.Equal(k.bounds, h.Bounds) {
		return nil, fmt.Errorf("%s: bucket bounds differ from the entry's other %s histograms", k.where(i, peer), k.name)
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
	var rows []*EtcdSample
	var at []int
	for i, s := range samples {
		if s.Etcd != nil {
			present[i] = 1
			rows, at = append(rows, s.Etcd), append(at, i)
		}
	}
	if rows == nil {
		return nil, nil
	}
	w := &wireEtcd{}
	w.Present = runsOf(present)
	wal := kindBounds{name: "wal_fsync"}
	backend := kindBounds{name: "backend_commit"}
	rtt := kindBounds{name: "peer_rtt"}
	peers := map[string]bool{}
	for _, x := range rows {
		for id := range x.PeerRTT {
			peers[id] = true
		}
	}
	if len(peers) > 0 {
		w.PeerRTT = map[string][]*[]uint64{}
	}
	for j, x := range rows {
		i := at[j]
		if k := len(w.MemberID); k > 0 && w.MemberID[k-1].ID == x.MemberID {
			w.MemberID[k-1].N++
		} else {
			w.MemberID = append(w.MemberID, idRun{ID: x.MemberID, N: 1})
		}
		sp, err := wal.sparse(i, "", x.WALFsync)
		if err != nil {
			return nil, err
		}
		w.WALFsync = append(w.WALFsync, sp)
		if sp, err = backend.sparse(i, "", x.BackendCommit); err != nil {
			return nil, err
		}
		w.BackendCommit = append(w.BackendCommit, sp)
		for id := range peers {
			col := w.PeerRTT[id]
			var sp *[]uint64
			if h, ok := x.PeerRTT[id]; ok {
				if sp, err = rtt.sparse(i, id, h); err != nil {
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
	}
	if err := encodeColumns(etcdColumns[:], w.cols[:], "etcd.", rows, at); err != nil {
		return nil, err
	}
	w.Bounds = wireBounds{WALFsync: wal.bounds, BackendCommit: backend.bounds, PeerRTT: rtt.bounds}
	return w, nil
}
