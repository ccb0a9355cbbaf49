package entry

import (
	"errors"
	"fmt"
	"strings"
)

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

// plainName reports whether k is a field name as the format writes them.
func plainName(k string) bool {
	return every(k, func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' })
}

// NodeNameChars reports whether k is made of the characters a Kubernetes
// node name (a DNS subdomain) may have, and is not empty. The format refuses
// voter names of any other; JSON would have to escape some (Go writes & as
// \u0026), and a name written two ways would dodge the duplicate check.
func NodeNameChars(k string) bool {
	return every(k, func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' })
}

// MemberIDChars reports whether k is lowercase hex, as etcd writes member
// IDs (FACTS.md), and not empty.
func MemberIDChars(k string) bool {
	return every(k, func(c byte) bool { return c >= 'a' && c <= 'f' || c >= '0' && c <= '9' })
}

// every reports whether k is not empty and each of its bytes is ok.
func every(k string, ok func(c byte) bool) bool {
	for i := 0; i < len(k); i++ {
		if !ok(k[i]) {
			return false
		}
	}
	return k != ""
}
