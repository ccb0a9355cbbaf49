package kube_test

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/k3snode"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// NodesFromKube reads k3s's EtcdIsVoter condition: False/MemberIsLearner is
// a learner, and True says how long the node had been a voter at k3s's last
// heartbeat of it, both times by k3s's clock.
func TestNodesFromKubeReadsTheVoterCondition(t *testing.T) {
	at := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	cond := func(status corev1.ConditionStatus, reason string, beat time.Time) corev1.Node {
		return corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{k3snode.EtcdRoleLabel: "true"}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
				Type: k3snode.EtcdIsVoterCondition, Status: status, Reason: reason,
				LastTransitionTime: metav1.NewTime(at), LastHeartbeatTime: metav1.NewTime(beat),
			}}},
		}
	}
	s := settings.Defaults()
	for _, c := range []struct {
		beat  time.Time
		known bool
		age   time.Duration
	}{
		{at.Add(5 * time.Minute), true, 5 * time.Minute},
		{at, true, 0},
		// A heartbeat by a server whose clock is behind the one that
		// wrote the transition: a transition just made, never a negative
		// age that would date it after now.
		{at.Add(-time.Minute), true, 0},
		{time.Time{}, false, 0},
	} {
		voter := kube.NodesFromKube([]corev1.Node{cond(corev1.ConditionTrue, "MemberNotLearner", c.beat)}, s)[0]
		if voter.Learner || voter.VoterForKnown != c.known || voter.VoterFor != c.age {
			t.Fatalf("voter with heartbeat %v: %+v, want VoterFor %v (known %v) and no learner", c.beat, voter, c.age, c.known)
		}
	}
	learner := kube.NodesFromKube([]corev1.Node{cond(corev1.ConditionFalse, k3snode.MemberIsLearner, at)}, s)[0]
	if !learner.Learner || learner.VoterForKnown {
		t.Fatalf("learner: %+v, want a learner with no VoterFor", learner)
	}
	unhealthy := kube.NodesFromKube([]corev1.Node{cond(corev1.ConditionFalse, "Unhealthy", at)}, s)[0]
	if unhealthy.Learner || unhealthy.VoterForKnown {
		t.Fatalf("unhealthy: %+v, want neither learner nor VoterFor", unhealthy)
	}
}

// The view of a Node that the components' informers keep decides as the
// whole Node does, for every role and way of giving the peer address, and
// keeps nothing NodesFromKube does not read: a real Node's images, its other
// conditions, labels, annotations and addresses, its field sets.
func TestNodeViewDecidesAsTheWholeNode(t *testing.T) {
	since := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	s := settings.Defaults()
	// Labels named otherwise than the defaults: the view keeps the
	// settings' labels, not fixed ones.
	s.EligibleLabel, s.PinnedLabel = "example.com/may-vote", "example.com/keep-vote"
	var whole []corev1.Node
	for _, n := range []testkit.Node{
		{Name: "server-1", Voter: true, Pinned: true, Address: "10.0.0.1"},
		{Name: "server-2", Voter: true, Address: "10.0.0.2", PeerAddress: "10.9.0.2:12380"},
		{Name: "agent-1", Eligible: true, Address: "10.0.0.3"},
		{Name: "agent-2", Address: "10.0.0.4"},
	} {
		k := n.Kubelet(since, since.Add(5*time.Minute))
		// testkit writes the default label names; these settings read others.
		k.Labels[s.EligibleLabel], k.Labels[s.PinnedLabel] = k.Labels[settings.Defaults().EligibleLabel], k.Labels[settings.Defaults().PinnedLabel]
		k.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "k3s", Operation: metav1.ManagedFieldsOperationUpdate}}
		whole = append(whole, *k)
	}
	// A learner, and a voter whose k3s address annotation is missing (the
	// first InternalIP is its peer address).
	whole[1].Status.Conditions[len(whole[1].Status.Conditions)-1].Status = corev1.ConditionFalse
	whole[1].Status.Conditions[len(whole[1].Status.Conditions)-1].Reason = k3snode.MemberIsLearner
	delete(whole[0].Annotations, k3snode.NodeAddressAnnotation)
	before := make([]corev1.Node, len(whole))
	for i := range whole {
		before[i] = *whole[i].DeepCopy()
	}

	const extra = "fleet-role.io/peer-address"
	view := kube.NodeView(s, extra)
	viewed := make([]corev1.Node, len(whole))
	for i := range whole {
		viewed[i] = *view(&whole[i])
	}
	if !reflect.DeepEqual(whole, before) {
		t.Fatal("the view changed the Node it was made from")
	}
	got, want := kube.NodesFromKube(viewed, s), kube.NodesFromKube(whole, s)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("NodesFromKube of the views:\n%+v\nof the whole Nodes:\n%+v", got, want)
	}
	// What the test covers: each case reads as it was made.
	if !want[0].Voter || !want[0].Pinned || want[0].PeerAddress != "10.0.0.1" || want[0].VoterFor != 5*time.Minute || !want[0].VoterForKnown ||
		!want[1].Learner || want[1].PeerAddress != "10.0.0.2" || !want[2].Eligible || want[3].Eligible || !want[3].EligibleMarked {
		t.Fatalf("the whole Nodes do not read as the test made them: %+v", want)
	}
	for i, v := range viewed {
		k := whole[i]
		if v.Name != k.Name || v.UID != k.UID || v.ResourceVersion != k.ResourceVersion {
			t.Errorf("%s: the view lost the name, UID or resourceVersion", k.Name)
		}
		if len(v.Status.Images) != 0 || len(v.ManagedFields) != 0 || v.Status.NodeInfo != (corev1.NodeSystemInfo{}) ||
			len(v.Status.Capacity) != 0 || len(v.Status.Allocatable) != 0 {
			t.Errorf("%s: the view keeps images, field sets, system information or capacity", k.Name)
		}
		for key := range v.Labels {
			if key != k3snode.EtcdRoleLabel && key != s.EligibleLabel && key != s.PinnedLabel {
				t.Errorf("%s: the view keeps the label %s", k.Name, key)
			}
		}
		for key := range v.Annotations {
			if key != k3snode.NodeAddressAnnotation && key != extra {
				t.Errorf("%s: the view keeps the annotation %s", k.Name, key)
			}
		}
		if a, ok := k.Annotations[extra]; ok && v.Annotations[extra] != a {
			t.Errorf("%s: the view lost the annotation it was asked to keep", k.Name)
		}
		if len(v.Status.Addresses) != 1 || v.Status.Addresses[0].Type != corev1.NodeInternalIP {
			t.Errorf("%s: the view keeps the addresses %v, want the first InternalIP alone", k.Name, v.Status.Addresses)
		}
		for _, c := range v.Status.Conditions {
			if c.Type != k3snode.EtcdIsVoterCondition || c.Message != "" {
				t.Errorf("%s: the view keeps the condition %+v", k.Name, c)
			}
		}
		// A view of a view is the view: an informer's resync changes nothing.
		if again := view(&v); !reflect.DeepEqual(*again, v) {
			t.Errorf("%s: the view of the view differs", k.Name)
		}
	}
}
