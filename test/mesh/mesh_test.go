package mesh

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/lab/fault/campaign"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
)

// ciSeed is the seed of the short campaign CI runs: its first round injects
// every kind of the catalogue once (voter-delay as a follower and as etcd's
// leader), on hosts, at times, for lengths and severities drawn from it.
const ciSeed = 20

// campaignTimeout bounds the short campaign: about a minute a fault on 2
// cores (the fault, then every host fit again), with room for a busy machine.
const campaignTimeout = 40 * time.Minute

// TestMesh is the end-to-end proof that fleet-role tells the truth about a
// real cluster: the campaign's fleet (lab/fleets/fleet: three voters with real etcd
// members and two standbys, each a network namespace, the real API server
// with RBAC and the admission policy, a real probe process in every host and
// the controller beside the API server), checked as an operator's cluster is
// (RBAC, the admission policy against a probe's real token), then the fault
// campaign's first round on it (lab/fault/campaign: every kind of fault once, every
// published decision scored against the truth of its moment), and at the
// end nothing in the cluster changed but fleet-role's status and each
// host's record, each written only by its own component (the etcd keys and
// the API server's audit log), and nothing the fleet made is left.
func TestMesh(t *testing.T) {
	repeatFailures(t)
	testenv.RequireRoot(t)
	var m *mesh
	// Registered before the fleet's own removal, so that it runs after it.
	t.Cleanup(func() {
		if m == nil {
			return
		}
		left, err := campaign.Leftovers(os.Getpid(), "mesh", "campaign", m.dir)
		if err != nil {
			errorf(t, "look for leftovers: %v", err)
		}
		if len(left) > 0 {
			errorf(t, "the fleet left behind:\n  %s", strings.Join(left, "\n  "))
		}
	})
	m = startMesh(t)

	step(t, "1. RBAC: kubectl auth can-i as each ServiceAccount; the admission policy as the probe of "+m.fl.Voters[0])
	m.checkRBAC(t)
	m.checkAdmission(t)
	if t.Failed() {
		t.FailNow()
	}

	before := m.snapshot(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	if err := m.fl.StartComponents(ctx); err != nil {
		fatal(t, err)
	}
	cancel()

	step(t, "2. the fault campaign's first round: every kind once, each decision scored")
	out := os.Getenv("FLEET_ROLE_CAMPAIGN_OUT")
	if out == "" {
		out = filepath.Join(m.dir, "campaign")
	}
	ctx, cancel = context.WithTimeout(context.Background(), campaignTimeout)
	defer cancel()
	res, err := campaign.RunOn(ctx, m.fl, campaign.Config{
		Seed:     ciSeed,
		Faults:   len(campaign.Kinds) + 1,
		Out:      out,
		Progress: logWriter{t},
	})
	if res != nil {
		var table strings.Builder
		res.WriteTable(&table)
		t.Logf("the campaign (written to %s):\n%s", out, table.String())
	}
	if err != nil {
		fatalf(t, "the campaign: %v", err)
	}
	if !res.OK {
		errorf(t, "the campaign failed its score (the table above and %s):\n%s", out, whatFailed(res))
	}
	if got := len(res.Totals.Kinds); got != len(campaign.Kinds) {
		errorf(t, "the campaign injected %d kinds %v, want every kind of the catalogue (%d)", got, res.Totals.Kinds, len(campaign.Kinds))
	}

	step(t, "3. nothing in the cluster changed but fleet-role's status and the probes' records")
	if err := m.fl.StopComponents(); err != nil {
		errorv(t, err)
	}
	after := m.snapshot(t)
	m.compareSnapshots(t, before, after)
	m.checkRecords(t)
	m.checkAudit(t)
}

func step(t *testing.T, what string) {
	t.Helper()
	t.Logf("== %s (%s)", what, time.Now().Format("15:04:05"))
}

// logWriter sends the campaign's progress lines to the test's log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// whatFailed says what failed a campaign's score in the few lines a
// failure is repeated with at the end of the log (CI shows only the tail):
// the totals that fail it and each fault that is not ok, with its notes.
func whatFailed(res *campaign.Result) string {
	t := res.Totals
	lines := []string{fmt.Sprintf("totals: %d wrong swaps, %d flaps, %d missed, %d unrecovered (of %d faults, %d swap-worthy, %d caught, %d gated)",
		t.WrongSwaps, t.Flaps, t.Missed, t.Unrecovered, t.Faults, t.SwapWorthy, t.Caught, t.Gated)}
	if res.Aborted != "" {
		lines = append(lines, "aborted: "+res.Aborted)
	}
	for i, f := range res.Faults {
		if !f.OK {
			lines = append(lines, fmt.Sprintf("fault %d %s: %s, load %.1f; %s", i+1, f.Spec, f.Outcome, f.Load, strings.Join(f.Notes, "; ")))
		}
	}
	return strings.Join(lines, "\n")
}
