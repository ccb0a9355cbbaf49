// Package alerts holds fleet-role's Prometheus alert rules, its scrape
// objects and its Grafana dashboard, all rendered from this one source for
// given settings: every alert's `for` and every range derives from the
// sample period and the decision's own figures (docs/limits.md, "Alerts").
// The files under deploy/monitoring are these renderings at the default
// settings; a test holds them equal.
package alerts

import (
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// Group is the name of the rule group.
const Group = "fleet-role"

// Rule is one alert.
type Rule struct {
	Alert       string
	Expr        string
	For         time.Duration
	Labels      map[string]string
	Annotations map[string]string
	// Basis says where For comes from (docs/limits.md).
	Basis string
}

// Staleness is how long the controller lets a host's entry stand unchanged
// before it calls it stale (entry_unchanged, docs/limits.md): three sample
// periods. The controller's readiness uses the same bound for its own
// decisions.
func Staleness(s settings.Settings) time.Duration { return 3 * s.SamplePeriod }

// decidingTemplate writes a host's deciding reason with its value and its
// limit, from the controller's fleet_role_host_deciding_* series at the
// alert's evaluation: " peer_rtt voter-1 0.4014 seconds, limit 0.1 seconds".
const decidingTemplate = `{{ range printf "fleet_role_host_deciding_value{host=%q}" $labels.host | query }} {{ .Labels.signal }}{{ with .Labels.subject }} {{ . }}{{ end }} {{ printf "%.4g" .Value }} {{ .Labels.unit }}{{ end }}` +
	`{{ range printf "fleet_role_host_deciding_limit{host=%q}" $labels.host | query }}, limit {{ printf "%.4g" .Value }} {{ .Labels.unit }}{{ end }}`

// runbooks is the page with a section for each alert: what it means,
// where to look and what to do.
const runbooks = "https://github.com/fleet-role/fleet-role/blob/main/docs/runbooks.md"

// RunbookURL is the address of alert's runbook, its section of
// docs/runbooks.md: a heading of the alert's name, which GitHub anchors as
// the name in lower case.
func RunbookURL(alert string) string { return runbooks + "#" + strings.ToLower(alert) }

// Rules are fleet-role's alerts at settings s, each with the runbook_url
// annotation of its runbook, as Prometheus alerts carry one by convention.
func Rules(s settings.Settings) []Rule {
	rules := rules(s)
	for _, r := range rules {
		r.Annotations["runbook_url"] = RunbookURL(r.Alert)
	}
	return rules
}

func rules(s settings.Settings) []Rule {
	p := s.SamplePeriod
	steady := time.Duration(status.SteadyPeriods) * p
	stale := Staleness(s)
	return []Rule{
		{
			Alert: "FleetRoleVoterUnfit",
			Expr:  `fleet_role_host_verdict{role="voter",verdict="unfit"} == 1`,
			For:   steady,
			Basis: fmt.Sprintf("steady periods (%d) x sample_period: the longest the hysteresis holds a swap that stays named before the controller publishes it (every voter writes again, then the next decision)", status.SteadyPeriods),
			Labels: map[string]string{
				"severity": "warning",
			},
			Annotations: map[string]string{
				"summary": "etcd voter {{ $labels.host }} is unfit to hold its vote",
				"description": `{{ $labels.host }} has read unfit at every decision for ` + dur(steady) + `. Deciding:` + decidingTemplate +
					`. fleet-role status {{ $labels.host }} prints every reason with its number, limit and basis.`,
			},
		},
		{
			Alert: "FleetRoleSwapAdvised",
			Expr:  `fleet_role_swap == 1`,
			For:   p,
			Basis: "one sample_period: the next decision still publishes it (a flap, published once and gone at the next decision, never fires)",
			Labels: map[string]string{
				"severity": "warning",
			},
			Annotations: map[string]string{
				"summary":     "fleet-role would swap etcd voter {{ $labels.out }} out for {{ $labels.in }}",
				"description": "The controller publishes a swap: {{ $labels.out }} out, {{ $labels.in }} in. With acting off (the default) it only reports: nothing is changed; with acting guided the swap waits for an operator's fleet-role approve, with acting auto for its plan to stand a window. fleet-role status prints the decision, every step behind it and the plan.",
			},
		},
		{
			Alert: "FleetRoleSwapHeld",
			Expr: `fleet_role_decision_held == 1` +
				` and on() (count(fleet_role_host_verdict{role="voter",verdict="unfit"} == 1) > 0)`,
			For:   steady + p,
			Basis: "steady periods + 1, x sample_period: a period longer than the steady step holds any swap back, so that the hysteresis alone never fires it",
			Labels: map[string]string{
				"severity": "info",
			},
			Annotations: map[string]string{
				"summary":     "a swap for an unfit etcd voter is held back by step {{ $labels.step }}",
				"description": "A voter is unfit and the decision makes no swap: step {{ $labels.step }} holds it back (pinned: the voter to replace is pinned; candidate: no fit standby; gate_*: a gate is closed; steady: not every voter has written again since the swap was first named; fleet_wide: a fault the whole fleet shares). fleet-role status prints the step's reason with its numbers.",
			},
		},
		{
			Alert: "FleetRoleFailureToleranceZero",
			// Only while the unfit voters are what takes the margin: with
			// the unknown alone counted lost some remains. A fleet whose
			// voters are unknown has its own alert when a probe stops
			// writing (FleetRoleProbeNotWriting), and every voter is unknown
			// while the windows fill after a start, which is no fault; one
			// or two voters have no margin by design, which no swap gives.
			Expr:  `fleet_role_failure_tolerance{lost="unfit_and_unknown"} == 0 and on() fleet_role_failure_tolerance{lost="unknown"} > 0`,
			For:   steady,
			Basis: fmt.Sprintf("steady periods (%d) x sample_period, as FleetRoleVoterUnfit: the tolerance falls with the verdicts that alert waits out", status.SteadyPeriods),
			Labels: map[string]string{
				"severity": "warning",
			},
			Annotations: map[string]string{
				"summary": "etcd can lose no more voters: fleet-role judges the voters beyond the quorum unfit",
				"description": `Counting the unfit and unknown voters as lost, no more voter may fail before etcd loses quorum; counting only the unknown as lost, {{ with query "fleet_role_failure_tolerance{lost=\"unknown\"}" }}{{ . | first | value }}{{ end }} may.` +
					` One more failure, or an unfit voter's slow disk or path, now stalls every write. fleet-role status prints which voters are unfit and why, and the swap it would make.`,
			},
		},
		{
			Alert: "FleetRoleProbeNotWriting",
			Expr:  `fleet_role_host_record_issue{issue=~"stale|missing"} == 1`,
			For:   stale,
			Basis: "entry_unchanged (3 x sample_period) again: a probe that starts takes up to that long to write its first window (a missing record), and the same again confirms a stale one",
			Labels: map[string]string{
				"severity": "warning",
			},
			Annotations: map[string]string{
				"summary":     "the fleet-role probe on {{ $labels.host }} is not writing its record ({{ $labels.issue }})",
				"description": "The controller has seen no new sample from {{ $labels.host }} ({{ $labels.issue }}: a stale record is unchanged for over " + dur(stale) + "; a missing one was never written), so the host is unknown and no swap can be judged against it. Look at the probe pod on that node: kubectl -n " + s.Namespace + " get pod -l app.kubernetes.io/name=fleet-role-probe --field-selector spec.nodeName={{ $labels.host }}.",
			},
		},
		{
			Alert: "FleetRoleRecordRefusedOrFull",
			Expr:  `fleet_role_host_record_issue{issue=~"refused|full|unreadable|unprotected"} == 1`,
			For:   p,
			Basis: "one sample_period: the probe tries its window again each period, so a refusal that outlasts the next try is not a passing one",
			Labels: map[string]string{
				"severity": "warning",
			},
			Annotations: map[string]string{
				"summary":     "the fleet-role record of {{ $labels.host }} is {{ $labels.issue }}",
				"description": "refused: the API server refused the probe's write (the admission policy, the size cap or validation; the record holds the refusal's text); full: the probe left its oldest samples out to fit the record's cap; unreadable: the record cannot be decoded; unprotected: the probe writes no samples because the API server did not refuse it a write to a record not its own (the admission policy fleet-role-probe-records is not enforced: see the probe's log and its readiness). fleet-role status {{ $labels.host }} prints the reason.",
			},
		},
		{
			Alert: "FleetRoleSwapPastDeadline",
			Expr:  `fleet_role_swap_step_deadline_timestamp_seconds < time()`,
			For:   2 * p,
			Basis: "two sample_periods: the executor ends a step past its deadline at its next decision (twice a sample_period) and the next scrape no longer sees it; one still there after two periods means the executor is not running (see FleetRoleActingStalled)",
			Labels: map[string]string{
				"severity": "critical",
			},
			Annotations: map[string]string{
				"summary":     "swap {{ $labels.plan }} is past the deadline of its step {{ $labels.step }}, and the controller has not ended it",
				"description": "A membership change is under way and its step {{ $labels.step }} should have been aborted (or, from remove on, halted) at its deadline; it was not, so the fleet may be left mid-swap (a learner admitted, a voter pre-written). kubectl fleet-role status shows the swap, its journal and why the controller stalls; docs/acting.md has the runbook.",
			},
		},
		{
			Alert: "FleetRoleActingStalled",
			Expr:  `fleet_role_acting_stalled == 1`,
			For:   stale,
			Basis: "entry_unchanged (3 x sample_period), the controller's readiness bound: a stall of one decision (a journal conflict as the Lease changes hands) passes; one that lasts as long as a decision may be missing is not passing",
			Labels: map[string]string{
				"severity": "warning",
			},
			Annotations: map[string]string{
				"summary":     "fleet-role's controller acts but cannot run its swaps ({{ $labels.code }})",
				"description": "Acting guided or auto, the controller could not run the swap's executor at its decisions for " + dur(stale) + " ({{ $labels.code }}: NoJournal, the journal ConfigMap is missing; JournalUnreadable, JournalConflict, ReadFailed or WriteFailed, its reads or writes fail; NoLease or NotLeading, it holds no Lease term to fence its commands). No swap begins or moves on meanwhile. kubectl fleet-role status prints the stall's detail.",
			},
		},
		{
			Alert: "FleetRoleControllerNotDeciding",
			Expr: fmt.Sprintf(`increase(fleet_role_decisions_total{result="ok"}[%s]) == 0`, promDur(stale)) +
				` or absent(fleet_role_decisions_total{result="ok"})`,
			For:   p,
			Basis: "the controller's readiness bound (no successful decision for 3 x sample_period), held one more sample_period",
			Labels: map[string]string{
				"severity": "warning",
			},
			Annotations: map[string]string{
				"summary":     "the fleet-role controller has made no decision for " + dur(stale),
				"description": "No successful decision in " + dur(stale) + " (or no controller is scraped): the published status is going stale. kubectl -n " + s.Namespace + " logs deploy/fleet-role.",
			},
		},
	}
}

// promDur writes d as Prometheus reads a duration.
func promDur(d time.Duration) string { return model.Duration(d).String() }

// dur writes d for people, as Prometheus writes it (45s, 1m, 1m30s).
func dur(d time.Duration) string { return promDur(d) }
