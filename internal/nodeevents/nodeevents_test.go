package nodeevents_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/acting"
	"github.com/fleet-role/fleet-role/internal/nodeevents"
	"github.com/fleet-role/fleet-role/internal/status"
)

func num(v float64) *float64 { return &v }

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

func at(i int) *int { return &i }

var none = status.Decision{Action: status.ActionNone, Deciding: at(0), Reasons: []status.Reason{
	{Signal: status.StepReplace, Code: status.CodeAllVotersFit, OK: false, Detail: "every voter is fit: nothing to replace"}}}

func held(code status.Code, detail string) status.Decision {
	return status.Decision{Action: status.ActionNone, Deciding: at(2), Reasons: []status.Reason{
		{Signal: status.StepReplace, Code: status.CodeMostSlowLinks, Subject: "voter-2", OK: true, Detail: "voter-2 is the voter on the most slow links"},
		{Signal: status.StepCandidate, Code: status.CodeCandidateUnfit, Subject: "standby-2", OK: false, Detail: "standby-2 is unfit"},
		{Signal: status.SignalOfCode(code), Code: code, OK: false, Detail: detail}}}
}

var swap = status.Decision{Action: status.ActionSwap, Out: "voter-2", In: "standby-1", Deciding: at(0), Reasons: []status.Reason{
	{Signal: status.StepReplace, Code: status.CodeMostSlowLinks, Subject: "voter-2", OK: true, Detail: "voter-2 is the voter on the most slow links (2: voter-1, voter-3)"}}}

func TestChanges(t *testing.T) {
	fit3 := []status.Host{host("voter-1", status.RoleVoter, status.Fit), host("voter-2", status.RoleVoter, status.Fit), host("standby-1", status.RoleStandby, status.Fit)}
	slow := []status.Host{host("voter-1", status.RoleVoter, status.Fit), host("voter-2", status.RoleVoter, status.Unfit), host("standby-1", status.RoleStandby, status.Fit)}
	for _, tc := range []struct {
		name      string
		prev, cur *status.Status
		want      []string // node reason type, and a part of the message
	}{
		{"nothing changed", statusOf(none, fit3...), statusOf(none, fit3...), nil},
		{"a voter turns unfit, the swap held by the cooldown",
			statusOf(none, fit3...), statusOf(held(status.CodeCooldownRunning, "the voter set changed 5m ago"), slow...),
			[]string{"voter-2 SwapHeld Warning step gate_cooldown holds it back: the voter set changed 5m ago; fleet-role judges this voter unfit (was fit): peer_rtt voter-1: 401.4ms, must be at most 100ms"}},
		{"the same step holds again: the verdict alone said it",
			statusOf(held(status.CodeCooldownRunning, "4m ago"), slow...), statusOf(held(status.CodeCooldownRunning, "3m ago"), slow...), nil},
		{"another step holds",
			statusOf(held(status.CodeCooldownRunning, "1m ago"), slow...), statusOf(held(status.CodeVoterUnreported, "voter-1 is stale"), slow...),
			[]string{"voter-2 SwapHeld Warning step gate_reported holds it back: voter-1 is stale"}},
		{"the swap is advised",
			statusOf(held(status.CodeCooldownRunning, "1m ago"), slow...), statusOf(swap, slow...),
			[]string{"voter-2 SwapAdvised Warning would swap this voter out for standby-1 (dry run: nothing is changed): voter-2 is the voter on the most slow links"}},
		{"the same swap again says nothing", statusOf(swap, slow...), statusOf(swap, slow...), nil},
		{"the voter recovers: fit, and no swap held (nothing to hold)",
			statusOf(swap, slow...), statusOf(none, fit3...),
			[]string{"voter-2 Fit Normal fleet-role judges this voter fit (was unfit): peer_rtt voter-1: 2ms, must be at most 100ms"}},
		{"a first decision: a new host unknown says nothing, fit says so",
			nil, statusOf(none, host("voter-1", status.RoleVoter, status.Unknown), host("standby-1", status.RoleStandby, status.Fit)),
			[]string{"standby-1 Fit Normal judges this standby fit (was unknown)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := nodeevents.Changes(tc.prev, tc.cur)
			if len(got) != len(tc.want) {
				t.Fatalf("%d events, want %d: %+v", len(got), len(tc.want), got)
			}
			seen := map[string]bool{}
			for i, e := range got {
				if seen[e.Node] {
					t.Errorf("two events on %s in one decision", e.Node)
				}
				seen[e.Node] = true
				f := strings.SplitN(tc.want[i], " ", 4)
				if e.Node != f[0] || e.Reason != f[1] || e.Type != f[2] || !strings.Contains(e.Message, f[3]) {
					t.Errorf("event %+v, want %q", e, tc.want[i])
				}
			}
		})
	}
}

// golden reads a golden scenario's status document, as the controller reads
// its previous one back.
func golden(t *testing.T, scenario string) *status.Status {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "decide", "testdata", scenario, "status.json"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := status.UnmarshalStatus(b)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// On the decisions of the golden scenarios, read back from their documents:
// the messages state the deciding reason and step the documents name by
// index, the holding step the one after every step that passed.
func TestChangesOfGoldenDecisions(t *testing.T) {
	fit := golden(t, "all-fit")
	for _, tc := range []struct {
		scenario string
		want     []string
	}{
		{"swap-held", []string{"alpha SwapHeld Warning fleet-role would swap no voter: step steady holds it back: alpha has been named to leave (for delta) since 2026-11-29T12:00:00Z, at 1 decision in a row; " +
			"the records of alpha, bravo, charlie have not changed since: held until every voter has written again; fleet-role judges this voter unfit (was fit): wal_fsync: 31.817ms, must be under 10ms"}},
		{"slow-voter-link", []string{"bravo SwapAdvised Warning fleet-role would swap this voter out for delta (dry run: nothing is changed): bravo is the voter on the most slow links (1: alpha) of those that explain them (alpha, bravo), and of those on as many, the one the last decision named; " +
			"its worst reason: connect alpha: 801.103ms, must be at most 250ms (220.4% over the limit); unfit voters: alpha, bravo; fleet-role judges this voter unfit (was fit): connect alpha: 801.103ms, must be at most 250ms",
			"alpha Unfit Warning fleet-role judges this voter unfit (was fit): connect bravo: 801.092ms, must be at most 250ms"}},
	} {
		got := nodeevents.Changes(fit, golden(t, tc.scenario))
		var lines []string
		for _, e := range got {
			lines = append(lines, e.Node+" "+e.Reason+" "+e.Type+" "+e.Message)
		}
		slices.Sort(lines)
		slices.Sort(tc.want)
		if !slices.Equal(lines, tc.want) {
			t.Errorf("%s:\n%s\nwant\n%s", tc.scenario, strings.Join(lines, "\n"), strings.Join(tc.want, "\n"))
		}
	}
}

// A message is cut to what the API server takes, at a character boundary.
func TestMessageBound(t *testing.T) {
	long := held(status.CodeVoterUnreported, strings.Repeat("é", nodeevents.MaxMessageBytes))
	slow := host("voter-2", status.RoleVoter, status.Unfit)
	for _, extra := range []int{0, 1} {
		d := long
		d.Reasons = append([]status.Reason{}, long.Reasons...)
		d.Reasons[2].Detail += strings.Repeat("x", extra)
		got := nodeevents.Changes(statusOf(none, slow), statusOf(d, slow))
		if len(got) != 1 || len(got[0].Message) > nodeevents.MaxMessageBytes || !strings.HasSuffix(got[0].Message, "…") {
			t.Fatalf("message of %d bytes: %q", len(got[0].Message), got[0].Message)
		}
	}
}

// hostile is a record's text as an unknown host's reason may carry it: a
// terminal escape that clears the screen, a line break that forges a line
// of `kubectl get events`, a bidi override and a byte that is not UTF-8.
const hostile = "record cannot be read: \x1b[2J\nNormal  Fit  node/voter-9  all is well \u202eevil\xff"

// unknownHost is a host judged unknown by a reason that carries hostile.
func unknownHost(name string) status.Host {
	return status.Host{Name: name, Role: status.RoleVoter, Verdict: status.Unknown, Deciding: at(0),
		Reasons: []status.Reason{{Signal: status.SignalEntry, Detail: hostile}}}
}

// A message carries a record's text escaped as the CLI prints it, so that
// `kubectl describe node` prints no terminal escape and no forged line; the
// escaping counts against the bound, which still holds.
func TestMessageEscapesRecordText(t *testing.T) {
	got := nodeevents.Changes(statusOf(none, host("voter-3", status.RoleVoter, status.Fit)), statusOf(none, unknownHost("voter-3")))
	if len(got) != 1 {
		t.Fatalf("events %+v, want one", got)
	}
	m := got[0].Message
	for _, bad := range []string{"\x1b", "\n", "\u202e", "\xff"} {
		if strings.Contains(m, bad) {
			t.Errorf("message %q holds %q as it is", m, bad)
		}
	}
	if want := status.Printable(hostile); !strings.Contains(m, want) {
		t.Errorf("message %q lacks the escaped text %q", m, want)
	}
	long := unknownHost("voter-3")
	long.Reasons[0].Detail = strings.Repeat("\x1b", nodeevents.MaxMessageBytes)
	got = nodeevents.Changes(statusOf(none, host("voter-3", status.RoleVoter, status.Fit)), statusOf(none, long))
	if m := got[0].Message; len(m) > nodeevents.MaxMessageBytes || strings.Contains(m, "\x1b") || !strings.HasSuffix(m, "…") {
		t.Errorf("a message of escapes: %d bytes (bound %d), %q", len(m), nodeevents.MaxMessageBytes, m[:min(len(m), 80)])
	}
}

// Observe writes each Event on its Node, and none for a host whose Node it
// was not given.
func TestObserveRecordsOnTheNode(t *testing.T) {
	s := &createdSink{created: make(chan *corev1.Event, 10)}
	r := nodeevents.Start(s, "fleet-role-controller", nil, nil)
	defer r.Stop()
	prev := statusOf(none, host("voter-1", status.RoleVoter, status.Fit), host("voter-2", status.RoleVoter, status.Fit))
	cur := statusOf(none, host("voter-1", status.RoleVoter, status.Unfit), host("voter-2", status.RoleVoter, status.Unfit))
	r.Observe(prev, cur, []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "voter-1", UID: "u1"}}})
	select {
	case e := <-s.created:
		if e.Type != corev1.EventTypeWarning || e.Reason != nodeevents.ReasonUnfit || !strings.HasPrefix(e.Message, "fleet-role judges this voter unfit (was fit)") ||
			e.InvolvedObject != (corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: "voter-1", UID: "u1"}) ||
			e.Namespace != metav1.NamespaceDefault || !strings.HasPrefix(e.Name, "voter-1.") || e.Count != 1 || e.Source.Component != "fleet-role-controller" {
			t.Fatalf("recorded %+v, want one Warning Unfit on voter-1's UID in namespace default", e)
		}
	case <-time.After(time.Minute):
		t.Fatal("nothing recorded within a minute")
	}
	select {
	case e := <-s.created:
		t.Fatalf("recorded %s %s on %s too, whose Node was not given", e.Type, e.Reason, e.InvolvedObject.Name)
	case <-time.After(200 * time.Millisecond):
	}
	var nilRecorder *nodeevents.Recorder
	nilRecorder.Observe(prev, cur, nil) // records nothing, and does not panic
	nilRecorder.Stop()
}

// createdSink tells each Event created.
type createdSink struct{ created chan *corev1.Event }

func (s *createdSink) Create(_ context.Context, e *corev1.Event) (*corev1.Event, error) {
	s.created <- e
	return e, nil
}

func (s *createdSink) MergePatch(context.Context, string, string, []byte) (*corev1.Event, error) {
	panic("no repeat in this test")
}

// A swap's Events: one per line its history gained since the journal
// before, on the host the line is about, the command named beside the step
// that asked for it; a failed step and the abort are Warnings; a journal of
// another swap starts over.
func TestSwapChanges(t *testing.T) {
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	before := &acting.Journal{PlanID: "swap-1", Out: acting.Party{Node: "x"}, In: acting.Party{Node: "s"}, Started: at,
		History: []acting.Event{{Step: "open", State: "running"}, {Step: "admit", State: "pending"}}}
	after := *before
	after.History = append(append([]acting.Event(nil), before.History...),
		acting.Event{Step: "admit", State: "running"},
		acting.Event{Step: "promote", State: "failed", Cause: "deadline"},
		acting.Event{Step: "abort", State: "aborting", Cause: "deadline"},
		acting.Event{Step: "restore-out", State: "running"})
	after.Seq = 2
	after.Command = &acting.Command{Seq: 2, Host: "x", Verb: acting.VerbEtcdOn}
	got := nodeevents.SwapChanges(before, &after)
	want := []nodeevents.Event{
		{Node: "s", Type: corev1.EventTypeNormal, Reason: nodeevents.ReasonSwapStep, Message: "fleet-role swap swap-1 (x out, s in): admit running; x's actuator asked: etcd-on"},
		{Node: "s", Type: corev1.EventTypeWarning, Reason: nodeevents.ReasonSwapStep, Message: "fleet-role swap swap-1 (x out, s in): promote failed (deadline)"},
		{Node: "x", Type: corev1.EventTypeWarning, Reason: nodeevents.ReasonSwapStep, Message: "fleet-role swap swap-1 (x out, s in): abort aborting (deadline)"},
		{Node: "s", Type: corev1.EventTypeWarning, Reason: nodeevents.ReasonSwapStep, Message: "fleet-role swap swap-1 (x out, s in): abort aborting (deadline)"},
		{Node: "x", Type: corev1.EventTypeNormal, Reason: nodeevents.ReasonSwapStep, Message: "fleet-role swap swap-1 (x out, s in): restore-out running; x's actuator asked: etcd-on"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%+v\nwant\n%+v", got, want)
	}
	if got := nodeevents.SwapChanges(&after, &after); len(got) != 0 {
		t.Errorf("nothing new: %+v", got)
	}
	other := after
	other.PlanID = "swap-2"
	if got := nodeevents.SwapChanges(&after, &other); len(got) != 2*2+4 {
		t.Errorf("another swap: %d events, want its whole history's (8)", len(got))
	}
}

// A leadership move's lines go on its one host's Node, and say what it
// moves.
func TestLeadershipMoveChanges(t *testing.T) {
	j := &acting.Journal{Kind: acting.KindMoveLeader, PlanID: "lead-1", Out: acting.Party{Node: "x"},
		History: []acting.Event{{Step: "open", State: "running"}, {Step: "move-leader", State: "done"}, {Step: "swap", State: "done"}}}
	got := nodeevents.SwapChanges(nil, j)
	if len(got) != 3 {
		t.Fatalf("events %+v, want one a line, on x alone", got)
	}
	for _, e := range got {
		if e.Node != "x" || !strings.HasPrefix(e.Message, "fleet-role move-leader lead-1 (etcd's leadership off x): ") {
			t.Errorf("event %+v, want on x, saying the leadership move", e)
		}
	}
}
