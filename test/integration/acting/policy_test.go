package acting_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/fleet-role/fleet-role/internal/acting"
	"github.com/fleet-role/fleet-role/internal/cli"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

const actuatorSA = "fleet-role-actuator"

// journalFor is a journal of a running swap of out for in, as the executor
// opens one.
func journalFor(out, in, plan string) *acting.Journal {
	j := &acting.Journal{Schema: acting.JournalSchema, PlanID: plan, Out: acting.Party{Node: out, MemberID: "a1"},
		In: acting.Party{Node: in}, Phase: acting.PhaseRunning, Started: time.Now().UTC(), History: []acting.Event{}}
	for _, n := range acting.Steps {
		j.Steps = append(j.Steps, acting.JournalStep{Name: n, State: acting.StatePending})
	}
	return j
}

// forbidden fails unless err is the API server's 403 saying want.
func forbidden(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: admitted, want refused (%s)", what, want)
		return
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %v, want 403 saying %q", what, err, want)
	}
}

// The acting install bounds each power it adds, on the real API server:
// only the controller updates the journal (an administrator is refused
// too); the controller changes a Node only to add k3s's remove annotation
// with its own request naming the plan, on the journal's leaving voter,
// while the swap runs; an actuator writes only its own record, in its
// exact shape, and no other ConfigMap of the namespace its RBAC reaches.
func TestActingPoliciesBoundThePowers(t *testing.T) {
	c := testkit.StartActing(t)
	ns := c.Namespace
	ctx := context.Background()
	c.AddNodes(t,
		testkit.Node{Name: "server-1", Voter: true, Eligible: true, Address: "127.0.21.1"},
		testkit.Node{Name: "server-2", Voter: true, Eligible: true, Address: "127.0.21.2"},
		testkit.Node{Name: "server-3", Voter: true, Eligible: true, Address: "127.0.21.3"},
		testkit.Node{Name: "server-4", Eligible: true, Address: "127.0.21.4"})
	ctrl := c.Client(t, testkit.ControllerSA)
	swap := ctrl.SwapStore(ns)
	act := c.ClientForToken(t, c.PodToken(t, actuatorSA, "server-4"))
	acm := act.ConfigMapClient(ns)
	ctrlset := clientset(t, c, testkit.ControllerSA)
	own, _ := acting.ActuatorRecordName("server-4")
	other, _ := acting.ActuatorRecordName("server-3")

	// A policy is enforced a moment after it is created (the API server
	// compiles it and its informer sees the binding): until then every
	// write below would be admitted. Each is in force once a dry run of a
	// write it refuses is refused.
	dry := []string{metav1.DryRunAll}
	testkit.Eventually(t, time.Minute, func() error {
		if _, err := c.Admin.CoreV1().ConfigMaps(ns).Patch(ctx, acting.JournalConfigMap, types.MergePatchType, []byte(`{"data":{"x":"y"}}`), metav1.PatchOptions{DryRun: dry}); !apierrors.IsForbidden(err) {
			return fmt.Errorf("fleet-role-journal not in force: %v", err)
		}
		if _, err := ctrlset.CoreV1().Nodes().Patch(ctx, "server-2", types.MergePatchType, []byte(`{"metadata":{"annotations":{"x":"y"}}}`), metav1.PatchOptions{DryRun: dry}); !apierrors.IsForbidden(err) {
			return fmt.Errorf("fleet-role-remove-annotation not in force: %v", err)
		}
		if _, err := acm.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: other, Namespace: ns}}, metav1.CreateOptions{DryRun: dry}); !apierrors.IsForbidden(err) {
			return fmt.Errorf("fleet-role-actuator-records not in force: %v", err)
		}
		return nil
	})

	// The journal: the controller writes it at its resourceVersion; an
	// administrator may not; a write at an old version conflicts.
	j0, rv, err := swap.Journal(ctx)
	if err != nil || j0 != nil {
		t.Fatalf("the install's journal: %+v, %v; want an empty one", j0, err)
	}
	const plan = "swap-0123456789"
	rv2, err := swap.WriteJournal(ctx, journalFor("server-3", "server-4", plan), rv)
	if err != nil {
		t.Fatalf("the controller's journal write: %v", err)
	}
	if _, err := swap.WriteJournal(ctx, journalFor("server-3", "server-4", plan), rv); !strings.Contains(err.Error(), kube.ErrConflict.Error()) {
		t.Errorf("a write at the replaced resourceVersion %s: %v, want a conflict", rv, err)
	}
	_, err = c.Admin.CoreV1().ConfigMaps(ns).Patch(ctx, acting.JournalConfigMap, types.MergePatchType,
		[]byte(`{"data":{"out":"server-1"}}`), metav1.PatchOptions{})
	forbidden(t, "the administrator's edit of the journal", err, "only the fleet-role controller writes its swap journal")
	if got, _, err := swap.Journal(ctx); err != nil || got == nil || got.Out.Node != "server-3" {
		t.Fatalf("the journal after the refused edit: %+v, %v", got, err)
	}

	// The remove annotation: the journal's leaving voter only, its plan
	// only, nothing else of the Node.
	forbidden(t, "the remove annotation on server-2", swap.RequestRemoval(ctx, "server-2", plan), "may change only the Node its open swap removes (server-3), not server-2")
	forbidden(t, "the remove annotation naming another plan", swap.RequestRemoval(ctx, "server-3", "swap-other"), "fleet-role.io/remove-requested="+plan)
	for _, p := range []struct{ what, patch, want string }{
		{"a label beside the annotation", `{"metadata":{"labels":{"fleet-role.io/voter-eligible":"false"},"annotations":{"etcd.k3s.cattle.io/remove":"true","fleet-role.io/remove-requested":"` + plan + `"}}}`, "changes no label, spec"},
		{"another annotation beside it", `{"metadata":{"annotations":{"etcd.k3s.cattle.io/remove":"true","fleet-role.io/remove-requested":"` + plan + `","x":"y"}}}`, "changes no annotation of a Node"},
		{"the Node unschedulable", `{"spec":{"unschedulable":true},"metadata":{"annotations":{"etcd.k3s.cattle.io/remove":"true","fleet-role.io/remove-requested":"` + plan + `"}}}`, "changes no label, spec"},
		{"the remove annotation false", `{"metadata":{"annotations":{"etcd.k3s.cattle.io/remove":"false","fleet-role.io/remove-requested":"` + plan + `"}}}`, "sets etcd.k3s.cattle.io/remove=true"},
	} {
		_, err := ctrlset.CoreV1().Nodes().Patch(ctx, "server-3", types.MergePatchType, []byte(p.patch), metav1.PatchOptions{})
		forbidden(t, p.what, err, p.want)
	}
	if err := swap.RequestRemoval(ctx, "server-3", plan); err != nil {
		t.Fatalf("the remove annotation on the journal's leaving voter: %v", err)
	}
	n, err := c.Admin.CoreV1().Nodes().Get(ctx, "server-3", metav1.GetOptions{})
	if err != nil || n.Annotations[acting.RemoveAnnotation] != "true" || n.Annotations[acting.RemoveRequestedAnnotation] != plan {
		t.Fatalf("server-3's annotations %v, %v", n.Annotations, err)
	}
	// The swap ended: no Node change at all.
	done := journalFor("server-3", "server-4", plan)
	done.Phase = acting.PhaseDone
	if _, err := swap.WriteJournal(ctx, done, rv2); err != nil {
		t.Fatalf("the journal at the resourceVersion of the controller's last write, %s: %v", rv2, err)
	}
	forbidden(t, "the remove annotation once the swap is done", swap.RequestRemoval(ctx, "server-3", plan), "no swap runs")

	// The actuator on server-4: its own record in its exact shape, and
	// nothing else.
	node4, err := c.Admin.CoreV1().Nodes().Get(ctx, "server-4", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	report, _ := json.Marshal(acting.Report{PlanID: plan, Seq: 1, Term: 1, Done: true})
	record := func(name string, mutate func(*corev1.ConfigMap)) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels:          map[string]string{"fleet-role.io/record": acting.ActuatorRecordLabel, "app.kubernetes.io/part-of": "fleet-role"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node4.Name, UID: node4.UID}}},
			Data: map[string]string{acting.ReportKey: string(report)}}
		if mutate != nil {
			mutate(cm)
		}
		return cm
	}
	for _, tc := range []struct {
		what string
		cm   *corev1.ConfigMap
		want string
	}{
		{"another host's record", record(other, nil), "may write only its own record, fleet-role-actuator.server-4, not fleet-role-actuator.server-3"},
		{"a record with a second key", record(own, func(cm *corev1.ConfigMap) { cm.Data["x"] = "y" }), "one data key, report"},
		{"a record of 4097 bytes", record(own, func(cm *corev1.ConfigMap) { cm.Data[acting.ReportKey] = strings.Repeat("x", 4097) }), "at most 4096 bytes"},
		{"a record with an annotation", record(own, func(cm *corev1.ConfigMap) { cm.Annotations = map[string]string{"a": "b"} }), "no annotations"},
		{"a record owned by nothing", record(own, func(cm *corev1.ConfigMap) { cm.OwnerReferences = nil }), "exactly one ownerReference"},
		{"a record labelled a probe's", record(own, func(cm *corev1.ConfigMap) { cm.Labels["fleet-role.io/record"] = "probe" }), "fleet-role.io/record=actuator"},
	} {
		_, err := acm.Create(ctx, tc.cm, metav1.CreateOptions{})
		forbidden(t, tc.what, err, tc.want)
	}
	// At the cap, admitted.
	if _, err := acm.Create(ctx, record(own, func(cm *corev1.ConfigMap) { cm.Data[acting.ReportKey] = strings.Repeat("x", 4096) }), metav1.CreateOptions{}); err != nil {
		t.Fatalf("the actuator's own record of 4096 bytes: %v", err)
	}
	for _, name := range []string{acting.JournalConfigMap, acting.ApprovalConfigMap, "fleet-role-status"} {
		_, err := acm.Patch(ctx, name, types.MergePatchType, []byte(`{"data":{"x":"y"}}`), metav1.PatchOptions{})
		want := "may write only its own record"
		if name == acting.JournalConfigMap && err != nil && strings.Contains(err.Error(), "only the fleet-role controller writes its swap journal") {
			// Two policies refuse this one; the API server reports
			// whichever it evaluated first.
			want = "only the fleet-role controller writes its swap journal"
		}
		forbidden(t, "the actuator's write of "+name, err, want)
	}
	// A token of the actuator's account bound to no Pod writes nothing.
	plain := c.ClientForToken(t, c.Token(t, actuatorSA)).ConfigMapClient(ns)
	_, err = plain.Create(ctx, record(own, nil), metav1.CreateOptions{})
	forbidden(t, "the actuator's record by a token bound to no Pod", err, "only with a token bound to a Pod on a Node")

	// The controller reads the report as the actuator wrote it.
	body, _ := json.Marshal(map[string]any{"data": map[string]string{acting.ReportKey: string(report)}})
	if _, err := acm.Patch(ctx, own, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Fatalf("the actuator's own record: %v", err)
	}
	reports, bad, err := swap.Reports(ctx)
	if err != nil || len(bad) != 0 || reports["server-4"] == nil || *reports["server-4"] != (acting.Report{PlanID: plan, Seq: 1, Term: 1, Done: true}) {
		t.Fatalf("the reports the controller reads: %v, bad %v, %v", reports, bad, err)
	}
}

// clientset is a client-go clientset holding a token of ServiceAccount sa.
func clientset(t *testing.T, c *testkit.Cluster, sa string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.Server.TokenConfig(c.Token(t, sa)))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// fleet-role approve approves only the plan the status publishes, only for
// one the Role fleet-role-approver is bound to, and says what comes next.
func TestActingApprove(t *testing.T) {
	c := testkit.StartActing(t)
	ns := c.Namespace
	ctx := context.Background()
	// The status a controller acting guided published: the golden
	// acting-plan scenario's, its mode made guided.
	raw, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), "internal", "decide", "testdata", "acting-plan", "status.json"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := status.UnmarshalStatus(raw)
	if err != nil {
		t.Fatal(err)
	}
	st.Acting.Mode = "guided"
	doc, err := st.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	if err := c.PatchData(ctx, st.Settings.Values.StatusConfigMap, status.StatusKey, &text); err != nil {
		t.Fatal(err)
	}
	plan := st.Acting.Plan.ID

	// alice, bound to nothing, and bob, bound to fleet-role-approver: two
	// ServiceAccounts of namespace default stand in for two people.
	for _, who := range []string{"alice", "bob"} {
		if _, err := c.Admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: who}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := kubectl(t, c, "", "-n", ns, "create", "rolebinding", "fleet-role-approver-bob", "--role=fleet-role-approver", "--serviceaccount=default:bob"); err != nil {
		t.Fatalf("kubectl create rolebinding: %v\n%s", err, out)
	}
	approve := func(who string, args ...string) (int, string, string) {
		kc := filepath.Join(t.TempDir(), who+".kubeconfig")
		tok, err := c.Server.TokenFor(ctx, "default", who, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Server.Kubeconfig(kc, tok); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		code := cli.Main(append([]string{"approve", "--kubeconfig", kc}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	approval := func() string {
		cm, err := c.Admin.CoreV1().ConfigMaps(ns).Get(ctx, acting.ApprovalConfigMap, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm.Data[acting.ApprovalKey]
	}

	if code, _, errb := approve("alice", plan); code != cli.ExitUsage || !strings.Contains(errb, "forbidden") || !strings.Contains(errb, "fleet-role-approver") {
		t.Errorf("alice's approval: exit %d, %q; want 2, forbidden, naming the Role fleet-role-approver", code, errb)
	}
	if got := approval(); got != "" {
		t.Fatalf("after alice's refused approval the approval names %q", got)
	}
	if code, _, errb := approve("bob", "swap-ffffffffff"); code != cli.ExitUsage || !strings.Contains(errb, "is not the published plan: the status publishes "+plan) {
		t.Errorf("bob's approval of another plan: exit %d, %q", code, errb)
	}
	if code, _, errb := approve("bob"); code != cli.ExitUsage || !strings.Contains(errb, "one argument") {
		t.Errorf("approve without a plan: exit %d, %q", code, errb)
	}
	code, out, errb := approve("bob", plan)
	if code != cli.ExitOK || !strings.Contains(out, "approved "+plan+": bravo out, delta in") {
		t.Fatalf("bob's approval: exit %d, stdout %q, stderr %q", code, out, errb)
	}
	if got := approval(); got != plan {
		t.Fatalf("the approval names %q, want %s", got, plan)
	}
	if code, out, errb := approve("bob", "--withdraw"); code != cli.ExitOK || !strings.Contains(out, "approval withdrawn") {
		t.Fatalf("bob's withdrawal: exit %d, %q, %q", code, out, errb)
	}
	if got := approval(); got != "" {
		t.Fatalf("after the withdrawal the approval names %q", got)
	}
}

// kubectl runs kubectl as ServiceAccount sa (the admin when empty).
func kubectl(t *testing.T, c *testkit.Cluster, sa string, args ...string) ([]byte, error) {
	t.Helper()
	return exec.Command(testenv.Kubectl(t), append([]string{"--kubeconfig", c.Kubeconfig(t, sa)}, args...)...).CombinedOutput()
}
