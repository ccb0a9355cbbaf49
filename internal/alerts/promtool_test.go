package alerts

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"

	"github.com/fleet-role/fleet-role/internal/settings"
)

// testdata holds the recordings (lab/cmd/recordseries) and the promtool unit
// tests and rules generated from them.
const testdata = monitoring + "/testdata"

// series is one series of a recording: its labels (with __name__) and its
// value at each scrape; missing where it had none.
type series struct {
	labels  map[string]string
	values  []float64
	present []bool
}

// recording is one recorded run.
type recording struct {
	name     string
	period   time.Duration
	window   int
	events   []string
	scrapes  int
	series   map[string]*series // by its text, name{labels}
	families map[string]string  // name -> type
	up       map[string][]bool  // target -> scraped at each scrape
}

var headerRE = regexp.MustCompile(`^# run=(\S+) period=(\S+) window=(\d+)`)
var blockRE = regexp.MustCompile(`^# scrape=(\d+) target=(\S+) up=([01])`)

// atRE is a block's wall time (Unix seconds), which recordings that hold
// timestamps write: the tests' time starts at 0, so a timestamp gauge is
// read relative to the first scrape's wall time, as promtool's time() is
// relative to the test's start.
var atRE = regexp.MustCompile(` at=([0-9.]+)`)

func recordedRuns(t *testing.T) []*recording {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testdata, "recorded", "*.prom.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no recordings in %s: go run ./lab/cmd/recordseries", filepath.Join(testdata, "recorded"))
	}
	var out []*recording
	for _, f := range files {
		r, err := readRecording(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, r)
	}
	return out
}

func readRecording(path string) (*recording, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	r := &recording{series: map[string]*series{}, families: map[string]string{}, up: map[string][]bool{}}
	type block struct {
		scrape int
		target string
		up     bool
		at     float64
		text   bytes.Buffer
	}
	var blocks []*block
	var events []string
	first := -1
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := headerRE.FindStringSubmatch(line); m != nil {
			r.name = m[1]
			if r.period, err = time.ParseDuration(m[2]); err != nil {
				return nil, err
			}
			r.window, _ = strconv.Atoi(m[3])
			continue
		}
		if strings.HasPrefix(line, "# event ") {
			events = append(events, line)
			continue
		}
		if m := blockRE.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			if first < 0 {
				first = n
			}
			b := &block{scrape: n - first, target: m[2], up: m[3] == "1"}
			if a := atRE.FindStringSubmatch(line); a != nil {
				if b.at, err = strconv.ParseFloat(a[1], 64); err != nil {
					return nil, fmt.Errorf("%q: %w", line, err)
				}
			}
			blocks = append(blocks, b)
			continue
		}
		if len(blocks) > 0 {
			blocks[len(blocks)-1].text.WriteString(line + "\n")
		}
	}
	if r.period == 0 || len(blocks) == 0 {
		return nil, fmt.Errorf("no header or no scrapes")
	}
	r.scrapes = blocks[len(blocks)-1].scrape + 1
	// Events name the recorder's scrape; the tests' time starts at the
	// first scrape that reached a component.
	for _, e := range events {
		var n int
		rest := ""
		if _, err := fmt.Sscanf(e, "# event scrape=%d", &n); err == nil {
			_, rest, _ = strings.Cut(strings.TrimPrefix(e, "# event "), " ")
		}
		r.events = append(r.events, fmt.Sprintf("# at %s: %s", promDur(time.Duration(n-first)*r.period), rest))
	}
	// The wall time of the tests' 0: the first block's, when blocks carry
	// theirs.
	base := blocks[0].at
	for _, b := range blocks {
		if r.up[b.target] == nil {
			r.up[b.target] = make([]bool, r.scrapes)
		}
		r.up[b.target][b.scrape] = b.up
		if !b.up {
			continue
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := p.TextToMetricFamilies(&b.text)
		if err != nil {
			return nil, fmt.Errorf("scrape %d of %s: %w", b.scrape, b.target, err)
		}
		for name, mf := range mfs {
			r.families[name] = mf.GetType().String()
			for _, m := range mf.GetMetric() {
				v, ok := value(mf.GetType(), m)
				if !ok {
					continue // histograms: no rule reads them
				}
				if base > 0 && strings.HasSuffix(name, "_timestamp_seconds") {
					v -= base
				}
				labels := targetLabels(b.target)
				labels[model.MetricNameLabel] = name
				for _, lp := range m.GetLabel() {
					labels[lp.GetName()] = lp.GetValue()
				}
				key := model.Metric(toModel(labels)).String()
				s := r.series[key]
				if s == nil {
					s = &series{labels: labels, values: make([]float64, r.scrapes), present: make([]bool, r.scrapes)}
					r.series[key] = s
				}
				s.values[b.scrape], s.present[b.scrape] = v, true
			}
		}
	}
	return r, nil
}

func value(t dto.MetricType, m *dto.Metric) (float64, bool) {
	switch t {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue(), true
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue(), true
	case dto.MetricType_UNTYPED:
		return m.GetUntyped().GetValue(), true
	}
	return 0, false
}

// targetLabels are the labels Prometheus adds to a target's series with the
// PodMonitors: job and instance, and host for a probe (its node).
func targetLabels(target string) map[string]string {
	comp, host, _ := strings.Cut(target, "/")
	job := "fleet-role" // the pods' app.kubernetes.io/name, the PodMonitors' jobLabel
	if comp == "probe" {
		job = "fleet-role-probe"
	}
	l := map[string]string{"job": job, "instance": target}
	if host != "" {
		l["host"] = host
	}
	return l
}

func toModel(l map[string]string) model.LabelSet {
	out := model.LabelSet{}
	for k, v := range l {
		out[model.LabelName(k)] = model.LabelValue(v)
	}
	return out
}

// settingsOf are the settings the run was recorded at, as far as the rules
// read them.
func (r *recording) settingsOf() settings.Settings {
	s := settings.Defaults()
	s.SamplePeriod = r.period
	s.Window = r.window
	return s
}

// at returns the series of metric name whose labels hold want, with a
// sample at scrape i that is not stale (the target scraped, the series in
// the page).
func (r *recording) at(i int, name string, want map[string]string) []*series {
	var out []*series
	for _, s := range r.series {
		if s.labels[model.MetricNameLabel] != name || !s.present[i] {
			continue
		}
		ok := true
		for k, v := range want {
			if s.labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, s)
		}
	}
	return out
}

// alertLabels are an alert's labels: the series' without its name, the
// rule's, and alertname.
func alertLabels(rule Rule, l map[string]string) map[string]string {
	out := map[string]string{"alertname": rule.Alert}
	for k, v := range l {
		if k != model.MetricNameLabel {
			out[k] = v
		}
	}
	for k, v := range rule.Labels {
		out[k] = v
	}
	return out
}

// conditions computes, from the recorded values, the series each alert's
// expression returns at scrape i: what the rule says, read off the
// recording independently of PromQL.
func (r *recording) conditions(rule Rule, i int) []map[string]string {
	var out []map[string]string
	eq1 := func(name string, match map[string]string, keep func(map[string]string) bool) {
		for _, s := range r.at(i, name, match) {
			if s.values[i] == 1 && (keep == nil || keep(s.labels)) {
				out = append(out, alertLabels(rule, s.labels))
			}
		}
	}
	in := func(key string, vals ...string) func(map[string]string) bool {
		return func(l map[string]string) bool {
			for _, v := range vals {
				if l[key] == v {
					return true
				}
			}
			return false
		}
	}
	unfitVoter := false
	for _, s := range r.at(i, "fleet_role_host_verdict", map[string]string{"role": "voter", "verdict": "unfit"}) {
		if s.values[i] == 1 {
			unfitVoter = true
		}
	}
	switch rule.Alert {
	case "FleetRoleVoterUnfit":
		eq1("fleet_role_host_verdict", map[string]string{"role": "voter", "verdict": "unfit"}, nil)
	case "FleetRoleSwapAdvised":
		eq1("fleet_role_swap", nil, nil)
	case "FleetRoleSwapHeld":
		if unfitVoter {
			eq1("fleet_role_decision_held", nil, nil)
		}
	case "FleetRoleFailureToleranceZero":
		margin := false
		for _, s := range r.at(i, "fleet_role_failure_tolerance", map[string]string{"lost": "unknown"}) {
			if s.values[i] > 0 {
				margin = true
			}
		}
		for _, s := range r.at(i, "fleet_role_failure_tolerance", map[string]string{"lost": "unfit_and_unknown"}) {
			if margin && s.values[i] == 0 {
				out = append(out, alertLabels(rule, s.labels))
			}
		}
	case "FleetRoleProbeNotWriting":
		eq1("fleet_role_host_record_issue", nil, in("issue", "stale", "missing"))
	case "FleetRoleRecordRefusedOrFull":
		eq1("fleet_role_host_record_issue", nil, in("issue", "refused", "full", "unreadable"))
	case "FleetRoleSwapPastDeadline":
		// The deadline, relative to the first scrape, before the
		// evaluation's time (promtool's time() at scrape i).
		for _, s := range r.at(i, "fleet_role_swap_step_deadline_timestamp_seconds", nil) {
			if s.values[i] < (time.Duration(i) * r.period).Seconds() {
				out = append(out, alertLabels(rule, s.labels))
			}
		}
	case "FleetRoleActingStalled":
		eq1("fleet_role_acting_stalled", nil, nil)
	case "FleetRoleControllerNotDeciding":
		// increase over (t-3P, t] == 0 needs two samples there, all
		// equal; absent() when the series has no sample at t.
		k := int(Staleness(r.settingsOf()) / r.period)
		found := false
		for _, s := range r.series {
			if s.labels[model.MetricNameLabel] != "fleet_role_decisions_total" || s.labels["result"] != "ok" {
				continue
			}
			if s.present[i] {
				found = true
			}
			var vals []float64
			for j := max(0, i-k+1); j <= i; j++ {
				if s.present[j] {
					vals = append(vals, s.values[j])
				}
			}
			if len(vals) >= 2 && vals[0] == vals[len(vals)-1] {
				l := map[string]string{}
				for key, v := range s.labels {
					l[key] = v
				}
				delete(l, model.MetricNameLabel)
				out = append(out, alertLabels(rule, l))
			}
		}
		if !found {
			out = append(out, alertLabels(rule, map[string]string{"result": "ok"}))
		}
	default:
		panic("no condition for " + rule.Alert)
	}
	return out
}

func labelKey(l map[string]string) string { return toModel(l).String() }

// firing are the alerts of rule firing at scrape i: those whose expression
// returned them at every evaluation from i - For/period to i (Prometheus
// evaluates once a period, at the scrapes' instants).
func (r *recording) firing(rule Rule, i int) []map[string]string {
	k := int(rule.For / r.period)
	if i-k < 0 {
		return nil
	}
	count := map[string]int{}
	var last []map[string]string
	for j := i - k; j <= i; j++ {
		last = r.conditions(rule, j)
		for _, l := range last {
			count[labelKey(l)]++
		}
	}
	var out []map[string]string
	for _, l := range last {
		if count[labelKey(l)] == k+1 {
			out = append(out, l)
		}
	}
	sort.Slice(out, func(a, b int) bool { return labelKey(out[a]) < labelKey(out[b]) })
	return out
}

// annotations expands the rule's annotations for one alert as Prometheus
// would: $labels, and the deciding reason read off the recording.
func (r *recording) annotations(rule Rule, l map[string]string, i int) map[string]string {
	out := map[string]string{}
	for k, text := range rule.Annotations {
		if strings.Contains(text, decidingTemplate) {
			var b strings.Builder
			for _, s := range r.at(i, "fleet_role_host_deciding_value", map[string]string{"host": l["host"]}) {
				fmt.Fprintf(&b, " %s", s.labels["signal"])
				if sub := s.labels["subject"]; sub != "" {
					fmt.Fprintf(&b, " %s", sub)
				}
				fmt.Fprintf(&b, " %.4g %s", s.values[i], s.labels["unit"])
			}
			for _, s := range r.at(i, "fleet_role_host_deciding_limit", map[string]string{"host": l["host"]}) {
				fmt.Fprintf(&b, ", limit %.4g %s", s.values[i], s.labels["unit"])
			}
			text = strings.ReplaceAll(text, decidingTemplate, b.String())
		}
		// A query of one of the controller's series by its labels, as the
		// tolerance alert reads the other figures: the value read off the
		// recording, as text/template prints a float.
		text = queryRE.ReplaceAllStringFunc(text, func(m string) string {
			q := queryRE.FindStringSubmatch(m)
			want := map[string]string{}
			for _, kv := range strings.Split(q[2], ",") {
				k, v, _ := strings.Cut(kv, "=")
				want[k] = strings.Trim(v, `\"`)
			}
			for _, s := range r.at(i, q[1], want) {
				return fmt.Sprint(s.values[i])
			}
			return ""
		})
		for name, v := range l {
			text = strings.ReplaceAll(text, "{{ $labels."+name+" }}", v)
		}
		out[k] = text
	}
	return out
}

// queryRE is an annotation's query of one series: its name and labels.
var queryRE = regexp.MustCompile(`\{\{ with query "(fleet_role_[a-z_]+)\{([^}]*)\}" \}\}\{\{ \. \| first \| value \}\}\{\{ end \}\}`)

// The promtool test file's shape.
type unitFile struct {
	RuleFiles          []string   `json:"rule_files"`
	EvaluationInterval string     `json:"evaluation_interval"`
	Tests              []unitTest `json:"tests"`
}

type unitTest struct {
	Name          string      `json:"name"`
	Interval      string      `json:"interval"`
	InputSeries   []inputSer  `json:"input_series"`
	AlertRuleTest []alertTest `json:"alert_rule_test"`
}

type inputSer struct {
	Series string `json:"series"`
	Values string `json:"values"`
}

type alertTest struct {
	EvalTime  string     `json:"eval_time"`
	Alertname string     `json:"alertname"`
	ExpAlerts []expAlert `json:"exp_alerts"`
}

type expAlert struct {
	ExpLabels      map[string]string `json:"exp_labels"`
	ExpAnnotations map[string]string `json:"exp_annotations"`
}

// values writes a series' samples in promtool's notation: a run of one
// value as v+0xN, missing samples as _xN, and a staleness marker where a
// series that had samples loses them (a failed scrape, or gone from the
// page), as Prometheus writes one.
func (s *series) valuesText() string {
	var parts []string
	n := len(s.values)
	had := false
	for i := 0; i < n; {
		if !s.present[i] {
			if had {
				parts = append(parts, "stale")
				had = false
				i++
				continue
			}
			j := i
			for j < n && !s.present[j] {
				j++
			}
			parts = append(parts, fmt.Sprintf("_x%d", j-i))
			i = j
			continue
		}
		had = true
		j := i
		for j < n && s.present[j] && s.values[j] == s.values[i] {
			j++
		}
		v := strconv.FormatFloat(s.values[i], 'g', -1, 64)
		if math.IsNaN(s.values[i]) {
			v = "NaN"
		}
		if j-i == 1 {
			parts = append(parts, v)
		} else {
			parts = append(parts, fmt.Sprintf("%s+0x%d", v, j-i-1))
		}
		i = j
	}
	return strings.Join(parts, " ")
}

// rulesFileFor names the rules rendered at a recording's settings.
func rulesFileFor(s settings.Settings) string {
	return fmt.Sprintf("rules-period-%s-window-%d.yaml", promDur(s.SamplePeriod), s.Window)
}

// unitTests generates the promtool unit tests of one recording: for each
// alert, the first evaluation of its last firing stretch (with its labels and
// annotations), and evaluations at which it stays silent: one while its
// condition holds but for less than its `for` (pending), when the recording
// has one, and the last quiet evaluation before that.
func (r *recording) unitTests(t *testing.T) ([]byte, []string) {
	t.Helper()
	s := r.settingsOf()
	names := map[string]bool{}
	for _, n := range MetricNames(s) {
		names[n] = true
	}
	var keys []string
	for k, sr := range r.series {
		if names[sr.labels[model.MetricNameLabel]] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	ut := unitTest{Name: "recorded run " + r.name, Interval: promDur(r.period)}
	for _, k := range keys {
		ut.InputSeries = append(ut.InputSeries, inputSer{Series: k, Values: r.series[k].valuesText()})
	}
	evalAt := func(i int) string { return promDur(time.Duration(i) * r.period) }
	var fired []string
	for _, rule := range Rules(s) {
		// The start of the last stretch in which it fires: the fault's,
		// or the stop's for the controller (at the start of a run, before
		// the first decision, it fires too).
		fire := -1
		for i := r.scrapes - 1; i >= 0; i-- {
			if len(r.firing(rule, i)) > 0 {
				fire = i
			} else if fire >= 0 {
				break
			}
		}
		if fire < 0 {
			continue
		}
		fired = append(fired, rule.Alert)
		var exp []expAlert
		for _, l := range r.firing(rule, fire) {
			exp = append(exp, expAlert{ExpLabels: l, ExpAnnotations: r.annotations(rule, l, fire)})
		}
		// Silent: the evaluation just before it fires (pending, or
		// nothing yet), and the last at which its condition did not hold.
		quiet := -1
		for i := fire - 1; i >= 0; i-- {
			if len(r.conditions(rule, i)) == 0 {
				quiet = i
				break
			}
		}
		if fire > 0 {
			ut.AlertRuleTest = append(ut.AlertRuleTest, alertTest{EvalTime: evalAt(fire - 1), Alertname: rule.Alert, ExpAlerts: []expAlert{}})
		}
		if quiet >= 0 && quiet != fire-1 {
			ut.AlertRuleTest = append(ut.AlertRuleTest, alertTest{EvalTime: evalAt(quiet), Alertname: rule.Alert, ExpAlerts: []expAlert{}})
		}
		ut.AlertRuleTest = append(ut.AlertRuleTest, alertTest{EvalTime: evalAt(fire), Alertname: rule.Alert, ExpAlerts: exp})
	}
	f := unitFile{RuleFiles: []string{rulesFileFor(s)}, EvaluationInterval: promDur(r.period), Tests: []unitTest{ut}}
	b, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	head := fmt.Sprintf("# promtool unit tests generated from the recorded run %q (recorded/%s.prom.gz, lab/cmd/recordseries)\n"+
		"# by go test ./internal/alerts -run TestPromtoolFiles -update. Do not edit.\n", r.name, r.name)
	for _, e := range r.events {
		head += e + "\n"
	}
	return append([]byte(head), b...), fired
}

// TestPromtoolFiles holds the generated promtool tests and the rules at the
// recordings' settings equal to what the recordings give, and checks that
// together the recordings fire every alert.
func TestPromtoolFiles(t *testing.T) {
	files := map[string][]byte{}
	fired := map[string]bool{}
	for _, r := range recordedRuns(t) {
		b, f := r.unitTests(t)
		files[r.name+".test.yaml"] = b
		for _, a := range f {
			fired[a] = true
		}
		rules, err := RulesFile(r.settingsOf())
		if err != nil {
			t.Fatal(err)
		}
		files[rulesFileFor(r.settingsOf())] = rules
	}
	for _, rule := range Rules(settings.Defaults()) {
		if !fired[rule.Alert] {
			t.Errorf("no recording fires %s", rule.Alert)
		}
	}
	checkFiles(t, testdata, files, "TestPromtoolFiles")
}
