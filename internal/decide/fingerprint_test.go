package decide_test

import (
	"bytes"
	"crypto/sha256"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/status"
)

// Two decisions a second apart over the same records differ in their ages
// alone: every host's freshness, the cooldown, and the decision's reasons
// that quote a stale host's freshness (the gate on a stale voter, the
// candidacy of a stale standby). Their documents differ; their fingerprints
// do not. A flip of any ok does change it.
func TestFingerprintLeavesOutAges(t *testing.T) {
	f := standardFleet(k3s())
	f.host("alpha").slowWAL = true // a voter to replace, so that the standbys are judged
	stale := []string{"charlie", "echo"}
	for _, n := range stale {
		f.host(n).until = f.now.Add(-5 * f.s.SamplePeriod)
	}
	// The previous decision saw every record: the fresh ones change now,
	// the stale ones four periods ago.
	first := decide.Decide(f.input(t, settled(f, 10*time.Minute)))
	for i, h := range first.Hosts {
		if slices.Contains(stale, h.Name) {
			o := *h.Observation
			o.ChangedAt = f.now.Add(-4 * f.s.SamplePeriod)
			first.Hosts[i].Observation = &o
		}
	}
	in := f.input(t, &first)
	in.Now = f.now.Add(time.Second)
	a := decide.Decide(in)
	in.Now = in.Now.Add(time.Second)
	b := decide.Decide(in)

	quotes := map[string]string{status.GateReported: "charlie", status.StepCandidate: "echo"}
	for signal, subject := range quotes {
		r := decisionReason(t, b, signal, subject)
		if r.OK || !strings.Contains(r.Detail, "entry last seen changing 1m2s ago") {
			t.Fatalf("%s %s does not quote the stale host's age: %+v", signal, subject, r)
		}
	}
	ja, jb := mustMarshal(t, a), mustMarshal(t, b)
	if bytes.Equal(ja, jb) {
		t.Fatal("the two documents are the same: the test compares no ages")
	}
	fb := fingerprint(t, b)
	if fingerprint(t, a) != fb {
		t.Fatalf("a second later the fingerprint differs:\n%s\n%s", ja, jb)
	}

	// The cooldown gate's ok is compared, its age is not.
	c := b
	c.Decision.Reasons = slices.Clone(b.Decision.Reasons)
	for i := range c.Decision.Reasons {
		if r := &c.Decision.Reasons[i]; r.Signal == status.GateCooldown {
			r.OK = !r.OK
		}
	}
	if fingerprint(t, c) == fb {
		t.Fatal("the cooldown ending leaves the fingerprint as it was")
	}
	// So is a host's verdict.
	c = b
	c.Hosts = slices.Clone(b.Hosts)
	c.Hosts[0].Verdict = status.Unknown
	if fingerprint(t, c) == fb {
		t.Fatal("a verdict changing leaves the fingerprint as it was")
	}
}

func fingerprint(t *testing.T, st status.Status) [sha256.Size]byte {
	t.Helper()
	f, err := st.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func mustMarshal(t *testing.T, st status.Status) []byte {
	t.Helper()
	b, err := st.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
