package decide

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fleet-role/fleet-role/internal/status"
)

// etcd's quorum is a majority of the voting members: 1 of 1, 2 of 2 and 3,
// 3 of 4 and 5, 4 of 6 and 7 (etcd's FAQ, "What is failure tolerance?").
func TestQuorum(t *testing.T) {
	want := map[int]int{0: 0, 1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4}
	for n, q := range want {
		if got := status.Quorum(n); got != q {
			t.Errorf("Quorum(%d) = %d, want %d", n, got, q)
		}
	}
}

func voters(verdicts ...status.Verdict) []status.Host {
	var hs []status.Host
	for i, v := range verdicts {
		hs = append(hs, status.Host{Name: fmt.Sprintf("voter-%d", i), Role: status.RoleVoter, Verdict: v})
	}
	return hs
}

// The tolerance at, just over and just under zero, and what is not counted:
// learners and standbys do not vote.
func TestToleranceOf(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		hosts                   []status.Host
		tol, optimistic, design int
	}{
		{"three fit: one may fail", voters(status.Fit, status.Fit, status.Fit), 1, 1, 1},
		{"three, one unfit: none may, one if it holds", voters(status.Fit, status.Unfit, status.Fit), 0, 1, 1},
		{"three, one unknown: none either way", voters(status.Fit, status.Unknown, status.Fit), 0, 0, 1},
		{"three, two unfit: below quorum, held at zero", voters(status.Unfit, status.Unfit, status.Fit), 0, 1, 1},
		{"five, one unfit: one more may fail", voters(status.Fit, status.Fit, status.Fit, status.Fit, status.Unfit), 1, 2, 2},
		{"five, two unfit: none", voters(status.Fit, status.Fit, status.Fit, status.Unfit, status.Unfit), 0, 2, 2},
		{"one voter: nothing to spare by design", voters(status.Fit), 0, 0, 0},
		{"two voters: nothing to spare either", voters(status.Fit, status.Fit), 0, 0, 0},
		{"no voters", nil, 0, 0, 0},
		{"learners and standbys are not counted", append(voters(status.Fit, status.Fit, status.Fit),
			status.Host{Name: "l", Role: status.RoleLearner, Verdict: status.Unfit}, status.Host{Name: "s", Role: status.RoleStandby, Verdict: status.Unknown}), 1, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := status.ToleranceOf(tc.hosts)
			if got.Tolerance != tc.tol || got.OptimisticTolerance != tc.optimistic || got.DesignTolerance != tc.design {
				t.Errorf("toleranceOf = %+v, want tolerance %d, optimistic %d, design %d", got, tc.tol, tc.optimistic, tc.design)
			}
			if got.Tolerance > got.OptimisticTolerance || got.OptimisticTolerance > got.DesignTolerance {
				t.Errorf("%+v: want tolerance <= optimistic <= design", got)
			}
		})
	}
}

func TestToleranceSentence(t *testing.T) {
	got := status.ToleranceOf(voters(status.Fit, status.Unfit, status.Fit)).Sentence()
	for _, want := range []string{"failure tolerance 0", "(1 if the 1 unfit voter holds)", "quorum (2)", "1 unfit and 0 unknown"} {
		if !strings.Contains(got, want) {
			t.Errorf("Sentence() = %q, lacks %q", got, want)
		}
	}
	if got := status.ToleranceOf(voters(status.Fit, status.Fit, status.Fit)).Sentence(); strings.Contains(got, " if the ") {
		t.Errorf("Sentence() = %q: no optimistic figure when it is the same", got)
	}
}

// The attributed tolerance does not count as lost the voters unfit only by
// their links to an implicated voter: at, just over and just under the
// quorum.
func TestAttributedTolerance(t *testing.T) {
	cleared := func(hs []status.Host, names ...int) []status.Host {
		for _, i := range names {
			hs[i].UnfitByLinksTo = []string{"voter-0"}
		}
		return hs
	}
	for _, tc := range []struct {
		name                         string
		hosts                        []status.Host
		attributed, tol, clearedWant int
	}{
		{"three, one slow, two cleared: at quorum, none to spare", cleared(voters(status.Unfit, status.Unfit, status.Unfit), 1, 2), 0, 0, 2},
		{"five, one slow, four cleared: one to spare", cleared(voters(status.Unfit, status.Unfit, status.Unfit, status.Unfit, status.Unfit), 1, 2, 3, 4), 1, 0, 4},
		{"five, one slow, three cleared, one unfit itself: at quorum", cleared(voters(status.Unfit, status.Unfit, status.Unfit, status.Unfit, status.Unfit), 1, 2, 3), 0, 0, 3},
		{"six, one slow, four cleared, one unknown: at quorum (4)", cleared(append(voters(status.Unfit, status.Unfit, status.Unfit, status.Unfit, status.Unfit), status.Host{Name: "u", Role: status.RoleVoter, Verdict: status.Unknown}), 1, 2, 3, 4), 0, 0, 4},
		{"seven, one slow, five cleared, one unknown: one to spare", cleared(append(voters(status.Unfit, status.Unfit, status.Unfit, status.Unfit, status.Unfit, status.Unfit), status.Host{Name: "u", Role: status.RoleVoter, Verdict: status.Unknown}), 1, 2, 3, 4, 5), 1, 0, 5},
		{"none cleared: the two are one", voters(status.Unfit, status.Fit, status.Fit), 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := status.ToleranceOf(tc.hosts)
			if got.Attributed != tc.attributed || got.Tolerance != tc.tol || got.Cleared != tc.clearedWant {
				t.Errorf("toleranceOf = %+v, want attributed %d, tolerance %d, cleared %d", got, tc.attributed, tc.tol, tc.clearedWant)
			}
			if got.Attributed < got.Tolerance {
				t.Errorf("%+v: attributed under the tolerance", got)
			}
		})
	}
}
