package decide

import "fmt"

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
}

// Quorum is etcd's quorum of n voting members: a majority, floor(n/2)+1.
func Quorum(n int) int {
	if n <= 0 {
		return 0
	}
	return n/2 + 1
}

// toleranceOf counts the voters of hosts by verdict.
func toleranceOf(hosts []Host) FailureTolerance {
	var t FailureTolerance
	for _, h := range hosts {
		if h.Role != RoleVoter {
			continue
		}
		t.Voters++
		switch h.Verdict {
		case Unfit:
			t.Unfit++
		case Unknown:
			t.Unknown++
		}
	}
	t.Quorum = Quorum(t.Voters)
	t.Tolerance = max(0, t.Voters-t.Unfit-t.Unknown-t.Quorum)
	t.OptimisticTolerance = max(0, t.Voters-t.Unknown-t.Quorum)
	t.DesignTolerance = max(0, t.Voters-t.Quorum)
	return t
}

// Sentence says the tolerance in one line, for the table, the page and the
// Events: "failure tolerance 0 (1 if the 2 unfit voters hold; 3 voters,
// quorum 2, 2 unfit, 0 unknown)".
func (t FailureTolerance) Sentence() string {
	if t.Voters == 0 {
		return "failure tolerance: no voters"
	}
	s := fmt.Sprintf("failure tolerance %d", t.Tolerance)
	if t.OptimisticTolerance != t.Tolerance {
		s += fmt.Sprintf(" (%d if the %d unfit %s)", t.OptimisticTolerance, t.Unfit, plural(t.Unfit, "voter holds", "voters hold"))
	}
	return s + fmt.Sprintf(": %d of %d voters may still fail before etcd loses quorum (%d); %d unfit and %d unknown counted as lost",
		t.Tolerance, t.Voters, t.Quorum, t.Unfit, t.Unknown)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
