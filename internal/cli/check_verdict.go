package cli

import (
	"fmt"
	"io"

	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// ExitUnfit is a check's exit code for a reading taken and judged unfit
// against the limit the verdict holds it to, as `etcdctl check perf` fails
// its check; 1 stays a reading that could not be taken.
const ExitUnfit = 3

// Verdicts of a check.
const (
	checkFit       = "fit"
	checkUnfit     = "unfit"
	checkNotJudged = "not_judged"
)

// checkVerdict is a reading held to the limit the decision holds the same
// signal to (settings.Limits), with the limit's basis: what a check says
// beside its figures, and its exit code.
type checkVerdict struct {
	Verdict string   `json:"verdict"`
	Value   *float64 `json:"value,omitempty"`
	// Limit is the number the value is held to; nil for a reading judged
	// by a rule with no number (the link's class).
	Limit *settings.Limit `json:"limit,omitempty"`
	// Basis says where the limit or the rule comes from.
	Basis string `json:"basis"`
	// Why is the judgement in a line: the figure against the limit, or
	// why it was not judged.
	Why string `json:"why"`
}

// judge holds value (what names the figure: "p99") to l.
func judge(l settings.Limit, what string, value float64) checkVerdict {
	v := checkVerdict{Verdict: checkUnfit, Value: &value, Limit: &l, Basis: l.Basis}
	if l.OK(value) {
		v.Verdict = checkFit
	}
	lim := l.Value
	v.Why = status.Summary(status.Reason{Signal: what, Value: &value, Limit: &lim, Unit: l.Unit, Rule: l.Rule})
	return v
}

// notJudged is a reading that says nothing against l, and why.
func notJudged(l settings.Limit, why string) checkVerdict {
	return checkVerdict{Verdict: checkNotJudged, Limit: &l, Basis: l.Basis, Why: why}
}

// write prints the verdict's lines into a check's table.
func (v checkVerdict) write(w io.Writer) {
	fmt.Fprintf(w, "verdict\t%s: %s\n", v.Verdict, v.Why)
	fmt.Fprintf(w, "limit basis\t%s\n", v.Basis)
}

// exit is the command's result for the verdict: nil unless unfit.
func (v checkVerdict) exit() error {
	if v.Verdict == checkUnfit {
		return &exitError{code: ExitUnfit}
	}
	return nil
}

// printJudged prints a judged reading as printReading does, then ends the
// command as its verdict says (exit 3 when unfit).
func printJudged(w io.Writer, asJSON bool, v any, judged checkVerdict, human func(io.Writer) error) error {
	if err := printReading(w, asJSON, v, human); err != nil {
		return err
	}
	return judged.exit()
}
