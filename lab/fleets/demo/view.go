package demo

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// view shows the fleet as the demo goes: on a terminal a table redrawn in
// place each period; elsewhere one line per period and the table at the end
// of each phase, so that a log of it reads well.
type view struct {
	w     io.Writer
	live  bool
	set   settings.Settings
	start time.Time
	lines int // lines drawn last time, to redraw over them
}

func newView(w io.Writer, live bool, s settings.Settings) *view {
	return &view{w: w, live: live, set: s, start: time.Now()}
}

// update shows one period's status.
func (v *view) update(st *status.Status) {
	if v.live {
		if v.lines > 0 {
			fmt.Fprintf(v.w, "\x1b[%dA\x1b[J", v.lines) // up over the last table, clear below
		}
		text := v.render(st)
		io.WriteString(v.w, text)
		v.lines = strings.Count(text, "\n")
		return
	}
	fmt.Fprintf(v.w, "%5.0fs  %s\n", time.Since(v.start).Seconds(), v.line(st))
}

// table prints the whole table once, ending a phase.
func (v *view) table(st *status.Status) {
	if v.live {
		v.lines = 0 // leave this one on screen
		return
	}
	io.WriteString(v.w, v.render(st))
}

// line is one period in a few words: verdict counts, the fullest window and
// the decision.
func (v *view) line(st *status.Status) string {
	count := map[status.Verdict]int{}
	least := -1
	for _, h := range st.Hosts {
		count[h.Verdict]++
		if least < 0 || h.Samples < least {
			least = h.Samples
		}
	}
	return fmt.Sprintf("fit %d, unfit %d, unknown %d; samples %d/%d; %s",
		count[status.Fit], count[status.Unfit], count[status.Unknown], max(least, 0), v.set.Window, decisionLine(st.Decision))
}

func (v *view) render(st *status.Status) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tROLE\tVERDICT\tSAMPLES\tDECIDING REASON")
	for _, h := range st.Hosts {
		why := "-"
		if r, ok := status.DecidingReason(h); ok {
			why = status.Summary(r)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\n", h.Name, h.Role, h.Verdict, h.Samples, v.set.Window, why)
	}
	tw.Flush()
	fmt.Fprintf(&b, "%s\n", decisionLine(st.Decision))
	return b.String()
}

// decisionLine is the decision in words.
func decisionLine(d status.Decision) string {
	if d.Action == status.ActionSwap {
		return fmt.Sprintf("would swap %s out for %s (dry run: nothing is changed)", d.Out, d.In)
	}
	for _, r := range d.Reasons {
		if !r.OK {
			return "would not swap: " + status.Summary(r)
		}
	}
	if len(d.Reasons) > 0 {
		return "would not swap: " + status.Summary(d.Reasons[0])
	}
	return "would not swap"
}
