package entry

// The reflective reader this package had before its own (read.go): a
// shape scan, encoding/json into wireIn with the numeric columns raw, and
// a hand reader of those columns. It stays here, in the tests only, as the
// oracle the differential tests and fuzz target hold the new reader to.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
)

// decodeReflective is DecodeLimited as it was before read.go.
func decodeReflective(raw string, l Limits) (Entry, error) {
	if len(raw) > l.MaxBytes {
		return Entry{}, fmt.Errorf("decode entry: %d bytes, over the limit of %d (%s)", len(raw), l.MaxBytes, l.bytesBasis())
	}
	if err := scanShape(raw, l); err != nil {
		return Entry{}, fmt.Errorf("decode entry: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	var in wireIn
	cols, err := withColumns(dec, &in, entryColumns[:])
	if err != nil {
		return Entry{}, fmt.Errorf("decode entry: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Entry{}, errors.New("decode entry: data after the entry object")
	}
	w, err := in.toWire(l, cols)
	if err != nil {
		return Entry{}, fmt.Errorf("decode entry: %w", err)
	}
	if err := w.checkSizes(l); err != nil {
		return Entry{}, fmt.Errorf("decode entry: %w", err)
	}
	e, err := fromWire(w, l)
	if err != nil {
		return Entry{}, fmt.Errorf("decode entry: %w", err)
	}
	return e, nil
}

// UnmarshalJSON reads [a,b] by hand, without allocating: runs are the most
// numerous values of an entry, and a json.Unmarshal per pair made them most
// of a decision's time.
func (p *pair) UnmarshalJSON(b []byte) error {
	c := cols{field: "pair", b: b}
	if c.peek() != '[' {
		return fmt.Errorf("want a pair of two numbers, got %.40s", b)
	}
	c.i++
	for k := range p {
		if k > 0 {
			if c.peek() != ',' {
				return fmt.Errorf("want a pair of two numbers, got %.40s", b)
			}
			c.i++
		}
		c.peek()
		start := c.i
		neg, v, err := c.digits(k)
		if err != nil || neg && v != 0 {
			for c.i < len(c.b) && c.b[c.i] != ',' && c.b[c.i] != ']' {
				c.i++
			}
			return fmt.Errorf("pair element %d: want a whole number, got %q", k, bytes.TrimSpace(c.b[min(start, len(c.b)):c.i]))
		}
		p[k] = v
	}
	switch c.peek() {
	case ']':
	case ',':
		return fmt.Errorf("want a pair of two numbers, got %d", 2+bytes.Count(c.b[c.i:], []byte{','}))
	default:
		return fmt.Errorf("want a pair of two numbers, got %.40s", b)
	}
	c.i++
	if c.peek() != 0 {
		return fmt.Errorf("want a pair of two numbers, got %.40s", b)
	}
	return nil
}

// The numeric columns are most of an entry's bytes, and encoding/json's
// reflection made reading them most of a decision's time. Decode therefore
// takes them as raw JSON and reads them here by hand, with the field's name in
// every error; everything else, and all of encoding, stays encoding/json's.

// wireIn is wire as Decode reads it, but for its columns (withColumns): the
// numeric columns raw, and the etcd object raw, read as wireEtcdIn with its
// columns in turn.
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
	Errors      []pair                     `json:"errors,omitempty"`
	Strings     []string                   `json:"strings,omitempty"`
	Etcd        json.RawMessage            `json:"etcd,omitempty"`
	Fsync       *wireFsync                 `json:"fsync,omitempty"`
	Shrunk      int                        `json:"shrunk,omitempty"`
	Refused     string                     `json:"refused,omitempty"`
	Withheld    string                     `json:"withheld,omitempty"`
}

type wireEtcdIn struct {
	Present       []pair                     `json:"present"`
	MemberID      []idRun                    `json:"member_id"`
	WALFsync      json.RawMessage            `json:"wal_fsync"`
	BackendCommit json.RawMessage            `json:"backend_commit"`
	PeerRTT       map[string]json.RawMessage `json:"peer_rtt,omitempty"`
	Err           []pair                     `json:"err,omitempty"`
	Bounds        wireBounds                 `json:"bounds"`
}

// withColumns decodes the object that is next in dec as encoding/json
// decodes into a struct: into own, a pointer to a struct of the object's
// own fields, and a json.RawMessage field for each of cols, whose values
// it returns. The struct is made here, from own's fields and the columns'
// names, so that the oracle reads every column the table has.
func withColumns[S any](dec *json.Decoder, own any, cols []column[S]) ([]json.RawMessage, error) {
	ownType := reflect.TypeOf(own).Elem()
	fields := make([]reflect.StructField, 0, ownType.NumField()+len(cols))
	for i := range ownType.NumField() {
		fields = append(fields, ownType.Field(i))
	}
	for k := range cols {
		fields = append(fields, reflect.StructField{Name: fmt.Sprintf("Column%d", k), Type: reflect.TypeFor[json.RawMessage](),
			Tag: reflect.StructTag(fmt.Sprintf("json:%q", cols[k].name))})
	}
	v := reflect.New(reflect.StructOf(fields)).Elem()
	if err := dec.Decode(v.Addr().Interface()); err != nil {
		return nil, err
	}
	for i := range ownType.NumField() {
		reflect.ValueOf(own).Elem().Field(i).Set(v.Field(i))
	}
	raws := make([]json.RawMessage, len(cols))
	for k := range cols {
		raws[k] = v.Field(ownType.NumField() + k).Interface().(json.RawMessage)
	}
	return raws, nil
}

// readColumns reads the raw columns into data, each in its form; where
// prefixes their names in errors.
func readColumns[S any](where string, cols []column[S], raws []json.RawMessage, data []colData, col colLimit) error {
	for k := range cols {
		field, raw, d := where+cols[k].name, raws[k], &data[k]
		var err error
		switch cols[k].form {
		case formRuns:
			if len(raw) > 0 {
				if err = json.Unmarshal(raw, &d.runs); err != nil {
					err = fmt.Errorf("%s: %w", field, err)
				}
			}
		case formEach:
			d.vals, err = readUints(field, raw, col)
		case formMicros:
			d.opt, err = readOptInts(field, raw, col)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// toWire reads the raw columns (cols, entryColumns') into wire, refusing a
// column longer than l.MaxSamples and a sparse histogram longer than its
// buckets allow before they grow past them.
func (in *wireIn) toWire(l Limits, cols []json.RawMessage) (wire, error) {
	col := colLimit{max: l.MaxSamples, l: &l}
	hist := colLimit{max: 2 * (l.MaxBounds + 1), l: &l, hist: true}
	var w wire
	w.V, w.Node, w.N, w.T0, w.Restart, w.Link, w.ConnectFail = in.V, in.Node, in.N, in.T0, in.Restart, in.Link, in.ConnectFail
	w.Errors, w.Strings, w.Fsync, w.Shrunk, w.Refused, w.Withheld = in.Errors, in.Strings, in.Fsync, in.Shrunk, in.Refused, in.Withheld
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
	if err := readColumns("", entryColumns[:], cols, w.cols[:], col); err != nil {
		return w, err
	}
	if len(in.Etcd) == 0 || string(in.Etcd) == "null" {
		return w, nil
	}
	dec := json.NewDecoder(bytes.NewReader(in.Etcd))
	dec.DisallowUnknownFields()
	var e wireEtcdIn
	etcdCols, err := withColumns(dec, &e, etcdColumns[:])
	if err != nil {
		return w, fmt.Errorf("etcd: %w", err)
	}
	w.Etcd = &wireEtcd{}
	w.Etcd.Present, w.Etcd.MemberID, w.Etcd.Err, w.Etcd.Bounds = e.Present, e.MemberID, e.Err, e.Bounds
	if err := readColumns("etcd.", etcdColumns[:], etcdCols, w.Etcd.cols[:], col); err != nil {
		return w, err
	}
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

// scanShape walks the raw entry once, before encoding/json allocates
// anything for it, and refuses what encoding/json would take but the format
// never has:
//
//   - nesting deeper than the format's (maxDepth);
//   - a key twice in one object: encoding/json keeps the last silently,
//     where another reader (jq, a person) may see the first;
//   - a field name that is not plain lowercase ASCII: encoding/json matches
//     struct fields without regard to case, and with Unicode folding ("ſ" is
//     "s"), so one text could read two ways;
//   - a key with escapes: node names, member IDs and field names need none,
//     and a key written two ways would dodge the duplicate check;
//   - more keys in one object than the format has, or more voters or peers
//     than the limits allow (the maps' keys are counted here, before
//     encoding/json builds the maps).
//
// It does not validate the JSON: on malformed text it gives up quietly and
// leaves the syntax error to encoding/json, which reports it with its offset.
func scanShape(raw string, l Limits) error {
	s := shape{b: raw, l: l, keys: make([]string, 0, 2*maxStructKeys)}
	err := s.value(kindStruct, 0, listSamples)
	if errors.Is(err, errSyntax) {
		return nil
	}
	return err
}

// errSyntax makes scanShape give up; encoding/json reports the error.
var errSyntax = errors.New("syntax")

type objKind int

const (
	kindStruct objKind = iota
	kindConnectMap
	kindPeerMap
)

type shape struct {
	b    string
	i    int
	l    Limits
	path [maxDepth + 1]pathKey // the keys leading to the value being read
	keys []string              // the keys of the objects being read, innermost last
}

func (s *shape) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// pathKey is one key on the way to a value: a field name, or a map's key.
type pathKey struct {
	key    string
	mapKey bool
}

// field names the value at depth for an error: etcd.peer_rtt["a1"].
func (s *shape) field(depth int) string {
	var b strings.Builder
	for _, k := range s.path[:depth] {
		switch {
		case k.key == "":
		case k.mapKey:
			fmt.Fprintf(&b, "[%q]", k.key)
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(k.key)
		}
	}
	if b.Len() == 0 {
		return "entry"
	}
	return b.String()
}

// str reads the string at s.i (its opening quote) and returns its raw
// content and whether it has escapes.
func (s *shape) str() (string, bool, error) {
	s.i++
	start, esc := s.i, false
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			esc = true
			s.i += 2
			continue
		case '"':
			s.i++
			return s.b[start : s.i-1], esc, nil
		}
		s.i++
	}
	return "", false, errSyntax
}

// listKind says which limit an array is held to, by where it is.
type listKind int

const (
	listSamples listKind = iota // a column, runs or references: at most a value a sample
	listErrors                  // errors: errorsPerSample a sample
	listStrings                 // strings: MaxStrings
	listBounds                  // etcd.bounds.*: MaxBounds
	listInner                   // an array in an array (a sparse histogram, a pair)
)

// most is the limit of a list.
func (s *shape) most(k listKind) int {
	switch k {
	case listErrors:
		return s.l.MaxSamples * errorsPerSample
	case listStrings:
		return s.l.MaxStrings
	case listBounds:
		return s.l.MaxBounds
	case listInner:
		return 2 * (s.l.MaxBounds + 1)
	}
	return s.l.MaxSamples
}

// tooLong is the error for a list of kind k over its limit.
func (s *shape) tooLong(k listKind, depth int) error {
	l, most := s.l, s.most(k)
	what, why := "values", l.samplesBasis()
	switch k {
	case listErrors:
		what, why = "references", fmt.Sprintf("%d a sample: etcd, link, memory; %s", errorsPerSample, l.samplesBasis())
	case listStrings:
		what, why = "texts", "a distinct text per sample of the longest entry, "+l.samplesBasis()
	case listBounds:
		what, why = "bounds", boundsBasis
	case listInner:
		why = fmt.Sprintf("a [bucket, count] pair for each of %d bounds and +Inf", l.MaxBounds)
	}
	return fmt.Errorf("%s: more than %d %s, over the limit of %d (%s)", s.field(depth), most, what, most, why)
}

// value reads one value at the given depth (the number of enclosing
// containers); an object is read as the kind given, an array held to the
// limit of list.
func (s *shape) value(kind objKind, depth int, list listKind) error {
	s.ws()
	if s.i >= len(s.b) {
		return errSyntax
	}
	switch s.b[s.i] {
	case '{':
		if depth >= maxDepth {
			return fmt.Errorf("%s: nested deeper than the format's %d levels", s.field(depth), maxDepth)
		}
		return s.object(kind, depth+1)
	case '[':
		if depth >= maxDepth {
			return fmt.Errorf("%s: nested deeper than the format's %d levels", s.field(depth), maxDepth)
		}
		s.i++
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ']' {
			s.i++
			return nil
		}
		most := s.most(list)
		for k := 0; ; k++ {
			if k >= most {
				return s.tooLong(list, depth)
			}
			if err := s.value(kindStruct, depth+1, listInner); err != nil {
				return err
			}
			s.ws()
			if s.i >= len(s.b) {
				return errSyntax
			}
			switch s.b[s.i] {
			case ',':
				s.i++
			case ']':
				s.i++
				return nil
			default:
				return errSyntax
			}
		}
	case '"':
		_, _, err := s.str()
		return err
	}
	// A number or a literal: encoding/json reads it.
	start := s.i
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ',', ']', '}', ' ', '\t', '\n', '\r':
			if s.i == start {
				return errSyntax
			}
			return nil
		}
		s.i++
	}
	return nil
}

func (s *shape) object(kind objKind, depth int) error {
	s.i++ // {
	first := len(s.keys)
	defer func() { s.keys = s.keys[:first] }()
	for {
		s.ws()
		if s.i >= len(s.b) {
			return errSyntax
		}
		if s.b[s.i] == '}' {
			s.i++
			return nil
		}
		if len(s.keys) > first {
			if s.b[s.i] != ',' {
				return errSyntax
			}
			s.i++
			s.ws()
		}
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return errSyntax
		}
		key, esc, err := s.str()
		if err != nil {
			return err
		}
		if esc {
			return fmt.Errorf("%s: key %q has escapes (field names, node names and member IDs need none)", s.field(depth-1), key)
		}
		if kind == kindStruct && !plainName(key) {
			return fmt.Errorf("%s: key %q is not a field name of the format (lowercase letters, digits and _)", s.field(depth-1), key)
		}
		if kind == kindConnectMap && !NodeNameChars(key) {
			return fmt.Errorf("%s: key %q is not a node name (a DNS subdomain: lowercase letters, digits, '-' and '.')", s.field(depth-1), key)
		}
		if kind == kindPeerMap && !MemberIDChars(key) {
			return fmt.Errorf("%s: key %q is not a member ID (lowercase hex)", s.field(depth-1), key)
		}
		for _, k := range s.keys[first:] {
			if k == key {
				return fmt.Errorf("%s: key %q appears twice", s.field(depth-1), key)
			}
		}
		s.keys = append(s.keys, key)
		switch n := len(s.keys) - first; {
		case kind == kindStruct && n > maxStructKeys:
			return fmt.Errorf("%s: %d keys or more, over the %d fields any object of the format has", s.field(depth-1), n, maxStructKeys)
		case kind == kindConnectMap && n > s.l.MaxConnectTargets:
			return fmt.Errorf("%s: %d voters or more, over the limit of %d (max_servers %d: a host connects to every server at most)",
				s.field(depth-1), n, s.l.MaxConnectTargets, s.l.MaxServers)
		case kind == kindPeerMap && n > s.l.MaxPeers:
			return fmt.Errorf("%s: %d peers or more, over the limit of %d (max_servers %d - 1: the other members)",
				s.field(depth-1), n, s.l.MaxPeers, s.l.MaxServers)
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return errSyntax
		}
		s.i++
		child := kindStruct
		switch {
		case depth == 1 && (key == "connect_us" || key == "connect_fail"):
			child = kindConnectMap
		case depth == 2 && s.path[0].key == "etcd" && key == "peer_rtt":
			child = kindPeerMap
		}
		s.path[depth-1] = pathKey{key: key, mapKey: kind != kindStruct}
		list := listSamples
		switch {
		case depth == 1 && key == "errors":
			list = listErrors
		case depth == 1 && key == "strings":
			list = listStrings
		case depth == 3 && s.path[1].key == "bounds":
			list = listBounds
		}
		err = s.value(child, depth, list)
		s.path[depth-1] = pathKey{}
		if err != nil {
			return err
		}
	}
}
