package quorumwatch

import (
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// TestInFlight holds the definition of changes in flight on the member
// lists of a swap done right (one change at a time) and of the two
// mistakes the figure must catch: a removal beside a learner, and two
// learners.
func TestInFlight(t *testing.T) {
	v := func(id uint64) *pb.Member { return &pb.Member{ID: id, Name: string(rune('a' + id))} }
	l := func(id uint64) *pb.Member { return &pb.Member{ID: id, Name: string(rune('a' + id)), IsLearner: true} }
	for _, tc := range []struct {
		name                               string
		lists                              [][]*pb.Member
		learners, inFlight, besideLearners int
		kinds                              []EventKind
	}{
		{
			name:     "add first, one at a time",
			lists:    [][]*pb.Member{{v(1), v(2), v(3)}, {v(1), v(2), v(3), l(4)}, {v(1), v(2), v(3), v(4)}, {v(1), v(2), v(4)}},
			learners: 1, inFlight: 1,
			kinds: []EventKind{AddedLearner, Promoted, Removed},
		},
		{
			name:     "a removal beside a learner",
			lists:    [][]*pb.Member{{v(1), v(2), v(3)}, {v(1), v(2), v(3), l(4)}, {v(1), v(2), l(4)}},
			learners: 1, inFlight: 2, besideLearners: 1,
			kinds: []EventKind{AddedLearner, Removed},
		},
		{
			name:     "two learners",
			lists:    [][]*pb.Member{{v(1), v(2), v(3)}, {v(1), v(2), v(3), l(4), l(5)}},
			learners: 2, inFlight: 2,
			kinds: []EventKind{AddedLearner, AddedLearner},
		},
		{
			name:     "a promotion and a removal between two samples",
			lists:    [][]*pb.Member{{v(1), v(2), v(3), l(4)}, {v(1), v(2), v(4)}},
			learners: 1, inFlight: 2, besideLearners: 1,
			kinds: []EventKind{Promoted, Removed},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &Watch{cfg: Config{Logf: t.Logf}}
			var before []*pb.Member
			for i, list := range tc.lists {
				w.compare(time.Now(), before, list, i == 0)
				before = list
			}
			f := w.fig
			if f.MaxLearners != tc.learners || f.MaxInFlight != tc.inFlight || f.RemovesBesideLearner != tc.besideLearners {
				t.Errorf("learners %d, in flight %d, removals beside a learner %d; want %d, %d, %d",
					f.MaxLearners, f.MaxInFlight, f.RemovesBesideLearner, tc.learners, tc.inFlight, tc.besideLearners)
			}
			var kinds []EventKind
			for _, e := range f.Events {
				kinds = append(kinds, e.Kind)
			}
			if strings.Join(toStrings(kinds), ",") != strings.Join(toStrings(tc.kinds), ",") {
				t.Errorf("events %v, want %v", kinds, tc.kinds)
			}
			if s := f.String(); !strings.Contains(s, "learners at once, most") {
				t.Errorf("String() lacks the learners' figure:\n%s", s)
			}
		})
	}
}

func toStrings(ks []EventKind) []string {
	var out []string
	for _, k := range ks {
		out = append(out, string(k))
	}
	return out
}
