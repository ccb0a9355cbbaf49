package decide

import (
	"slices"

	"github.com/fleet-role/fleet-role/internal/status"
)

// clearByAttribution sets UnfitByLinksTo of each unfit voter of hosts that
// the attribution does not implicate and whose every failing judgement is
// a link to a voter it does (implicated): what makes it unfit is theirs.
// judged are the hosts' judgements, hosts their published form, one for
// one in the same order.
func clearByAttribution(judged []*host, hosts []status.Host, implicated []string) {
	if len(implicated) == 0 {
		return
	}
	for i, h := range judged {
		if hosts[i].Role != status.RoleVoter || hosts[i].Verdict != status.Unfit || slices.Contains(implicated, h.node.Name) {
			continue
		}
		var to []string
		cleared := true
		for k := range h.all {
			g := &h.all[k]
			if g.out != fail {
				continue
			}
			if !g.kind.isLink() || !slices.Contains(implicated, g.subject) {
				cleared = false
				break
			}
			if !slices.Contains(to, g.subject) {
				to = append(to, g.subject)
			}
		}
		if cleared && len(to) > 0 {
			slices.Sort(to)
			hosts[i].UnfitByLinksTo = to
		}
	}
}
