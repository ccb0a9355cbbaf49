package alerts

import (
	"fmt"
	"sort"
	"strings"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/fleet-role/fleet-role/internal/settings"
)

// header says what made a rendered file and at which settings.
func header(s settings.Settings, what string) string {
	return fmt.Sprintf("# %s, rendered by internal/alerts at sample_period %s, window %d\n"+
		"# (go test ./internal/alerts -run TestRendered -update). Do not edit: change internal/alerts.\n",
		what, s.SamplePeriod, s.Window)
}

// ruleFile is a Prometheus rules file.
type ruleFile struct {
	Groups []ruleGroup `json:"groups"`
}

type ruleGroup struct {
	Name     string     `json:"name"`
	Interval string     `json:"interval,omitempty"`
	Rules    []ruleYAML `json:"rules"`
}

type ruleYAML struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// group is the rule group at s, evaluated once a sample period: each probe
// writes once a period, and the controller, which decides twice a period,
// changes its figures at most once a period unless a decision or a verdict
// changes (docs/limits.md), so a faster evaluation sees little new.
func group(s settings.Settings) ruleGroup {
	g := ruleGroup{Name: Group, Interval: promDur(s.SamplePeriod)}
	for _, r := range Rules(s) {
		g.Rules = append(g.Rules, ruleYAML{Alert: r.Alert, Expr: r.Expr, For: forDur(r.For), Labels: r.Labels, Annotations: r.Annotations})
	}
	return g
}

func forDur(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return promDur(d)
}

// RulesFile renders the plain Prometheus rules file at s.
func RulesFile(s settings.Settings) ([]byte, error) {
	b, err := yaml.Marshal(ruleFile{Groups: []ruleGroup{group(s)}})
	if err != nil {
		return nil, fmt.Errorf("render rules: %w", err)
	}
	return append([]byte(header(s, "fleet-role's Prometheus alert rules")), b...), nil
}

// labels every object carries.
func objectLabels() map[string]string {
	return map[string]string{"app.kubernetes.io/part-of": "fleet-role"}
}

// PrometheusRule is the same rules as prometheus-operator's object.
func PrometheusRule(s settings.Settings) *monitoringv1.PrometheusRule {
	g := group(s)
	pg := monitoringv1.RuleGroup{Name: g.Name}
	iv := monitoringv1.Duration(g.Interval)
	pg.Interval = &iv
	for _, r := range g.Rules {
		rule := monitoringv1.Rule{Alert: r.Alert, Expr: intstr.FromString(r.Expr), Labels: r.Labels, Annotations: r.Annotations}
		if r.For != "" {
			d := monitoringv1.Duration(r.For)
			rule.For = &d
		}
		pg.Rules = append(pg.Rules, rule)
	}
	return &monitoringv1.PrometheusRule{
		TypeMeta:   metav1.TypeMeta{APIVersion: monitoringv1.SchemeGroupVersion.String(), Kind: monitoringv1.PrometheusRuleKind},
		ObjectMeta: metav1.ObjectMeta{Name: "fleet-role", Namespace: s.Namespace, Labels: objectLabels()},
		Spec:       monitoringv1.PrometheusRuleSpec{Groups: []monitoringv1.RuleGroup{pg}},
	}
}

// Component scrape targets: the pods' app.kubernetes.io/name and the port
// named metrics (deploy/base).
var components = []struct{ name, pod string }{
	{"fleet-role-controller", "fleet-role"},
	{"fleet-role-probe", "fleet-role-probe"},
}

// PodMonitors scrape the controller and every probe once a sample period
// (each writes or decides once a period; a faster scrape sees nothing new),
// and label the probe's series with its node as host, the label the
// controller's series carry.
func PodMonitors(s settings.Settings) []*monitoringv1.PodMonitor {
	var out []*monitoringv1.PodMonitor
	for _, c := range components {
		iv := monitoringv1.Duration(promDur(s.SamplePeriod))
		port := "metrics"
		ep := monitoringv1.PodMetricsEndpoint{Port: &port, Path: "/metrics"}
		ep.Interval = iv
		ep.RelabelConfigs = []monitoringv1.RelabelConfig{{
			SourceLabels: []monitoringv1.LabelName{"__meta_kubernetes_pod_node_name"},
			TargetLabel:  "node",
		}}
		if c.pod == "fleet-role-probe" {
			ep.RelabelConfigs = append(ep.RelabelConfigs, monitoringv1.RelabelConfig{
				SourceLabels: []monitoringv1.LabelName{"__meta_kubernetes_pod_node_name"},
				TargetLabel:  "host",
			})
		}
		out = append(out, &monitoringv1.PodMonitor{
			TypeMeta:   metav1.TypeMeta{APIVersion: monitoringv1.SchemeGroupVersion.String(), Kind: monitoringv1.PodMonitorsKind},
			ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: s.Namespace, Labels: objectLabels()},
			Spec: monitoringv1.PodMonitorSpec{
				JobLabel:            "app.kubernetes.io/name",
				Selector:            metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": c.pod}},
				PodMetricsEndpoints: []monitoringv1.PodMetricsEndpoint{ep},
			},
		})
	}
	return out
}

// Objects renders the PrometheusRule and the PodMonitors as one
// multi-document YAML file, for kubectl apply.
func Objects(s settings.Settings) ([]byte, error) {
	var docs []string
	objs := []any{PrometheusRule(s)}
	for _, m := range PodMonitors(s) {
		objs = append(objs, m)
	}
	for _, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("render %T: %w", o, err)
		}
		docs = append(docs, string(b))
	}
	return []byte(header(s, "fleet-role's prometheus-operator objects: the PrometheusRule (the same rules as fleet-role.rules.yaml) and a PodMonitor for the controller and for the probes") +
		"---\n" + strings.Join(docs, "---\n")), nil
}

// MetricNames are the fleet_role_ metrics the rules' expressions and
// annotations name.
func MetricNames(s settings.Settings) []string {
	var texts []string
	for _, r := range Rules(s) {
		texts = append(texts, r.Expr)
		for _, a := range r.Annotations {
			texts = append(texts, a)
		}
	}
	return namesIn(texts...)
}

// namesIn finds the fleet_role_ metric names in PromQL texts.
func namesIn(texts ...string) []string {
	seen := map[string]bool{}
	for _, t := range texts {
		for i := strings.Index(t, "fleet_role_"); i >= 0; {
			j := i
			for j < len(t) && (t[j] == '_' || t[j] >= 'a' && t[j] <= 'z' || t[j] >= '0' && t[j] <= '9') {
				j++
			}
			seen[t[i:j]] = true
			k := strings.Index(t[j:], "fleet_role_")
			if k < 0 {
				break
			}
			i = j + k
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
