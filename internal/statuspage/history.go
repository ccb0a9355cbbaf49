package statuspage

import (
	"slices"
	"time"

	"github.com/fleet-role/fleet-role/internal/decide"
)

// History is the verdicts of the last decisions, oldest first: what the
// controller remembers of its own decisions (the status document holds one
// decision, so a page written from it has no history). It holds one byte
// per host and decision, so that its memory is the fleet's size times its
// length, whatever the hosts' reasons hold.
type History struct {
	size  int
	times []time.Time
	marks map[string][]byte // per host, aligned with times; 0 where the decision did not list it
}

// Marks of a verdict in the history; a host a decision did not list has
// none there.
const (
	markFit     = 'F'
	markUnfit   = 'U'
	markUnknown = '?'
	markAbsent  = '-'
)

func markOf(v decide.Verdict) byte {
	switch v {
	case decide.Fit:
		return markFit
	case decide.Unfit:
		return markUnfit
	}
	return markUnknown
}

// NewHistory remembers the last size decisions.
func NewHistory(size int) *History {
	return &History{size: max(1, size), marks: map[string][]byte{}}
}

// Add remembers a decision's verdicts, forgetting the oldest past the size
// and every host that none of the remembered decisions lists.
func (h *History) Add(st *decide.Status) {
	drop := 0
	if len(h.times) == h.size {
		drop = 1
	}
	h.times = append(h.times[drop:], st.GeneratedAt)
	n := len(h.times)
	seen := make(map[string]bool, len(st.Hosts))
	for _, x := range st.Hosts {
		seen[x.Name] = true
		m := h.marks[x.Name]
		if m == nil {
			m = make([]byte, n-1, h.size) // absent from the decisions before
		} else {
			m = m[drop:]
		}
		h.marks[x.Name] = append(m, markOf(x.Verdict))
	}
	for name, m := range h.marks {
		if seen[name] {
			continue
		}
		m = append(m[drop:], 0)
		if !slices.ContainsFunc(m, func(b byte) bool { return b != 0 }) {
			delete(h.marks, name)
			continue
		}
		h.marks[name] = m
	}
}

// Len is the number of decisions remembered.
func (h *History) Len() int {
	if h == nil {
		return 0
	}
	return len(h.times)
}

// Clone is a copy that later Adds do not change, for a page rendered while
// the controller goes on deciding.
func (h *History) Clone() *History {
	if h == nil {
		return nil
	}
	c := &History{size: h.size, times: slices.Clone(h.times), marks: make(map[string][]byte, len(h.marks))}
	for k, v := range h.marks {
		c.marks[k] = slices.Clone(v)
	}
	return c
}

// run is a stretch of one mark in a host's history.
type run struct {
	Mark  string
	Class string
	N     int
}

// Runs is a host's history as runs of one mark, oldest first.
func (h *History) Runs(host string) []run {
	m := h.marks[host]
	var out []run
	for i := 0; i < len(m); {
		j := i
		for j < len(m) && m[j] == m[i] {
			j++
		}
		mark, class := string(rune(m[i])), classOfMark(m[i])
		if m[i] == 0 {
			mark = string(markAbsent)
		}
		out = append(out, run{Mark: mark, Class: class, N: j - i})
		i = j
	}
	return out
}

func classOfMark(b byte) string {
	switch b {
	case markFit:
		return "ok"
	case markUnfit:
		return "bad"
	case markUnknown:
		return "unk"
	}
	return "none"
}
