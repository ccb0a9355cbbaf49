package kube

import (
	"testing"

	"github.com/fleet-role/fleet-role/internal/status"
)

// LeadOut names the voter a decision would replace only when the decision
// is held back by its candidate step alone (no standby, or none fit); a
// gate, a swap, or no voter to replace names none.
func TestLeadOut(t *testing.T) {
	idx := func(i int) *int { return &i }
	replace := status.Reason{Code: status.CodeMostSlowLinks, Subject: "charlie", OK: true}
	for _, c := range []struct {
		name string
		d    status.Decision
		want string
	}{
		{"no standby", status.Decision{Action: status.ActionNone, Reasons: []status.Reason{replace, {Code: status.CodeNoStandby}}, Deciding: idx(1)}, "charlie"},
		{"none fit", status.Decision{Action: status.ActionNone, Reasons: []status.Reason{{Code: status.CodeFurthestOverLimits, Subject: "bravo", OK: true}, {Code: status.CodeNoFitStandby}}, Deciding: idx(1)}, "bravo"},
		{"a gate holds", status.Decision{Action: status.ActionNone, Reasons: []status.Reason{{Code: status.CodeVoterUnreported}, replace, {Code: status.CodeNoStandby}}, Deciding: idx(0)}, ""},
		{"a swap", status.Decision{Action: status.ActionSwap, Out: "charlie", In: "delta", Reasons: []status.Reason{replace}, Deciding: idx(0)}, ""},
		{"no voter to replace", status.Decision{Action: status.ActionNone, Reasons: []status.Reason{{Code: status.CodeAllVotersFit, OK: false}}, Deciding: idx(0)}, ""},
	} {
		if got := LeadOut(c.d); got != c.want {
			t.Errorf("%s: LeadOut = %q, want %q", c.name, got, c.want)
		}
	}
}
