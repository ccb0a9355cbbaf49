package probe_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleet-role/fleet-role/internal/k3snode"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/lab/kit/kubefake"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// The probe plans its sample from the view of the Nodes its command's
// informer keeps (kube.NodeView with PeerAddressAnnotation) as it does
// from the whole Nodes a kubelet reports: the same peers at the same
// addresses, the same role, and its record owned by the same Node. (In
// memory: the plan, not the API, is under test; the informer's cache is
// tested against the API server in internal/kube.)
func TestPlanFromTheNodeView(t *testing.T) {
	s := testkit.Settings(t, time.Minute) // each probe ticks once, by hand
	since := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	var whole []corev1.Node
	for i, n := range []testkit.Node{
		{Name: "server-1", Voter: true, Address: "127.0.4.1"},
		{Name: "server-2", Voter: true, Address: "127.0.4.2", PeerAddress: "127.0.9.2:12380"},
		{Name: "server-3", Voter: true, Address: "127.0.4.3"},
		{Name: "agent-1", Eligible: true, Address: "127.0.4.4"},
		{Name: "agent-2", Address: "127.0.4.5"},
	} {
		k := n.Kubelet(since, since.Add(5*time.Minute))
		k.UID = types.UID("uid-" + n.Name)
		if i == 2 {
			// No k3s address annotation: the first InternalIP is the peer.
			delete(k.Annotations, k3snode.NodeAddressAnnotation)
		}
		whole = append(whole, *k)
	}
	view := kube.NodeView(s, probe.PeerAddressAnnotation)
	var viewed []corev1.Node
	for i := range whole {
		viewed = append(viewed, *view(&whole[i]))
	}
	for _, self := range []string{"server-1", "agent-1", "agent-2"} {
		plans := map[string][]probe.Plan{}
		owners := map[string]string{}
		for name, nodes := range map[string][]corev1.Node{"whole": whole, "view": viewed} {
			mem := &kubefake.Nodes{}
			mem.Set(nodes...)
			store := kubefake.NewRecords(s.RecordsNamespace())
			sampler := &testkit.Sampler{}
			firstPeriod(t, probe.Config{Node: self, Settings: s, Records: store, Nodes: mem, Sampler: sampler, Log: testkit.NewLog().Logger})
			plans[name] = sampler.Plans()
			l, err := store.List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, cm := range l {
				for _, o := range cm.OwnerReferences {
					owners[name] += o.Name + "/" + string(o.UID)
				}
			}
		}
		if !reflect.DeepEqual(plans["view"], plans["whole"]) || owners["view"] != owners["whole"] {
			t.Errorf("%s: from the view, plans %+v and owner %q; from the whole Nodes, plans %+v and owner %q",
				self, plans["view"], owners["view"], plans["whole"], owners["whole"])
		}
		t.Logf("%s: plans %+v, owner %q", self, plans["whole"], owners["whole"])
	}
	// What the test covers: a voter and a standby sample, with each way of
	// giving a peer's address; a node that does not record takes none.
	want := []probe.Peer{{Node: "server-2", Address: "127.0.9.2:12380"}, {Node: "server-3", Address: "127.0.4.3:2380"}}
	mem := &kubefake.Nodes{}
	mem.Set(viewed...)
	sampler := &testkit.Sampler{}
	firstPeriod(t, probe.Config{Node: "server-1", Settings: s, Records: kubefake.NewRecords(s.RecordsNamespace()), Nodes: mem, Sampler: sampler, Log: testkit.NewLog().Logger})
	if got := sampler.Plans(); len(got) != 1 || !reflect.DeepEqual(got[0].Peers, want) || !got[0].Voter {
		t.Fatalf("server-1 from the view: plans %+v, want one voter's plan with peers %+v", got, want)
	}
}

// firstPeriod runs a probe with cfg on a fake clock until it has ended its
// first period, and stops it before a second begins.
func firstPeriod(t *testing.T, cfg probe.Config) {
	t.Helper()
	c := testkit.NewClocked(cfg.Settings.SamplePeriod)
	periods := c.Watch(cfg.Nodes)
	p, err := probe.New(c.Config(cfg, periods))
	if err != nil {
		t.Fatal(err)
	}
	loop := testkit.Go(t, "probe "+cfg.Node, p.Run)
	testkit.Eventually(t, time.Minute, func() error {
		if n := periods.Ended(); n < 1 {
			return fmt.Errorf("%s has ended %d periods", cfg.Node, n)
		}
		return nil
	})
	periods.Stop()
	loop.Stop(t)
}
