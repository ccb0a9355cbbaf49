package nodeevents

import "github.com/fleet-role/fleet-role/internal/decide"

// The statuses the test observes: a controller's decisions before and after
// voter-2's verdict changed and voter-3's record became unreadable, built as
// the decision core writes them.

func num(v float64) *float64 { return &v }

func at(i int) *int { return &i }

// host is a voter (or standby) with one reason that decides its verdict.
func host(name string, role decide.Role, v decide.Verdict) decide.Host {
	r := decide.Reason{Signal: decide.SignalPeerRTT, Subject: "voter-1", Value: num(0.4014), Limit: num(0.1), Unit: "seconds", Rule: "at_most", OK: v != decide.Unfit}
	if v == decide.Fit {
		r.Value = num(0.002)
	}
	return decide.Host{Name: name, Role: role, Verdict: v, Reasons: []decide.Reason{r}, Deciding: at(0)}
}

func status(d decide.Decision, hosts ...decide.Host) *decide.Status {
	return &decide.Status{Hosts: hosts, Decision: d}
}

// none is a decision to swap nothing, every voter fit.
var none = decide.Decision{Action: decide.ActionNone, Deciding: at(0), Reasons: []decide.Reason{
	{Signal: decide.StepReplace, OK: false, Detail: "every voter is fit: nothing to replace"}}}

// held is a swap of voter-2 held back at step, for detail.
func held(step, detail string) decide.Decision {
	return decide.Decision{Action: decide.ActionNone, Deciding: at(2), Reasons: []decide.Reason{
		{Signal: decide.StepReplace, Subject: "voter-2", OK: true, Detail: "voter-2 is the voter on the most slow links"},
		{Signal: decide.StepCandidate, Subject: "standby-2", OK: false, Detail: "standby-2 is unfit"},
		{Signal: step, OK: false, Detail: detail}}}
}

// hostile is a record's text as an unknown host's reason may carry it:
// terminal escapes, a forged line, a bidirectional override and a byte
// that is not UTF-8.
const hostile = "record cannot be read: \x1b[2J\nNormal  Fit  node/voter-9  all is well \u202eevil\xff"

// unknownHost is a host judged unknown by a reason that carries hostile.
func unknownHost(name string) decide.Host {
	return decide.Host{Name: name, Role: decide.RoleVoter, Verdict: decide.Unknown, Deciding: at(0),
		Reasons: []decide.Reason{{Signal: decide.SignalEntry, Detail: hostile}}}
}
