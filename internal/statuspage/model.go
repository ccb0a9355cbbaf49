// Package statuspage renders a decision as one read-only HTML page for
// operators: the hosts with their verdicts and the numbers behind them, the
// failure tolerance, the swap or the step that holds it, the link matrix
// (every measuring host's tail connect time to every etcd member, and etcd's
// own round trip where it was measured, against their limits), and the
// verdicts of the last decisions.
//
// The page is self-contained (no script, font or style from anywhere else;
// it works offline and from a file), every text that came from a record is
// escaped, colour always comes with a mark and a number,
// and its size is bounded at the largest fleet measured
// (docs/operators.md). The controller serves it on its metrics port;
// `fleet-role status --html` and `fleet-role decide -o html` write it.
package statuspage

import (
	"cmp"
	"slices"
	"time"

	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// Model is what the page shows of one decision, and nothing more: the
// controller keeps it between decisions instead of the whole Status, whose
// hosts' reasons are most of a large fleet's decision and which the page
// does not show.
type Model struct {
	GeneratedAt time.Time
	// Version is the fleet-role version of the controller that wrote the
	// decision; empty where no elected controller did (decide, the demo).
	Version  string
	DryRun   bool
	Form     string
	Dropped  []status.Dropped
	Settings settings.Settings
	// Percentile names the tail percentile ("99").
	Percentile string
	// Connect and RTT are the limits the matrix's cells are held to.
	Connect, RTT settings.Limit
	Hosts        []HostRow
	Decision     status.Decision
	Tolerance    status.FailureTolerance
	Timing       status.Timing
	Matrix       Matrix
}

// HostRow is one host's line: its verdict and the reason that decides it.
type HostRow struct {
	Name    string
	Role    status.Role
	Verdict status.Verdict
	// UnfitByLinksTo: unfit only by its links to these implicated voters
	// (status.Host).
	UnfitByLinksTo []string
	Eligible       bool
	Pinned         bool
	Samples        int
	// Deciding is the reason the status names as deciding the verdict
	// (the host's deciding index, status.DecidingReason); nil when this
	// form of the document keeps none of its reasons.
	Deciding *status.Reason
}

// roleOrder puts the voters first, as an operator reads a fleet: the hosts
// that hold the quorum, those becoming voters, the standbys, the rest.
var roleOrder = map[status.Role]int{status.RoleVoter: 0, status.RoleLearner: 1, status.RoleStandby: 2, status.RoleOther: 3}

// ModelOf is the page's view of a decision.
func ModelOf(st *status.Status) *Model {
	s := st.Settings.Values
	m := &Model{
		GeneratedAt: st.GeneratedAt,
		Version:     st.Writer.VersionOrEmpty(),
		DryRun:      st.DryRun,
		Form:        st.Form,
		Dropped:     st.Dropped,
		Settings:    s,
		Percentile:  settings.PercentileName(s.TailPercentile),
		Connect:     s.ConnectLimit(),
		RTT:         s.RTTLimit(),
		Decision:    st.Decision,
		Tolerance:   st.FailureTolerance,
		Timing:      st.Timing,
	}
	// The model outlives the status: nothing of the decision is shared.
	m.Decision.Reasons = slices.Clone(st.Decision.Reasons)
	if i := st.Decision.Deciding; i != nil {
		at := *i
		m.Decision.Deciding = &at
	}
	for _, h := range st.Hosts {
		row := HostRow{Name: h.Name, Role: h.Role, Verdict: h.Verdict, UnfitByLinksTo: h.UnfitByLinksTo, Eligible: h.Eligible, Pinned: h.Pinned, Samples: h.Samples}
		if r, ok := status.DecidingReason(h); ok {
			row.Deciding = &r
		}
		m.Hosts = append(m.Hosts, row)
	}
	slices.SortStableFunc(m.Hosts, func(a, b HostRow) int {
		return cmp.Or(cmp.Compare(roleOrder[a.Role], roleOrder[b.Role]), cmp.Compare(a.Name, b.Name))
	})
	m.Matrix = matrixOf(st, m.Hosts)
	return m
}
