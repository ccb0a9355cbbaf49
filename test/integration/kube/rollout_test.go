package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// olderReader is the records as a controller of a release before the tail
// layout reads them: it does not select tails, and refuses a record that
// holds binaryData ("has binaryData"). Standing in for that release's
// reader (its code is no longer here), it makes such a record unreadable,
// so that its host reads as unknown exactly when that release would read
// it so.
type olderReader struct{ inner kube.RecordSource }

func (o olderReader) List(ctx context.Context) ([]*corev1.ConfigMap, error) {
	all, err := o.inner.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []*corev1.ConfigMap
	for _, cm := range all {
		switch {
		case record.IsTail(cm):
		case len(cm.BinaryData) > 0:
			cp := cm.DeepCopy()
			cp.Data = map[string]string{"has-binaryData": ""}
			out = append(out, cp)
		default:
			out = append(out, cm)
		}
	}
	return out, nil
}

// unknownSpans follows the published status and measures, per host, the
// longest span it was judged unknown: from the first decision that judged
// it so to the first that did not.
type unknownSpans struct {
	mu      sync.Mutex
	since   map[string]time.Time
	longest map[string]time.Duration
	last    time.Time
}

func (u *unknownSpans) saw(st *status.Status) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !st.GeneratedAt.After(u.last) {
		return
	}
	u.last = st.GeneratedAt
	for _, h := range st.Hosts {
		from, was := u.since[h.Name]
		switch {
		case h.Verdict == status.Unknown && !was:
			u.since[h.Name] = st.GeneratedAt
		case h.Verdict != status.Unknown && was:
			u.longest[h.Name] = max(u.longest[h.Name], st.GeneratedAt.Sub(from))
			delete(u.since, h.Name)
		}
	}
}

// worst is the longest span of any host, the spans still open counted to
// the last decision seen; and it starts counting afresh.
func (u *unknownSpans) worst() (string, time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	defer clear(u.longest)
	host, d := "", time.Duration(0)
	for h, l := range u.longest {
		if l > d {
			host, d = h, l
		}
	}
	for h, from := range u.since {
		if l := u.last.Sub(from); l > d {
			host, d = h, l
		}
	}
	return host, d
}

// A rollout that mixes the layouts, on the real API server with the
// install's RBAC and admission policy, in both orders: the probes updated
// before the controller, then the controller; the controller rolled back
// first, then the probes; the controller updated before the probes. A
// probe of this release writes the tail layout only once the controller
// holding the Lease says it reads it; until then, and again within a period
// of a controller of an older release taking the Lease, it writes the entry
// layout, which every release reads. Throughout, no host is judged unknown
// for longer than one period, and a probe updated resumes its window: every
// sample the record held before is there after.
func TestRolloutMixesLayouts(t *testing.T) {
	c := testkit.Start(t)
	s := testkit.Settings(t, 500*time.Millisecond)
	// A window of 10 (the fewest at p90) fills in 5 s, before which every
	// host reads unknown.
	s.Window, s.TailPercentile = 10, 0.9
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	hosts := []string{"server-1", "server-2", "server-3", "agent-1", "agent-2"}
	c.AddNodes(t,
		testkit.Node{Name: "server-1", Voter: true, Eligible: true, Address: "127.0.8.1"},
		testkit.Node{Name: "server-2", Voter: true, Eligible: true, Address: "127.0.8.2"},
		testkit.Node{Name: "server-3", Voter: true, Eligible: true, Address: "127.0.8.3"},
		testkit.Node{Name: "agent-1", Eligible: true, Address: "127.0.8.4"},
		testkit.Node{Name: "agent-2", Eligible: true, Address: "127.0.8.5"},
	)
	samplers := map[string]*testkit.Sampler{}
	for _, h := range hosts {
		samplers[h] = &testkit.Sampler{}
	}
	// A probe of either release: older writes the entry layout and reads
	// no Lease, as a release before the tail layout does.
	probes := map[string]*testkit.Loop{}
	startProbeOf := func(node string, older bool) {
		cl := c.ProbeClient(t, node)
		records := cl.Records(s.RecordsNamespace())
		if !older {
			format, err := cl.RecordFormat(s.Namespace, controller.LeaseName)
			if err != nil {
				t.Fatal(err)
			}
			records = cl.RecordsInLayout(s.RecordsNamespace(), kube.Layout{Format: format, RetryAfter: s.Window, CheckEvery: s.StalePeriods()})
		}
		p, err := probe.New(probe.Config{Node: node, Settings: s, Records: records, Nodes: cl.Nodes(), Sampler: samplers[node], Log: testkit.NewLog().Logger})
		if err != nil {
			t.Fatal(err)
		}
		probes[node] = testkit.Go(t, "probe "+node, p.Run)
	}
	e := controller.Election{Namespace: s.Namespace, Name: controller.LeaseName,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 300 * time.Millisecond}
	var ctrl *testkit.Loop
	startController := func(older bool) {
		cl := c.Client(t, testkit.ControllerSA)
		var src kube.RecordSource = testkit.RecordSource(t, cl, s.RecordsNamespace())
		el := e
		if older {
			src, el.RecordFormat = olderReader{src}, -1
		}
		leases, err := cl.Leases(s.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		ctl, err := controller.New(controller.Config{Settings: s, Store: cl.ConfigMaps(s.Namespace), Records: src, Nodes: cl.Nodes(), Log: testkit.NewLog().Logger})
		if err != nil {
			t.Fatal(err)
		}
		el.Leases, el.Status, el.Identity, el.ReleaseOnCancel = leases, cl.StatusStore(s.Namespace), fmt.Sprintf("older-%v-%d", older, time.Now().UnixNano()), true
		ctrl = testkit.Go(t, "controller", func(ctx context.Context) error { return ctl.RunElected(ctx, el) })
	}

	spans := &unknownSpans{since: map[string]time.Time{}, longest: map[string]time.Duration{}}
	ctx, stopFollowing := context.WithCancel(context.Background())
	defer stopFollowing()
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		for ctx.Err() == nil {
			if st, err := c.Status(t); err == nil {
				spans.saw(st)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	// layouts counts the records in each layout, from the API server.
	layouts := func() (entries, windows, tails int) {
		l, err := c.Admin.CoreV1().ConfigMaps(s.RecordsNamespace()).List(context.Background(), metav1.ListOptions{LabelSelector: record.AnySelector})
		if err != nil {
			t.Fatal(err)
		}
		for _, cm := range l.Items {
			switch {
			case record.IsTail(&cm):
				tails++
			case len(cm.BinaryData) > 0 && cm.Data[record.DataKey] == "":
				windows++
			default:
				entries++
			}
		}
		return entries, windows, tails
	}
	// windowOf is node's window as the records read.
	windowOf := func(node string) []int64 {
		text, ok := c.Records(t)[node]
		if !ok {
			t.Fatalf("no record of %s", node)
		}
		en, err := entry.Decode(text)
		if err != nil {
			t.Fatalf("record of %s: %v", node, err)
		}
		return testkit.Millis(en.Samples)
	}
	allKnown := func(what string) {
		t.Helper()
		testkit.Eventually(t, time.Duration(s.Window)*s.SamplePeriod+time.Minute, func() error {
			st, err := c.Status(t)
			if err != nil {
				return err
			}
			var unknown []string
			for _, h := range st.Hosts {
				if h.Verdict == status.Unknown {
					unknown = append(unknown, h.Name)
				}
			}
			if len(st.Hosts) != len(hosts) || len(unknown) > 0 {
				return fmt.Errorf("%d hosts, unknown %v", len(st.Hosts), unknown)
			}
			return nil
		})
		t.Logf("%s: every host known", what)
	}
	// update restarts each probe in turn as the given release, and holds
	// that each resumed its window.
	update := func(older bool) {
		t.Helper()
		for _, h := range hosts {
			before := windowOf(h)
			probes[h].Stop(t)
			startProbeOf(h, older)
			testkit.Eventually(t, time.Minute, func() error {
				after := windowOf(h)
				if len(after) == 0 || after[len(after)-1] <= before[len(before)-1] {
					return fmt.Errorf("%s has written nothing since its restart", h)
				}
				// Every sample before the restart that the window still
				// spans is there.
				for _, ms := range before {
					if ms >= after[0] && !slices.Contains(after, ms) {
						return fmt.Errorf("%s lost the sample at %d ms on its restart (window before %v, after %v)", h, ms, before, after)
					}
				}
				if len(after) < min(len(before)+1, s.Window) {
					return fmt.Errorf("%s holds %d samples after its restart, %d before", h, len(after), len(before))
				}
				return nil
			})
		}
	}
	waitLayouts := func(what string, entriesWant, windowsWant int) {
		t.Helper()
		testkit.Eventually(t, time.Minute, func() error {
			if en, w, tl := layouts(); en != entriesWant || w != windowsWant || tl < windowsWant {
				return fmt.Errorf("%d records in the entry layout, %d in the tail layout, %d tails", en, w, tl)
			}
			return nil
		})
		en, w, tl := layouts()
		t.Logf("%s: %d records in the entry layout, %d in the tail layout, %d tails", what, en, w, tl)
	}
	// checkSpans holds the longest span a host was judged unknown since
	// the last check to bound.
	checkSpans := func(what string, bound time.Duration, basis string) {
		t.Helper()
		host, d := spans.worst()
		t.Logf("%s: the longest a host was judged unknown: %v (%s), against %v (%s)", what, d, host, bound, basis)
		if d > bound {
			t.Errorf("%s: %s was judged unknown for %v, longer than %v (%s)", what, host, d, bound, basis)
		}
	}
	onePeriod, period := s.SamplePeriod, "one period"

	// The older release throughout.
	startController(true)
	for _, h := range hosts {
		startProbeOf(h, true)
	}
	allKnown("the older release")
	waitLayouts("the older release", len(hosts), 0)
	spans.worst() // the windows filling, before the rollout

	// Probes updated first: with the older controller leading they keep to
	// the entry layout.
	update(false)
	allKnown("probes updated, the older controller")
	waitLayouts("probes updated, the older controller", len(hosts), 0)
	checkSpans("probes updated before the controller", onePeriod, period)

	// Then the controller: the probes take up the tail layout.
	ctrl.Stop(t)
	startController(false)
	waitLayouts("both updated", 0, len(hosts))
	allKnown("both updated")
	checkSpans("the controller updated after the probes", onePeriod, period)

	// Rolled back, the controller first: within entry_unchanged of the
	// older controller's first write of the Lease the probes write the
	// entry layout again (a probe writing tails reads the Lease at least
	// once every entry_unchanged), which it reads; then the probes. Its
	// decisions until then read the records in the tail layout as
	// unreadable: a host may read unknown from the first decision after
	// its takeover until the first after that write, entry_unchanged and
	// a decision's interval (half a period) at most.
	ctrl.Stop(t)
	startController(true)
	waitLayouts("the controller rolled back", len(hosts), 0)
	allKnown("the controller rolled back")
	update(true)
	checkSpans("rolled back, the controller first", time.Duration(s.StalePeriods())*s.SamplePeriod+onePeriod/2, "entry_unchanged and a decision's interval")

	// The controller updated before the probes: the older probes write the
	// entry layout it reads; updated, they take up the tail layout.
	ctrl.Stop(t)
	startController(false)
	allKnown("the controller updated, the older probes")
	waitLayouts("the controller updated, the older probes", len(hosts), 0)
	update(false)
	waitLayouts("both updated again", 0, len(hosts))
	allKnown("both updated again")
	checkSpans("the controller updated before the probes", onePeriod, period)

	stopFollowing()
	<-followed
}

// countingWindows counts the writes that carry binaryData (the tail
// layout's), and those the admission policy refused.
type countingWindows struct {
	kube.ConfigMapClient
	mu      sync.Mutex
	packed  int
	refused int
}

func (c *countingWindows) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*corev1.ConfigMap, error) {
	cm, err := c.ConfigMapClient.Patch(ctx, name, pt, data, opts, sub...)
	if strings.Contains(string(data), `"binaryData":{`) {
		c.count(err)
	}
	return cm, err
}

func (c *countingWindows) Create(ctx context.Context, cm *corev1.ConfigMap, opts metav1.CreateOptions) (*corev1.ConfigMap, error) {
	out, err := c.ConfigMapClient.Create(ctx, cm, opts)
	if len(cm.BinaryData) > 0 {
		c.count(err)
	}
	return out, err
}

// count counts a write in the tail layout; a 404 (a patch of an object
// not made yet, which a create follows) is no write.
func (c *countingWindows) count(err error) {
	if apierrors.IsNotFound(err) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.packed++
	if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
		c.refused++
	}
}

func (c *countingWindows) counts() (packed, refused int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.packed, c.refused
}

// Under an admission policy that refuses the tail layout (as one older
// than it does), a probe's write in it is followed by the entry layout in
// the same write, and the entry layout is kept for RetryAfter writes
// before the tail layout is tried again: at the limit it is tried, just
// under it is not. Once the policy admits it, the record takes it up.
func TestTailLayoutRefusedFallsBack(t *testing.T) {
	c := testkit.Start(t)
	s := testkit.Settings(t, time.Second)
	c.AddNodes(t, testkit.Node{Name: "agent-1", Eligible: true, Address: "127.0.8.9"})
	ctx := context.Background()
	vaps := c.Admin.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	installed, err := vaps.Get(ctx, "fleet-role-probe-records", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	older := installed.DeepCopy()
	forbidden := metav1.StatusReasonForbidden
	older.Spec.Validations = append(older.Spec.Validations, admissionregistrationv1.Validation{
		Expression: "!has(object.binaryData) || size(object.binaryData) == 0",
		Message:    "an older policy: a probe record holds no binaryData", Reason: &forbidden})
	if _, err := vaps.Update(ctx, older, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cl := c.ProbeClient(t, "agent-1")
	node, err := c.Admin.CoreV1().Nodes().Get(ctx, "agent-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := record.Owner{Name: node.Name, UID: node.UID}
	cms := &countingWindows{ConfigMapClient: cl.ConfigMapClient(s.RecordsNamespace())}
	const retryAfter = 3
	rs := kube.NewRecordsFor(cms, s.RecordsNamespace(), kube.Layout{Format: func(context.Context) int { return record.FormatTail }, RetryAfter: retryAfter})
	// Windows of 20 samples, a sample on each write.
	e := testkit.RealisticEntry(node.Name, []string{"server-1"}, -1, 1000, s.SamplePeriod, time.Now())
	n := 20
	put := func() string {
		t.Helper()
		if n > len(e.Samples) {
			t.Fatalf("%d writes and the tail layout still admitted", n)
		}
		w := e
		w.Samples = e.Samples[n-20 : n]
		n++
		text, err := entry.Encode(w)
		if err != nil {
			t.Fatal(err)
		}
		if err := rs.Put(ctx, owner, text); err != nil {
			t.Fatalf("write %d: %v", n, err)
		}
		return text
	}
	layoutOf := func() string {
		cm, err := c.Admin.CoreV1().ConfigMaps(s.RecordsNamespace()).Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(cm.BinaryData) > 0 {
			return "tail"
		}
		return "entry"
	}
	// The API server loads a policy's change within a moment: until the
	// first refusal the tail layout may still be admitted.
	testkit.Eventually(t, 30*time.Second, func() error {
		put()
		if _, refused := cms.counts(); refused == 0 {
			return errors.New("the tail layout not refused yet")
		}
		return nil
	})
	packed, _ := cms.counts()
	if got := layoutOf(); got != "entry" {
		t.Fatalf("after the refusal the record is in the %s layout, want entry", got)
	}
	// retryAfter writes in the entry layout without trying: just under
	// the limit it is not tried, at it it is (and refused again).
	for i := range retryAfter {
		text := put()
		if p, _ := cms.counts(); p != packed {
			t.Fatalf("write %d after the refusal tried the tail layout, under RetryAfter %d", i+1, retryAfter)
		}
		if _, got, err := record.Assemble(mustGet(t, c, s, node.Name), nil); err != nil || got != text {
			t.Fatalf("write %d after the refusal: the record reads %d bytes (%v), want the window's %d", i+1, len(got), err, len(text))
		}
	}
	put()
	if p, r := cms.counts(); p != packed+1 || r != 2 {
		t.Fatalf("the write at RetryAfter: %d writes in the tail layout, %d refused; want %d and 2", p, r, packed+1)
	}
	// The installed policy back: at the next try the tail layout is taken.
	current, err := vaps.Get(ctx, installed.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	current.Spec = installed.Spec
	if _, err := vaps.Update(ctx, current, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, func() error {
		put()
		if got := layoutOf(); got != "tail" {
			return fmt.Errorf("the record is in the %s layout", got)
		}
		return nil
	})
	p, r := cms.counts()
	t.Logf("an older policy: %d writes tried in the tail layout, %d refused, each followed by the entry layout; the installed policy back, the tail layout taken", p, r)
}

func mustGet(t *testing.T, c *testkit.Cluster, s settings.Settings, name string) *corev1.ConfigMap {
	t.Helper()
	cm, err := c.Admin.CoreV1().ConfigMaps(s.RecordsNamespace()).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}
