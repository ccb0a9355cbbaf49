package demo

import (
	"fmt"
	"io"

	"github.com/fleet-role/fleet-role/internal/status"
)

// WriteSummary tells what the demo showed: the decision in words, the numbers
// behind it, and where the status document is.
func (r *Result) WriteSummary(w io.Writer, opt Options) {
	fmt.Fprintln(w, "== summary")
	st := r.Status
	if st == nil {
		fmt.Fprintln(w, "no decision was made")
		return
	}
	switch opt.Fault {
	case FaultSlow:
		fmt.Fprintf(w, "%s's peer traffic was delayed by %s each way; %d periods of %s later the controller %s.\n",
			r.Slowed, opt.Delay, r.Detected, opt.Period, decisionLine(st.Decision))
	case FaultPause:
		fmt.Fprintf(w, "%s was paused; %d periods of %s later its verdict was %s and the controller %s.\n",
			r.Slowed, r.Detected, opt.Period, verdictOf(st, r.Slowed), decisionLine(st.Decision))
	default:
		fmt.Fprintf(w, "no fault; after a further window the controller %s.\n", decisionLine(st.Decision))
	}
	for _, h := range st.Hosts {
		if h.Name != r.Slowed && h.Name != st.Decision.In {
			continue
		}
		fmt.Fprintf(w, "%s (%s) is %s:\n", h.Name, h.Role, h.Verdict)
		shown := 0
		for _, reason := range h.Reasons {
			if reason.OK {
				continue
			}
			fmt.Fprintf(w, "  %s  [%s]\n", status.Summary(reason), reason.Basis)
			shown++
		}
		if shown == 0 {
			if reason, ok := status.DecidingReason(h); ok {
				fmt.Fprintf(w, "  closest to its limit: %s  [%s]\n", status.Summary(reason), reason.Basis)
			}
		}
	}
	fmt.Fprintln(w, "decision reasons:")
	for _, reason := range st.Decision.Reasons {
		mark := "ok"
		if !reason.OK {
			mark = "NO"
		}
		fmt.Fprintf(w, "  %-3s %s\n", mark, status.Summary(reason))
	}
	fmt.Fprintf(w, "the whole status document: %s\n", r.StatusPath)
	fmt.Fprintf(w, "wall time: %s\n", r.Elapsed.Round(1e9))
}
