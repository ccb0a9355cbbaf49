package probe

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// gauge is the value of a gauge without labels, and whether it is exported.
func gauge(t *testing.T, reg *prometheus.Registry, name string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// Fail closed, on the real API server: with the admission policy in force
// the probe's dry runs are refused and it writes its samples; with the
// policy's binding deleted (as a cluster whose admission plugin is off, or
// an install that skipped the policy, would have it) the API server admits
// them, and the probe writes no samples: its record becomes a marker that
// says why, its readiness fails, fleet_role_probe_policy_enforced reads 0,
// and the controller's status names the host unknown with that reason. A
// probe that starts while the binding is gone never writes a sample. With
// the binding back, the probe writes its window again.
func TestFailClosedWithoutThePolicy(t *testing.T) {
	c := testkit.Start(t)
	s := testkit.Settings(t, 100*time.Millisecond)
	c.AddNodes(t,
		testkit.Node{Name: "server-1", Voter: true, Eligible: true, Address: "127.0.12.1"},
		testkit.Node{Name: "agent-1", Eligible: true, Address: "127.0.12.2"},
	)
	ctx := context.Background()
	start := func(node string) (*probe.Prober, *probe.Metrics, *testkit.Log, *testkit.Loop) {
		cl := c.ProbeClient(t, node)
		m, log := probe.NewMetrics(), testkit.NewLog()
		p, err := probe.New(probe.Config{Node: node, Settings: s, Records: cl.Records(s.RecordsNamespace()),
			Policy: cl.PolicyCheck(s.RecordsNamespace()), Nodes: cl.Nodes(),
			Sampler: &testkit.Sampler{}, Log: log.Logger, Metrics: m})
		if err != nil {
			t.Fatal(err)
		}
		return p, m, log, testkit.Go(t, "probe "+node, p.Run)
	}
	p, m, log, _ := start("agent-1")
	testkit.Eventually(t, time.Minute, func() error {
		if err := p.Ready(); err != nil {
			return err
		}
		if e, ok := c.Entry(t, "agent-1"); !ok || len(e.Samples) < 3 {
			return fmt.Errorf("agent-1's record: %d samples", len(e.Samples))
		}
		return nil
	})
	if v, ok := gauge(t, m.Registry, "fleet_role_probe_policy_enforced"); !ok || v != 1 {
		t.Fatalf("fleet_role_probe_policy_enforced %v (exported %v) with the policy in force, want 1", v, ok)
	}

	// Right after the install the API server may not hold the policy yet:
	// a first check then sees it admitted, and the probe withholds until
	// the next. Only what comes after the binding's deletion is counted.
	const withholding = "writing no samples: the API server did not refuse a write to a record not this node's"
	before := len(log.Records(withholding))

	// The binding deleted: the policy is no longer enforced.
	const binding = "fleet-role-probe-records"
	saved, err := c.Admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, binding, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, binding, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	removed := time.Now()
	testkit.Eventually(t, time.Minute, func() error {
		e, ok := c.Entry(t, "agent-1")
		if !ok || e.Withheld == "" || len(e.Samples) != 0 {
			return fmt.Errorf("agent-1's record: withheld %q, %d samples", e.Withheld, len(e.Samples))
		}
		return nil
	})
	t.Logf("the binding deleted: agent-1's record is the withheld marker %.1f s later (the check runs every %v)", time.Since(removed).Seconds(), s.StaleAfter().Duration())
	e, _ := c.Entry(t, "agent-1")
	for _, want := range []string{"the API server admitted, as a dry run, a create of ConfigMap " + s.RecordsNamespace() + "/agent-1.fleet-role-policy-check", "fleet-role-probe-records is not in force"} {
		if !strings.Contains(e.Withheld, want) {
			t.Errorf("withheld %q lacks %q", e.Withheld, want)
		}
	}
	checkOutOfReach(t, ctx, c, s, "agent-1")

	// The attack the marker must survive: with the policy off, another
	// node's probe token overwrites agent-1's marker with a record of its
	// making. The honest probe writes its marker again at its next check
	// (every period while the policy is off): the old probe wrote it once
	// a spell, and a forged record then stood until the policy came back.
	forged, err := entry.Encode(testkit.RealisticEntry("agent-1", []string{"server-1"}, -1, 3, s.SamplePeriod, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	agent1, err := c.Admin.CoreV1().Nodes().Get(ctx, "agent-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ProbeClient(t, "server-1").Records(s.RecordsNamespace()).Put(ctx, record.Owner{Name: "agent-1", UID: agent1.UID}, forged); err != nil {
		t.Fatalf("with the policy off, server-1's probe token could not overwrite agent-1's record: %v", err)
	}
	forgedAt := time.Now()
	testkit.Eventually(t, time.Minute, func() error {
		if e, ok := c.Entry(t, "agent-1"); !ok || e.Withheld == "" || len(e.Samples) != 0 {
			return fmt.Errorf("agent-1's record: withheld %q, %d samples", e.Withheld, len(e.Samples))
		}
		return nil
	})
	back := time.Since(forgedAt)
	t.Logf("a record forged with server-1's token over agent-1's marker: the marker back %.2f s later (period %v)", back.Seconds(), s.SamplePeriod)

	if err := p.Ready(); err == nil || !strings.Contains(err.Error(), "writing no samples") {
		t.Errorf("Ready: %v, want writing no samples", err)
	}
	if v, ok := gauge(t, m.Registry, "fleet_role_probe_policy_enforced"); !ok || v != 0 {
		t.Errorf("fleet_role_probe_policy_enforced %v with the policy gone, want 0", v)
	}
	if n := len(log.Records(withholding)) - before; n != 1 {
		t.Errorf("the log says why %d times since the binding was deleted, want once:\n%s", n, log.String())
	}
	// It stays withheld: samples are taken and not written.
	time.Sleep(3 * s.StaleAfter().Duration())
	if e, _ := c.Entry(t, "agent-1"); len(e.Samples) != 0 {
		t.Errorf("%d samples written with the policy gone", len(e.Samples))
	}

	// A probe that starts now never writes a sample.
	p2, _, _, _ := start("server-1")
	testkit.Eventually(t, time.Minute, func() error {
		if err := p2.Ready(); err == nil || !strings.Contains(err.Error(), "writing no samples") {
			return fmt.Errorf("server-1 Ready: %v", err)
		}
		if e, ok := c.Entry(t, "server-1"); !ok || e.Withheld == "" {
			return fmt.Errorf("server-1's record: %v, withheld %q", ok, e.Withheld)
		}
		return nil
	})
	time.Sleep(3 * s.StaleAfter().Duration())
	if e, _ := c.Entry(t, "server-1"); len(e.Samples) != 0 {
		t.Errorf("server-1, started without the policy, wrote %d samples", len(e.Samples))
	}

	// The controller names both hosts and the reason, and, reading the
	// policy itself with its own token, holds every swap for the whole
	// fleet.
	cl := c.Client(t, testkit.ControllerSA)
	metrics := controller.NewMetrics()
	ctrl, err := controller.New(controller.Config{Settings: s, Store: cl.ConfigMaps(s.Namespace),
		Records: testkit.RecordSource(t, cl, s.RecordsNamespace()), Nodes: cl.Nodes(), Metrics: metrics,
		Policy: cl.PolicyReader()})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, func() error {
		st, err := ctrl.Tick(ctx)
		if err != nil {
			return err
		}
		for _, n := range []string{"agent-1", "server-1"} {
			h := hostIn(st, n)
			// Withheld, quoting the marker's words: what the API server admitted.
			if h == nil || h.Verdict != status.Unknown || len(h.Reasons) == 0 || h.Reasons[0].Signal != status.SignalRecord ||
				h.Reasons[0].Code != status.CodeRecordWithheld || !strings.Contains(h.Reasons[0].Detail, ": the API server admitted") {
				return fmt.Errorf("%s: %+v", n, h)
			}
		}
		if err := protectedGate(st, true, "the controller read the admission policy not in force: the ValidatingAdmissionPolicyBinding fleet-role-probe-records is gone"); err != nil {
			return err
		}
		t.Logf("the status names server-1: %s", hostIn(st, "server-1").Reasons[0].Detail)
		return nil
	})

	// The binding back: the window is written again.
	saved.ResourceVersion, saved.UID = "", ""
	if _, err := c.Admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: saved.Name, Labels: saved.Labels}, Spec: saved.Spec}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rebound := time.Now()
	// At once, before any probe has written its samples again: still held.
	if st, err := ctrl.Tick(ctx); err != nil {
		t.Fatal(err)
	} else if err := protectedGate(st, true, ""); err != nil {
		t.Errorf("right after the binding came back, before any probe wrote again: %v", err)
	}
	testkit.Eventually(t, time.Minute, func() error {
		if err := p.Ready(); err != nil {
			return err
		}
		e, ok := c.Entry(t, "agent-1")
		if !ok || e.Withheld != "" || len(e.Samples) < s.Window {
			return fmt.Errorf("agent-1's record: withheld %q, %d samples", e.Withheld, len(e.Samples))
		}
		return nil
	})
	if v, _ := gauge(t, m.Registry, "fleet_role_probe_policy_enforced"); v != 1 {
		t.Errorf("fleet_role_probe_policy_enforced %v with the policy back, want 1", v)
	}
	// The controller frees the fleet once it reads the policy in force,
	// no marker has come for entry_unchanged, and both probes have written
	// their samples since: not before.
	testkit.Eventually(t, time.Minute, func() error {
		st, err := ctrl.Tick(ctx)
		if err != nil {
			return err
		}
		if err := protectedGate(st, false, ""); err != nil {
			return err
		}
		for _, n := range []string{"agent-1", "server-1"} {
			if h := hostIn(st, n); h == nil || len(h.Reasons) == 0 || withheld(h.Reasons[0].Code) {
				return fmt.Errorf("%s still held: %+v", n, h)
			}
		}
		return nil
	})
	t.Logf("the fleet freed %.2f s after the binding came back (entry_unchanged %v; agent-1 had to write a full window first)", time.Since(rebound).Seconds(), s.StaleAfter().Duration())
}

// protectedGate says whether st's decision holds (held) or does not hold
// every swap for the records unprotected, its detail carrying want.
func protectedGate(st *status.Status, held bool, want string) error {
	for _, r := range st.Decision.Reasons {
		if r.Signal != status.GateProtected {
			continue
		}
		if !held {
			return fmt.Errorf("the decision still holds every swap: %s", r.Detail)
		}
		if r.OK || r.Code != status.CodeRecordsUnprotected || !strings.Contains(r.Detail, want) {
			return fmt.Errorf("gate_protected %v: %s; want held, saying %q", r.OK, r.Detail, want)
		}
		return nil
	}
	if held {
		return fmt.Errorf("no gate_protected among the decision's reasons: %+v", st.Decision.Reasons)
	}
	return nil
}

// withheld says whether a host's reason code holds its samples back: a
// withheld marker, or one seen while the records were unprotected.
func withheld(c status.Code) bool {
	return c == status.CodeRecordWithheld || c == status.CodeWithheldUnprotected
}

func hostIn(st *status.Status, name string) *status.Host {
	for i := range st.Hosts {
		if st.Hosts[i].Name == name {
			return &st.Hosts[i]
		}
	}
	return nil
}

// checkOutOfReach holds, with the admission policy off, what RBAC alone
// keeps from node's probe credential: the status and the settings, in
// fleet-role's own namespace, can be neither written nor deleted, and no
// ConfigMap made there; while the write the policy exists to refuse, a
// record not its own in the records' namespace, is admitted (so the policy
// is indeed off). Every write is a server-side dry run.
func checkOutOfReach(t *testing.T, ctx context.Context, c *testkit.Cluster, s settings.Settings, node string) {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(c.ProbeClient(t, node).Config())
	dry := []string{metav1.DryRunAll}
	own := cs.CoreV1().ConfigMaps(s.Namespace)
	other := record.Object(s.RecordsNamespace(), record.Owner{Name: "someone-else"}, "{}")
	if _, err := cs.CoreV1().ConfigMaps(s.RecordsNamespace()).Create(ctx, other, metav1.CreateOptions{DryRun: dry}); err != nil {
		t.Errorf("with the policy off, the probe on %s was refused a record not its own (%v): the policy is not off", node, err)
	}
	for what, do := range map[string]func() error{
		"patch " + s.StatusConfigMap: func() error {
			_, err := own.Patch(ctx, s.StatusConfigMap, types.MergePatchType, []byte(`{"data":{"status.json":"{}"}}`), metav1.PatchOptions{DryRun: dry})
			return err
		},
		"delete " + s.StatusConfigMap: func() error {
			return own.Delete(ctx, s.StatusConfigMap, metav1.DeleteOptions{DryRun: dry})
		},
		"patch fleet-role-settings": func() error {
			_, err := own.Patch(ctx, "fleet-role-settings", types.MergePatchType, []byte(`{"data":{"settings.yaml":""}}`), metav1.PatchOptions{DryRun: dry})
			return err
		},
		"create a ConfigMap in " + s.Namespace: func() error {
			_, err := own.Create(ctx, record.Object(s.Namespace, record.Owner{Name: node}, "{}"), metav1.CreateOptions{DryRun: dry})
			return err
		},
	} {
		err := do()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot ") {
			t.Errorf("with the policy off, the probe on %s asked to %s: %v, want refused by RBAC", node, what, err)
		} else {
			t.Logf("with the policy off, the probe on %s may not %s: %v", node, what, err)
		}
	}
}
