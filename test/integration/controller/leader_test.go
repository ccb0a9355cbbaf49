package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/internal/statuspage"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// cutLeases is a Lease client that can be cut off from the API server, as
// a controller on a node that lost its network is, while its other calls
// go through.
type cutLeases struct {
	kube.Leases
	cut atomic.Bool
}

var errCut = errors.New("cut off from the Lease")

func (l *cutLeases) Get(ctx context.Context, name string) (kube.LeaseRecord, string, error) {
	if l.cut.Load() {
		return kube.LeaseRecord{}, "", errCut
	}
	return l.Leases.Get(ctx, name)
}

func (l *cutLeases) Create(ctx context.Context, name string, r kube.LeaseRecord) (string, error) {
	if l.cut.Load() {
		return "", errCut
	}
	return l.Leases.Create(ctx, name, r)
}

func (l *cutLeases) Update(ctx context.Context, name string, r kube.LeaseRecord, rv string) (string, error) {
	if l.cut.Load() {
		return "", errCut
	}
	return l.Leases.Update(ctx, name, r, rv)
}

// written is one version of the status, as a watch saw it.
type written struct {
	rv     string
	at     time.Time // when the watch saw it
	writer *status.Writer
	gen    time.Time
}

// statusHistory watches the status ConfigMap and keeps every version.
type statusHistory struct {
	mu  sync.Mutex
	all []written
}

func watchStatus(t *testing.T, c *testkit.Cluster, name string) *statusHistory {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := c.Admin.CoreV1().ConfigMaps(c.Namespace).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	h := &statusHistory{}
	go func() {
		for ev := range w.ResultChan() {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok || ev.Type == watch.Deleted || cm.Data[status.StatusKey] == "" {
				continue
			}
			st, err := status.UnmarshalStatus([]byte(cm.Data[status.StatusKey]))
			if err != nil {
				continue
			}
			h.mu.Lock()
			h.all = append(h.all, written{rv: cm.ResourceVersion, at: time.Now(), writer: st.Writer, gen: st.GeneratedAt})
			h.mu.Unlock()
		}
	}()
	return h
}

func (h *statusHistory) versions() []written {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]written(nil), h.all...)
}

// lastBy is the last version written by identity, and whether there is one.
func (h *statusHistory) lastBy(identity string) (written, bool) {
	v := h.versions()
	for i := len(v) - 1; i >= 0; i-- {
		if v[i].writer != nil && v[i].writer.Identity == identity {
			return v[i], true
		}
	}
	return written{}, false
}

// oneWriter holds that no status was written by two: in the order the
// versions were written, every one names a writer, the terms never go
// back, and each term has one writer.
func (h *statusHistory) oneWriter(t *testing.T) {
	t.Helper()
	byTerm := map[int32]string{}
	var last int32 = -1
	for i, v := range h.versions() {
		if v.writer == nil {
			t.Errorf("version %d (resourceVersion %s) names no writer", i, v.rv)
			continue
		}
		if v.writer.Term < last {
			t.Errorf("version %d (resourceVersion %s) was written by %s in term %d after term %d had written: a deposed leader wrote", i, v.rv, v.writer.Identity, v.writer.Term, last)
		}
		last = max(last, v.writer.Term)
		if w, ok := byTerm[v.writer.Term]; ok && w != v.writer.Identity {
			t.Errorf("term %d written by %s and %s", v.writer.Term, w, v.writer.Identity)
		}
		byTerm[v.writer.Term] = v.writer.Identity
	}
}

// Two controllers on the real API server, each with the controller's own
// token, run for the Lease: one decides and writes, the other never does;
// cut the leader off from the Lease (a node that lost its network) and it
// stops writing within its renew deadline while the other takes the Lease
// over within the bound; stop that one with a release and the first leads
// again within a retry period or two. Through all of it no status is
// written by two (the terms, which the status names, never go back), and a
// write conditioned on a resourceVersion a deposed leader last wrote fails.
func TestOneWriterOnAPIServer(t *testing.T) {
	c := testkit.Start(t)
	s := testkit.Settings(t, 200*time.Millisecond)
	c.AddNodes(t,
		testkit.Node{Name: "server-1", Voter: true, Eligible: true, Address: "127.0.13.1"},
		testkit.Node{Name: "agent-1", Eligible: true, Address: "127.0.13.2"},
	)
	for _, n := range []string{"server-1", "agent-1"} {
		startProbe(t, c, s, n, &testkit.Sampler{})
	}
	history := watchStatus(t, c, s.StatusConfigMap)
	// Timings short enough for a test, as the defaults relate: lease >
	// renew deadline > 1.2 x retry period.
	e := controller.Election{Namespace: s.Namespace, Name: controller.LeaseName,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 300 * time.Millisecond}
	start := func(id string, release bool) *replica { return startReplica(t, c, s, e, id, release, nil) }
	waitWriter := func(id string, within time.Duration) written {
		t.Helper()
		var got written
		testkit.Eventually(t, within, func() error {
			v, ok := history.lastBy(id)
			if !ok {
				return fmt.Errorf("no status written by %s yet", id)
			}
			got = v
			return nil
		})
		return got
	}

	a := start("a", false)
	first := waitWriter("a", time.Minute)
	// The watch may see the write before the decision that made it has
	// returned: the leader is ready within a period of it.
	testkit.Eventually(t, 3*s.SamplePeriod, func() error {
		if err := readyErr(a.ctrl); err != nil {
			return fmt.Errorf("the leader is not ready: %w", err)
		}
		return nil
	})
	// The Service reaches the leader's page: its Endpoints name a alone.
	servedBy(t, c, s.Namespace, "pod-a", pageWithin)
	b := start("b", true)
	// The follower, ready, writes nothing while the leader renews.
	time.Sleep(2 * e.LeaseDuration)
	if _, ok := history.lastBy("b"); ok {
		t.Fatal("the follower wrote the status while the leader held the lease")
	}
	if err := readyErr(b.ctrl); err != nil {
		t.Errorf("the follower is not ready: %v", err)
	}
	// A scrape of both pods and a browser on either see one decision: the
	// leader's. The follower names the leader.
	if err := b.follows(t, "following: a holds the lease"); err != nil {
		t.Error(err)
	}
	// The leader's gauges hold verdicts once a decision has listed the
	// hosts: on a busy machine the probes' first records can come after
	// its first decisions.
	testkit.Eventually(t, time.Minute, func() error { return a.leads(t) })
	if n := len(history.versions()); n < 2 {
		t.Fatalf("the leader wrote %d versions in %v", n, 2*e.LeaseDuration)
	}

	// Cut the leader off from the Lease.
	a.leases.cut.Store(true)
	cut := time.Now()
	took := waitWriter("b", time.Minute)
	lastA, _ := history.lastBy("a")
	t.Logf("a cut off from the lease: a's last write %.2f s after the cut (renew deadline %v); b's first %.2f s after (bound %v)",
		lastA.at.Sub(cut).Seconds(), e.RenewDeadline, took.at.Sub(cut).Seconds(), e.TakeoverBound())
	// The status is written at a decision; a decision ends within a
	// period; the watch sees a write within the API server's latency: a
	// period of slack on each bound.
	if lastA.gen.Sub(cut) > e.RenewDeadline+s.SamplePeriod {
		t.Errorf("a wrote a status generated %v after it was cut off from the lease, past its renew deadline %v", lastA.gen.Sub(cut), e.RenewDeadline)
	}
	if d := took.at.Sub(cut); d > e.TakeoverBound()+s.SamplePeriod {
		t.Errorf("b took over %v after the leader was cut off, past the bound %v", d, e.TakeoverBound())
	}
	// Deposed, a drops its decision: by the time b writes, a's renew
	// deadline is over, and once the decision it may have had under way
	// ends with its term's context it exports none and its page says it
	// cannot read the Lease. Bounded by a renew deadline more, not a
	// period: on a busy machine the ending decision may wait for a core.
	testkit.Eventually(t, e.RenewDeadline, func() error { return a.follows(t, "not leading: the lease") })
	testkit.Eventually(t, 3*s.SamplePeriod, func() error { return b.leads(t) })
	servedBy(t, c, s.Namespace, "pod-b", pageWithin)
	if took.writer.Term <= first.writer.Term {
		t.Errorf("b's term %d is not after a's %d", took.writer.Term, first.writer.Term)
	}
	// A late write of the deposed leader: conditioned on the last status
	// it wrote, it fails.
	store := c.Client(t, testkit.ControllerSA).StatusStore(s.Namespace)
	if _, err := store.PatchKeyAt(context.Background(), s.StatusConfigMap, status.StatusKey, "{}", lastA.rv); !errors.Is(err, kube.ErrConflict) {
		t.Errorf("a write conditioned on a's last version %s after b wrote: %v, want a conflict", lastA.rv, err)
	}
	// Back in touch, a follows: it writes nothing more.
	a.leases.cut.Store(false)
	time.Sleep(2 * e.LeaseDuration)
	if v, _ := history.lastBy("a"); v.rv != lastA.rv {
		t.Errorf("a wrote again (resourceVersion %s) while b held the lease", v.rv)
	}

	// b stops and gives the lease up: a takes it at its next retry.
	b.loop.Cancel()
	b.loop.Stop(t)
	stopped := time.Now()
	again := waitWriter2(t, history, "a", lastA.rv, time.Minute)
	// a sees the Lease free at its next retry (a jittered retry period),
	// then decides and writes within a period.
	if d := again.at.Sub(stopped); d > time.Duration(2*(1+1.2)*float64(e.RetryPeriod))+s.SamplePeriod {
		// When a took the Lease (its term's acquire time, on this
		// process's clock) tells a late take-over from a late decision.
		t.Errorf("a led again %v after b stopped and gave the lease up, past two jittered retry periods (%v) and a period: it took the lease %v after the stop, and wrote %v after taking it",
			d, time.Duration(2*(1+1.2)*float64(e.RetryPeriod)), again.writer.Since.Sub(stopped), again.at.Sub(again.writer.Since))
	}
	t.Logf("b stopped: a wrote again %.2f s later, term %d", again.at.Sub(stopped).Seconds(), again.writer.Term)
	// b took its page out as it stopped; a names its own again.
	servedBy(t, c, s.Namespace, "pod-a", pageWithin)
	history.oneWriter(t)
	t.Logf("%d versions of the status, terms %v", len(history.versions()), terms(history.versions()))
}

// pageWithin bounds the Endpoints' following the leader: a term names its
// page with its first API write, but on a busy machine (the race step runs
// four packages on two cores) a write may wait seconds; what is held is
// who is named, and the time is logged.
const pageWithin = 30 * time.Second

// servedBy waits for the Service fleet-role's Endpoints to name pod alone,
// as the API server's service proxy reads them.
func servedBy(t *testing.T, c *testkit.Cluster, namespace, pod string, within time.Duration) {
	t.Helper()
	start := time.Now()
	testkit.Eventually(t, within, func() error {
		ep, err := c.Admin.CoreV1().Endpoints(namespace).Get(context.Background(), "fleet-role", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if a := kube.PageAddressOf(ep); a.Pod != pod || a.Namespace != namespace || a.Port != 9870 {
			return fmt.Errorf("the Service's Endpoints hold %+v, want %s alone on port 9870", ep.Subsets, pod)
		}
		if ep.Labels["app.kubernetes.io/part-of"] != "fleet-role" {
			return fmt.Errorf("the Endpoints lost the install's labels: %v", ep.Labels)
		}
		return nil
	})
	t.Logf("the Service reaches %s's page (%.2f s)", pod, time.Since(start).Seconds())
}

// replica is one controller of two running for the Lease.
type replica struct {
	id      string
	leases  *cutLeases
	ctrl    *controller.Controller
	metrics *controller.Metrics
	page    *statuspage.Server
	loop    *testkit.Loop
}

// decisionGauges are the gauges a decision sets.
var decisionGauges = []string{"fleet_role_host_verdict", "fleet_role_host_samples", "fleet_role_swap", "fleet_role_records",
	"fleet_role_host_record_issue", "fleet_role_host_deciding_value", "fleet_role_host_deciding_limit", "fleet_role_decision_held", "fleet_role_failure_tolerance"}

// standing is what a replica says of itself to a scrape and a browser: the
// decision gauges it exports a series of, its fleet_role_leader, and its
// status page's code and body.
func (r *replica) standing(t *testing.T) (gauges []string, leader float64, code int, page string) {
	t.Helper()
	mfs, err := r.metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	leader = -1
	for _, mf := range mfs {
		switch {
		case mf.GetName() == "fleet_role_leader":
			leader = mf.GetMetric()[0].GetGauge().GetValue()
		case slices.Contains(decisionGauges, mf.GetName()) && len(mf.GetMetric()) > 0:
			gauges = append(gauges, mf.GetName())
		}
	}
	w := httptest.NewRecorder()
	r.page.ServeHTTP(w, httptest.NewRequest(http.MethodGet, statuspage.Path, nil))
	return gauges, leader, w.Code, w.Body.String()
}

// follows holds that r exports no decision, says it does not lead, and
// names why in its page (want in the body).
func (r *replica) follows(t *testing.T, want string) error {
	gauges, leader, code, page := r.standing(t)
	if len(gauges) > 0 || leader != 0 || code != http.StatusServiceUnavailable || !strings.Contains(page, want) {
		return fmt.Errorf("%s, not leading, exports decision gauges %v and fleet_role_leader %v, its page answers %d %q; want none, 0, and 503 saying %q", r.id, gauges, leader, code, page, want)
	}
	return nil
}

// leads holds that r exports its decision and serves its page.
func (r *replica) leads(t *testing.T) error {
	gauges, leader, code, page := r.standing(t)
	if !slices.Contains(gauges, "fleet_role_host_verdict") || leader != 1 || code != http.StatusOK {
		return fmt.Errorf("%s, leading, exports decision gauges %v and fleet_role_leader %v, its page answers %d %.200q; want the verdicts, 1 and 200", r.id, gauges, leader, code, page)
	}
	return nil
}

// startReplica starts a controller with the controller's own token running
// for the Lease e names, its Lease client wrapped by wrap when set.
func startReplica(t *testing.T, c *testkit.Cluster, s settings.Settings, e controller.Election, id string, release bool, wrap func(kube.Leases) kube.Leases) *replica {
	t.Helper()
	cl := c.Client(t, testkit.ControllerSA)
	leases, err := cl.Leases(s.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		leases = wrap(leases)
	}
	r := &replica{id: id, leases: &cutLeases{Leases: leases}, metrics: controller.NewMetrics(), page: statuspage.NewServer(4, "controller "+id)}
	r.ctrl, err = controller.New(controller.Config{Settings: s, Store: cl.ConfigMaps(s.Namespace),
		Records: testkit.RecordSource(t, cl, s.RecordsNamespace()), Nodes: cl.Nodes(), Metrics: r.metrics, Page: r.page})
	if err != nil {
		t.Fatal(err)
	}
	el := e
	el.Leases, el.Status, el.Identity, el.ReleaseOnCancel = r.leases, cl.StatusStore(s.Namespace), id, release
	// Its page, as the install's Service fleet-role reaches it: a Pod
	// named after the replica, at an address of its own.
	eps, err := cl.PageEndpoints(s.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	el.Page = &controller.PageAdvert{Endpoints: eps, Name: "fleet-role",
		Self: kube.PageAddress{Namespace: s.Namespace, Pod: "pod-" + id, IP: fmt.Sprintf("10.244.0.%d", 1+int(id[0]-'a')), Port: 9870}}
	r.loop = testkit.Go(t, "controller "+id, func(ctx context.Context) error { return r.ctrl.RunElected(ctx, el) })
	return r
}

// waitWriter2 waits for a version by id other than the one at rv.
func waitWriter2(t *testing.T, h *statusHistory, id, rv string, within time.Duration) written {
	t.Helper()
	var got written
	testkit.Eventually(t, within, func() error {
		v, ok := h.lastBy(id)
		if !ok || v.rv == rv {
			return fmt.Errorf("no new status by %s", id)
		}
		got = v
		return nil
	})
	return got
}

func terms(vs []written) string {
	var out []string
	for _, v := range vs {
		if v.writer != nil && (len(out) == 0 || !strings.HasPrefix(out[len(out)-1], v.writer.Identity+"@")) {
			out = append(out, fmt.Sprintf("%s@%d", v.writer.Identity, v.writer.Term))
		}
	}
	return strings.Join(out, " ")
}

// slowLeases delays every Get on its way to the API server, as a slow or
// congested path to it does: the answer may carry a renewal made while the
// request was under way.
type slowLeases struct {
	kube.Leases
	delay time.Duration
}

func (l *slowLeases) Get(ctx context.Context, name string) (kube.LeaseRecord, string, error) {
	select {
	case <-ctx.Done():
		return kube.LeaseRecord{}, "", ctx.Err()
	case <-time.After(l.delay):
	}
	return l.Leases.Get(ctx, name)
}

// The election on the real API server under what would make two leaders:
// one replica's reads of the Lease slow (half the renew deadline) while the
// other is cut off and loses it; the Lease taken by a foreign writer with a
// duration of an hour; the Lease deleted. Through all of it the spells the
// two replicas led (by their own clock, one process here) never overlap,
// the foreign hour is waited out for no longer than the replicas' own lease
// duration, and the terms never go back, in the Lease and in the status,
// across the deletion too.
func TestElectionOnAPIServer(t *testing.T) {
	c := testkit.Start(t)
	s := testkit.Settings(t, 200*time.Millisecond)
	c.AddNodes(t, testkit.Node{Name: "server-1", Voter: true, Eligible: true, Address: "127.0.13.1"})
	startProbe(t, c, s, "server-1", &testkit.Sampler{})
	history := watchStatus(t, c, s.StatusConfigMap)
	e := controller.Election{Namespace: s.Namespace, Name: controller.LeaseName,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 300 * time.Millisecond}
	leases := c.Admin.CoordinationV1().Leases(s.Namespace)
	ctx := context.Background()
	leaseTerm := func() int32 {
		l, err := leases.Get(ctx, controller.LeaseName, metav1.GetOptions{})
		if err != nil || l.Spec.LeaseTransitions == nil {
			return -1
		}
		return *l.Spec.LeaseTransitions
	}
	leader := func(within time.Duration, not string) string {
		t.Helper()
		var who string
		testkit.Eventually(t, within, func() error {
			l, err := leases.Get(ctx, controller.LeaseName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if h := l.Spec.HolderIdentity; h != nil && (*h == "a" || *h == "b") && *h != not {
				who = *h
				return nil
			}
			return errors.New("neither replica holds the lease")
		})
		return who
	}

	a := startReplica(t, c, s, e, "a", false, nil)
	leader(time.Minute, "")
	b := startReplica(t, c, s, e, "b", false, func(l kube.Leases) kube.Leases { return &slowLeases{Leases: l, delay: e.RenewDeadline / 2} })
	// b follows, reading slowly: ready, and naming a as the holder.
	testkit.Eventually(t, time.Minute, func() error {
		if note, err := b.ctrl.Ready(); err != nil || !strings.Contains(note, "following: a holds the lease") {
			return fmt.Errorf("b's readiness: %q, %v", note, err)
		}
		return nil
	})
	a.leases.cut.Store(true)
	if got := leader(time.Minute, "a"); got != "b" {
		t.Fatalf("after a was cut off, %s leads", got)
	}
	a.leases.cut.Store(false)
	before := leaseTerm()

	// A foreign writer takes the Lease for an hour.
	l, err := leases.Get(ctx, controller.LeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hour, intruder, term := int32(3600), "intruder", before+1
	now := metav1.NewMicroTime(time.Now())
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime, l.Spec.AcquireTime, l.Spec.LeaseTransitions = &intruder, &hour, &now, &now, &term
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	taken := time.Now()
	// A replica sees it within its retry (and b's slow read), waits its own
	// lease duration at most, and tries within two jittered retries.
	bound := e.RenewDeadline/2 + e.TakeoverBound()
	back := leader(2*bound+time.Minute, "")
	t.Logf("the Lease taken for an hour by a foreign writer: %s led again %.2f s later (bound %v)", back, time.Since(taken).Seconds(), bound)
	if d := time.Since(taken); d > bound+s.SamplePeriod {
		t.Errorf("a replica led again %v after the foreign hour was written, past the bound %v (its own lease duration honoured at most)", d, bound)
	}
	if got := leaseTerm(); got <= term {
		t.Errorf("term %d after taking over from the intruder's %d", got, term)
	}

	// The Lease deleted: whoever leads steps down, and a term above every
	// one before starts. Or the holder's renewal, read before the deletion
	// and written after it, makes the Lease anew as it was (a Lease's
	// update creates it when it is missing): the same holder in the same
	// term, with no second writer, which is no term going back either.
	holderOf := func() string {
		l, err := leases.Get(ctx, controller.LeaseName, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	high, held := leaseTerm(), holderOf()
	if err := leases.Delete(ctx, controller.LeaseName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	leader(time.Minute, "")
	switch got, by := leaseTerm(), holderOf(); {
	case got > high:
		testkit.Eventually(t, time.Minute, func() error {
			v := history.versions()
			if len(v) == 0 || v[len(v)-1].writer == nil || v[len(v)-1].writer.Term <= high {
				return fmt.Errorf("no status written in a term above %d yet", high)
			}
			return nil
		})
		t.Logf("the Lease deleted at term %d (%s): made anew at term %d by %s", high, held, got, by)
	case got == high && by == held:
		t.Logf("the Lease deleted at term %d: %s's renewal in flight made it anew as it was", high, held)
	default:
		t.Errorf("the Lease made anew at term %d by %s after it was deleted at term %d held by %s: terms went back", got, by, high, held)
	}

	a.loop.Cancel()
	b.loop.Cancel()
	a.loop.Stop(t)
	b.loop.Stop(t)
	history.oneWriter(t)
	sa, sb := a.ctrl.LeadingSpells(), b.ctrl.LeadingSpells()
	t.Logf("a led %d spells, b %d; status terms %v", len(sa), len(sb), terms(history.versions()))
	if len(sa) == 0 || len(sb) == 0 {
		t.Fatalf("a led %d spells and b %d: each should have led", len(sa), len(sb))
	}
	for _, x := range sa {
		for _, y := range sb {
			if x[0].Before(y[1]) && y[0].Before(x[1]) {
				from, to := x[0], x[1]
				if y[0].After(from) {
					from = y[0]
				}
				if y[1].Before(to) {
					to = y[1]
				}
				t.Errorf("a led %s to %s and b %s to %s: %v of overlap", x[0].Format("15:04:05.000"), x[1].Format("15:04:05.000"),
					y[0].Format("15:04:05.000"), y[1].Format("15:04:05.000"), to.Sub(from))
			}
		}
	}
}
