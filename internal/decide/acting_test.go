package decide_test

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/k3snode"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// With acting on, the view keeps what acting reads of a Node (the
// control-plane label, Ready, k3s's annotations, a deletion), and acting
// makes the same plan of the views as of the whole Nodes.
func TestNodeViewActsAsTheWholeNode(t *testing.T) {
	s := k3s()
	s.Acting = settings.ActingPlan
	f := standardFleet(s)
	f.slow[pairOf("alpha", "bravo")] = 0.4
	f.k3sNodes = true
	f.host("delta").server = true
	whole := f.nodes().Items
	for i := range whole {
		// What a real Node also carries, which the view must drop.
		whole[i].Status.Images = []corev1.ContainerImage{{Names: []string{"rancher/mirrored-pause:3.6"}}}
		whole[i].Annotations[k3snode.NodeNameAnnotation+"-not"] = "x"
		for j := range whole[i].Status.Conditions {
			if c := &whole[i].Status.Conditions[j]; c.Type == corev1.NodeReady {
				c.LastHeartbeatTime = metav1.NewTime(f.now) // the kubelet's, every 10 s
			}
		}
	}
	view := kube.NodeView(s)
	viewed := make([]corev1.Node, len(whole))
	for i := range whole {
		viewed[i] = *view(&whole[i])
		if len(viewed[i].Status.Images) != 0 {
			t.Fatalf("%s: the view keeps images", whole[i].Name)
		}
		if _, ok := viewed[i].Annotations[k3snode.NodeNameAnnotation+"-not"]; ok {
			t.Fatalf("%s: the view keeps an annotation acting does not read", whole[i].Name)
		}
		for _, c := range viewed[i].Status.Conditions {
			// The kubelet's heartbeat of Ready would wake every informer
			// each 10 s; acting reads its status alone.
			if c.Type == corev1.NodeReady && !c.LastHeartbeatTime.IsZero() {
				t.Fatalf("%s: the view keeps Ready's heartbeat", whole[i].Name)
			}
		}
	}
	plan := func(nodes []corev1.Node) *status.Status {
		st := decide.Decide(f.input(t, namedBefore(settled(f, 2*time.Hour), "bravo")))
		kube.WithActing(&st, nodes, s, f.now, nil)
		return &st
	}
	got, want := plan(viewed), plan(whole)
	if want.Acting == nil || want.Acting.Plan == nil || !want.Acting.Plan.Ready {
		t.Fatalf("the whole Nodes make no ready plan: %+v", want.Acting)
	}
	if !reflect.DeepEqual(got.Acting, want.Acting) {
		t.Fatalf("acting of the views:\n%+v\nof the whole Nodes:\n%+v", got.Acting.Plan, want.Acting.Plan)
	}
	// Off, the same views plan nothing and the status carries no acting.
	st := decide.Decide(f.input(t, nil))
	kube.WithActing(&st, viewed, settings.Defaults(), f.now, nil)
	if st.Acting != nil {
		t.Fatalf("acting off: %+v", st.Acting)
	}
}
