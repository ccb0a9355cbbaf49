package decide_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/settings"
)

// NodesFromKube reads k3s's EtcdIsVoter condition: False/MemberIsLearner is
// a learner, and True dates when the node became a voter.
func TestNodesFromKubeReadsTheVoterCondition(t *testing.T) {
	at := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	cond := func(status corev1.ConditionStatus, reason string) corev1.Node {
		return corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{decide.EtcdRoleLabel: "true"}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
				Type: decide.EtcdIsVoterCondition, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(at),
			}}},
		}
	}
	s := settings.Defaults()
	voter := decide.NodesFromKube([]corev1.Node{cond(corev1.ConditionTrue, "MemberNotLearner")}, s)[0]
	if voter.Learner || !voter.VoterSince.Equal(at) {
		t.Fatalf("voter: %+v, want VoterSince %v and no learner", voter, at)
	}
	learner := decide.NodesFromKube([]corev1.Node{cond(corev1.ConditionFalse, decide.MemberIsLearner)}, s)[0]
	if !learner.Learner || !learner.VoterSince.IsZero() {
		t.Fatalf("learner: %+v, want a learner with no VoterSince", learner)
	}
	unhealthy := decide.NodesFromKube([]corev1.Node{cond(corev1.ConditionFalse, "Unhealthy")}, s)[0]
	if unhealthy.Learner || !unhealthy.VoterSince.IsZero() {
		t.Fatalf("unhealthy: %+v, want neither learner nor VoterSince", unhealthy)
	}
}
