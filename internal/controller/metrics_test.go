package controller

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/acting"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/prometheus/common/expfmt"
)

func ptr(v float64) *float64 { return &v }

// TestMetricsForAlerts: the series the alert rules read (internal/alerts)
// follow the status: the deciding reason's value and limit per host, the
// steps that hold a swap back (none while one is published), and a stale
// record named so.
func TestMetricsForAlerts(t *testing.T) {
	m := NewMetrics()
	held := status.Status{
		Hosts: []status.Host{
			{Name: "alpha", Role: status.RoleVoter, Verdict: status.Unfit, Reasons: []status.Reason{
				{Signal: status.SignalConnect, Subject: "bravo", Value: ptr(0.3), Limit: ptr(0.25), Unit: "seconds"},
				{Signal: status.SignalPeerRTT, Subject: "bravo", Value: ptr(0.9), Limit: ptr(0.5), Unit: "seconds"},
				{Signal: status.SignalWALFsync, Value: ptr(0.001), Limit: ptr(0.01), Unit: "seconds", OK: true},
			}},
			{Name: "bravo", Role: status.RoleVoter, Verdict: status.Unknown, Reasons: []status.Reason{
				{Signal: status.SignalFreshness, Code: status.CodeEntryStale, Value: ptr(60), Limit: ptr(45), Unit: "seconds"},
			}},
			{Name: "delta", Role: status.RoleStandby, Verdict: status.Unfit, Reasons: []status.Reason{
				{Signal: status.SignalLink, Subject: "wlan0", Detail: "wifi"},
			}},
		},
		Decision: status.Decision{Action: status.ActionNone, Reasons: []status.Reason{
			{Signal: "gate_reported", Detail: "bravo is unknown"},
			{Signal: "gate_leader", OK: true},
			{Signal: "gate_cooldown", Detail: "10m of 30m"},
		}},
	}
	m.observeStatus(&held)
	want := `fleet_role_decision_held{step="gate_cooldown"} 1
fleet_role_decision_held{step="gate_reported"} 1
`
	if got := series(t, m, "fleet_role_decision_held"); got != want {
		t.Errorf("held steps:\n%s\nwant\n%s", got, want)
	}
	// alpha: the reason furthest over its limit (peer_rtt 180% of it, not
	// connect's 120%); bravo: its stale entry; delta's link has no number.
	want = `fleet_role_host_deciding_value{host="alpha",role="voter",signal="peer_rtt",subject="bravo",unit="seconds",verdict="unfit"} 0.9
fleet_role_host_deciding_value{host="bravo",role="voter",signal="entry_unchanged",subject="",unit="seconds",verdict="unknown"} 60
`
	if got := series(t, m, "fleet_role_host_deciding_value"); got != want {
		t.Errorf("deciding values:\n%s\nwant\n%s", got, want)
	}
	want = `fleet_role_host_deciding_limit{host="alpha",role="voter",signal="peer_rtt",subject="bravo",unit="seconds",verdict="unfit"} 0.5
fleet_role_host_deciding_limit{host="bravo",role="voter",signal="entry_unchanged",subject="",unit="seconds",verdict="unknown"} 45
`
	if got := series(t, m, "fleet_role_host_deciding_limit"); got != want {
		t.Errorf("deciding limits:\n%s\nwant\n%s", got, want)
	}
	if got, want := series(t, m, "fleet_role_host_record_issue"), `fleet_role_host_record_issue{host="bravo",issue="stale"} 1`+"\n"; got != want {
		t.Errorf("record issues:\n%s\nwant\n%s", got, want)
	}

	// Published: no step holds it, and alpha's deciding series is gone
	// with alpha.
	swap := status.Status{
		Hosts: held.Hosts[1:],
		Decision: status.Decision{Action: status.ActionSwap, Out: "bravo", In: "delta", Reasons: []status.Reason{
			{Signal: "steady", OK: true},
		}},
	}
	m.observeStatus(&swap)
	if got := series(t, m, "fleet_role_decision_held"); got != "" {
		t.Errorf("held steps while a swap is published:\n%s", got)
	}
	if got := series(t, m, "fleet_role_host_deciding_value"); strings.Count(got, "\n") != 1 || !strings.Contains(got, `host="bravo"`) {
		t.Errorf("deciding series with alpha gone:\n%s", got)
	}
}

// series is the exposition text of one metric's series, without its HELP
// and TYPE lines.
func series(t *testing.T, m *Metrics, name string) string {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	for _, line := range strings.SplitAfter(b.String(), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			out.WriteString(line)
		}
	}
	return out.String()
}

// The failure tolerance is exported four ways, from the status.
func TestToleranceMetric(t *testing.T) {
	m := NewMetrics()
	m.observeStatus(&status.Status{FailureTolerance: status.FailureTolerance{Voters: 7, Quorum: 4, Unfit: 2, Unknown: 1,
		Tolerance: 0, OptimisticTolerance: 2, DesignTolerance: 3, Cleared: 1, Attributed: 1}})
	want := `fleet_role_failure_tolerance{lost="implicated_and_unknown"} 1
fleet_role_failure_tolerance{lost="none"} 3
fleet_role_failure_tolerance{lost="unfit_and_unknown"} 0
fleet_role_failure_tolerance{lost="unknown"} 2
`
	if got := series(t, m, "fleet_role_failure_tolerance"); got != want {
		t.Errorf("failure tolerance:\n%s\nwant\n%s", got, want)
	}
}

// TestRecordIssueByCode: each code of a record's trouble names its issue;
// the words of the reason play no part.
func TestRecordIssueByCode(t *testing.T) {
	for _, c := range []struct {
		signal string
		code   status.Code
		ok     bool
		want   string
	}{
		{status.SignalEntry, status.CodeRecordMissing, false, "missing"},
		{status.SignalEntry, status.CodeRecordUnreadable, false, "unreadable"},
		{status.SignalEntry, status.CodeJudgingPanicked, false, "unreadable"},
		{status.SignalRecord, status.CodeWriteRefused, false, "refused"},
		{status.SignalRecord, status.CodeMemberClaimed, false, "refused"},
		{status.SignalRecord, status.CodeRecordWithheld, false, "unprotected"},
		{status.SignalRecord, status.CodeWithheldUnprotected, false, "unprotected"},
		{status.SignalRecord, status.CodeRecordFull, false, "full"},
		{status.SignalFreshness, status.CodeEntryStale, false, "stale"},
		{status.SignalFreshness, status.CodeEntryFresh, true, ""},
		{status.SignalConnect, status.CodeOverLimit, false, ""},
	} {
		h := status.Host{Name: "alpha", Reasons: []status.Reason{{Signal: c.signal, Code: c.code, OK: c.ok, Detail: "words that say otherwise: no probe record, refused, withheld"}}}
		if got := recordIssue(h); got != c.want {
			t.Errorf("%s %s: issue %q, want %q", c.signal, c.code, got, c.want)
		}
	}
}

// The swap acting carries out, as the metrics say it: its phase and the
// step under way with its start and deadline, and a stall by its code;
// nothing of it with acting off.
func TestMetricsOfTheSwap(t *testing.T) {
	m := NewMetrics()
	started := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	deadline := started.Add(75 * time.Second)
	j := &acting.Journal{PlanID: "swap-0123456789", Out: acting.Party{Node: "x"}, In: acting.Party{Node: "s"}, Phase: acting.PhaseRunning}
	for _, n := range acting.Steps {
		st := acting.JournalStep{Name: n, State: acting.StatePending}
		switch n {
		case acting.StepAdmit:
			st.State = acting.StateDone
		case acting.StepPromote:
			st.State, st.Started, st.Deadline = acting.StateRunning, &started, &deadline
		}
		j.Steps = append(j.Steps, st)
	}
	st := status.Status{Acting: &acting.Status{Mode: "guided", Journal: j, Stall: &acting.Stall{Code: acting.StallJournalConflict}}}
	m.observeStatus(&st)
	for name, want := range map[string]string{
		"fleet_role_swap_phase":                           `fleet_role_swap_phase{in="s",out="x",phase="running",plan="swap-0123456789",step="promote"} 1` + "\n",
		"fleet_role_swap_step_started_timestamp_seconds":  `fleet_role_swap_step_started_timestamp_seconds{plan="swap-0123456789",step="promote"} ` + unix(started) + "\n",
		"fleet_role_swap_step_deadline_timestamp_seconds": `fleet_role_swap_step_deadline_timestamp_seconds{plan="swap-0123456789",step="promote"} ` + unix(deadline) + "\n",
		"fleet_role_acting_stalled":                       `fleet_role_acting_stalled{code="JournalConflict"} 1` + "\n",
	} {
		if got := series(t, m, name); got != want {
			t.Errorf("%s:\n%s\nwant\n%s", name, got, want)
		}
	}
	// Done: the phase alone, no step under way.
	j.Phase = acting.PhaseDone
	st.Acting.Stall = nil
	m.observeStatus(&st)
	if got, want := series(t, m, "fleet_role_swap_phase"), `fleet_role_swap_phase{in="s",out="x",phase="done",plan="swap-0123456789",step="none"} 1`+"\n"; got != want {
		t.Errorf("done:\n%s\nwant\n%s", got, want)
	}
	// Acting off: nothing.
	m.observeStatus(&status.Status{})
	for _, name := range []string{"fleet_role_swap_phase", "fleet_role_swap_step_deadline_timestamp_seconds", "fleet_role_acting_stalled"} {
		if got := series(t, m, name); got != "" {
			t.Errorf("acting off: %s\n%s", name, got)
		}
	}
}

// unix is t as the exposition format writes a timestamp gauge.
func unix(t time.Time) string { return strconv.FormatFloat(float64(t.Unix()), 'g', -1, 64) }
