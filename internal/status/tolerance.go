package status

import (
	"fmt"
	"strings"
)

// FailureTolerance is how many more voters the cluster can lose before etcd
// loses quorum, as the verdicts stand (docs/status.md, "Failure
// tolerance"). etcd commits only what a quorum of its voting members,
// floor(n/2)+1 of n, has written; learners do not vote and are not counted.
// A voter lost is one that cannot be relied on to be part of that quorum.
type FailureTolerance struct {
	// Voters is n, the voting members (role voter); Quorum is floor(n/2)+1.
	Voters int `json:"voters"`
	Quorum int `json:"quorum"`
	// Unfit and Unknown count the voters with those verdicts.
	Unfit   int `json:"unfit"`
	Unknown int `json:"unknown"`
	// Tolerance counts the unfit and the unknown voters as lost: the fit
	// voters less the quorum, never below zero. At zero, one more voter
	// lost (or one unfit voter's slow disk or path) stalls every write.
	Tolerance int `json:"tolerance"`
	// OptimisticTolerance counts only the unknown voters as lost, as if
	// every unfit voter held its vote: the voters that are not unknown
	// less the quorum, never below zero.
	OptimisticTolerance int `json:"optimistic_tolerance"`
	// DesignTolerance is what the voter count alone allows, n less the
	// quorum, every voter counted: the figure the other two fall from.
	DesignTolerance int `json:"design_tolerance"`
	// Cleared counts the unfit voters the attribution clears: unfit only
	// by their links to the voters it implicates (Host.UnfitByLinksTo).
	Cleared int `json:"cleared"`
	// Attributed counts as lost the unknown voters and the unfit voters
	// the attribution does not clear: one slow voter makes the links of
	// every other voter to it slow, and the others' votes are sound. It is
	// the figure shown first; Tolerance, every unfit voter lost, stands
	// beside it. Never under Tolerance.
	Attributed int `json:"attributed_tolerance"`
}

// Quorum is etcd's quorum of n voting members: a majority, floor(n/2)+1.
func Quorum(n int) int {
	if n <= 0 {
		return 0
	}
	return n/2 + 1
}

// ToleranceOf counts the voters of hosts by verdict.
func ToleranceOf(hosts []Host) FailureTolerance {
	var t FailureTolerance
	for _, h := range hosts {
		if h.Role != RoleVoter {
			continue
		}
		t.Voters++
		switch h.Verdict {
		case Unfit:
			t.Unfit++
			if len(h.UnfitByLinksTo) > 0 {
				t.Cleared++
			}
		case Unknown:
			t.Unknown++
		}
	}
	t.Quorum = Quorum(t.Voters)
	t.Attributed = max(0, t.Voters-(t.Unfit-t.Cleared)-t.Unknown-t.Quorum)
	t.Tolerance = max(0, t.Voters-t.Unfit-t.Unknown-t.Quorum)
	t.OptimisticTolerance = max(0, t.Voters-t.Unknown-t.Quorum)
	t.DesignTolerance = max(0, t.Voters-t.Quorum)
	return t
}

// Sentence says the tolerance in one line, for the table, the page and the
// Events, the attributed figure first: "failure tolerance 1 (0 counting
// the 4 voters unfit only by their links to an implicated voter as lost; 2
// if the 5 unfit voters hold): 1 of 5 voters may still fail before etcd
// loses quorum (3); 1 unfit and 0 unknown counted as lost, 4 unfit only by
// their links to an implicated voter not".
func (t FailureTolerance) Sentence() string {
	if t.Voters == 0 {
		return "failure tolerance: no voters"
	}
	s := fmt.Sprintf("failure tolerance %d", t.Attributed)
	var beside []string
	if t.Cleared > 0 && t.Tolerance != t.Attributed {
		beside = append(beside, fmt.Sprintf("%d counting the %d %s unfit only by %s links to an implicated voter as lost",
			t.Tolerance, t.Cleared, Plural(t.Cleared, "voter", "voters"), Plural(t.Cleared, "its", "their")))
	}
	if t.OptimisticTolerance != t.Attributed {
		beside = append(beside, fmt.Sprintf("%d if the %d unfit %s", t.OptimisticTolerance, t.Unfit, Plural(t.Unfit, "voter holds", "voters hold")))
	}
	if len(beside) > 0 {
		s += " (" + strings.Join(beside, "; ") + ")"
	}
	s += fmt.Sprintf(": %d of %d voters may still fail before etcd loses quorum (%d); %d unfit and %d unknown counted as lost",
		t.Attributed, t.Voters, t.Quorum, t.Unfit-t.Cleared, t.Unknown)
	if t.Cleared > 0 {
		s += fmt.Sprintf(", %d unfit only by %s links to an implicated voter not", t.Cleared, Plural(t.Cleared, "its", "their"))
	}
	return s
}

// VerdictText is a host's verdict as the table and the page show it: a
// voter unfit only by its links to implicated voters says so beside it
// ("unfit: its link to voter-2"), apart from voters unfit by readings of
// their own.
func VerdictText(h Host) string {
	if len(h.UnfitByLinksTo) == 0 {
		return string(h.Verdict)
	}
	return fmt.Sprintf("%s: its %s to %s", h.Verdict, Plural(len(h.UnfitByLinksTo), "link", "links"), strings.Join(h.UnfitByLinksTo, ", "))
}

func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
