package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// namedToLeave is every voter a decision names to leave: its out, and the
// subject of a replace step that lets the swap go on.
func namedToLeave(st *status.Status) []string {
	var out []string
	for _, r := range st.Decision.Reasons {
		if r.Signal == status.StepReplace && r.OK && r.Subject != "" {
			out = append(out, r.Subject)
		}
	}
	if st.Decision.Out != "" {
		out = append(out, st.Decision.Out)
	}
	return out
}

// A compromised probe writes a crafted record with its own node's token, on
// the real API server, as the probe's real loop writes: server-3 claims that
// every connect to server-1 (whose name sorts first) takes 600 ms, over the
// 250 ms limit, while server-1 measures the same link at 1 ms. The
// admission policy admits it (it is server-3's own record), and the
// decision must not name server-1 at any decision: server-1's slow link
// rests on server-3's record alone. The liar may get itself replaced, and
// does. Then it writes, by hand with the same token, a record that reports
// server-1's etcd member ID: refused by the decision, server-1 judged as
// before.
func TestCraftedRecordOnAPIServer(t *testing.T) {
	c := testkit.Start(t)
	s := testkit.Settings(t, 200*time.Millisecond)
	s.LearnerStallTime = 0
	c.AddNodes(t,
		testkit.Node{Name: "server-1", Voter: true, Eligible: true, Address: "127.0.8.1"},
		testkit.Node{Name: "server-2", Voter: true, Eligible: true, Address: "127.0.8.2"},
		testkit.Node{Name: "server-3", Voter: true, Eligible: true, Address: "127.0.8.3"},
		testkit.Node{Name: "agent-1", Eligible: true, Address: "127.0.8.4"},
	)
	withID := func(node string) func(probe.Plan, int, time.Time) entry.Sample {
		return func(plan probe.Plan, seq int, at time.Time) entry.Sample {
			x := testkit.Fit(plan, seq, at)
			if x.Etcd != nil {
				x.Etcd.MemberID = testkit.MemberID(node)
			}
			return x
		}
	}
	for _, n := range []string{"server-1", "server-2", "agent-1"} {
		startProbe(t, c, s, n, &testkit.Sampler{Make: withID(n)})
	}
	liar, _ := startProbe(t, c, s, "server-3", &testkit.Sampler{Make: func(plan probe.Plan, seq int, at time.Time) entry.Sample {
		x := withID("server-3")(plan, seq, at)
		if _, ok := x.Connect["server-1"]; ok {
			x.Connect["server-1"] = entry.Connect{Seconds: 0.6}
		}
		return x
	}})

	cl := c.Client(t, testkit.ControllerSA)
	ctrl, err := controller.New(controller.Config{Settings: s, Store: cl.ConfigMaps(s.Namespace),
		Records: testkit.RecordSource(t, cl, s.RecordsNamespace()), Nodes: cl.Nodes()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	decisions := 0
	// decide ticks the controller until done holds of a decision, holding
	// every decision on the way to never naming server-1.
	decideUntil := func(within time.Duration, done func(st *status.Status) error) *status.Status {
		t.Helper()
		var last *status.Status
		testkit.Eventually(t, within, func() error {
			st, err := ctrl.Tick(ctx)
			if err != nil {
				return err
			}
			decisions++
			if slices.Contains(namedToLeave(st), "server-1") {
				t.Fatalf("server-1 named to leave on server-3's crafted record: %+v", st.Decision.Reasons)
			}
			last = st
			return done(st)
		})
		return last
	}
	st := decideUntil(2*time.Minute, func(st *status.Status) error {
		if st.Decision.Action != status.ActionSwap {
			return fmt.Errorf("decision %s: %s", st.Decision.Action, firstFailed(st.Decision.Reasons))
		}
		return nil
	})
	if st.Decision.Out != "server-3" || st.Decision.In != "agent-1" {
		t.Fatalf("swap %s -> %s, want server-3 (the liar, on its own record's word) -> agent-1", st.Decision.Out, st.Decision.In)
	}
	if v := hostOf(st, "server-1").Verdict; v != status.Unfit {
		t.Errorf("server-1 is %s, want unfit: the link the liar measures is its to change", v)
	}
	// The step that decides names server-3 for its slow links; server-1,
	// unfit by the links the liar's record alone accuses, is not named
	// (its words say why: "rest on server-3's record alone"; the rule
	// itself is held in internal/decide's trust tests).
	if r, ok := st.Decision.DecidingStep(); !ok || r.Code != status.CodeMostSlowLinks || r.Subject != "server-3" {
		t.Errorf("deciding step %+v, want the replace step naming server-3 for its slow links", r)
	} else {
		t.Logf("replace: %s", r.Detail)
	}
	t.Logf("%d decisions, none naming server-1", decisions)

	// The same token writes a record claiming server-1's member ID.
	liar.Stop(t)
	p3 := c.ProbeClient(t, "server-3")
	raw, err := p3.Records(s.RecordsNamespace()).Get(ctx, "server-3")
	if err != nil {
		t.Fatal(err)
	}
	e, err := entry.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	for i := range e.Samples {
		if x := e.Samples[i].Etcd; x != nil {
			x.MemberID = testkit.MemberID("server-1")
		}
		delete(e.Samples[i].Connect, "server-1")
		e.Samples[i].At = time.Now().Add(-time.Duration(len(e.Samples)-i) * s.SamplePeriod)
	}
	text, err := entry.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	node, err := c.Admin.CoreV1().Nodes().Get(ctx, "server-3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p3.Records(s.RecordsNamespace()).Put(ctx, record.Owner{Name: "server-3", UID: node.UID}, text); err != nil {
		t.Fatalf("the policy refused server-3's own record: %v", err)
	}
	st = decideUntil(time.Minute, func(st *status.Status) error {
		h := hostOf(st, "server-3")
		if h == nil || h.Verdict != status.Unknown || h.Reasons[0].Code != status.CodeMemberClaimed {
			return fmt.Errorf("server-3: %+v", h)
		}
		return nil
	})
	if v := hostOf(st, "server-1").Verdict; v != status.Fit {
		t.Errorf("server-1 is %s once the liar claims its member ID, want fit (its record held the ID first)", v)
	}
	if o := hostOf(st, "server-1").Observation; o == nil || o.MemberID != testkit.MemberID("server-1") {
		t.Errorf("server-1's observation %+v, want member ID %s", o, testkit.MemberID("server-1"))
	}
	t.Logf("server-3: %s", hostOf(st, "server-3").Reasons[0].Detail)
}
