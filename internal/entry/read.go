package entry

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// reader is the entry format's own decoder: one pass over the text, led by
// the format's grammar, that builds the wire form with no reflection and no
// second scan. Every list is held to its limit before the value past it is
// read, every map's keys are counted as they come, and every text is held
// to its limit once read; what it takes and refuses is what the reflective
// reader (encoding/json with scanShape, kept in the tests as the oracle the
// differential tests and fuzz targets compare it with) takes and refuses:
//
//   - JSON's grammar exactly (numbers without leading zeros or a '+', no
//     control characters in strings, nothing after the entry but space);
//   - null where encoding/json reads it as nothing: a whole field (its zero
//     value), an element of a list of numbers, texts or objects (a zero
//     element), a column (no column);
//   - a field name the format does not have, at any depth, is refused, and
//     so is a key twice in one object, a key with escapes, a field name that
//     is not plain lowercase, a voter name that is not a node name and a
//     peer that is not a member ID;
//   - texts with escapes or bytes that are not UTF-8 are read as
//     encoding/json reads them (it unquotes them).
type reader struct {
	s string
	i int
	l Limits
	// n is the entry's n once read and within the limits, else -1: lists
	// read after it are sized for it at once.
	n int
	// a is the memory of a Decoder, nil for a decode of its own.
	a *arena
}

// decodeWire reads raw into the wire form, holding it to l as it goes.
func decodeWire(raw string, l Limits) (wire, error) {
	return decodeWireInto(raw, l, nil)
}

// decodeWireInto is decodeWire with its columns cut from a (nil: afresh).
func decodeWireInto(raw string, l Limits, a *arena) (wire, error) {
	r := reader{s: raw, l: l, n: -1, a: a}
	var w wire
	r.ws()
	if r.i == len(r.s) {
		return w, errors.New("EOF: no entry in the text")
	}
	if !r.null() {
		if err := r.entry(&w); err != nil {
			return w, err
		}
	}
	r.ws()
	if r.i < len(r.s) {
		return w, errors.New("data after the entry object")
	}
	return w, nil
}

func (r *reader) ws() {
	for r.i < len(r.s) {
		switch r.s[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// peek skips space and returns the next byte, 0 at the end.
func (r *reader) peek() byte {
	r.ws()
	if r.i < len(r.s) {
		return r.s[r.i]
	}
	return 0
}

// null consumes a null if one is next.
func (r *reader) null() bool {
	if r.peek() == 'n' && len(r.s)-r.i >= 4 && r.s[r.i:r.i+4] == "null" {
		r.i += 4
		return true
	}
	return false
}

// syntax is the error for text that is not what JSON or the format allows
// at this point.
func (r *reader) syntax(field, want string) error {
	if r.i >= len(r.s) {
		return fmt.Errorf("%s: want %s, got the end of the text (offset %d)", field, want, r.i)
	}
	return fmt.Errorf("%s: want %s, got %s at offset %d", field, want, r.what(), r.i)
}

// what names the value that starts at r.i, for errors.
func (r *reader) what() string {
	if r.i >= len(r.s) {
		return "the end of the text"
	}
	switch c := r.s[r.i]; {
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == '-' || c >= '0' && c <= '9':
		end := r.i + 1
		for end < len(r.s) && end-r.i < 40 && (r.s[end] >= '0' && r.s[end] <= '9' || r.s[end] == '.' || r.s[end] == 'e' || r.s[end] == 'E' || r.s[end] == '-' || r.s[end] == '+') {
			end++
		}
		return "number " + r.s[r.i:end]
	default:
		return strconv.QuoteRune(rune(c))
	}
}

// fieldKey names a map's value in errors: connect_us["node-b"].
func fieldKey(field, key string) string { return fmt.Sprintf("%s[%q]", field, key) }

// fieldAt names a list's element in errors: link[3].
func fieldAt(field string, k int) string { return fmt.Sprintf("%s[%d]", field, k) }

// keyKind says which keys an object may have.
type keyKind int

const (
	keysField   keyKind = iota // the format's field names
	keysVoter                  // node names (connect_us, connect_fail)
	keysMember                 // member IDs (etcd.peer_rtt)
	maxKeysSeen = maxStructKeys
)

// object reads the object that is next and calls fn for each key, with r
// at its value; fn reads the value. Keys are checked before fn sees them:
// no escapes, no repeats, the characters of their kind, and at most most
// of them (a map's limit: voters, peers).
func (r *reader) object(field string, kind keyKind, most int, fn func(key string) error) error {
	if r.peek() != '{' {
		return r.syntax(field, "an object")
	}
	r.i++
	var seen [maxKeysSeen]string
	k := 0
	if r.peek() == '}' {
		r.i++
		return nil
	}
	for {
		if r.peek() != '"' {
			return r.syntax(field, "a key")
		}
		key, esc, err := r.rawString(field)
		if err != nil {
			return err
		}
		if esc {
			return fmt.Errorf("%s: key %q has escapes (field names, node names and member IDs need none)", field, key)
		}
		switch kind {
		case keysField:
			if !plainName(key) {
				return fmt.Errorf("%s: key %q is not a field name of the format (lowercase letters, digits and _)", field, key)
			}
		case keysVoter:
			if !NodeNameChars(key) {
				return fmt.Errorf("%s: key %q is not a node name (a DNS subdomain: lowercase letters, digits, '-' and '.')", field, key)
			}
		case keysMember:
			if !MemberIDChars(key) {
				return fmt.Errorf("%s: key %q is not a member ID (lowercase hex)", field, key)
			}
		}
		for _, s := range seen[:min(k, len(seen))] {
			if s == key {
				return fmt.Errorf("%s: key %q appears twice", field, key)
			}
		}
		k++
		switch {
		case kind == keysVoter && k > most:
			return fmt.Errorf("%s: %d voters or more, over the limit of %d (max_servers %d: a host connects to every server at most)",
				field, k, most, r.l.MaxServers)
		case kind == keysMember && k > most:
			return fmt.Errorf("%s: %d peers or more, over the limit of %d (max_servers %d - 1: the other members)",
				field, k, most, r.l.MaxServers)
		case k > len(seen):
			// No object of the format has more keys than its fields, and
			// fn refuses a key it does not know.
			return fmt.Errorf("%s: %d keys or more, over the %d fields any object of the format has", field, k, maxStructKeys)
		}
		seen[k-1] = key
		if r.peek() != ':' {
			return r.syntax(field, "':' after a key")
		}
		r.i++
		if err := fn(key); err != nil {
			return err
		}
		switch r.peek() {
		case ',':
			r.i++
		case '}':
			r.i++
			return nil
		default:
			return r.syntax(field, "',' or '}'")
		}
	}
}

// unknown is the error for a field name the format does not have.
func unknown(field, key string) error {
	return fmt.Errorf("%s: unknown field %q", field, key)
}

// array reads the array that is next, calling elem for each element with
// its index and r at it, and refuses more than most elements before reading
// the one past them. why says where the limit comes from.
func (r *reader) array(field string, most int, what string, why func() string, elem func(k int) error) error {
	if r.peek() != '[' {
		return r.syntax(field, "an array")
	}
	r.i++
	if r.peek() == ']' {
		r.i++
		return nil
	}
	for k := 0; ; k++ {
		if k >= most {
			return fmt.Errorf("%s: more than %d %s, over the limit of %d (%s)", field, most, what, most, why())
		}
		if err := elem(k); err != nil {
			return err
		}
		switch r.peek() {
		case ',':
			r.i++
		case ']':
			r.i++
			return nil
		default:
			return r.syntax(field, "',' or ']'")
		}
	}
}

// The limits of lists, with their bases for refusals.
func (r *reader) samples() (int, func() string) { return r.l.MaxSamples, r.l.samplesBasis }

func (r *reader) inner() (int, func() string) {
	return 2 * (r.l.MaxBounds + 1), func() string {
		return fmt.Sprintf("a [bucket, count] pair for each of %d bounds and +Inf", r.l.MaxBounds)
	}
}

// sized is the capacity to give a list of at most one value a sample: n
// once it is known.
func (r *reader) sized() int { return max(r.n, 0) }

// rawString reads the string that is next and returns its content as
// written and whether it has escapes. It checks JSON's rules for strings:
// no control characters, escapes of the known kinds.
func (r *reader) rawString(field string) (string, bool, error) {
	r.i++ // "
	start, esc := r.i, false
	for r.i < len(r.s) {
		c := r.s[r.i]
		switch {
		case c == '"':
			r.i++
			return r.s[start : r.i-1], esc, nil
		case c == '\\':
			esc = true
			if r.i+1 >= len(r.s) {
				r.i = len(r.s)
				return "", false, r.syntax(field, "an escape")
			}
			switch r.s[r.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				r.i += 2
			case 'u':
				if r.i+6 > len(r.s) {
					r.i = len(r.s)
					return "", false, r.syntax(field, "four hex digits")
				}
				for _, h := range []byte(r.s[r.i+2 : r.i+6]) {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						r.i += 2
						return "", false, r.syntax(field, "four hex digits")
					}
				}
				r.i += 6
			default:
				r.i++
				return "", false, r.syntax(field, "an escape")
			}
		case c < 0x20:
			return "", false, r.syntax(field, "a character in a string")
		default:
			r.i++
		}
	}
	return "", false, r.syntax(field, "the end of a string")
}

// text reads a string value (null reads as ""), as encoding/json reads it:
// escapes resolved, bytes that are not UTF-8 each replaced by U+FFFD.
func (r *reader) text(field string) (string, error) {
	if r.null() {
		return "", nil
	}
	if r.peek() != '"' {
		return "", r.syntax(field, "a string")
	}
	start := r.i
	s, esc, err := r.rawString(field)
	if err != nil {
		return "", err
	}
	if !esc && utf8.ValidString(s) {
		return s, nil
	}
	// Rare (the format's own texts need neither): encoding/json's own
	// unquoting, so that the two readers agree byte for byte. The result
	// is at most three times the quoted text, itself within MaxBytes.
	var out string
	if err := json.Unmarshal([]byte(r.s[start:r.i]), &out); err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	return out, nil
}

// number reads the JSON number that is next and returns it as written and
// whether it is an integer literal (no fraction, no exponent).
func (r *reader) number(field string) (string, bool, error) {
	r.ws()
	start := r.i
	if r.i < len(r.s) && r.s[r.i] == '-' {
		r.i++
	}
	switch {
	case r.i < len(r.s) && r.s[r.i] == '0':
		r.i++
	case r.i < len(r.s) && r.s[r.i] >= '1' && r.s[r.i] <= '9':
		for r.i < len(r.s) && r.s[r.i] >= '0' && r.s[r.i] <= '9' {
			r.i++
		}
	default:
		r.i = start
		return "", false, r.syntax(field, "a number")
	}
	whole := true
	if r.i < len(r.s) && r.s[r.i] == '.' {
		whole = false
		r.i++
		if !r.digits() {
			return "", false, r.syntax(field, "a digit after '.'")
		}
	}
	if r.i < len(r.s) && (r.s[r.i] == 'e' || r.s[r.i] == 'E') {
		whole = false
		r.i++
		if r.i < len(r.s) && (r.s[r.i] == '+' || r.s[r.i] == '-') {
			r.i++
		}
		if !r.digits() {
			return "", false, r.syntax(field, "a digit in an exponent")
		}
	}
	return r.s[start:r.i], whole, nil
}

func (r *reader) digits() bool {
	start := r.i
	for r.i < len(r.s) && r.s[r.i] >= '0' && r.s[r.i] <= '9' {
		r.i++
	}
	return r.i > start
}

// int reads a whole number field as encoding/json reads it into an int:
// null is 0, a fraction, an exponent or a number past 64 bits is refused.
func (r *reader) int(field string) (int64, error) {
	if r.null() {
		return 0, nil
	}
	if c := r.peek(); c != '-' && (c < '0' || c > '9') {
		return 0, r.syntax(field, "a whole number")
	}
	lit, whole, err := r.number(field)
	if err != nil {
		return 0, err
	}
	v, perr := strconv.ParseInt(lit, 10, 64)
	if !whole || perr != nil {
		return 0, fmt.Errorf("%s: %s is not a whole number of 64 bits", field, lit)
	}
	return v, nil
}

// float reads a number as encoding/json reads it into a float64: null is
// 0, a number past float64's range is refused.
func (r *reader) float(field string) (float64, error) {
	if r.null() {
		return 0, nil
	}
	if c := r.peek(); c != '-' && (c < '0' || c > '9') {
		return 0, r.syntax(field, "a number of type float64")
	}
	lit, _, err := r.number(field)
	if err != nil {
		return 0, err
	}
	v, perr := strconv.ParseFloat(lit, 64)
	if perr != nil {
		return 0, fmt.Errorf("%s: %s is not a number of type float64", field, lit)
	}
	return v, nil
}

// bool reads true or false; null is false.
func (r *reader) bool(field string) (bool, error) {
	switch {
	case r.null():
		return false, nil
	case r.peek() == 't' && len(r.s)-r.i >= 4 && r.s[r.i:r.i+4] == "true":
		r.i += 4
		return true, nil
	case r.peek() == 'f' && len(r.s)-r.i >= 5 && r.s[r.i:r.i+5] == "false":
		r.i += 5
		return false, nil
	}
	return false, r.syntax(field, "true or false")
}

// element reads element k of a column of whole numbers as a sign and a
// magnitude: the columns' own rule, which takes -0 and refuses null, a
// fraction, an exponent and a magnitude past 2^64-1, naming the element.
func (r *reader) element(field string, k int) (neg bool, mag uint64, err error) {
	// Most elements are short plain integers followed by ',' or ']': read
	// them in one pass; anything else (a sign, a fraction, an exponent, a
	// leading zero before more digits, 20 digits or more) goes the long way
	// below, which names what is wrong.
	r.ws()
	if i := r.i; i < len(r.s) && r.s[i] >= '0' && r.s[i] <= '9' {
		var v uint64
		j := i
		for j < len(r.s) && j-i < 19 && r.s[j] >= '0' && r.s[j] <= '9' {
			v = v*10 + uint64(r.s[j]-'0')
			j++
		}
		if j < len(r.s) && (r.s[j] < '0' || r.s[j] > '9') && r.s[j] != '.' && r.s[j] != 'e' && r.s[j] != 'E' && (r.s[i] != '0' || j == i+1) {
			r.i = j
			return false, v, nil
		}
	}
	if c := r.peek(); c != '-' && (c < '0' || c > '9') {
		return false, 0, fmt.Errorf("%s: element %d is not a number", field, k)
	}
	lit, whole, err := r.number(field)
	if err != nil {
		return false, 0, err
	}
	if !whole {
		return false, 0, fmt.Errorf("%s: element %d is not a whole number", field, k)
	}
	digits := lit
	if lit[0] == '-' {
		neg, digits = true, lit[1:]
	}
	for i := 0; i < len(digits); i++ {
		d := uint64(digits[i] - '0')
		if mag > (math.MaxUint64-d)/10 {
			return false, 0, fmt.Errorf("%s: element %d does not fit 64 bits", field, k)
		}
		mag = mag*10 + d
	}
	return neg, mag, nil
}

func (r *reader) intElement(field string, k int) (int64, error) {
	neg, mag, err := r.element(field, k)
	switch {
	case err != nil:
		return 0, err
	case neg && mag <= 1<<63:
		return -int64(mag-1) - 1, nil // -2^63 itself fits
	case !neg && mag <= math.MaxInt64:
		return int64(mag), nil
	}
	return 0, fmt.Errorf("%s: element %d does not fit an int64", field, k)
}

func (r *reader) uintElement(field string, k int) (uint64, error) {
	neg, mag, err := r.element(field, k)
	if err != nil {
		return 0, err
	}
	if neg && mag != 0 {
		return 0, fmt.Errorf("%s: element %d: -%d is not a whole number of at least 0", field, k, mag)
	}
	return mag, nil
}

// ints reads a column of whole numbers; null is no column.
func (r *reader) ints(field string) ([]int64, error) {
	if r.null() {
		return nil, nil
	}
	most, why := r.samples()
	out := take(r.a, int64s, r.sized())[:0]
	err := r.array(field, most, "values", why, func(k int) error {
		v, err := r.intElement(field, k)
		out = append(out, v)
		return err
	})
	return out, err
}

func (r *reader) uints(field string) ([]uint64, error) {
	if r.null() {
		return nil, nil
	}
	most, why := r.samples()
	out := take(r.a, uint64s, r.sized())[:0]
	err := r.array(field, most, "values", why, func(k int) error {
		v, err := r.uintElement(field, k)
		out = append(out, v)
		return err
	})
	return out, err
}

// optInts reads a column of whole numbers and nulls; null is no column.
// The numbers share one backing array.
func (r *reader) optInts(field string) ([]*int64, error) {
	if r.null() {
		return nil, nil
	}
	most, why := r.samples()
	vals := take(r.a, int64s, r.sized())[:0]
	var nulls []int // where the nulls are, few in a real column
	err := r.array(field, most, "values", why, func(k int) error {
		if r.null() {
			vals = append(vals, 0)
			nulls = append(nulls, k)
			return nil
		}
		v, err := r.intElement(field, k)
		vals = append(vals, v)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := take(r.a, ptrs, len(vals))
	for k := range vals {
		if len(nulls) > 0 && nulls[0] == k {
			nulls = nulls[1:]
			continue
		}
		out[k] = &vals[k]
	}
	return out, nil
}

// hists reads a column of sparse histograms and nulls; null is no column.
// The numbers share one backing array.
func (r *reader) hists(field string) ([]*[]uint64, error) {
	if r.null() {
		return nil, nil
	}
	most, why := r.samples()
	innerMost, innerWhy := r.inner()
	// A histogram of the window's deltas has a few nonzero buckets: room
	// for two [bucket, count] pairs a sample, more as a column needs.
	vals := take(r.a, uint64s, 4*r.sized())[:0]
	ends := take(r.a, ints, r.sized())[:0] // where each element's numbers end in vals; -1 for null
	err := r.array(field, most, "values", why, func(k int) error {
		if r.null() {
			ends = append(ends, -1)
			return nil
		}
		err := r.array(field, innerMost, "values", innerWhy, func(j int) error {
			v, err := r.uintElement(field, j)
			vals = append(vals, v)
			return err
		})
		if err != nil {
			return fmt.Errorf("element %d: %w", k, err)
		}
		ends = append(ends, len(vals))
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := take(r.a, histPtrs, len(ends))
	cols := take(r.a, histCols, len(ends))
	start := 0
	for k, end := range ends {
		if end < 0 {
			continue
		}
		cols[k] = vals[start:end:end]
		out[k] = &cols[k]
		start = end
	}
	return out, nil
}

// pair reads a [a, b] pair of whole numbers; anything else, null too, is
// refused.
func (r *reader) pair(field string) (pair, error) {
	var p pair
	if r.peek() != '[' {
		return p, fmt.Errorf("%s: want a pair of two numbers, got %s", field, r.what())
	}
	r.i++
	for k := range p {
		if k > 0 {
			if r.peek() != ',' {
				return p, fmt.Errorf("%s: want a pair of two numbers, got 1", field)
			}
			r.i++
		}
		r.ws()
		neg, v, err := r.element(field, k)
		if err != nil || neg && v != 0 {
			return p, fmt.Errorf("%s: pair element %d: want a whole number of at least 0 and at most 2^64-1", field, k)
		}
		p[k] = v
	}
	switch r.peek() {
	case ']':
		r.i++
		return p, nil
	case ',':
		return p, fmt.Errorf("%s: want a pair of two numbers, got 3 or more", field)
	}
	return p, r.syntax(field, "']' after a pair")
}

// pairs reads a list of pairs (runs or references) of at most most.
func (r *reader) pairs(field string, most int, what string, why func() string) ([]pair, error) {
	if r.null() {
		return nil, nil
	}
	// A run column holds a run or a few, and references are few: room for
	// some, more as a list needs (at most most).
	out := make([]pair, 0, min(r.sized(), most, 4))
	err := r.array(field, most, what, why, func(k int) error {
		p, err := r.pair(field)
		out = append(out, p)
		return err
	})
	return out, err
}

func (r *reader) runs(field string) ([]pair, error) {
	most, why := r.samples()
	return r.pairs(field, most, "values", why)
}

// entry reads the entry object.
func (r *reader) entry(w *wire) error {
	const field = "entry"
	return r.object(field, keysField, 0, func(key string) error {
		var err error
		switch key {
		case "v":
			var v int64
			v, err = r.int(key)
			w.V = int(v)
		case "node":
			w.Node, err = r.text(key)
		case "n":
			var v int64
			v, err = r.int(key)
			w.N = int(v)
			if w.N >= 0 && w.N <= r.l.MaxSamples {
				r.n = w.N
			}
		case "t0":
			w.T0, err = r.text(key)
		case "dt_ms":
			w.DtMs, err = r.ints(key)
		case "restart":
			w.Restart, err = r.restart(key)
		case "link":
			w.Link, err = r.link(key)
		case "connect_us":
			w.ConnectUs, err = r.connectUs(key)
		case "connect_fail":
			w.ConnectFail, err = r.connectFail(key)
		case "errors":
			w.Errors, err = r.pairs(key, r.l.MaxSamples*errorsPerSample, "references", func() string {
				return fmt.Sprintf("%d a sample: etcd, link, memory; %s", errorsPerSample, r.l.samplesBasis())
			})
		case "strings":
			w.Strings, err = r.strings(key)
		case "etcd":
			w.Etcd, err = r.etcd(key)
		case "fsync":
			w.Fsync, err = r.fsync(key)
		case "shrunk":
			var v int64
			v, err = r.int(key)
			w.Shrunk = int(v)
		case "refused":
			w.Refused, err = r.text(key)
		case "withheld":
			w.Withheld, err = r.text(key)
		default:
			k := columnNamed(entryColumns[:], key)
			if k < 0 {
				return unknown(field, key)
			}
			err = r.column(key, entryColumns[k].form, &w.cols[k])
		}
		return err
	})
}

// column reads the column that is next into d, in its form.
func (r *reader) column(field string, f form, d *colData) (err error) {
	switch f {
	case formRuns:
		d.runs, err = r.runs(field)
	case formEach:
		d.vals, err = r.uints(field)
	case formMicros:
		d.opt, err = r.optInts(field)
	}
	return err
}

func (r *reader) restart(field string) ([]int, error) {
	if r.null() {
		return nil, nil
	}
	most, why := r.samples()
	var out []int
	err := r.array(field, most, "values", why, func(k int) error {
		v, err := r.int(fieldAt(field, k))
		out = append(out, int(v))
		return err
	})
	return out, err
}

func (r *reader) link(field string) ([]linkRun, error) {
	if r.null() {
		return nil, nil
	}
	most, why := r.samples()
	var out []linkRun
	err := r.array(field, most, "values", why, func(k int) error {
		var run linkRun
		if !r.null() {
			at := fieldAt(field, k)
			if err := r.object(at, keysField, 0, func(key string) error {
				var err error
				switch key {
				case "if":
					run.If, err = r.text(at + ".if")
				case "class":
					run.Class, err = r.text(at + ".class")
				case "n":
					var v int64
					v, err = r.int(at + ".n")
					run.N = int(v)
				default:
					return unknown(at, key)
				}
				return err
			}); err != nil {
				return err
			}
		}
		out = append(out, run)
		return nil
	})
	return out, err
}

func (r *reader) connectUs(field string) (map[string][]*int64, error) {
	if r.null() {
		return nil, nil
	}
	out := wireUsMap(r.a)
	err := r.object(field, keysVoter, r.l.MaxConnectTargets, func(key string) error {
		col, err := r.optInts(fieldKey(field, key))
		out[key] = col
		return err
	})
	return out, err
}

func (r *reader) connectFail(field string) (map[string][]pair, error) {
	if r.null() {
		return nil, nil
	}
	out := map[string][]pair{}
	err := r.object(field, keysVoter, r.l.MaxConnectTargets, func(key string) error {
		ps, err := r.runs(fieldKey(field, key))
		out[key] = ps
		return err
	})
	return out, err
}

func (r *reader) strings(field string) ([]string, error) {
	if r.null() {
		return nil, nil
	}
	var out []string
	err := r.array(field, r.l.MaxStrings, "texts", func() string {
		return "a distinct text per sample of the longest entry, " + r.l.samplesBasis()
	}, func(k int) error {
		s, err := r.text(fieldAt(field, k))
		out = append(out, s)
		return err
	})
	return out, err
}

func (r *reader) fsync(field string) (*wireFsync, error) {
	if r.null() {
		return nil, nil
	}
	f := &wireFsync{}
	err := r.object(field, keysField, 0, func(key string) error {
		name := field + "." + key
		var err error
		switch key {
		case "at":
			f.At, err = r.text(name)
		case "dir":
			f.Dir, err = r.text(name)
		case "filesystem":
			f.Filesystem, err = r.text(name)
		case "measured_disk":
			f.MeasuredDisk, err = r.bool(name)
		case "writes":
			var v int64
			v, err = r.int(name)
			f.Writes = int(v)
		case "p99_us":
			f.P99Us, err = r.int(name)
		case "max_us":
			f.MaxUs, err = r.int(name)
		case "err":
			f.Err, err = r.text(name)
		case "skipped":
			f.Skipped, err = r.text(name)
		default:
			return unknown(field, key)
		}
		return err
	})
	return f, err
}

func (r *reader) etcd(field string) (*wireEtcd, error) {
	if r.null() {
		return nil, nil
	}
	x := &wireEtcd{}
	err := r.object(field, keysField, 0, func(key string) error {
		name := field + "." + key
		var err error
		switch key {
		case "present":
			x.Present, err = r.runs(name)
		case "member_id":
			x.MemberID, err = r.memberIDs(name)
		case "wal_fsync":
			x.WALFsync, err = r.hists(name)
		case "backend_commit":
			x.BackendCommit, err = r.hists(name)
		case "peer_rtt":
			if r.null() {
				return nil
			}
			x.PeerRTT = map[string][]*[]uint64{}
			err = r.object(name, keysMember, r.l.MaxPeers, func(id string) error {
				col, err := r.hists(fieldKey(name, id))
				x.PeerRTT[id] = col
				return err
			})
		case "err":
			x.Err, err = r.runs(name)
		case "bounds":
			err = r.bounds(name, &x.Bounds)
		default:
			k := columnNamed(etcdColumns[:], key)
			if k < 0 {
				return unknown(field, key)
			}
			err = r.column(name, etcdColumns[k].form, &x.cols[k])
		}
		return err
	})
	return x, err
}

func (r *reader) memberIDs(field string) ([]idRun, error) {
	if r.null() {
		return nil, nil
	}
	most, why := r.samples()
	var out []idRun
	err := r.array(field, most, "values", why, func(k int) error {
		var run idRun
		if !r.null() {
			at := fieldAt(field, k)
			if err := r.object(at, keysField, 0, func(key string) error {
				var err error
				switch key {
				case "id":
					run.ID, err = r.text(at + ".id")
				case "n":
					var v int64
					v, err = r.int(at + ".n")
					run.N = int(v)
				default:
					return unknown(at, key)
				}
				return err
			}); err != nil {
				return err
			}
		}
		out = append(out, run)
		return nil
	})
	return out, err
}

func (r *reader) bounds(field string, b *wireBounds) error {
	if r.null() {
		return nil
	}
	return r.object(field, keysField, 0, func(key string) error {
		name := field + "." + key
		var list *[]float64
		switch key {
		case "wal_fsync":
			list = &b.WALFsync
		case "backend_commit":
			list = &b.BackendCommit
		case "peer_rtt":
			list = &b.PeerRTT
		default:
			return unknown(field, key)
		}
		if r.null() {
			return nil
		}
		*list = []float64{}
		return r.array(name, r.l.MaxBounds, "bounds", func() string { return boundsBasis }, func(k int) error {
			v, err := r.float(fieldAt(name, k))
			*list = append(*list, v)
			return err
		})
	})
}
