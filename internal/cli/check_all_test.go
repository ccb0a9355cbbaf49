package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fleet-role/fleet-role/internal/link"
)

// check all on this host: every reading taken and judged, one verdict that
// is unfit exactly when a reading is, and the exit code that says it.
func TestCheckAllThisHost(t *testing.T) {
	dir := fsyncTestDir(t, "/var/tmp")
	r := runMain("check", "all", "--dir", dir, "--wakeup-for", "300ms", "--json")
	var rep allReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("exit %d, stdout %q, stderr %q: %v", r.code, r.stdout, r.stderr, err)
	}
	unfit := false
	var names []string
	for _, row := range rep.Readings {
		names = append(names, row.Reading)
		if row.Judged == nil {
			t.Errorf("%s not taken: %s", row.Reading, row.Err)
			continue
		}
		unfit = unfit || row.Judged.Verdict == checkUnfit
	}
	if got := strings.Join(names, " "); got != "link memory wakeup fsync" {
		t.Errorf("readings %s, want link memory wakeup fsync (no --peer: no connect)", got)
	}
	want, code := checkFit, ExitOK
	if unfit {
		want, code = checkUnfit, ExitUnfit // a busy machine's disk or timer
	}
	if rep.Verdict != want || r.code != code {
		t.Errorf("verdict %s with exit %d, want %s and %d: %+v", rep.Verdict, r.code, want, code, rep)
	}
	for _, p := range []string{"link...", "memory...", "wakeup, a 500ms timer for 300ms...", "fsync in " + dir + "..."} {
		if !strings.Contains(r.stderr, p) {
			t.Errorf("progress lacks %q: %q", p, r.stderr)
		}
	}
	assertDirEmpty(t, dir)

	// A peer that refuses: the connect reading is unfit, and so the host.
	r = runMain("check", "all", "--dir", dir, "--wakeup-for", "100ms", "--peer", "127.0.0.1:1")
	if r.code != ExitUnfit || !strings.Contains(r.stdout, "connect  unfit    the connect to 127.0.0.1:1 failed") || !strings.HasSuffix(r.stdout, "this host: unfit\n") {
		t.Errorf("with a refusing peer: exit %d, output:\n%s", r.code, r.stdout)
	}
	if r := runMain("check", "all", "--peer", "nohost"); r.code != ExitUsage || !strings.Contains(r.stderr, `"nohost"`) {
		t.Errorf("--peer nohost: exit %d, %q", r.code, r.stderr)
	}
}

// The link is judged as the decision judges it.
func TestLinkVerdict(t *testing.T) {
	for class, want := range map[link.Class]string{link.WiFi: checkUnfit, link.Wired: checkFit, link.Unknown: checkNotJudged} {
		if v := linkVerdict(link.Reading{Interface: "wlp2s0", Class: class}); v.Verdict != want {
			t.Errorf("class %s: %+v, want %s", class, v, want)
		}
	}
}
