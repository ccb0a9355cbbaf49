package decide

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// candidate judges standby c against the voters that would remain when out
// leaves.
func candidate(c *host, out string, remaining []string) (ok bool, margin float64, why string) {
	counts := func(r Reason) bool { return r.Subject != out || !isLink(r) }
	var bad []string
	for _, r := range c.reasons {
		if r.OK || !counts(r) {
			continue
		}
		if r.unknown {
			return false, math.Inf(-1), fmt.Sprintf("%s is unknown: %s", c.node.Name, r.Detail)
		}
		bad = append(bad, Summary(r))
	}
	if len(bad) > 0 {
		return false, math.Inf(-1), fmt.Sprintf("%s is unfit against the voters that would remain: %s", c.node.Name, strings.Join(bad, "; "))
	}
	for _, v := range remaining {
		measured := false
		for _, r := range c.reasons {
			if r.Signal == SignalConnect && r.Subject == v && r.Value != nil {
				measured = true
			}
		}
		if !measured {
			return false, math.Inf(-1), fmt.Sprintf("%s has no connect measured to %s, a voter that would remain", c.node.Name, v)
		}
	}
	margin = minHeadroom(c.reasons, func(r Reason) bool { return counts(r) && isMeasure(r) && r.Value != nil })
	why = fmt.Sprintf("%s is fit against %s, tightest headroom %s", c.node.Name, strings.Join(remaining, ", "), formatMargin(margin))
	if slices.Contains(slowLinks(c.reasons), out) {
		why += fmt.Sprintf(" (its slow link to %s, the voter leaving, does not count)", out)
	}
	return true, margin, why
}
