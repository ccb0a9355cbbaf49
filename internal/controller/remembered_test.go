package controller_test

import (
	"bytes"
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/status"
)

// decideOver is one decision over cfg's records and Nodes at now, after
// previous, with node's record unreadable when node is not empty.
func decideOver(t *testing.T, cfg controller.Config, now time.Time, previous *status.Status, unreadable string) status.Status {
	t.Helper()
	ctx := context.Background()
	records, err := cfg.Records.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	entries, bad := record.ReadAll(records)
	if unreadable != "" {
		delete(entries, unreadable)
		bad[unreadable] = "record " + unreadable + ": made unreadable by the test"
	}
	nodes, err := cfg.Nodes.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return decide.Decide(decide.Input{Now: now, Settings: cfg.Settings, Nodes: kube.NodesFromKube(nodes, cfg.Settings),
		Entries: entries, Unreadable: bad, Previous: previous})
}

// The controller keeps of each decision only what the next one reads
// (remembered): deciding after that is deciding after the whole Status.
// The second decision turns a standby unknown, so that the memory's
// verdict changes, which read the previous hosts' verdicts, move too.
func TestRememberedDecidesAlike(t *testing.T) {
	cfg, now := largeFleet(t, 20)
	first := decideOver(t, cfg, now, nil, "")
	kept := controller.Remembered(&first)
	for _, h := range kept.Hosts {
		if h.Reasons != nil {
			t.Fatalf("remembered keeps %d reasons of %s", len(h.Reasons), h.Name)
		}
	}
	if len(kept.Hosts) != len(first.Hosts) || len(kept.Decision.Reasons) != len(first.Decision.Reasons) {
		t.Fatalf("remembered keeps %d hosts and %d decision reasons of %d and %d",
			len(kept.Hosts), len(kept.Decision.Reasons), len(first.Hosts), len(first.Decision.Reasons))
	}
	standby := first.Hosts[len(first.Hosts)-1].Name
	later := now.Add(cfg.Settings.SamplePeriod)
	whole := decideOver(t, cfg, later, &first, standby)
	slim := decideOver(t, cfg, later, kept, standby)
	if whole.Memory.VerdictChanges == 0 {
		t.Fatalf("the second decision changed no verdict (%s made unreadable): the test exercises nothing of the previous hosts", standby)
	}
	if !reflect.DeepEqual(whole, slim) {
		a, _ := whole.Marshal()
		b, _ := slim.Marshal()
		t.Errorf("deciding after the remembered status differs from deciding after the whole one:\n%s\n%s", a, b)
	}
}

// The fingerprint the controller compares leaves the Status it was given as
// it was, and a later decision over the same records, whose ages alone
// differ, has the same fingerprint; a host made unknown changes it.
func TestFingerprintLeavesStatus(t *testing.T) {
	cfg, now := largeFleet(t, 5)
	st := decideOver(t, cfg, now, nil, "")
	before, err := st.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	d1, err := st.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	after, err := st.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatalf("the fingerprint changed the status:\n%s\n%s", before, after)
	}
	older := decideOver(t, cfg, now.Add(time.Second), &st, "")
	if d2, err := older.Fingerprint(); err != nil || d2 != d1 {
		t.Errorf("a second later the fingerprint differs (%v): the ages are compared", err)
	}
	changed := decideOver(t, cfg, now.Add(time.Second), &st, st.Hosts[len(st.Hosts)-1].Name)
	if d3, err := changed.Fingerprint(); err != nil || d3 == d1 {
		t.Errorf("a host made unknown leaves the fingerprint as it was (%v)", err)
	}
}
