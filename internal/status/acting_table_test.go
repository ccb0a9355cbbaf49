package status

import (
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/acting"
)

// A leadership move's plan and journal read as one: what it moves, with
// no standby named.
func TestTableLeadershipMove(t *testing.T) {
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	s := Status{Decision: Decision{Action: ActionNone, Reasons: []Reason{}}, Acting: &acting.Status{Mode: "guided",
		Plan: &acting.Plan{Kind: acting.KindMoveLeader, ID: "lead-0123456789", Out: acting.Party{Node: "x"},
			Steps: []acting.Step{{Name: acting.StepMoveLeader, State: acting.StatePending, Actor: acting.ActorActuator, Host: "x", Guards: []acting.Guard{}}}},
		Journal: &acting.Journal{Kind: acting.KindMoveLeader, PlanID: "lead-0123456789", Out: acting.Party{Node: "x"}, Phase: acting.PhaseRunning, ApprovedBy: "operator", Started: at}}}
	var b strings.Builder
	if err := s.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"move-leader lead-0123456789: etcd's leadership off x; running, approved by operator",
		"plan lead-0123456789: etcd's leadership off x (no standby to swap it for)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), " in ") {
		t.Errorf("a leadership move names a standby:\n%s", b.String())
	}
}
