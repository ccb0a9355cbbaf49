package cli

import (
	"fmt"
	"time"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/status"
)

// StatusExitStale is `fleet-role status`'s code for a status no controller
// is writing: older than staleAfter, its decision is not current, whatever
// it says.
const StatusExitStale = 3

// shippedElection is the election timing the manifests run the controller
// with (its flags' defaults): the status does not carry the timing a
// controller ran with.
var shippedElection = controller.Election{LeaseDuration: controller.DefaultLeaseDuration,
	RenewDeadline: controller.DefaultRenewDeadline, RetryPeriod: controller.DefaultRetryPeriod}

// staleAfter is the oldest a status can be while a controller writes it.
// The leader rewrites it at least once a window (Window x SamplePeriod),
// even when nothing but ages changed (internal/controller, the overdue
// write), at one of its decisions, twice a period; a leader lost, its
// follower writes at the start of its term, within a takeover bound of the
// last renewal. So: a window, a period for the decisions' spacing and the
// write, and a takeover.
func staleAfter(st *status.Status) (time.Duration, string) {
	v := st.Settings.Values
	window := time.Duration(v.Window) * v.SamplePeriod
	takeover := shippedElection.TakeoverBound()
	limit := window + v.SamplePeriod + takeover
	return limit, fmt.Sprintf("the controller rewrites it at least once a window (%d x %v) and a period, and a follower takes over within %v", v.Window, v.SamplePeriod, takeover)
}

// ageLine is the line `status` prints before the table: when the status
// was decided, by whom, and how old it is by now (the reader's clock
// against the writer's: a skew between the two counts too); and whether it
// is stale.
func ageLine(st *status.Status, now time.Time) (line string, stale bool) {
	by := "no elected controller"
	if w := st.Writer; w != nil {
		by = fmt.Sprintf("%s (term %d of lease %s)", status.Printable(w.Identity), w.Term, status.Printable(w.Lease))
		if w.Version != "" {
			by += ", fleet-role " + status.Printable(w.Version)
		}
	}
	at := st.GeneratedAt.UTC().Format(time.RFC3339)
	age := now.Sub(st.GeneratedAt)
	limit, basis := staleAfter(st)
	if age > limit {
		return fmt.Sprintf("STALE: decided %s by %s, %v ago: over the %v within which %s; no controller is writing it, and its decision is not current",
			at, by, age.Round(time.Second), limit, basis), true
	}
	if age < 0 {
		return fmt.Sprintf("decided %s by %s, %v ahead of this clock: the writer's clock and this one differ (stale after %v)", at, by, (-age).Round(time.Second), limit), false
	}
	return fmt.Sprintf("decided %s by %s, %v ago (stale after %v)", at, by, age.Round(time.Second), limit), false
}
