package decide

import (
	"time"

	"github.com/fleet-role/fleet-role/internal/status"
)

// reanchored is prev with every time it carries forward read on the
// reader's clock: each time's age at prev's generation (its GeneratedAt,
// by the clock that wrote it) is kept, and counted from at, when the
// reader first read prev by its own clock. nil or a zero at leave prev as
// it is (this clock's own decision).
//
// Why: the decision's memory (when the voter set changed, when a swap was
// first named, when connects were last slow, when a member last ran late,
// when each record last changed) is written by one replica's clock and
// read, after a failover, by another's, which may be minutes ahead or
// behind. Compared raw, a clock ahead passes the cooldown and the holds
// early, and one behind reads every time as in the future and drops the
// memory. Ages do not depend on either clock. The reader cannot read prev
// before it was written, so at is no earlier than its generation: the
// ages lose the time between the two (a takeover's seconds), which makes
// the cooldown, the hysteresis and the holds longer, never shorter
// (docs/status.md, "The decision's memory across writers").
func reanchored(prev *status.Status, at time.Time) *status.Status {
	if prev == nil || at.IsZero() || prev.GeneratedAt.IsZero() {
		return prev
	}
	shift := at.Sub(prev.GeneratedAt)
	if shift == 0 {
		return prev
	}
	move := func(t time.Time) time.Time {
		if t.IsZero() {
			return t
		}
		return t.Add(shift).UTC()
	}
	p := *prev
	p.GeneratedAt = move(p.GeneratedAt)
	m := &p.Memory
	m.VotersChangedAt, m.NamedSince = move(m.VotersChangedAt), move(m.NamedSince)
	m.ConnectsSlowAt, m.MemberLateAt = move(m.ConnectsSlowAt), move(m.MemberLateAt)
	m.UnprotectedAt = move(m.UnprotectedAt)
	p.Hosts = make([]status.Host, len(prev.Hosts))
	for i, h := range prev.Hosts {
		if h.Observation != nil {
			o := *h.Observation
			o.ChangedAt = move(o.ChangedAt)
			h.Observation = &o
		}
		p.Hosts[i] = h
	}
	return &p
}
