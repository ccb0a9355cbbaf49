package statuspage

import (
	"bufio"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fleet-role/fleet-role/internal/decide"
)

// Page is one rendering: a decision's model, the verdicts of the decisions
// before it when the controller remembers them, and where it came from.
type Page struct {
	Model *Model
	// History is nil for a page written from a status document or from
	// saved inputs: those hold one decision.
	History *History
	// Source says where the decision came from, for the page's header.
	Source string
}

// ContentSecurityPolicy is what the page may load: nothing but its own
// inline style. The controller sends it as a header; the page carries it
// in a meta element too, so that a copy opened from a file holds to it.
const ContentSecurityPolicy = "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

// TextRunes is the most characters of one text the page shows in a cell:
// a reason's detail can quote an entry's error text, up to decide.TextCap
// bytes; the page shows its start and says it was cut, and `fleet-role
// status HOST` prints it whole. It bounds what each host adds to the page
// whatever its record holds (docs/status-page.md, "Size").
const TextRunes = 200

// TimeLayout is how the page writes the decision's time: to the
// millisecond, which tells apart decisions half a period apart.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

//go:embed page.html.tmpl
var pageTemplate string

var tmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"secs":    func(v float64) string { return decide.FormatValue(v, "seconds") },
	"summary": func(r decide.Reason) string { return short(decide.Summary(r)) },
	"short":   short,
	"long":    func(s string) string { return cut(s, DecisionRunes) },
	"verdict": verdictMark,
	"reading": readingMark,
	"rclass":  readingClass,
	"vclass":  verdictClass,
	"repeat":  strings.Repeat,
	"time":    func(t time.Time) string { return t.UTC().Format(TimeLayout) },
	"add":     func(a, b int) int { return a + b },
}).Parse(pageTemplate))

// Render writes the page. Every text is escaped by html/template for where
// it stands (text or attribute), so that a record's text is shown as text.
func Render(w io.Writer, p Page) error {
	if p.Model == nil {
		return fmt.Errorf("render status page: no decision")
	}
	bw := bufio.NewWriter(w)
	if err := tmpl.Execute(bw, p); err != nil {
		return fmt.Errorf("render status page: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write status page: %w", err)
	}
	return nil
}

// DecisionRunes is the most characters of a decision step's detail the page
// shows: the decision's own sentences (the attribution names every slow
// link and the sets that explain them) run longer than a host's, and there
// are only as many steps as the plan has and a candidate per standby.
const DecisionRunes = 1000

// short cuts a text to TextRunes characters, saying so.
func short(s string) string { return cut(s, TextRunes) }

func cut(s string, most int) string {
	if utf8.RuneCountInString(s) <= most {
		return s
	}
	n := 0
	for i := range s {
		if n == most {
			return s[:i] + fmt.Sprintf("… [cut from %d bytes; fleet-role status HOST prints it whole]", len(s))
		}
		n++
	}
	return s
}

// verdictMark is a verdict with its mark, so that it reads without colour.
func verdictMark(v decide.Verdict) string {
	switch v {
	case decide.Fit:
		return "✓ fit"
	case decide.Unfit:
		return "✗ unfit"
	case decide.Unknown:
		return "? unknown"
	}
	return string(v)
}

func verdictClass(v decide.Verdict) string {
	switch v {
	case decide.Fit:
		return "ok"
	case decide.Unfit:
		return "bad"
	}
	return "unk"
}

// readingMark is a cell's reading as text: its number and a mark.
func readingMark(r Reading) string {
	switch {
	case !r.Measured:
		return "· none"
	case r.Failed:
		return "✗ failed"
	case r.OK:
		return decide.FormatValue(r.Value, "seconds") + " ✓"
	}
	return decide.FormatValue(r.Value, "seconds") + " ✗"
}

func readingClass(r Reading) string {
	switch {
	case !r.Measured:
		return "none"
	case r.OK:
		return "ok"
	}
	return "bad"
}
