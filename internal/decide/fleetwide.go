package decide

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// hostLocal are the host-local limits the whole-fleet rule counts, by what
// they measure. Links are the attribution rule's, and a link's class (Wi-Fi)
// is a host's own choice of interface, not a shared fault.
var hostLocal = []struct {
	name  string
	kinds []kind
}{
	{"disk", []kind{kindWALFsync, kindBackendCommit, kindFdatasync}},
	{"memory", []kind{kindMemory}},
	{"memory stall", []kind{kindStall}},
	// A machine, a hypervisor or a neighbour that starves every host of
	// CPU makes every host's timer late, and no swap mends it. A group of
	// its own, not memory stall's: the two are different resources, and
	// one host stalled on memory beside another starved of CPU are two
	// hosts' own faults, not a shared one.
	{"cpu", []kind{kindWakeup}},
}

const fleetWideBasis = "a host-local limit (disk: wal_fsync, backend_commit or fdatasync; memory: memory_available; memory stall: memory_full_stall; cpu: wakeup_late) breached by most recording hosts in the same window is a fault they share (a hypervisor, a storage array, the machine), not a host's: swapping one host changes nothing (TiKV PD acts only when one store is slow; Cluster API stops remediating when too many machines are unhealthy at once). Recording hosts are those judged on a full, fresh window; most is more than half"

// fleetWide is the whole-fleet rule: one reason per host-local limit that
// most recording hosts breach (each not ok: nothing is swapped), or one ok
// reason with the largest count. shared reports a breach.
func fleetWide(hosts []*host) (rs []status.Reason, shared bool) {
	var recording []*host
	for _, h := range hosts {
		if h.judged && h.decoded {
			recording = append(recording, h)
		}
	}
	n := len(recording)
	half := float64(n) / 2
	var counts []string
	most, mostName := 0, ""
	for _, c := range hostLocal {
		var breach []string
		for _, h := range recording {
			for i := range h.all {
				if g := &h.all[i]; g.failedMeasure() && slices.Contains(c.kinds, g.kind) {
					breach = append(breach, h.node.Name)
					break
				}
			}
		}
		counts = append(counts, fmt.Sprintf("%s %d", c.name, len(breach)))
		if len(breach) > most {
			most, mostName = len(breach), c.name
		}
		if float64(len(breach)) > half {
			r := step(status.CodeFleetWideFault, c.name, fleetWideBasis, false,
				fmt.Sprintf("%s is over its limit on %d of the %d recording hosts (%s), more than half: a fault the fleet shares, not a host's; the verdicts stand as measured: nothing is swapped",
					c.name, len(breach), n, strings.Join(breach, ", ")))
			r.Value, r.Limit, r.Unit, r.Rule = num(float64(len(breach))), num(half), "hosts", settings.AtMost
			rs = append(rs, r)
		}
	}
	if len(rs) > 0 {
		return rs, true
	}
	r := step(status.CodeNoFleetWideFault, mostName, fleetWideBasis, true,
		fmt.Sprintf("no host-local limit is over on more than half of the %d recording hosts (%s)", n, strings.Join(counts, ", ")))
	r.Value, r.Limit, r.Unit, r.Rule = num(float64(most)), num(half), "hosts", settings.AtMost
	return []status.Reason{r}, false
}
