package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/quantile"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/kit/kubefake"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// seriesOf adds the identity (name and labels) of every series the registry
// exports now to seen: a time-series database keeps each one it scraped.
func seriesOf(t *testing.T, m *controller.Metrics, seen map[string]bool) {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, x := range mf.GetMetric() {
			id := mf.GetName()
			for _, l := range x.GetLabel() {
				id += "," + l.GetName() + "=" + l.GetValue()
			}
			seen[id] = true
		}
	}
}

// No metric label takes a record's text: records that change every text they
// hold every round (a new interface, a new fsync directory, a slow round trip
// to a new member ID no host claims, new reading errors) add no series to
// those the first round exported, as a scraper that kept every series it
// ever saw would count them. Before, the deciding reason's subject was such
// a text, and each new one a new series every round.
func TestMetricsBoundedAgainstRecordTexts(t *testing.T) {
	s := testkit.Settings(t, 200*time.Millisecond)
	voters := []string{"server-1", "server-2", "server-3"}
	nodes, records, mem := inMemory(t, s, voters, "127.0.9.%d", *testkit.Node{Name: "agent-1", Eligible: true, Address: "127.0.9.9"}.Object())
	ctx := context.Background()
	metrics := controller.NewMetrics()
	now := time.Now().UTC().Truncate(time.Second)
	ctrl, err := controller.New(controller.Config{Settings: s, Store: mem, Records: records, Nodes: nodes, Metrics: metrics,
		Clock: clocktesting.NewFakeClock(now)})
	if err != nil {
		t.Fatal(err)
	}
	rttBounds := make([]float64, 16)
	for i, v := 0, 0.0001; i < len(rttBounds); i, v = i+1, v*2 {
		rttBounds[i] = v
	}
	seen := map[string]bool{}
	first := 0
	for round := range 12 {
		text := fmt.Sprintf("r%03d", round)
		for i, n := range append(append([]string{}, voters...), "agent-1") {
			self := i
			if n == "agent-1" {
				self = -1
			}
			e := testkit.RealisticEntry(n, voters, self, s.Window, s.SamplePeriod, now.Add(-time.Duration(s.Window)*s.SamplePeriod))
			for j := range e.Samples {
				x := &e.Samples[j]
				x.Link = entry.Link{Interface: "if" + text, Class: entry.ClassUnknown}
				x.Errors = []string{"reading" + text + ": failed " + text}
				if x.Etcd != nil && j > 0 {
					// A slow round trip to a member no record claims, with
					// a new ID each round: the deciding reason's subject.
					h := quantile.Histogram{Bounds: rttBounds, Counts: make([]uint64, len(rttBounds)+1)}
					h.Counts[14] = 1
					if x.Etcd.PeerRTT == nil {
						x.Etcd.PeerRTT = map[string]quantile.Histogram{}
					}
					x.Etcd.PeerRTT["f00d"+fmt.Sprintf("%x", round)] = h
				}
			}
			if e.Fsync != nil {
				e.Fsync.Dir = "/var/lib/" + text
				e.Fsync.P99Seconds = 0.05
			}
			raw, err := entry.Encode(e)
			if err != nil {
				t.Fatal(err)
			}
			if err := records.Put(ctx, record.Owner{Name: n}, raw); err != nil {
				t.Fatal(err)
			}
		}
		st, err := ctrl.Tick(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			// The round's texts reach the status: the subjects the
			// metrics leave out are really there.
			r, ok := status.DecidingReason(*statusHost(st, "agent-1"))
			if !ok || r.Subject != "/var/lib/r000" {
				t.Fatalf("agent-1's deciding reason %+v, want the fdatasync in /var/lib/r000", r)
			}
			r, ok = status.DecidingReason(*statusHost(st, "server-1"))
			if !ok || r.Subject != "member f00d0" {
				t.Fatalf("server-1's deciding reason %+v, want the round trip to member f00d0", r)
			}
			seriesOf(t, metrics, seen)
			first = len(seen)
			continue
		}
		seriesOf(t, metrics, seen)
		if len(seen) != first {
			t.Fatalf("round %d: %d series seen, %d after the first round: a record's text became a label value", round, len(seen), first)
		}
		now = now.Add(s.SamplePeriod)
	}
	t.Logf("12 rounds of new texts in every record: %d series each round", first)
}

func statusHost(st *status.Status, name string) *status.Host {
	for i := range st.Hosts {
		if st.Hosts[i].Name == name {
			return &st.Hosts[i]
		}
	}
	panic("no host " + name)
}

// inMemory is a fleet in memory: the voters' Nodes (each at addrFormat of
// its index from 1) and others, an empty record store, and a store holding
// an empty status ConfigMap.
func inMemory(t *testing.T, s settings.Settings, voters []string, addrFormat string, others ...corev1.Node) (*kubefake.Nodes, *kubefake.Records, *kubefake.ConfigMaps) {
	t.Helper()
	nodes := &kubefake.Nodes{}
	var objs []corev1.Node
	for i, v := range voters {
		objs = append(objs, *testkit.Node{Name: v, Voter: true, Eligible: true, Address: fmt.Sprintf(addrFormat, i+1)}.Object())
	}
	nodes.Set(append(objs, others...)...)
	mem := kubefake.NewConfigMaps()
	if err := mem.Create(s.StatusConfigMap, nil); err != nil {
		t.Fatal(err)
	}
	return nodes, kubefake.NewRecords(s.RecordsNamespace()), mem
}
