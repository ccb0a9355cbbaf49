package status

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// History is the verdicts of the controller's last decisions, oldest first,
// as the status carries them so that its page's history survives a restart
// and a failover: the new leader reads it with the status it starts its
// term from (internal/statuspage holds it in memory). Compact, since it is
// written with every status: the decisions' times as milliseconds, the
// first since the Unix epoch and each later one since the one before; each
// host's marks run-length encoded.
type History struct {
	TimesMS []int64       `json:"times_ms"`
	Hosts   []HostHistory `json:"hosts"`
}

// HostHistory is one host's marks, one a decision: F fit, U unfit, ?
// unknown, - not listed; a mark followed by a count stands for that many
// (F37U13 is 37 fit decisions, then 13 unfit).
type HostHistory struct {
	Name  string `json:"name"`
	Marks string `json:"marks"`
}

// Marks a history holds.
const (
	MarkFit     = 'F'
	MarkUnfit   = 'U'
	MarkUnknown = '?'
	MarkAbsent  = '-'
)

// EncodeTimes is times as History.TimesMS.
func EncodeTimes(times []time.Time) []int64 {
	out := make([]int64, len(times))
	for i, t := range times {
		ms := t.UnixMilli()
		if i == 0 {
			out[i] = ms
			continue
		}
		out[i] = ms - times[i-1].UnixMilli()
	}
	return out
}

// DecodeTimes is History.TimesMS as times, in UTC.
func (h *History) DecodeTimes() []time.Time {
	out := make([]time.Time, len(h.TimesMS))
	var ms int64
	for i, d := range h.TimesMS {
		ms += d
		out[i] = time.UnixMilli(ms).UTC()
	}
	return out
}

// EncodeMarks run-length encodes marks (each a Mark).
func EncodeMarks(marks []byte) string {
	var b strings.Builder
	for i := 0; i < len(marks); {
		j := i
		for j < len(marks) && marks[j] == marks[i] {
			j++
		}
		b.WriteByte(marks[i])
		if n := j - i; n > 1 {
			b.WriteString(strconv.Itoa(n))
		}
		i = j
	}
	return b.String()
}

// DecodeMarks is EncodeMarks undone, for a history of n decisions: it
// refuses a mark it does not know, a count that is not a positive number,
// and marks that do not add up to n.
func DecodeMarks(s string, n int) ([]byte, error) {
	out := make([]byte, 0, n)
	for i := 0; i < len(s); {
		m := s[i]
		switch m {
		case MarkFit, MarkUnfit, MarkUnknown, MarkAbsent:
		default:
			return nil, fmt.Errorf("history marks: %q at %d is no mark (F, U, ? or -)", m, i)
		}
		j := i + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		count := 1
		if j > i+1 {
			c, err := strconv.Atoi(s[i+1 : j])
			if err != nil || c < 1 || c > n-len(out) {
				return nil, fmt.Errorf("history marks: a run of %q at %d: want a count from 1 to the %d decisions left", s[i+1:j], i, n-len(out))
			}
			count = c
		}
		if len(out)+count > n {
			return nil, fmt.Errorf("history marks: more than the %d decisions", n)
		}
		for range count {
			out = append(out, m)
		}
		i = j
	}
	if len(out) != n {
		return nil, fmt.Errorf("history marks: %d, want one for each of the %d decisions", len(out), n)
	}
	return out, nil
}
