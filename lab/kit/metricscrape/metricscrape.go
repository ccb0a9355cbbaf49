// Package metricscrape reads a Prometheus text exposition (a /metrics page)
// into its metric families with the parser the product uses
// (github.com/prometheus/common/expfmt), and looks series up by name and
// labels: the harness's one reader of etcd's, k3s's and fleet-role's own
// pages, so that a test judges a page as a Prometheus server would parse it
// rather than by the prefix of its lines. It is harness, not product.
package metricscrape

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// MaxPageBytes is the most of a page read: the pages the harness reads are
// well under it (etcd's is about 170 KB, k3s's with every component's
// series a few MB), and a page over it is refused rather than cut, since a
// cut page would parse as one without its last series.
const MaxPageBytes = 32 << 20

// maxErrorText is the most of a parse error's text kept: the parser quotes
// the token it stopped at, and a page gone wrong can make that token a
// whole line of bytes; this keeps a line and a half of a real etcd page.
const maxErrorText = 360

// textAccept asks for the text format: a server that also offers the
// protobuf or OpenMetrics formats serves this one when asked for it.
const textAccept = "text/plain;version=0.0.4"

// Labels are a series' label names and values.
type Labels map[string]string

// Series is one series of a gauge, counter or untyped family: its labels
// and its value.
type Series struct {
	Labels Labels
	Value  float64
}

// Page is a parsed exposition.
type Page struct {
	// Bytes is the length of the page as read.
	Bytes    int
	families map[string]*dto.MetricFamily
}

// Parse reads a page in the Prometheus text format from r.
func Parse(r io.Reader) (*Page, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxPageBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read metrics page: %w", err)
	}
	return parse(b)
}

// Fetch gets url with client (http.DefaultClient when nil) and parses the
// page it serves; a status other than 200 is an error.
func Fetch(ctx context.Context, client *http.Client, url string) (*Page, error) {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("metrics page %s: %w", url, err)
	}
	req.Header.Set("Accept", textAccept)
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics page: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics page %s: status %s", url, resp.Status)
	}
	p, err := Parse(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	return p, nil
}

func parse(b []byte) (*Page, error) {
	if len(b) > MaxPageBytes {
		return nil, fmt.Errorf("metrics page over %d bytes", MaxPageBytes)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("parse metrics page (%d bytes): %w", len(b), boundedError{err})
	}
	return &Page{Bytes: len(b), families: fams}, nil
}

// Has reports whether the page holds a family called name.
func (p *Page) Has(name string) bool {
	return p.families[name] != nil
}

// Names are the page's family names, sorted.
func (p *Page) Names() []string {
	return slices.Sorted(maps.Keys(p.families))
}

// Series are the series of the family name whose labels hold every pair of
// match (nil matches every series), in the page's order. A histogram's or
// summary's series have no one value and are left out: the harness reads
// only gauges, counters and untyped series.
func (p *Page) Series(name string, match Labels) []Series {
	f := p.families[name]
	if f == nil {
		return nil
	}
	var out []Series
	for _, m := range f.GetMetric() {
		v, ok := value(m)
		if !ok {
			continue
		}
		ls := make(Labels, len(m.GetLabel()))
		for _, l := range m.GetLabel() {
			ls[l.GetName()] = l.GetValue()
		}
		if holds(ls, match) {
			out = append(out, Series{Labels: ls, Value: v})
		}
	}
	return out
}

// Value is the value of the first series of name whose labels hold match;
// ok is false when no series does.
func (p *Page) Value(name string, match Labels) (v float64, ok bool) {
	s := p.Series(name, match)
	if len(s) == 0 {
		return 0, false
	}
	return s[0].Value, true
}

// TextBytes is the size of the family name in the text format, its HELP
// and TYPE lines included, as expfmt writes it (the encoder the exporters'
// client library uses, so within a few bytes of what they served), or 0
// when the page has no such family.
func (p *Page) TextBytes(name string) (int, error) {
	f := p.families[name]
	if f == nil {
		return 0, nil
	}
	n, err := expfmt.MetricFamilyToText(io.Discard, f)
	if err != nil {
		return 0, fmt.Errorf("encode %s: %w", name, err)
	}
	return n, nil
}

// value is a gauge's, counter's or untyped series' value.
func value(m *dto.Metric) (float64, bool) {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue(), true
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue(), true
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue(), true
	}
	return 0, false
}

func holds(ls, match Labels) bool {
	for k, v := range match {
		if got, ok := ls[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// boundedError cuts the text of a parse error at maxErrorText bytes.
type boundedError struct{ err error }

func (e boundedError) Error() string {
	s := e.err.Error()
	if len(s) <= maxErrorText {
		return s
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:maxErrorText], len(s))
}

func (e boundedError) Unwrap() error { return e.err }
