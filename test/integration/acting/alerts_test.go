package acting_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleet-role/fleet-role/internal/acting"
	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// RecordEnv names the directory the alert run's recording is written to
// (deploy/monitoring/testdata/recorded, whose recordings feed the alert
// rules' promtool tests: go test ./internal/alerts -run TestPromtoolFiles
// -update after it); unset, the run is only judged.
const RecordEnv = "FLEET_ROLE_RECORD_SERIES"

// heldPeriods is how many scrapes at least see admit past its deadline with
// the journal refused: the stall alert's `for` (three periods, the longer
// of the two alerts'), and three more. The refusal is held a period more.
const heldPeriods = 6

// scrape is one scrape of the controller's registry: its page and what the
// test reads of it.
type scrape struct {
	at       time.Time
	page     []byte
	deadline map[string]float64 // plan/step -> Unix seconds
	stalled  map[string]bool    // code
}

// recorder scrapes a registry once a period, as a Prometheus whose scrape
// interval is the sample period would, in the format of
// lab/cmd/recordseries's recordings, each block with its wall time.
type recorder struct {
	mu      sync.Mutex
	scrapes []scrape
	events  []string
}

func (r *recorder) run(ctx context.Context, t *testing.T, m *controller.Metrics, period time.Duration) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		mfs, err := m.Registry.Gather()
		if err != nil {
			t.Errorf("gather the controller's metrics: %v", err)
			return
		}
		sc := scrape{at: time.Now(), deadline: map[string]float64{}, stalled: map[string]bool{}}
		var b bytes.Buffer
		enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				t.Errorf("encode %s: %v", mf.GetName(), err)
				return
			}
			for _, mm := range mf.GetMetric() {
				switch mf.GetName() {
				case "fleet_role_swap_step_deadline_timestamp_seconds":
					sc.deadline[label(mm, "plan")+"/"+label(mm, "step")] = mm.GetGauge().GetValue()
				case "fleet_role_acting_stalled":
					sc.stalled[label(mm, "code")] = mm.GetGauge().GetValue() == 1
				}
			}
		}
		sc.page = b.Bytes()
		r.mu.Lock()
		r.scrapes = append(r.scrapes, sc)
		r.mu.Unlock()
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func (r *recorder) event(t *testing.T, format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := fmt.Sprintf("# event scrape=%d ", len(r.scrapes)) + fmt.Sprintf(format, a...)
	r.events = append(r.events, e)
	t.Log(e)
}

func (r *recorder) taken() []scrape {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]scrape(nil), r.scrapes...)
}

// write writes the recording to dir/name.prom.gz.
func (r *recorder) write(dir, name string, s settings.Settings) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Recorded by test/integration/acting (%s=DIR go test -run TestActingStepPastItsDeadline ./test/integration/acting):\n", RecordEnv)
	fmt.Fprintf(&b, "# fleet-role's real controller acting guided on a real kube-apiserver, k3s and the actuators played by the test;\n")
	fmt.Fprintf(&b, "# its registry scraped every %s (the sample period), window %d; each block with its wall time.\n", s.SamplePeriod, s.Window)
	fmt.Fprintf(&b, "# run=%s period=%s window=%d recorded=%s\n", name, s.SamplePeriod, s.Window, time.Now().UTC().Format(time.RFC3339))
	for _, e := range r.events {
		b.WriteString(e + "\n")
	}
	for i, sc := range r.taken() {
		fmt.Fprintf(&b, "# scrape=%d target=controller up=1 at=%.3f\n", i, float64(sc.at.UnixMilli())/1000)
		b.Write(sc.page)
	}
	f, err := os.Create(filepath.Join(dir, name+".prom.gz"))
	if err != nil {
		return err
	}
	zw, _ := gzip.NewWriterLevel(f, gzip.BestCompression)
	zw.Header.ModTime = time.Time{}
	if _, err := zw.Write(b.Bytes()); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// refuseJournal makes the API server refuse every update of the journal,
// as a policy or webhook gone wrong would refuse the controller's writes;
// off, it removes that. It returns once a dry-run update is refused
// (or taken).
func refuseJournal(ctx context.Context, t *testing.T, c *testkit.Cluster, on bool) {
	t.Helper()
	const name, refusal = "test-refuse-journal", "the test refuses every write of the journal"
	pol := c.Admin.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	bind := c.Admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	if on {
		fail := admissionv1.Fail
		if _, err := pol.Create(ctx, &admissionv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: &fail,
				MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionv1.RuleWithOperations{
						Operations: []admissionv1.OperationType{admissionv1.Update},
						Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
					},
				}}},
				Validations: []admissionv1.Validation{{
					Expression: fmt.Sprintf("object.metadata.namespace != '%s' || object.metadata.name != '%s'", c.Namespace, acting.JournalConfigMap),
					Message:    refusal,
				}},
			},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := bind.Create(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	} else {
		if err := bind.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := pol.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The API server loads policies from its informers: a dry-run update
	// by the controller (whom alone the install lets write the journal)
	// says when this one is (or is no longer) in force.
	cms := c.Client(t, testkit.ControllerSA).ConfigMapClient(c.Namespace)
	testkit.Eventually(t, 30*time.Second, func() error {
		_, err := cms.Patch(ctx, acting.JournalConfigMap, types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"test-dry-run":"x"}}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		if refused := err != nil && strings.Contains(err.Error(), refusal); refused != on || (!on && err != nil) {
			return fmt.Errorf("the controller's dry-run update of the journal: %v, want refused by %q: %v", err, name, on)
		}
		return nil
	})
}

// A swap's step past its deadline that the controller cannot end (its
// journal writes refused) is exported as such for as long as it lasts, with
// the stall that explains it, and both are gone at the first scrapes after
// the controller can write again and aborts the swap: what the alerts
// FleetRoleSwapPastDeadline and FleetRoleActingStalled read. With
// FLEET_ROLE_RECORD_SERIES set, the run is recorded for their promtool
// tests.
func TestActingStepPastItsDeadline(t *testing.T) {
	c := testkit.StartActing(t)
	// Admit's deadline is learner_stall_time: 10 s, long enough for the
	// refusal to be in force before it passes (about a second here).
	f := newFleet(t, c, settings.ActingGuided, func(s *settings.Settings) { s.LearnerStallTime = 10 * time.Second })
	m := controller.NewMetrics()
	rec := &recorder{}
	rctx, stopRecording := context.WithCancel(context.Background())
	recorded := make(chan struct{})
	go func() { defer close(recorded); rec.run(rctx, t, m, f.s.SamplePeriod) }()
	defer func() { stopRecording(); <-recorded }()
	loop := f.metered("a", election(f.s), m)

	plan := f.readyPlan()
	text := plan.ID
	if err := c.PatchData(f.ctx, acting.ApprovalConfigMap, acting.ApprovalKey, &text); err != nil {
		t.Fatal(err)
	}
	rec.event(t, "plan %s approved", plan.ID)
	j := f.await("admit under way", time.Minute, func(j *acting.Journal) error {
		if j == nil || j.Current() == nil || j.Current().Name != acting.StepAdmit || j.Command == nil {
			return errors.New("admit not yet under way")
		}
		return nil
	})
	deadline := *j.Current().Deadline
	refuseJournal(f.ctx, t, c, true)
	rec.event(t, "an admission policy refuses every write of the journal")
	if time.Now().After(deadline) {
		t.Fatalf("the refusal took effect after admit's deadline (%s): the run shows nothing", deadline.Format(time.RFC3339Nano))
	}
	// Past the deadline, held long enough for both alerts to fire.
	hold := deadline.Add((heldPeriods + 1) * f.s.SamplePeriod)
	testkit.Eventually(t, time.Minute, func() error {
		if n := time.Now(); n.Before(hold) {
			return fmt.Errorf("%v before the hold ends", hold.Sub(n))
		}
		return nil
	})
	// Taken before the policy goes: from its deletion the controller may
	// write the abort before the API server is seen to take writes again.
	liftedAt := time.Now()
	refuseJournal(f.ctx, t, c, false)
	rec.event(t, "the admission policy removed")
	j = f.await("the swap aborting at admit", time.Minute, func(j *acting.Journal) error {
		if j.Abort == nil {
			return fmt.Errorf("phase %s, no abort yet", j.Phase)
		}
		return nil
	})
	abortSeen := time.Now()
	if j.Abort.Step != acting.StepAdmit || j.Abort.Cause != acting.CauseDeadline {
		t.Fatalf("abort %+v, want at admit, its deadline passed", j.Abort)
	}
	// The undo: the newcomer never joined (etcd's members stayed three),
	// so remove-in finds it gone; standby-in is its actuator's.
	j = f.await("standby-in asked of server-4", time.Minute, func(j *acting.Journal) error {
		if j.Command == nil || j.Command.Verb != acting.VerbEtcdOff || j.Command.Host != "server-4" {
			return fmt.Errorf("phase %s, abort %+v, command %+v", j.Phase, j.Abort, j.Command)
		}
		return nil
	})
	f.report("server-4", acting.Report{PlanID: plan.ID, Seq: j.Command.Seq, Term: j.Term, Done: true})
	f.await("the swap aborted", time.Minute, func(j *acting.Journal) error {
		if j.Phase != acting.PhaseAborted {
			return fmt.Errorf("phase %s", j.Phase)
		}
		return nil
	})
	rec.event(t, "the swap aborted")
	f.periods(5) // scrapes to hold the quiet after it: at least 3 are asked for below
	// The recording ends before the controller does: stopping it cancels
	// the decision in flight, whose reads then fail (ReadFailed), and a
	// scrape between the two would show a stall the swap never had.
	stopRecording()
	<-recorded
	loop.Stop(t)

	// What the scrapes showed: the deadline exported past itself at every
	// scrape from the deadline to the lifting, the refused writes' stall
	// at the last of them, and neither from a period after the abort was
	// written (the metrics follow the decision that wrote it).
	key := plan.ID + "/" + string(acting.StepAdmit)
	past, after := 0, 0
	var last scrape
	for _, sc := range rec.taken() {
		d, exported := sc.deadline[key]
		switch {
		case sc.at.After(deadline) && sc.at.Before(liftedAt):
			if !exported || d != float64(deadline.UnixMilli())/1000 {
				t.Errorf("scrape at %s, past admit's deadline %s with the journal refused: deadline exported %v (%v)", sc.at.Format(time.RFC3339Nano), deadline.Format(time.RFC3339Nano), exported, d)
			}
			past++
			last = sc
		case sc.at.After(abortSeen.Add(f.s.SamplePeriod)):
			if exported || len(sc.stalled) > 0 {
				t.Errorf("scrape at %s, a period after the abort was written: deadline exported %v, stalls %v", sc.at.Format(time.RFC3339Nano), exported, sc.stalled)
			}
			after++
		}
	}
	if past < heldPeriods || after < 3 {
		t.Errorf("%d scrapes past the deadline (want at least %d), %d after the abort (want at least 3)", past, heldPeriods, after)
	} else if !last.stalled[string(acting.StallWriteFailed)] {
		t.Errorf("the last scrape before the lifting (%s) shows stalls %v, want %s", last.at.Format(time.RFC3339Nano), last.stalled, acting.StallWriteFailed)
	}
	t.Logf("%d scrapes showed admit past its deadline, %d after the abort showed nothing", past, after)
	if dir := os.Getenv(RecordEnv); dir != "" {
		if err := rec.write(dir, "acting", f.s); err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded to %s", filepath.Join(dir, "acting.prom.gz"))
	}
}
