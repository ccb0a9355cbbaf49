package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// The age line names the writer, its term and Lease, and the fleet-role
// version it runs when the status says one (a writer from before versions
// were stamped says none, and the line then names none).
func TestAgeLineNamesTheWritersVersion(t *testing.T) {
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	st := &status.Status{GeneratedAt: at, Settings: status.Settings{Values: settings.Defaults()}}
	st.Writer = &status.Writer{Identity: "controller-a", Lease: "fleet-role/fleet-role-controller", Term: 4, Version: "v0.1.0"}
	line, stale := ageLine(st, at.Add(time.Minute))
	if want := "decided 2026-12-03T12:00:00Z by controller-a (term 4 of lease fleet-role/fleet-role-controller), fleet-role v0.1.0, 1m0s ago"; stale || !strings.HasPrefix(line, want) {
		t.Errorf("age line %q (stale %v), want it to start %q", line, stale, want)
	}
	st.Writer.Version = ""
	if line, _ := ageLine(st, at.Add(time.Minute)); strings.Contains(line, "fleet-role v") || !strings.Contains(line, "fleet-role/fleet-role-controller), 1m0s ago") {
		t.Errorf("age line of a writer with no version: %q", line)
	}
}
