package probe_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/lab/probetest"
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
	c := probetest.Start(t)
	s := probetest.Settings(t, 100*time.Millisecond)
	c.AddNodes(t,
		probetest.Node{Name: "server-1", Voter: true, Eligible: true, Address: "127.0.12.1"},
		probetest.Node{Name: "agent-1", Eligible: true, Address: "127.0.12.2"},
	)
	ctx := context.Background()
	start := func(node string) (*probe.Prober, *probe.Metrics, *probetest.Log, *probetest.Loop) {
		cl := c.ProbeClient(t, node)
		m, log := probe.NewMetrics(), probetest.NewLog()
		p, err := probe.New(probe.Config{Node: node, Settings: s, Records: cl.Records(s.Namespace),
			Policy: cl.PolicyCheck(s.Namespace, s.StatusConfigMap), Nodes: cl.Nodes(),
			Sampler: &probetest.Sampler{}, Log: log.Logger, Metrics: m})
		if err != nil {
			t.Fatal(err)
		}
		return p, m, log, probetest.Go(t, "probe "+node, p.Run)
	}
	p, m, log, _ := start("agent-1")
	probetest.Eventually(t, time.Minute, func() error {
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
	probetest.Eventually(t, time.Minute, func() error {
		e, ok := c.Entry(t, "agent-1")
		if !ok || e.Withheld == "" || len(e.Samples) != 0 {
			return fmt.Errorf("agent-1's record: withheld %q, %d samples", e.Withheld, len(e.Samples))
		}
		return nil
	})
	t.Logf("the binding deleted: agent-1's record is the withheld marker %.1f s later (the check runs every %v)", time.Since(removed).Seconds(), s.StaleAfter().Duration())
	e, _ := c.Entry(t, "agent-1")
	for _, want := range []string{"the API server admitted, as dry runs, a create of ConfigMap fleet-role/agent-1.fleet-role-policy-check", "and a patch of ConfigMap fleet-role/fleet-role-status", "fleet-role-probe-records is not in force"} {
		if !strings.Contains(e.Withheld, want) {
			t.Errorf("withheld %q lacks %q", e.Withheld, want)
		}
	}
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
	probetest.Eventually(t, time.Minute, func() error {
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

	// The controller names both hosts and the reason.
	cl := c.Client(t, probetest.ControllerSA)
	metrics := controller.NewMetrics()
	ctrl, err := controller.New(controller.Config{Settings: s, Store: cl.ConfigMaps(s.Namespace),
		Records: probetest.RecordSource(t, cl, s.Namespace), Nodes: cl.Nodes(), Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	probetest.Eventually(t, time.Minute, func() error {
		st, err := ctrl.Tick(ctx)
		if err != nil {
			return err
		}
		for _, n := range []string{"agent-1", "server-1"} {
			h := hostIn(st, n)
			if h == nil || h.Verdict != decide.Unknown || len(h.Reasons) == 0 || h.Reasons[0].Signal != decide.SignalRecord ||
				!strings.HasPrefix(h.Reasons[0].Detail, "withheld: the probe writes no samples: the API server admitted") {
				return fmt.Errorf("%s: %+v", n, h)
			}
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
	probetest.Eventually(t, time.Minute, func() error {
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
}

func hostIn(st *decide.Status, name string) *decide.Host {
	for i := range st.Hosts {
		if st.Hosts[i].Name == name {
			return &st.Hosts[i]
		}
	}
	return nil
}

// With the status ConfigMap deleted (a person, or an uninstall left half
// done), a probe that starts still proves the policy in force by the
// refused create of a record not its own, and writes its samples: it does
// not wait for the install to be applied again. With the binding also gone
// it still withholds: a status it cannot patch does not hide an admitted
// create.
func TestPolicyCheckWithTheStatusGone(t *testing.T) {
	c := probetest.Start(t)
	s := probetest.Settings(t, 100*time.Millisecond)
	c.AddNodes(t, probetest.Node{Name: "agent-1", Eligible: true, Address: "127.0.12.3"},
		probetest.Node{Name: "agent-2", Eligible: true, Address: "127.0.12.4"})
	ctx := context.Background()
	if err := c.Admin.CoreV1().ConfigMaps(s.Namespace).Delete(ctx, s.StatusConfigMap, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	start := func(node string) (*probe.Prober, *probe.Metrics) {
		cl := c.ProbeClient(t, node)
		m := probe.NewMetrics()
		p, err := probe.New(probe.Config{Node: node, Settings: s, Records: cl.Records(s.Namespace),
			Policy: cl.PolicyCheck(s.Namespace, s.StatusConfigMap), Nodes: cl.Nodes(),
			Sampler: &probetest.Sampler{}, Log: probetest.NewLog().Logger, Metrics: m})
		if err != nil {
			t.Fatal(err)
		}
		probetest.Go(t, "probe "+node, p.Run)
		return p, m
	}
	p, m := start("agent-1")
	probetest.Eventually(t, time.Minute, func() error {
		if err := p.Ready(); err != nil {
			return err
		}
		if e, ok := c.Entry(t, "agent-1"); !ok || e.Withheld != "" || len(e.Samples) < 3 {
			return fmt.Errorf("agent-1's record: withheld %q, %d samples", e.Withheld, len(e.Samples))
		}
		return nil
	})
	if v, ok := gauge(t, m.Registry, "fleet_role_probe_policy_enforced"); !ok || v != 1 {
		t.Errorf("fleet_role_probe_policy_enforced %v (exported %v) with the status gone and the policy in force, want 1", v, ok)
	}

	if err := c.Admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, "fleet-role-probe-records", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p2, _ := start("agent-2")
	probetest.Eventually(t, time.Minute, func() error {
		if err := p2.Ready(); err == nil || !strings.Contains(err.Error(), "writing no samples") {
			return fmt.Errorf("agent-2 Ready: %v, want writing no samples", err)
		}
		e, ok := c.Entry(t, "agent-2")
		if !ok || len(e.Samples) != 0 || !strings.Contains(e.Withheld, "a create of ConfigMap fleet-role/agent-2.fleet-role-policy-check") {
			return fmt.Errorf("agent-2's record: %v, %d samples, withheld %q", ok, len(e.Samples), e.Withheld)
		}
		return nil
	})
}
