package status

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
	// FormFailing drops the hosts' passing reasons but the one that decides
	// a fit host's verdict (DecidingReason), so its table reads as the
	// full document's.
	FormFailing = "failing"
	// FormDeciding keeps of each host only the reason its table line shows
	// (DecidingReason).
	FormDeciding = "deciding"
	// FormVerdicts keeps no host reasons, and of the decision's candidates
	// only the chosen standby and the closing "none is fit".
	FormVerdicts = "verdicts"
	// FormSomeLinks is FormVerdicts with rows of the link matrix left out:
	// those of the hosts that are not etcd members, others first, then
	// standbys, by name within a role (partial).
	FormSomeLinks = "some_links"
	// FormSomeHosts is FormVerdicts with hosts left out: others first, then
	// standbys, then learners, voters last, by name within a role; only the
	// members kept keep their rows of the link matrix (partial).
	FormSomeHosts = "some_hosts"
	// FormBare keeps no hosts, no decision reasons and no links: the action,
	// out and in, the failure tolerance, the settings and the memory (its
	// voters too, unless they do not fit).
	FormBare = "bare"
)

// Dropped says how many of one part of the full decision a reduced form
// left out.
type Dropped struct {
	// Part is host_reasons, candidate_reasons, hosts, links,
	// decision_reasons or memory_voters; links counts cells.
	Part  string `json:"part"`
	Count int    `json:"count"`
}

// Parts a reduced form drops.
const (
	PartHostReasons      = "host_reasons"
	PartCandidateReasons = "candidate_reasons"
	PartHosts            = "hosts"
	PartLinks            = "links"
	PartDecisionReasons  = "decision_reasons"
	PartMemoryVoters     = "memory_voters"
	// PartHistory counts decisions: every reduced form leaves the history
	// out, since a document near 1 MiB has no room for what only the page
	// reads.
	PartHistory = "history"
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
		if form == FormFull && s.History != nil {
			// The whole decision without the history comes before any
			// of the decision is left out.
			r := s.reduced(FormFull)
			r.History, r.Dropped = nil, []Dropped{{PartHistory, len(s.History.TimesMS)}}
			if b, ok, err := r.fit(limit); err != nil || ok {
				return b, err
			}
		}
	}
	for _, form := range []string{FormSomeLinks, FormSomeHosts} {
		if b, ok, err := s.partial(form, limit); err != nil || ok {
			return b, err
		}
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
	if s.History != nil {
		r.History = nil
		r.Dropped = append(r.Dropped, Dropped{PartHistory, len(s.History.TimesMS)})
	}
	dropped := 0
	r.Hosts = make([]Host, len(s.Hosts))
	for i, h := range s.Hosts {
		var keep []Reason
		var deciding *int
		switch form {
		case FormFailing:
			for j, x := range h.Reasons {
				decides := h.Deciding != nil && *h.Deciding == j
				if decides {
					deciding = indexOf(len(keep))
				}
				if !x.OK || decides {
					keep = append(keep, x)
				}
			}
		case FormDeciding:
			if x, ok := DecidingReason(h); ok {
				keep, deciding = []Reason{x}, indexOf(0)
			}
		}
		dropped += len(h.Reasons) - len(keep)
		h.Reasons, h.Deciding = append([]Reason{}, keep...), deciding
		r.Hosts[i] = h
	}
	if dropped > 0 {
		r.Dropped = append(r.Dropped, Dropped{PartHostReasons, dropped})
	}
	switch form {
	case FormVerdicts:
		d := s.Decision
		d.Reasons, d.Deciding = []Reason{}, nil
		n := 0
		for i, x := range s.Decision.Reasons {
			if x.Code.Candidacy() && x.Code != CodeCandidateChosen {
				n++
				continue
			}
			if s.Decision.Deciding != nil && *s.Decision.Deciding == i {
				d.Deciding = indexOf(len(d.Reasons))
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
		d.Out, d.In, d.Reasons, d.Deciding = Clip(d.Out), Clip(d.In), []Reason{}, nil
		if n := len(s.Decision.Reasons); n > 0 {
			r.Dropped = append(r.Dropped, Dropped{PartDecisionReasons, n})
		}
		r.Decision = d
		r.Links = []LinkRow{}
		if n := linkCells(s.Links); n > 0 {
			r.Dropped = append(r.Dropped, Dropped{PartLinks, n})
		}
	}
	return r
}

// partial is the verdicts form with only as much as fits of what a large
// fleet has most of, in the order of rank (voters, learners, standbys,
// others; by name within a role), in one of two forms:
//
//   - FormSomeLinks keeps every host and the etcd members' rows of the link
//     matrix (the links between voters), and as many of the other hosts'
//     rows as fit;
//   - FormSomeHosts keeps as many hosts as fit, each member with its row,
//     and no other host's row.
func (s Status) partial(form string, limit int) ([]byte, bool, error) {
	r := s.reduced(FormVerdicts)
	r.Form = form
	all, rows := r.Hosts, r.Links
	rowOf := make(map[string]*LinkRow, len(rows))
	for i := range rows {
		rowOf[rows[i].From] = &rows[i]
	}
	order := slices.Clone(all)
	slices.SortStableFunc(order, func(a, b Host) int {
		return cmp.Or(cmp.Compare(rank[a.Role], rank[b.Role]), cmp.Compare(a.Name, b.Name))
	})
	member := func(h Host) bool { return h.Role == RoleVoter || h.Role == RoleLearner }

	// What the base holds, and what is added to it while it fits: a host
	// (with its row, when a member's) or a row alone.
	type item struct {
		host *Host
		row  *LinkRow
	}
	var items []item
	var keptHosts []Host
	var keptRows []LinkRow
	for i := range order {
		h := &order[i]
		row := rowOf[h.Name]
		switch {
		case form == FormSomeHosts && member(*h):
			items = append(items, item{h, row})
		case form == FormSomeHosts:
			items = append(items, item{host: h})
		case member(*h):
			keptHosts = append(keptHosts, *h)
			if row != nil {
				keptRows = append(keptRows, *row)
			}
		default:
			keptHosts = append(keptHosts, *h)
			if row != nil {
				items = append(items, item{row: row})
			}
		}
	}
	// The base is the document with what is kept anyway and the parts it
	// drops at the most they could be, so that their counts only shrink.
	r.Hosts, r.Links = keptHosts, keptRows
	r.Dropped = append(r.Dropped, Dropped{PartHosts, len(all)}, Dropped{PartLinks, linkCells(rows)})
	shared := r
	shared.share()
	base, err := compact(shared)
	if err != nil {
		return nil, false, err
	}
	// The compact document with shared texts is the base, its final
	// newline, and each host's or row's compact JSON with a comma; the
	// hosts keep no reasons, so the table does not change with them.
	size := len(base) + 1
	sizeOf := func(v any) (int, error) {
		b, err := compact(v)
		return len(b) + 1, err
	}
	for _, it := range items {
		add := 0
		if it.host != nil {
			n, err := sizeOf(it.host)
			if err != nil {
				return nil, false, err
			}
			add += n
		}
		if it.row != nil {
			n, err := sizeOf(it.row)
			if err != nil {
				return nil, false, err
			}
			add += n
		}
		if size+add > limit {
			break
		}
		size += add
		if it.host != nil {
			keptHosts = append(keptHosts, *it.host)
		}
		if it.row != nil {
			keptRows = append(keptRows, *it.row)
		}
	}
	slices.SortFunc(keptHosts, func(a, b Host) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(keptRows, func(a, b LinkRow) int { return cmp.Compare(a.From, b.From) })
	r.Hosts, r.Links = append([]Host{}, keptHosts...), append([]LinkRow{}, keptRows...)
	r.Dropped = r.Dropped[:len(r.Dropped)-2]
	if n := len(all) - len(keptHosts); n > 0 {
		r.Dropped = append(r.Dropped, Dropped{PartHosts, n})
	}
	if n := linkCells(rows) - linkCells(keptRows); n > 0 {
		r.Dropped = append(r.Dropped, Dropped{PartLinks, n})
	}
	return r.fit(limit)
}

// rank is the order a partial form keeps hosts in: those that vote first.
var rank = map[Role]int{RoleVoter: 0, RoleLearner: 1, RoleStandby: 2, RoleOther: 3}

// linkCells counts the cells of a link matrix.
func linkCells(rows []LinkRow) int {
	n := 0
	for _, r := range rows {
		n += len(r.To)
	}
	return n
}

// indexOf is a new index i.
func indexOf(i int) *int { return &i }

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
