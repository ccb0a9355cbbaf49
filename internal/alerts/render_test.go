package alerts

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/internal/settings"
)

var update = flag.Bool("update", false, "rewrite the rendered files under deploy/monitoring")

// monitoring is where the rendered files are checked in.
const monitoring = "../../deploy/monitoring"

func rendered(t *testing.T) map[string][]byte {
	t.Helper()
	s := settings.Defaults()
	rules, err := RulesFile(s)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects(s)
	if err != nil {
		t.Fatal(err)
	}
	dash, err := Dashboard(s)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		"fleet-role.rules.yaml":    rules,
		"prometheus-operator.yaml": objs,
		"grafana-dashboard.json":   dash,
	}
}

// TestRendered holds the checked-in files equal to what this package
// renders at the default settings.
func TestRendered(t *testing.T) {
	checkFiles(t, monitoring, rendered(t), "TestRendered")
}

// checkFiles holds the files in dir equal to want, or with -update writes
// them; test names the test that rewrites them.
func checkFiles(t *testing.T, dir string, want map[string][]byte, test string) {
	t.Helper()
	for name, b := range want {
		path := filepath.Join(dir, name)
		if *update {
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, b) {
			t.Errorf("%s differs from what internal/alerts renders; run go test ./internal/alerts -run %s -update", path, test)
		}
	}
}

// TestPrometheusOperatorObjects reads the checked-in objects back strictly
// into prometheus-operator's own types: every field is one those types
// know, and the rules are the plain file's.
func TestPrometheusOperatorObjects(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(monitoring, "prometheus-operator.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "\n---\n")
	if len(docs) != 4 { // the header, the rule, two monitors
		t.Fatalf("%d documents, want the header then 3 objects", len(docs))
	}
	var rule monitoringv1.PrometheusRule
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &rule); err != nil {
		t.Fatalf("PrometheusRule: %v", err)
	}
	if rule.Kind != "PrometheusRule" || len(rule.Spec.Groups) != 1 {
		t.Fatalf("not one group of rules: %+v", rule.TypeMeta)
	}
	want := Rules(settings.Defaults())
	g := rule.Spec.Groups[0]
	if len(g.Rules) != len(want) {
		t.Fatalf("%d rules, want %d", len(g.Rules), len(want))
	}
	for i, r := range g.Rules {
		if r.Alert != want[i].Alert || r.Expr.String() != want[i].Expr || r.For == nil || string(*r.For) != promDur(want[i].For) {
			t.Errorf("rule %d: %s %q for %v, want %s %q for %s", i, r.Alert, r.Expr.String(), r.For, want[i].Alert, want[i].Expr, promDur(want[i].For))
		}
	}
	for i, doc := range docs[2:] {
		var m monitoringv1.PodMonitor
		if err := yaml.UnmarshalStrict([]byte(doc), &m); err != nil {
			t.Fatalf("PodMonitor %d: %v", i, err)
		}
		if m.Kind != "PodMonitor" || len(m.Spec.PodMetricsEndpoints) != 1 || *m.Spec.PodMetricsEndpoints[0].Port != "metrics" ||
			string(m.Spec.PodMetricsEndpoints[0].Interval) != promDur(settings.Defaults().SamplePeriod) {
			t.Errorf("PodMonitor %s: %+v", m.Name, m.Spec)
		}
	}
}

// exported are the metric names the components export, gathered from their
// real registries (the probe's and the controller's NewMetrics) and, for
// the series a registry shows only once it has a value (a host's verdict,
// a swap, a held step), from the recorded scrapes of the real components.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, reg := range []prometheus.Gatherer{probe.NewMetrics().Registry, controller.NewMetrics().Registry} {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			addFamily(names, mf.GetName(), mf.GetType().String())
		}
	}
	for _, run := range recordedRuns(t) {
		for name, typ := range run.families {
			addFamily(names, name, typ)
		}
	}
	return names
}

// TestMetricNames holds the names the rules and the dashboard query to the
// names the components export.
func TestMetricNames(t *testing.T) {
	have := exported(t)
	s := settings.Defaults()
	dash, err := Dashboard(s)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	dashNames := namesIn(exprs...)
	if len(dashNames) < 10 {
		t.Fatalf("the dashboard names only %v", dashNames)
	}
	for what, names := range map[string][]string{"dashboard": dashNames, "rules": MetricNames(s)} {
		for _, n := range names {
			if !have[n] {
				t.Errorf("the %s query %s, which no component exports (exported: %v)", what, n, keys(have))
			}
		}
	}
}

// addFamily adds a family's names as a query sees them: a histogram's
// series are name_bucket, name_sum and name_count.
func addFamily(names map[string]bool, name, typ string) {
	names[name] = true
	if strings.EqualFold(typ, "histogram") {
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			names[name+suf] = true
		}
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestEveryAlertHasItsRunbook holds every alert to a runbook_url whose
// section docs/runbooks.md has: a heading of the alert's own name.
func TestEveryAlertHasItsRunbook(t *testing.T) {
	b, err := os.ReadFile("../../docs/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	headings := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if h, ok := strings.CutPrefix(l, "## "); ok {
			headings[h] = true
		}
	}
	rules := Rules(settings.Defaults())
	for _, r := range rules {
		want := "https://github.com/fleet-role/fleet-role/blob/main/docs/runbooks.md#" + strings.ToLower(r.Alert)
		if got := r.Annotations["runbook_url"]; got != want {
			t.Errorf("%s: runbook_url %q, want %q", r.Alert, got, want)
		}
		if !headings[r.Alert] {
			t.Errorf("%s: docs/runbooks.md has no section \"## %s\"", r.Alert, r.Alert)
		}
		delete(headings, r.Alert)
	}
	for h := range headings {
		t.Errorf("docs/runbooks.md has a section %q for no alert of the rules", h)
	}
}
