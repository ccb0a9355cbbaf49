package decide

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
)

// MaxStatusBytes is the most bytes Marshal writes. docs/facts.md: "A ConfigMap
// holds at most 1 MiB (1,048,576 bytes) of data; the API server refuses
// more." The document's key is taken off too, so that it fits whether the
// key's length is counted or not.
const MaxStatusBytes = 1<<20 - len(StatusKey)

// Forms of the status document, from the whole decision to the least that is
// published. Each keeps the verdicts and the decision before any host's
// details, and drops more than the one before; Marshal writes the first that
// fits (docs/status.md, "Forms").
const (
	// FormFull is the whole decision.
	FormFull = "full"
	// FormFailing drops the hosts' passing reasons.
	FormFailing = "failing"
	// FormDeciding keeps of each host only the reason its table line shows
	// (DecidingReason).
	FormDeciding = "deciding"
	// FormVerdicts keeps no host reasons, and of the decision's candidates
	// only the chosen standby and the closing "none is fit".
	FormVerdicts = "verdicts"
	// FormSomeHosts is FormVerdicts with hosts left out: others first, then
	// standbys, then learners, voters last, by name within a role.
	FormSomeHosts = "some_hosts"
	// FormBare keeps no hosts and no decision reasons: the action, out and in,
	// the settings and the memory (its voters too, unless they do not fit).
	FormBare = "bare"
)

// Dropped says how many of one part of the full decision a reduced form
// left out.
type Dropped struct {
	// Part is host_reasons, candidate_reasons, hosts, decision_reasons or
	// memory_voters.
	Part  string `json:"part"`
	Count int    `json:"count"`
}

// Parts a reduced form drops.
const (
	PartHostReasons      = "host_reasons"
	PartCandidateReasons = "candidate_reasons"
	PartHosts            = "hosts"
	PartDecisionReasons  = "decision_reasons"
	PartMemoryVoters     = "memory_voters"
)

// minShared is the shortest text worth a place in the table: a reference
// ("basis_ref": 12) costs about as much as a text this long.
const minShared = 16

// MarshalWithin writes the status document in at most limit bytes: the first
// form that fits, indented when that fits, else with the texts that repeat
// written once, else also without indentation. It fails only when even the
// bare form does not fit, which the settings alone would have to fill.
func (s Status) MarshalWithin(limit int) ([]byte, error) {
	for _, form := range []string{FormFull, FormFailing, FormDeciding, FormVerdicts} {
		if b, ok, err := s.reduced(form).fit(limit); err != nil || ok {
			return b, err
		}
	}
	if b, ok, err := s.someHosts(limit); err != nil || ok {
		return b, err
	}
	bare := s.reduced(FormBare)
	if b, ok, err := bare.fit(limit); err != nil || ok {
		return b, err
	}
	if n := len(bare.Memory.Voters); n > 0 {
		bare.Memory.Voters = []string{}
		bare.Dropped = append(bare.Dropped, Dropped{PartMemoryVoters, n})
		if b, ok, err := bare.fit(limit); err != nil || ok {
			return b, err
		}
	}
	size := -1
	if b, err := compact(bare); err == nil {
		size = len(b) + 1
	}
	return nil, fmt.Errorf("encode status: its bare form (no hosts, no reasons, no memory voters) is %d bytes, over the limit of %d", size, limit)
}

// reduced is a copy of s in form, sharing its texts. The reasons' slices are
// new; the Status s is not changed.
func (s Status) reduced(form string) Status {
	r := s
	r.Form, r.Texts = form, nil
	r.Dropped = nil
	if form == FormFull {
		return r
	}
	dropped := 0
	r.Hosts = make([]Host, len(s.Hosts))
	for i, h := range s.Hosts {
		var keep []Reason
		switch form {
		case FormFailing:
			for _, x := range h.Reasons {
				if !x.OK {
					keep = append(keep, x)
				}
			}
		case FormDeciding:
			if x, ok := DecidingReason(h); ok {
				keep = []Reason{x}
			}
		}
		dropped += len(h.Reasons) - len(keep)
		h.Reasons = append([]Reason{}, keep...)
		r.Hosts[i] = h
	}
	if dropped > 0 {
		r.Dropped = append(r.Dropped, Dropped{PartHostReasons, dropped})
	}
	switch form {
	case FormVerdicts:
		d := s.Decision
		d.Reasons = []Reason{}
		n := 0
		for _, x := range s.Decision.Reasons {
			if x.Signal == StepCandidate && x.Subject != "" && x.Subject != d.In {
				n++
				continue
			}
			d.Reasons = append(d.Reasons, x)
		}
		r.Decision = d
		if n > 0 {
			r.Dropped = append(r.Dropped, Dropped{PartCandidateReasons, n})
		}
	case FormBare:
		r.Hosts = []Host{}
		if len(s.Hosts) > 0 {
			r.Dropped = append(r.Dropped, Dropped{PartHosts, len(s.Hosts)})
		}
		d := s.Decision
		d.Out, d.In, d.Reasons = clip(d.Out), clip(d.In), []Reason{}
		if n := len(s.Decision.Reasons); n > 0 {
			r.Dropped = append(r.Dropped, Dropped{PartDecisionReasons, n})
		}
		r.Decision = d
	}
	return r
}

// someHosts is the verdicts form with as many hosts as fit, kept in the order
// voters, learners, standbys, others, and by name within a role.
func (s Status) someHosts(limit int) ([]byte, bool, error) {
	r := s.reduced(FormVerdicts)
	r.Form = FormSomeHosts
	all := r.Hosts
	r.Hosts = []Host{}
	r.Dropped = append(r.Dropped, Dropped{PartHosts, len(all)})
	shared := r
	shared.share()
	base, err := compact(shared)
	if err != nil {
		return nil, false, err
	}
	rank := map[Role]int{RoleVoter: 0, RoleLearner: 1, RoleStandby: 2, RoleOther: 3}
	order := slices.Clone(all)
	slices.SortStableFunc(order, func(a, b Host) int {
		return cmp.Or(cmp.Compare(rank[a.Role], rank[b.Role]), cmp.Compare(a.Name, b.Name))
	})
	// The compact document with shared texts is the base, its final newline,
	// and each host's compact JSON with a comma; the hosts keep no reasons,
	// so the table does not change with them, and the count dropped only
	// shrinks.
	size := len(base) + 1
	var kept []Host
	for _, h := range order {
		b, err := compact(h)
		if err != nil {
			return nil, false, err
		}
		if size+len(b)+1 > limit {
			break
		}
		size += len(b) + 1
		kept = append(kept, h)
	}
	slices.SortFunc(kept, func(a, b Host) int { return cmp.Compare(a.Name, b.Name) })
	r.Hosts = append([]Host{}, kept...)
	r.Dropped[len(r.Dropped)-1].Count = len(all) - len(kept)
	if r.Dropped[len(r.Dropped)-1].Count == 0 {
		r.Dropped = r.Dropped[:len(r.Dropped)-1]
	}
	return r.fit(limit)
}

// fit encodes s in at most limit bytes if it can: indented with each reason's
// own texts, else indented with the shared texts, else compact with them.
func (s Status) fit(limit int) ([]byte, bool, error) {
	plain, err := compactWithin(s, limit)
	if err != nil {
		return nil, false, err
	}
	// Indented only when that fits: a large fleet's document does not, and
	// building it to find out was a document and a half of garbage.
	if plain != nil && indentedLen(plain) <= limit {
		return indent(plain), true, nil
	}
	s.share()
	shared, err := compactWithin(s, limit)
	if err != nil || shared == nil {
		return nil, false, err
	}
	if indentedLen(shared) <= limit {
		return indent(shared), true, nil
	}
	b := append(shared, '\n')
	return b, len(b) <= limit, nil
}

// indentedLen is len(indent(compact)) without building it: json.Indent's
// rules (a new line and two spaces a level after an opening bracket that is
// not closed at once, after each comma and before each closing bracket; a
// space after each colon) counted over compact JSON, which has no space
// outside its strings.
func indentedLen(compact []byte) int {
	n, depth, open, inString := 0, 0, false, false
	for i := 0; i < len(compact); i++ {
		c := compact[i]
		if inString {
			n++
			if c == '\\' {
				i++
				n++
			} else if c == '"' {
				inString = false
			}
			continue
		}
		if open && c != '}' && c != ']' {
			open = false
			depth++
			n += 1 + 2*depth
		}
		switch c {
		case '"':
			inString = true
			n++
		case '{', '[':
			open = true
			n++
		case ',':
			n += 2 + 2*depth
		case ':':
			n += 2
		case '}', ']':
			if open {
				open = false
			} else {
				depth--
				n += 1 + 2*depth
			}
			n++
		default:
			n++
		}
	}
	return n + 1 // indent's final newline
}

func indent(compact []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(compact) * 3 / 2)
	_ = json.Indent(&b, compact, "", "  ") // compact is valid JSON
	b.WriteByte('\n')
	return b.Bytes()
}

func compact(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode status: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// compactWithin encodes s without indentation, host by host, and gives up
// (nil) as soon as the document passes limit, so that a decision far over
// the limit is never encoded whole.
func compactWithin(s Status, limit int) ([]byte, error) {
	hosts := s.Hosts
	s.Hosts = []Host{}
	head, err := compact(s)
	if err != nil {
		return nil, err
	}
	// Every text in head is a JSON string, whose quotes are escaped, so the
	// top-level field is the only place this can occur.
	const empty = `"hosts":[]`
	at := bytes.Index(head, []byte(empty))
	if at < 0 {
		return nil, fmt.Errorf("encode status: no hosts field in %.80s", head)
	}
	if len(head) > limit {
		return nil, nil
	}
	tail := head[at+len(empty)-1:]
	out := make([]byte, 0, min(limit, len(head)+len(hosts)*512))
	out = append(out, head[:at+len(empty)-1]...)
	for i, h := range hosts {
		b, err := compact(h)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, b...)
		if len(out)+len(tail) > limit {
			return nil, nil
		}
	}
	out = append(out, tail...)
	return out, nil
}

// share writes once, in Texts, every basis and detail at least minShared
// bytes long that more than one reason holds, and makes those reasons name
// it by index: in order of first appearance, hosts before the decision.
func (s *Status) share() {
	count := map[string]int{}
	s.eachReason(func(r *Reason) {
		count[r.Basis]++
		count[r.Detail]++
	})
	index := map[string]int{}
	s.Texts = nil
	ref := func(text *string, at **int) {
		if len(*text) < minShared || count[*text] < 2 {
			return
		}
		i, ok := index[*text]
		if !ok {
			i = len(s.Texts)
			index[*text] = i
			s.Texts = append(s.Texts, *text)
		}
		*at = &i
		*text = ""
	}
	// The hosts and reasons are copied before they are changed: s shares
	// its slices with the Status it was reduced from.
	s.Hosts = slices.Clone(s.Hosts)
	for i := range s.Hosts {
		s.Hosts[i].Reasons = slices.Clone(s.Hosts[i].Reasons)
	}
	s.Decision.Reasons = slices.Clone(s.Decision.Reasons)
	s.eachReason(func(r *Reason) {
		ref(&r.Basis, &r.BasisRef)
		ref(&r.Detail, &r.DetailRef)
	})
}

func (s *Status) eachReason(f func(*Reason)) {
	for i := range s.Hosts {
		for j := range s.Hosts[i].Reasons {
			f(&s.Hosts[i].Reasons[j])
		}
	}
	for j := range s.Decision.Reasons {
		f(&s.Decision.Reasons[j])
	}
}

// resolveTexts puts the table's texts back into the reasons that name them.
func (s *Status) resolveTexts() error {
	var err error
	get := func(at **int, text *string, what string) {
		if *at == nil || err != nil {
			return
		}
		i := **at
		if i < 0 || i >= len(s.Texts) {
			err = fmt.Errorf("%s %d: the texts table has %d", what, i, len(s.Texts))
			return
		}
		*text, *at = s.Texts[i], nil
	}
	s.eachReason(func(r *Reason) {
		get(&r.BasisRef, &r.Basis, "basis_ref")
		get(&r.DetailRef, &r.Detail, "detail_ref")
	})
	s.Texts = nil
	return err
}
