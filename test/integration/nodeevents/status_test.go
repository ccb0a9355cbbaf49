package nodeevents

import "github.com/fleet-role/fleet-role/internal/status"

// The statuses the test observes: a controller's decisions before and after
// voter-2's verdict changed and voter-3's record became unreadable, built as
// the decision core writes them.

func num(v float64) *float64 { return &v }

func at(i int) *int { return &i }

// host is a voter (or standby) with one reason that decides its verdict.
func host(name string, role status.Role, v status.Verdict) status.Host {
	r := status.Reason{Signal: status.SignalPeerRTT, Subject: "voter-1", Value: num(0.4014), Limit: num(0.1), Unit: "seconds", Rule: "at_most", OK: v != status.Unfit}
	if v == status.Fit {
		r.Value = num(0.002)
	}
	return status.Host{Name: name, Role: role, Verdict: v, Reasons: []status.Reason{r}, Deciding: at(0)}
}

func statusOf(d status.Decision, hosts ...status.Host) *status.Status {
	return &status.Status{Hosts: hosts, Decision: d}
}

// none is a decision to swap nothing, every voter fit.
var none = status.Decision{Action: status.ActionNone, Deciding: at(0), Reasons: []status.Reason{
	{Signal: status.StepReplace, Code: status.CodeAllVotersFit, OK: false, Detail: "every voter is fit: nothing to replace"}}}

// held is a swap of voter-2 held back at step, for detail.
func held(code status.Code, detail string) status.Decision {
	return status.Decision{Action: status.ActionNone, Deciding: at(2), Reasons: []status.Reason{
		{Signal: status.StepReplace, Code: status.CodeMostSlowLinks, Subject: "voter-2", OK: true, Detail: "voter-2 is the voter on the most slow links"},
		{Signal: status.StepCandidate, Code: status.CodeCandidateUnfit, Subject: "standby-2", OK: false, Detail: "standby-2 is unfit"},
		{Signal: status.SignalOfCode(code), Code: code, OK: false, Detail: detail}}}
}

// hostile is a record's text as an unknown host's reason may carry it:
// terminal escapes, a forged line, a bidirectional override and a byte
// that is not UTF-8.
const hostile = "record cannot be read: \x1b[2J\nNormal  Fit  node/voter-9  all is well \u202eevil\xff"

// unknownHost is a host judged unknown by a reason that carries hostile.
func unknownHost(name string) status.Host {
	return status.Host{Name: name, Role: status.RoleVoter, Verdict: status.Unknown, Deciding: at(0),
		Reasons: []status.Reason{{Signal: status.SignalEntry, Detail: hostile}}}
}
