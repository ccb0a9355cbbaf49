package statuspage

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fleet-role/fleet-role/internal/status"
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
	markFit     = status.MarkFit
	markUnfit   = status.MarkUnfit
	markUnknown = status.MarkUnknown
	markAbsent  = status.MarkAbsent
)

func markOf(v status.Verdict) byte {
	switch v {
	case status.Fit:
		return markFit
	case status.Unfit:
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
func (h *History) Add(st *status.Status) {
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

// Resize remembers the last size decisions from now on: a smaller size
// forgets the oldest at once (and every host that only they listed), a
// larger one keeps what it holds and forgets less from then.
func (h *History) Resize(size int) {
	size = max(1, size)
	if drop := len(h.times) - size; drop > 0 {
		h.times = slices.Clone(h.times[drop:])
		for name, m := range h.marks {
			m = slices.Clone(m[drop:])
			if !slices.ContainsFunc(m, func(b byte) bool { return b != 0 }) {
				delete(h.marks, name)
				continue
			}
			h.marks[name] = m
		}
	}
	h.size = size
}

// Export is the history as the status carries it (status.History), its
// hosts by name.
func (h *History) Export() *status.History {
	if h == nil || len(h.times) == 0 {
		return nil
	}
	names := make([]string, 0, len(h.marks))
	for name := range h.marks {
		names = append(names, name)
	}
	slices.Sort(names)
	out := &status.History{TimesMS: status.EncodeTimes(h.times), Hosts: make([]status.HostHistory, 0, len(names))}
	marks := make([]byte, len(h.times))
	for _, name := range names {
		for i, m := range h.marks[name] {
			if m == 0 {
				m = status.MarkAbsent
			}
			marks[i] = m
		}
		out.Hosts = append(out.Hosts, status.HostHistory{Name: name, Marks: status.EncodeMarks(marks)})
	}
	return out
}

// ImportHistory is a history of size decisions holding dh's (the newest of
// them, when dh holds more): what the status carried, read back at a
// controller's start or a new term. It refuses a history whose marks do not
// decode, or that names a host twice.
func ImportHistory(size int, dh *status.History) (*History, error) {
	h := NewHistory(size)
	if dh == nil {
		return h, nil
	}
	h.times = dh.DecodeTimes()
	n := len(h.times)
	for _, x := range dh.Hosts {
		if _, twice := h.marks[x.Name]; twice {
			return nil, fmt.Errorf("history: host %q named twice", x.Name)
		}
		marks, err := status.DecodeMarks(x.Marks, n)
		if err != nil {
			return nil, fmt.Errorf("history: host %q: %w", x.Name, err)
		}
		for i, m := range marks {
			if m == status.MarkAbsent {
				marks[i] = 0
			}
		}
		h.marks[x.Name] = marks
	}
	h.Resize(size)
	return h, nil
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

// Span is the times of the oldest and the newest decision remembered.
func (h *History) Span() (oldest, newest time.Time) {
	if h == nil || len(h.times) == 0 {
		return time.Time{}, time.Time{}
	}
	return h.times[0], h.times[len(h.times)-1]
}

// gapMark stands between two decisions further apart than the page's gap
// (Page.Gap): the controller decided nothing for a while (it restarted,
// failed over, or was starved of CPU).
const gapMark = "┆"

// gaps says, for each decision, whether more than over passed since the
// one before it; over of zero finds none. A clock that stepped back (a
// failover to a replica whose clock is behind) is no gap.
func (h *History) gaps(over time.Duration) []bool {
	g := make([]bool, len(h.times))
	if over <= 0 {
		return g
	}
	for i := 1; i < len(h.times); i++ {
		g[i] = h.times[i].Sub(h.times[i-1]) > over
	}
	return g
}

// cell is a stretch of a host's row on the page: marks of one verdict,
// with gapMark where a gap falls inside it.
type cell struct {
	Class, Text string
}

// Cells is a host's row as the page writes it, oldest first: runs of one
// mark, gapMark before each decision that came more than over after the
// one before it. Every host's row has as many characters as Ruler's, so
// that the marks of one decision stand in one column.
func (h *History) Cells(host string, over time.Duration) []cell {
	m, gap := h.marks[host], h.gaps(over)
	var out []cell
	var b strings.Builder
	for i := 0; i < len(m); {
		j := i
		for j < len(m) && m[j] == m[i] {
			j++
		}
		b.Reset()
		for k := i; k < j; k++ {
			if gap[k] {
				b.WriteString(gapMark)
			}
			if m[k] == 0 {
				b.WriteByte(markAbsent)
			} else {
				b.WriteByte(m[k])
			}
		}
		out = append(out, cell{Class: classOfMark(m[i]), Text: b.String()})
		i = j
	}
	return out
}

// rulerLayout is how the ruler writes a time: to the second, in UTC, as
// the decisions it labels are seconds apart.
const rulerLayout = "15:04:05"

// Ruler is the row above the hosts' rows: the oldest decision's time at
// the left and the newest's at the right, each above its column, and
// gapMark above every gap, the rest dots. Where the row is too short for
// both times, it holds the oldest alone.
func (h *History) Ruler(over time.Duration) string {
	if h == nil || len(h.times) == 0 {
		return ""
	}
	gap := h.gaps(over)
	cols := make([]string, 0, 2*len(h.times))
	for i := range h.times {
		if gap[i] {
			cols = append(cols, gapMark)
		}
		cols = append(cols, "·")
	}
	oldest, newest := h.times[0].UTC().Format(rulerLayout), h.times[len(h.times)-1].UTC().Format(rulerLayout)
	put := func(at int, label string) {
		for i, r := range label {
			cols[at+i] = string(r)
		}
	}
	switch {
	case len(cols) >= len(oldest)+1+len(newest):
		put(0, oldest)
		put(len(cols)-len(newest), newest)
	case len(cols) >= len(oldest):
		put(0, oldest)
	}
	return strings.Join(cols, "")
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
