package alerts

import (
	"encoding/json"
	"fmt"

	"github.com/fleet-role/fleet-role/internal/settings"
)

// panel is one Grafana panel, as the dashboard JSON model holds it.
type panel struct {
	ID          int            `json:"id"`
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Description string         `json:"description,omitempty"`
	GridPos     gridPos        `json:"gridPos"`
	Datasource  map[string]any `json:"datasource"`
	Targets     []target       `json:"targets"`
	FieldConfig map[string]any `json:"fieldConfig"`
	Options     map[string]any `json:"options,omitempty"`
}

type gridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

type target struct {
	RefID        string         `json:"refId"`
	Expr         string         `json:"expr"`
	LegendFormat string         `json:"legendFormat,omitempty"`
	Datasource   map[string]any `json:"datasource"`
}

var datasource = map[string]any{"type": "prometheus", "uid": "${datasource}"}

// Dashboard renders the Grafana dashboard at s: per host the verdict over
// time, the deciding numbers against their limits, the swap advice and why
// a swap is held, the probes' health and the controller's decisions.
func Dashboard(s settings.Settings) ([]byte, error) {
	stale := promDur(Staleness(s))
	var panels []panel
	y := 0
	add := func(w, h int, p panel) {
		x := 0
		if n := len(panels); n > 0 && panels[n-1].GridPos.Y == y && panels[n-1].GridPos.X+panels[n-1].GridPos.W+w <= 24 {
			x = panels[n-1].GridPos.X + panels[n-1].GridPos.W
		} else if n > 0 {
			y += panels[n-1].GridPos.H
		}
		p.ID = len(panels) + 1
		p.GridPos = gridPos{H: h, W: w, X: x, Y: y}
		p.Datasource = datasource
		for i := range p.Targets {
			p.Targets[i].RefID = string(rune('A' + i))
			p.Targets[i].Datasource = datasource
		}
		if p.FieldConfig == nil {
			p.FieldConfig = map[string]any{"defaults": map[string]any{}, "overrides": []any{}}
		}
		panels = append(panels, p)
	}
	verdictMap := []any{
		map[string]any{"type": "value", "options": map[string]any{
			"0": map[string]any{"text": "fit", "color": "green", "index": 0},
			"1": map[string]any{"text": "unknown", "color": "text", "index": 1},
			"2": map[string]any{"text": "unfit", "color": "red", "index": 2},
		}},
	}
	add(24, 8, panel{
		Type: "state-timeline", Title: "Verdict per host",
		Description: "Each host's verdict at each decision: fit, unknown (no full, fresh, readable window) or unfit. fleet-role status HOST prints every reason.",
		Targets: []target{{
			Expr:         `max by (host, role) (2 * fleet_role_host_verdict{verdict="unfit"} + fleet_role_host_verdict{verdict="unknown"})`,
			LegendFormat: "{{host}} ({{role}})",
		}},
		FieldConfig: map[string]any{"defaults": map[string]any{"mappings": verdictMap, "color": map[string]any{"mode": "thresholds"},
			"thresholds": map[string]any{"mode": "absolute", "steps": []any{
				map[string]any{"color": "green", "value": nil}, map[string]any{"color": "text", "value": 1}, map[string]any{"color": "red", "value": 2}}}},
			"overrides": []any{}},
		Options: map[string]any{"showValue": "never", "mergeValues": true},
	})
	add(12, 9, panel{
		Type: "timeseries", Title: "Deciding reason against its limit",
		Description: "Each host's deciding reason (the one furthest over its limit when unfit, closest to it when fit) as a fraction of its limit: over 1 is over an at-most limit; for an at-least limit (memory_available, samples) under 1 is short (docs/limits.md).",
		Targets: []target{{
			Expr:         `fleet_role_host_deciding_value / on (host, role, verdict, signal, subject, unit) fleet_role_host_deciding_limit`,
			LegendFormat: "{{host}} {{signal}} {{subject}}",
		}},
		FieldConfig: map[string]any{"defaults": map[string]any{"unit": "percentunit",
			"custom": map[string]any{"thresholdsStyle": map[string]any{"mode": "line"}},
			"thresholds": map[string]any{"mode": "absolute", "steps": []any{
				map[string]any{"color": "green", "value": nil}, map[string]any{"color": "red", "value": 1}}}},
			"overrides": []any{}},
	})
	add(12, 9, panel{
		Type: "table", Title: "Deciding numbers now",
		Description: "The deciding reason of each host with its measured value and its limit, in the reason's unit.",
		Targets: []target{
			{Expr: `fleet_role_host_deciding_value`, LegendFormat: "value"},
			{Expr: `fleet_role_host_deciding_limit`, LegendFormat: "limit"},
		},
		Options: map[string]any{"showHeader": true},
	})
	add(12, 8, panel{
		Type: "timeseries", Title: "Failure tolerance",
		Description: "Voters that may still fail before etcd loses quorum (floor(n/2)+1 of n voters), counting as lost the unfit and unknown voters, only the unknown, or none (what the voter count allows): docs/status.md, Failure tolerance.",
		Targets:     []target{{Expr: `fleet_role_failure_tolerance`, LegendFormat: "lost: {{lost}}"}},
		FieldConfig: map[string]any{"defaults": map[string]any{"decimals": 0, "min": 0,
			"custom": map[string]any{"thresholdsStyle": map[string]any{"mode": "line"}},
			"thresholds": map[string]any{"mode": "absolute", "steps": []any{
				map[string]any{"color": "red", "value": nil}, map[string]any{"color": "green", "value": 1}}}},
			"overrides": []any{}},
	})
	add(12, 8, panel{
		Type: "timeseries", Title: "Swap advice",
		Description: "1 while the controller would swap out for in (dry run: nothing is changed), and each step that holds a swap back.",
		Targets: []target{
			{Expr: `fleet_role_swap == 1`, LegendFormat: "swap {{out}} out, {{in}} in"},
			{Expr: `fleet_role_decision_held == 1`, LegendFormat: "held: {{step}}"},
		},
	})
	add(12, 8, panel{
		Type: "timeseries", Title: "Samples in each host's window",
		Description: fmt.Sprintf("A host is judged on a full window of %d samples (window >= 1/(1-tail_percentile)).", s.Window),
		Targets:     []target{{Expr: `fleet_role_host_samples`, LegendFormat: "{{host}}"}},
	})
	add(8, 8, panel{
		Type: "timeseries", Title: "Seconds since each probe last wrote",
		Description: "Against entry_unchanged (" + stale + "), after which the controller calls the host's record stale.",
		Targets:     []target{{Expr: `time() - fleet_role_probe_last_write_timestamp_seconds`, LegendFormat: "{{host}}"}},
		FieldConfig: map[string]any{"defaults": map[string]any{"unit": "s",
			"custom": map[string]any{"thresholdsStyle": map[string]any{"mode": "line"}},
			"thresholds": map[string]any{"mode": "absolute", "steps": []any{
				map[string]any{"color": "green", "value": nil}, map[string]any{"color": "red", "value": Staleness(s).Seconds()}}}},
			"overrides": []any{}},
	})
	add(8, 8, panel{
		Type: "timeseries", Title: "Probe writes and failed readings",
		Targets: []target{
			{Expr: `sum by (host, result) (rate(fleet_role_probe_writes_total[$__rate_interval]))`, LegendFormat: "{{host}} write {{result}}"},
			{Expr: `sum by (host, reading) (rate(fleet_role_probe_reading_failures_total[$__rate_interval]))`, LegendFormat: "{{host}} {{reading}} failed"},
		},
		FieldConfig: map[string]any{"defaults": map[string]any{"unit": "ops"}, "overrides": []any{}},
	})
	add(8, 8, panel{
		Type: "timeseries", Title: "Records: entry against its cap, and issues",
		Targets: []target{
			{Expr: `fleet_role_probe_entry_bytes / fleet_role_probe_entry_cap_bytes`, LegendFormat: "{{host}} of cap"},
			{Expr: `fleet_role_probe_entry_shrunk_samples`, LegendFormat: "{{host}} shrunk samples"},
			{Expr: `fleet_role_host_record_issue == 1`, LegendFormat: "{{host}} {{issue}}"},
		},
	})
	add(12, 8, panel{
		Type: "timeseries", Title: "Controller decisions",
		Targets: []target{
			{Expr: `sum by (result) (rate(fleet_role_decisions_total[$__rate_interval]))`, LegendFormat: "decisions {{result}}"},
			{Expr: `rate(fleet_role_status_writes_total[$__rate_interval])`, LegendFormat: "status writes"},
			{Expr: `histogram_quantile(0.99, sum by (le) (rate(fleet_role_decision_seconds_bucket[$__rate_interval])))`, LegendFormat: "p99 decision seconds"},
		},
	})
	add(12, 8, panel{
		Type: "timeseries", Title: "Flaps and verdict changes",
		Targets: []target{
			{Expr: `increase(fleet_role_flaps_total[1h])`, LegendFormat: "flaps per hour"},
			{Expr: `increase(fleet_role_verdict_changes_total[1h])`, LegendFormat: "verdict changes per hour"},
			{Expr: `histogram_quantile(0.99, sum by (le) (rate(fleet_role_probe_tick_seconds_bucket[$__rate_interval])))`, LegendFormat: "p99 probe period work seconds"},
		},
	})
	d := map[string]any{
		"title":         "fleet-role",
		"uid":           "fleet-role",
		"description":   "Which k3s hosts are fit to hold an etcd vote, the swap fleet-role would make, and its probes' health. Rendered by internal/alerts.",
		"tags":          []string{"fleet-role", "etcd", "k3s"},
		"schemaVersion": 39,
		"editable":      true,
		"time":          map[string]any{"from": "now-6h", "to": "now"},
		"refresh":       promDur(s.SamplePeriod),
		"templating": map[string]any{"list": []any{map[string]any{
			"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus",
		}}},
		"panels": panels,
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("render dashboard: %w", err)
	}
	return append(b, '\n'), nil
}
