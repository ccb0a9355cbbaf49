package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// The API server's concurrency limit at its defaults,
// --max-requests-inflight 400 and --max-mutating-requests-inflight 200,
// which API Priority and Fairness shares among the Limited levels by their
// nominal shares.
const serverConcurrency = 400 + 200

// testFlowControl holds the probe's write budget on the real API server,
// the install applied: every request of the probe's token, and none of the
// controller's, is classified by the FlowSchema fleet-role-probe into its
// priority level (the API server names both in each response's
// X-Kubernetes-PF-* headers); the level has the seats the manifest's
// comment derives, borrows none, and a burst of the probe's requests is
// dispatched within it.
func testFlowControl(t *testing.T, ctx context.Context, c *testkit.Cluster, admin kubernetes.Interface) {
	fs, err := admin.FlowcontrolV1().FlowSchemas().Get(ctx, "fleet-role-probe", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := admin.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, "fleet-role-probe", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range fs.Status.Conditions {
		if cond.Type == flowcontrolv1.FlowSchemaConditionDangling && cond.Status == flowcontrolv1.ConditionTrue {
			t.Errorf("FlowSchema fleet-role-probe is dangling: %s", cond.Message)
		}
	}
	// What each may read: the probe its settings (a list selected by
	// name, all RBAC grants it there), the controller the status.
	cm := c.Server.URL + "/api/v1/namespaces/" + ns + "/configmaps/"
	url := c.Server.URL + "/api/v1/namespaces/" + ns + "/configmaps?fieldSelector=metadata.name%3Dfleet-role-settings"
	classify := func(sa, url string) (schema, level string) {
		t.Helper()
		hc, err := rest.HTTPClientFor(c.Server.TokenConfig(c.Token(t, sa)))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s reads %s: %s", sa, url, resp.Status)
		}
		return resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID"), resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID")
	}
	if schema, level := classify(testkit.ProbeSA, url); schema != string(fs.UID) || level != string(pl.UID) {
		t.Errorf("the probe's request went to flow schema %s, priority level %s; want fleet-role-probe's, %s and %s", schema, level, fs.UID, pl.UID)
	}
	if schema, level := classify(testkit.ControllerSA, cm+"fleet-role-status"); schema == string(fs.UID) || level == string(pl.UID) {
		t.Errorf("the controller's request went to the probe's flow schema or level (%s, %s)", schema, level)
	}

	// The level's seats: its shares of the shares of every Limited level.
	levels, err := admin.FlowcontrolV1().PriorityLevelConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum := 0
	for _, l := range levels.Items {
		if l.Spec.Type == flowcontrolv1.PriorityLevelEnablementLimited && l.Spec.Limited.NominalConcurrencyShares != nil {
			sum += int(*l.Spec.Limited.NominalConcurrencyShares)
		}
	}
	shares := int(*pl.Spec.Limited.NominalConcurrencyShares)
	want := int(math.Ceil(float64(serverConcurrency) * float64(shares) / float64(sum)))
	// A burst of the probe's requests, more at once than the level has seats.
	burst := 4 * want
	probe, err := rest.HTTPClientFor(c.Server.TokenConfig(c.Token(t, testkit.ProbeSA)))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	codes := make([]int, burst)
	for i := range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, err := probe.Get(url); err == nil {
				codes[i] = resp.StatusCode
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	m := apiserverMetrics(t, ctx, admin)
	nominal := m[`apiserver_flowcontrol_nominal_limit_seats{priority_level="fleet-role-probe"}`]
	borrow := m[`apiserver_flowcontrol_upper_limit_seats{priority_level="fleet-role-probe"}`]
	dispatched := m[`apiserver_flowcontrol_dispatched_requests_total{flow_schema="fleet-role-probe",priority_level="fleet-role-probe"}`]
	if int(nominal) != want {
		t.Errorf("priority level fleet-role-probe has %v nominal seats; want %d, %d of %d shares of %d", nominal, want, shares, sum, serverConcurrency)
	}
	if borrow != nominal {
		t.Errorf("priority level fleet-role-probe may grow to %v seats, past its nominal %v: it must borrow none", borrow, nominal)
	}
	if int(dispatched) < burst {
		t.Errorf("%v of the probe's requests dispatched in its level after a burst of %d", dispatched, burst)
	}
	t.Logf("probe's level: %v seats (%d of %d shares of %d), upper limit %v; a burst of %d requests: %v dispatched in it, status codes %v",
		nominal, shares, sum, serverConcurrency, borrow, burst, dispatched, countCodes(codes))
}

// apiserverMetrics reads the API server's /metrics, one value per series.
func apiserverMetrics(t *testing.T, ctx context.Context, admin kubernetes.Interface) map[string]float64 {
	t.Helper()
	raw, err := admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

func countCodes(codes []int) string {
	n := map[int]int{}
	for _, c := range codes {
		n[c]++
	}
	var parts []string
	for c, k := range n {
		parts = append(parts, fmt.Sprintf("%d x%d", c, k))
	}
	return strings.Join(parts, ", ")
}

// floodWriters is how many of a flooding probe's writes are in flight at
// once: more than its priority level's seats and queue together (12 and
// 50), so that the level is full throughout and its queue overflows.
const floodWriters = 96

// testFloodingProbe measures what one flooding probe does to the others:
// every probe is one user (the ServiceAccount), so API Priority and
// Fairness cannot tell one node's probe from another's (a FlowSchema
// distinguishes by user or by namespace alone), and one probe's flood of
// writes to its own record shares the one queue with every honest probe's
// write. What it asserts holds on any machine: the flood fills the level
// (the API server answers it 429), the controller, in another level, is
// served throughout, and the honest probe writes again once the flood
// ends. What the honest probe's writes met during the flood is measured
// and logged, not judged (this test runs beside others): docs/security.md
// says it.
func testFloodingProbe(t *testing.T, ctx context.Context, c *testkit.Cluster, admin kubernetes.Interface, nodes map[string]*corev1.Node, capBytes int) {
	owner := func(n string) record.Owner { return record.Owner{Name: n, UID: nodes[n].UID} }
	// The flooder ignores the client's rate limit, as an attacker would,
	// and sends each writer's requests on a connection of its own: on one
	// HTTP/2 connection its flow control, not the API server, would bound
	// the requests in flight. A Dial of its own keeps client-go from
	// sharing one cached transport among the writers.
	flooders := make([]*kube.Client, floodWriters)
	for i := range flooders {
		cfg := c.ProbeClient(t, node1).Config()
		cfg.QPS, cfg.Burst = -1, 0
		cfg.Dial = (&net.Dialer{}).DialContext
		cl, err := kube.NewClientForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		flooders[i] = cl
	}
	honest := c.ProbeClient(t, node2)
	ctrl := c.Client(t, testkit.ControllerSA)
	big := strings.Repeat("x", capBytes)
	small := `{"samples":[]}`
	if err := honest.Records(rns).Put(ctx, owner(node2), small); err != nil {
		t.Fatalf("the honest probe's first write: %v", err)
	}

	// The flood sends one merge patch of the record's entry, the request
	// a probe's write makes, encoded once, as an attacker would send it:
	// encoded anew for each request (the probe's own Put), 96 writers'
	// encoding of 213 KB held the flood to at most 4 of the level's 12
	// seats in a cold run's race step, the machine's CPU spent on the
	// client rather than the API server.
	if err := flooders[0].Records(rns).Put(ctx, owner(node1), big); err != nil {
		t.Fatalf("the flooding probe's first write: %v", err)
	}
	floodBody, err := json.Marshal(map[string]any{"data": map[string]string{record.DataKey: big}})
	if err != nil {
		t.Fatal(err)
	}
	const flood = 6 * time.Second
	fctx, stop := context.WithTimeout(ctx, flood)
	defer stop()
	var (
		mu                      sync.Mutex
		floodOK, flood429, fErr int
		other                   []error
	)
	var wg sync.WaitGroup
	for _, flooder := range flooders {
		cms := flooder.ConfigMapClient(rns)
		wg.Go(func() {
			for fctx.Err() == nil {
				_, err := cms.Patch(fctx, node1, types.MergePatchType, floodBody, metav1.PatchOptions{FieldManager: "fleet-role"})
				mu.Lock()
				switch {
				case err == nil:
					floodOK++
				case apierrors.IsTooManyRequests(err):
					flood429++
				case fctx.Err() == nil:
					fErr++
					if len(other) < 3 {
						other = append(other, err)
					}
				}
				mu.Unlock()
			}
		})
	}
	// The honest probe and the controller, every quarter second.
	var honestLat []time.Duration
	honest429, honestErr, ctrlErr, ctrlReads := 0, 0, 0, 0
	var ctrlFirst error
	maxExecuting, maxQueued := 0.0, 0.0
	tick := time.NewTicker(250 * time.Millisecond)
	for fctx.Err() == nil {
		<-tick.C
		t0 := time.Now()
		err := honest.Records(rns).Put(ctx, owner(node2), small)
		switch {
		case err == nil:
			honestLat = append(honestLat, time.Since(t0))
		case apierrors.IsTooManyRequests(err):
			honest429++
		default:
			honestErr++
		}
		if _, err := ctrl.ConfigMaps(ns).Get(ctx, "fleet-role-status"); err != nil {
			ctrlErr++
			if ctrlFirst == nil {
				ctrlFirst = err
			}
		}
		ctrlReads++
		// The probes' level: the seats its requests hold, and those
		// waiting in its queue.
		executing, queued := 0.0, 0.0
		for series, v := range apiserverMetrics(t, ctx, admin) {
			if !strings.Contains(series, `priority_level="fleet-role-probe"`) {
				continue
			}
			switch {
			case strings.HasPrefix(series, "apiserver_flowcontrol_current_executing_seats{"):
				executing += v
			case strings.HasPrefix(series, "apiserver_flowcontrol_current_inqueue_requests{"):
				queued += v
			}
		}
		maxExecuting, maxQueued = max(maxExecuting, executing), max(maxQueued, queued)
	}
	tick.Stop()
	wg.Wait()
	// The flood filled the level: every seat held at a sample, requests
	// waiting in its queue, or refused past it; and it never held more
	// seats than the level has. (On a busy machine the flooders, slowed
	// encoding their writes, held every seat but left the queue empty at
	// each sample: CI's race step.)
	seats := float64(nominalProbeSeats(t, ctx, admin))
	if flood429 == 0 && maxQueued == 0 && maxExecuting < seats {
		t.Errorf("%d writers flooding for %v (%d written) held at most %v of the level's %v seats and were never queued nor answered 429: the flood never filled the probes' level", floodWriters, flood, floodOK, maxExecuting, seats)
	}
	if maxExecuting > seats {
		t.Errorf("the probes' level held %v seats during the flood, past its %v", maxExecuting, seats)
	}
	if ctrlErr > 0 {
		t.Errorf("the controller, in another priority level, failed %d of %d reads during the flood: %v", ctrlErr, ctrlReads, ctrlFirst)
	}
	if err := honest.Records(rns).Put(ctx, owner(node2), small); err != nil {
		t.Errorf("the honest probe's write after the flood: %v", err)
	}
	slices.Sort(honestLat)
	pct := func(q float64) time.Duration {
		if len(honestLat) == 0 {
			return 0
		}
		return honestLat[int(q*float64(len(honestLat)-1))]
	}
	t.Logf("one probe flooding its own record (%d writers of %d bytes, %v): %d written, %d answered 429, %d other errors %v; "+
		"the probes' level held at most %v seats with %v requests queued; "+
		"the honest probe's writes, one at a time every 250 ms: %d written (latency median %v, max %v), %d answered 429, %d other errors; the controller's reads: %d of %d served",
		floodWriters, capBytes, flood, floodOK, flood429, fErr, other, maxExecuting, maxQueued,
		len(honestLat), pct(0.5).Round(time.Millisecond), pct(1).Round(time.Millisecond), honest429, honestErr, ctrlReads-ctrlErr, ctrlReads)
	for _, n := range []string{node1, node2} {
		if err := c.ProbeClient(t, n).Records(rns).Delete(ctx, n); err != nil {
			t.Errorf("delete the record of %s: %v", n, err)
		}
	}
}

// nominalProbeSeats is the probes' priority level's seats as the API server
// reports them.
func nominalProbeSeats(t *testing.T, ctx context.Context, admin kubernetes.Interface) int {
	t.Helper()
	return int(apiserverMetrics(t, ctx, admin)[`apiserver_flowcontrol_nominal_limit_seats{priority_level="fleet-role-probe"}`])
}
