package nodeevents_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/nodeevents"
)

func num(v float64) *float64 { return &v }

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

func at(i int) *int { return &i }

var none = decide.Decision{Action: decide.ActionNone, Deciding: at(0), Reasons: []decide.Reason{
	{Signal: decide.StepReplace, Code: decide.CodeAllVotersFit, OK: false, Detail: "every voter is fit: nothing to replace"}}}

func held(code decide.Code, detail string) decide.Decision {
	return decide.Decision{Action: decide.ActionNone, Deciding: at(2), Reasons: []decide.Reason{
		{Signal: decide.StepReplace, Code: decide.CodeMostSlowLinks, Subject: "voter-2", OK: true, Detail: "voter-2 is the voter on the most slow links"},
		{Signal: decide.StepCandidate, Code: decide.CodeCandidateUnfit, Subject: "standby-2", OK: false, Detail: "standby-2 is unfit"},
		{Signal: decide.SignalOfCode(code), Code: code, OK: false, Detail: detail}}}
}

var swap = decide.Decision{Action: decide.ActionSwap, Out: "voter-2", In: "standby-1", Deciding: at(0), Reasons: []decide.Reason{
	{Signal: decide.StepReplace, Code: decide.CodeMostSlowLinks, Subject: "voter-2", OK: true, Detail: "voter-2 is the voter on the most slow links (2: voter-1, voter-3)"}}}

func TestChanges(t *testing.T) {
	fit3 := []decide.Host{host("voter-1", decide.RoleVoter, decide.Fit), host("voter-2", decide.RoleVoter, decide.Fit), host("standby-1", decide.RoleStandby, decide.Fit)}
	slow := []decide.Host{host("voter-1", decide.RoleVoter, decide.Fit), host("voter-2", decide.RoleVoter, decide.Unfit), host("standby-1", decide.RoleStandby, decide.Fit)}
	for _, tc := range []struct {
		name      string
		prev, cur *decide.Status
		want      []string // node reason type, and a part of the message
	}{
		{"nothing changed", status(none, fit3...), status(none, fit3...), nil},
		{"a voter turns unfit, the swap held by the cooldown",
			status(none, fit3...), status(held(decide.CodeCooldownRunning, "the voter set changed 5m ago"), slow...),
			[]string{"voter-2 SwapHeld Warning step gate_cooldown holds it back: the voter set changed 5m ago; fleet-role judges this voter unfit (was fit): peer_rtt voter-1: 401.4ms, must be at most 100ms"}},
		{"the same step holds again: the verdict alone said it",
			status(held(decide.CodeCooldownRunning, "4m ago"), slow...), status(held(decide.CodeCooldownRunning, "3m ago"), slow...), nil},
		{"another step holds",
			status(held(decide.CodeCooldownRunning, "1m ago"), slow...), status(held(decide.CodeVoterUnreported, "voter-1 is stale"), slow...),
			[]string{"voter-2 SwapHeld Warning step gate_reported holds it back: voter-1 is stale"}},
		{"the swap is advised",
			status(held(decide.CodeCooldownRunning, "1m ago"), slow...), status(swap, slow...),
			[]string{"voter-2 SwapAdvised Warning would swap this voter out for standby-1 (dry run: nothing is changed): voter-2 is the voter on the most slow links"}},
		{"the same swap again says nothing", status(swap, slow...), status(swap, slow...), nil},
		{"the voter recovers: fit, and no swap held (nothing to hold)",
			status(swap, slow...), status(none, fit3...),
			[]string{"voter-2 Fit Normal fleet-role judges this voter fit (was unfit): peer_rtt voter-1: 2ms, must be at most 100ms"}},
		{"a first decision: a new host unknown says nothing, fit says so",
			nil, status(none, host("voter-1", decide.RoleVoter, decide.Unknown), host("standby-1", decide.RoleStandby, decide.Fit)),
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
func golden(t *testing.T, scenario string) *decide.Status {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "decide", "testdata", scenario, "status.json"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := decide.UnmarshalStatus(b)
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
	long := held(decide.CodeVoterUnreported, strings.Repeat("é", nodeevents.MaxMessageBytes))
	slow := host("voter-2", decide.RoleVoter, decide.Unfit)
	for _, extra := range []int{0, 1} {
		d := long
		d.Reasons = append([]decide.Reason{}, long.Reasons...)
		d.Reasons[2].Detail += strings.Repeat("x", extra)
		got := nodeevents.Changes(status(none, slow), status(d, slow))
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
func unknownHost(name string) decide.Host {
	return decide.Host{Name: name, Role: decide.RoleVoter, Verdict: decide.Unknown, Deciding: at(0),
		Reasons: []decide.Reason{{Signal: decide.SignalEntry, Detail: hostile}}}
}

// A message carries a record's text escaped as the CLI prints it, so that
// `kubectl describe node` prints no terminal escape and no forged line; the
// escaping counts against the bound, which still holds.
func TestMessageEscapesRecordText(t *testing.T) {
	got := nodeevents.Changes(status(none, host("voter-3", decide.RoleVoter, decide.Fit)), status(none, unknownHost("voter-3")))
	if len(got) != 1 {
		t.Fatalf("events %+v, want one", got)
	}
	m := got[0].Message
	for _, bad := range []string{"\x1b", "\n", "\u202e", "\xff"} {
		if strings.Contains(m, bad) {
			t.Errorf("message %q holds %q as it is", m, bad)
		}
	}
	if want := decide.Printable(hostile); !strings.Contains(m, want) {
		t.Errorf("message %q lacks the escaped text %q", m, want)
	}
	long := unknownHost("voter-3")
	long.Reasons[0].Detail = strings.Repeat("\x1b", nodeevents.MaxMessageBytes)
	got = nodeevents.Changes(status(none, host("voter-3", decide.RoleVoter, decide.Fit)), status(none, long))
	if m := got[0].Message; len(m) > nodeevents.MaxMessageBytes || strings.Contains(m, "\x1b") || !strings.HasSuffix(m, "…") {
		t.Errorf("a message of escapes: %d bytes (bound %d), %q", len(m), nodeevents.MaxMessageBytes, m[:min(len(m), 80)])
	}
}

// Observe hands each Event to the recorder on its Node, and none for a host
// whose Node it was not given.
func TestObserveRecordsOnTheNode(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	r := nodeevents.New(rec)
	prev := status(none, host("voter-1", decide.RoleVoter, decide.Fit), host("voter-2", decide.RoleVoter, decide.Fit))
	cur := status(none, host("voter-1", decide.RoleVoter, decide.Unfit), host("voter-2", decide.RoleVoter, decide.Unfit))
	r.Observe(prev, cur, []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "voter-1", UID: "u1"}}})
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], "Warning Unfit fleet-role judges this voter unfit (was fit)") {
		t.Fatalf("recorded %q, want one Warning Unfit on voter-1", got)
	}
	var nilRecorder *nodeevents.Recorder
	nilRecorder.Observe(prev, cur, nil) // records nothing, and does not panic
}
