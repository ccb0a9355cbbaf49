package cli

import (
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/spf13/pflag"
)

// The forms decide and status print a status in, one convention for both
// (-o, as kubectl's): a table for people by default, the document for
// tools, the status page for a browser.
const (
	outputTable = "table"
	outputJSON  = "json"
	outputHTML  = "html"
)

// outputsDoc lists each form, for the commands' long help.
const outputsDoc = `  -o table  one line per host with the reason that decides its verdict, then
            the decision and every step behind it (default)
  -o json   the status document (docs/status.md)
  -o html   the status page the controller serves, self-contained, from
            this one status (so without the controller's history)`

// exitCodesDoc says the exit codes decide and status share.
const exitCodesDoc = `Exit codes, for scripts:
  0  the decision is none: nothing to do
  1  the decision is a swap (an unfit voter out, a fit standby in)
  2  no status could be made or read: a bad flag, setting or input`

// addOutputFlag adds -o/--output to f, defaulting to the table.
func addOutputFlag(f *pflag.FlagSet, output *string) {
	f.StringVarP(output, "output", "o", outputTable, "table, json (the status document) or html (the status page)")
}

// checkOutput refuses an -o the commands do not print.
func checkOutput(output string) error {
	switch output {
	case outputTable, outputJSON, outputHTML:
		return nil
	}
	return usageErrorf("-o %q: want %s, %s or %s", output, outputTable, outputJSON, outputHTML)
}

// decisionCode is the exit code a status's decision calls for: 1 for a
// swap, 0 for none; an answer, not an error.
func decisionCode(st *status.Status) int {
	if st.Decision.Action == status.ActionSwap {
		return StatusExitSwap
	}
	return StatusExitNone
}

// decisionExit is decisionCode as the error a command returns: nil for 0.
func decisionExit(st *status.Status) error {
	if c := decisionCode(st); c != StatusExitNone {
		return &exitError{code: c}
	}
	return nil
}
