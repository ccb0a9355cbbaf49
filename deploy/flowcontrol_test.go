package deploy

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fleet-role/fleet-role/lab/probetest"
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
func testFlowControl(t *testing.T, ctx context.Context, c *probetest.Cluster, admin kubernetes.Interface) {
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
	if schema, level := classify(probetest.ProbeSA, url); schema != string(fs.UID) || level != string(pl.UID) {
		t.Errorf("the probe's request went to flow schema %s, priority level %s; want fleet-role-probe's, %s and %s", schema, level, fs.UID, pl.UID)
	}
	if schema, level := classify(probetest.ControllerSA, cm+"fleet-role-status"); schema == string(fs.UID) || level == string(pl.UID) {
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
	probe, err := rest.HTTPClientFor(c.Server.TokenConfig(c.Token(t, probetest.ProbeSA)))
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
