package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Median is the middle value (the mean of the two middle ones for an even
// count); NaN-free input assumed. It returns 0 for no values.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Row is one figure of the report.
type Row struct {
	Measure, Figure, Goal string
	Met                   string // "yes", "NO", or "" where there is no goal
}

// Verdict says whether a figure met its goal.
func Verdict(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

// Table renders the rows as one Markdown table.
func Table(rows []Row) string {
	var b strings.Builder
	b.WriteString("| measure | figure | goal | met |\n|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.Measure, r.Figure, r.Goal, r.Met)
	}
	return b.String()
}

// The figures section of docs/performance.md lies between these markers;
// the runner replaces what is between them and leaves the rest.
const (
	BeginMarker = "<!-- bench:begin (written by bench/run.sh; do not edit by hand) -->"
	EndMarker   = "<!-- bench:end -->"
)

// WriteSection replaces the text between the markers of the file at path.
func WriteSection(path, section string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	begin := bytes.Index(doc, []byte(BeginMarker))
	end := bytes.Index(doc, []byte(EndMarker))
	if begin < 0 || end < begin {
		return errors.New(path + " has no bench markers")
	}
	var out bytes.Buffer
	out.Write(doc[:begin+len(BeginMarker)])
	out.WriteString("\n" + strings.TrimSpace(section) + "\n")
	out.Write(doc[end:])
	return os.WriteFile(path, out.Bytes(), 0o644)
}
