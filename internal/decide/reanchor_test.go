package decide_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// skewed is prev as a writer whose clock reads skew ahead of this one's
// would have written it: every time it carries, moved by skew.
func skewed(prev *status.Status, skew time.Duration) *status.Status {
	p := *prev
	move := func(t time.Time) time.Time {
		if t.IsZero() {
			return t
		}
		return t.Add(skew)
	}
	p.GeneratedAt = move(p.GeneratedAt)
	m := &p.Memory
	m.VotersChangedAt, m.NamedSince, m.ConnectsSlowAt, m.MemberLateAt = move(m.VotersChangedAt), move(m.NamedSince), move(m.ConnectsSlowAt), move(m.MemberLateAt)
	p.Hosts = append([]status.Host(nil), prev.Hosts...)
	for i := range p.Hosts {
		if o := p.Hosts[i].Observation; o != nil {
			c := *o
			c.ChangedAt = move(c.ChangedAt)
			p.Hosts[i].Observation = &c
		}
	}
	return &p
}

// A previous status written by another replica whose clock is minutes
// behind or ahead of this one's: read as ages at its generation and
// re-anchored to when this replica read it, the cooldown passes exactly
// when it would on one clock (just under the cooldown: held; at and just
// over: open), whatever the other clock read. Compared raw, a writer 5
// minutes behind opened the cooldown 5 minutes early, and one 5 minutes
// ahead held it 5 minutes late.
func TestCooldownAcrossWritersClocks(t *testing.T) {
	s := settings.Defaults()
	f := standardFleet(s)
	f.host("alpha").slowWAL = true
	cool := s.Cooldown().Duration()
	for _, skew := range []time.Duration{-5 * time.Minute, -time.Second, 0, time.Second, 5 * time.Minute} {
		for _, c := range []struct {
			ago  time.Duration
			open bool
		}{{cool - time.Millisecond, false}, {cool, true}, {cool + time.Millisecond, true}} {
			t.Run(fmt.Sprintf("skew %v, set changed %v ago", skew, c.ago), func(t *testing.T) {
				// The other replica wrote prev one period ago (its clock
				// skew ahead), and this one read it then.
				own := settled(f, c.ago)
				in := f.input(t, skewed(own, skew))
				in.PreviousAt = own.GeneratedAt
				st := decide.Decide(in)
				r := decisionReason(t, st, status.GateCooldown, "")
				if r.OK != c.open {
					t.Fatalf("cooldown ok %v, want %v: %s", r.OK, c.open, r.Detail)
				}
				if got := st.Memory.VotersChangedAt; !got.Equal(f.now.Add(-c.ago)) {
					t.Fatalf("the voter set changed at %v by this clock, want %v", got, f.now.Add(-c.ago))
				}
				// Raw, a writer's clock behind opens the cooldown early and
				// one ahead holds it late: the boundary on the skew's wrong
				// side shows that this case tells the two apart.
				in.PreviousAt = time.Time{}
				raw := decisionReason(t, decide.Decide(in), status.GateCooldown, "")
				if skew < 0 && !c.open && !raw.OK || skew > 0 && c.open && raw.OK {
					t.Fatalf("raw, a writer's clock %v off did not move the cooldown: the case shows nothing", skew)
				}
			})
		}
	}
}

// The swap's hysteresis and each record's last change are ages too: a
// swap named by the other replica stays named, with its time re-anchored,
// and a record unchanged since the other replica saw it change keeps that
// age on this clock.
func TestMemoryReanchored(t *testing.T) {
	f := standardFleet(settings.Defaults())
	f.host("alpha").slowWAL = true
	first := decide.Decide(f.input(t, settled(f, 2*time.Hour)))
	if first.Memory.Named != "alpha" {
		t.Fatalf("the first decision names %q, want alpha", first.Memory.Named)
	}
	for _, skew := range []time.Duration{-7 * time.Minute, 7 * time.Minute} {
		in := f.input(t, skewed(&first, skew))
		in.Now = first.GeneratedAt.Add(f.s.SamplePeriod / 2)
		in.PreviousAt = first.GeneratedAt.Add(time.Second) // read a second after it was written
		st := decide.Decide(in)
		if st.Memory.Named != "alpha" || st.Memory.NamedDecisions != 2 || !st.Memory.NamedSince.Equal(first.Memory.NamedSince.Add(time.Second)) {
			t.Fatalf("skew %v: named %q, %d decisions, since %v; want alpha, 2, %v", skew, st.Memory.Named, st.Memory.NamedDecisions, st.Memory.NamedSince, first.Memory.NamedSince.Add(time.Second))
		}
		for i, h := range st.Hosts {
			want := first.Hosts[i].Observation.ChangedAt.Add(time.Second)
			if got := h.Observation.ChangedAt; !got.Equal(want) {
				t.Fatalf("skew %v: %s's record changed at %v, want %v (the other replica's age, counted from this one's read)", skew, h.Name, got, want)
			}
		}
	}
}
